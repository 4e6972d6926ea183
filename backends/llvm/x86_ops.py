"""`x86vec` and `amx` ops: x86 dot-product and tile instructions as LLVM intrinsics.

Each op checks, before emitting anything, that the target (the options'
`cpu` and `features`, read as a `Target`) has the CPU feature it needs, and raises a
`CompileError` naming the op and the feature otherwise: a kernel never reaches
a CPU that would stop it with SIGILL.

    x86vec.dpbusd (512-bit)   -> @llvm.x86.avx512.vpdpbusd.512(<16 x i32>, <64 x i8>, <64 x i8>)
    x86vec.maddubs_dot (256-bit) -> @llvm.x86.avx2.pmadd.ub.sw, @llvm.x86.avx2.pmadd.wd with ones, add
    x86vec.maddwd_dot (256-bit) -> @llvm.x86.avx2.pmadd.wd, add
    x86vec.dpbf16ps (512-bit) -> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>, <32 x bfloat>, <32 x bfloat>)
    x86vec.bcast_group        -> bitcast to i32, splat, bitcast back
    amx.tile_config           -> a 64-byte palette-1 block on the stack, @llvm.x86.ldtilecfg
    amx.tile_load / store     -> @llvm.x86.tileloadd64 / @llvm.x86.tilestored64 (row stride in bytes)
    amx.tdp "bf16ps"          -> @llvm.x86.tdpbf16ps(i8 dst, i8 a, i8 b), and the int8 kinds
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.ir import Operation

from ziggurat.backends.llvm.lltypes import I8, I8P, I16, I32, I64, VOID, byte_size, llvm_type
from ziggurat.backends.llvm.memory import address
from ziggurat.errors import CompileError

if TYPE_CHECKING:
    from ziggurat.backends.llvm.translate import FuncState, Translator

_DOT = {
    ("x86vec.dpbusd", 128): ("x86.avx512.vpdpbusd.128", "avx512vnni"),
    ("x86vec.dpbusd", 256): ("x86.avx512.vpdpbusd.256", "avx512vnni"),
    ("x86vec.dpbusd", 512): ("x86.avx512.vpdpbusd.512", "avx512vnni"),
    ("x86vec.dpbf16ps", 128): ("x86.avx512bf16.dpbf16ps.128", "avx512bf16"),
    ("x86vec.dpbf16ps", 256): ("x86.avx512bf16.dpbf16ps.256", "avx512bf16"),
    ("x86vec.dpbf16ps", 512): ("x86.avx512bf16.dpbf16ps.512", "avx512bf16"),
}


def target_features(t: Translator) -> frozenset[str]:
    """The instruction sets of the translation target: its CPU's (`CPU_ISA`) and its feature string's."""
    return t.options.target.features()


def require_feature(t: Translator, op: Operation, feature: str) -> None:
    """Raise a clear CompileError when the target lacks `feature`."""
    if feature not in target_features(t):
        o = t.options
        shown = o.features if o.features and len(o.features) <= 80 else ""  # a host's string is hundreds of flags
        where = f"the target CPU '{o.cpu}'" + (f" with -mattr={shown}" if shown else "")
        raise CompileError(
            f"'{op.name}' needs the CPU feature '{feature}', which {where} does not have; "
            f"target a CPU with +{feature} (ziggurat's -mattr) or use a schedule without this intrinsic")


def _dot(t: Translator, f: FuncState, op: Operation) -> None:
    acc, lhs, rhs = (f.get(v) for v in op.operands)
    bits = byte_size(acc.type) * 8
    name, feature = _DOT[(op.name, bits)]
    require_feature(t, op, feature)
    fn = t.decl.function(f"llvm.{name}", acc.type, [acc.type, lhs.type, rhs.type])
    f.vals[op.results[0]] = f.b.call(fn, [acc, lhs, rhs])


_MADDUBS = {  # register bits -> (pmaddubsw, pmaddwd, feature)
    128: ("x86.ssse3.pmadd.ub.sw.128", "x86.sse2.pmadd.wd", "avx"),  # SSSE3, which every AVX CPU has
    256: ("x86.avx2.pmadd.ub.sw", "x86.avx2.pmadd.wd", "avx2"),
    512: ("x86.avx512.pmaddubs.w.512", "x86.avx512.pmaddw.d.512", "avx512bw"),
}


def _maddubs_dot(t: Translator, f: FuncState, op: Operation) -> None:
    """acc + pmaddwd(pmaddubsw(lhs, rhs), ones): u8 x s8 products summed in saturating i16 pairs,
    then the pairs in i32."""
    acc, lhs, rhs = (f.get(v) for v in op.operands)
    lanes = acc.type.count
    ubsw, wd, feature = _MADDUBS[lanes * 32]
    require_feature(t, op, feature)
    i16v = ir.VectorType(I16, 2 * lanes)
    pairs = f.b.call(t.decl.function(f"llvm.{ubsw}", i16v, [lhs.type, rhs.type]), [lhs, rhs])
    f.vals[op.results[0]] = _add_pmaddwd(t, f, wd, acc, pairs, ir.Constant(i16v, [I16(1)] * (2 * lanes)))


def _maddwd_dot(t: Translator, f: FuncState, op: Operation) -> None:
    """acc + pmaddwd(lhs, rhs): i16 x i16 products summed in i32 pairs (exact)."""
    acc, lhs, rhs = (f.get(v) for v in op.operands)
    _, wd, feature = _MADDUBS[acc.type.count * 32]
    require_feature(t, op, feature)
    f.vals[op.results[0]] = _add_pmaddwd(t, f, wd, acc, lhs, rhs)


def _add_pmaddwd(t: Translator, f: FuncState, wd: str, acc, lhs, rhs):
    """acc + pmaddwd(lhs, rhs) (`wd`: the intrinsic's name for acc's width)."""
    return f.b.add(acc, f.b.call(t.decl.function(f"llvm.{wd}", acc.type, [lhs.type, rhs.type]), [lhs, rhs]))


def _bcast_group(t: Translator, f: FuncState, op: Operation) -> None:
    src = f.get(op.operands[0])
    rt = t.ty(op.results[0].type)
    lanes = byte_size(rt) // 4
    word = f.b.bitcast(src, I32)
    undef = ir.Constant(ir.VectorType(I32, lanes), ir.Undefined)
    one = f.b.insert_element(undef, word, I32(0))
    splat = f.b.shuffle_vector(one, undef, ir.Constant(ir.VectorType(I32, lanes), [I32(0)] * lanes))
    f.vals[op.results[0]] = f.b.bitcast(splat, rt)


# -- amx ---------------------------------------------------------------------------


def _tile_config(t: Translator, f: FuncState, op: Operation) -> None:
    require_feature(t, op, "amx-tile")
    b = f.b
    cfg = f.entry_b.alloca(ir.ArrayType(I8, 64), name="amx.cfg")
    cfg.align = 64
    base = b.bitcast(cfg, I8P)
    b.store(ir.Constant(ir.ArrayType(I8, 64), [I8(0)] * 64), cfg)
    b.store(I8(1), base)  # palette 1
    for tile, (rows, colsb) in enumerate(op.tile_shapes()):  # type: ignore[attr-defined]
        colsb_p = b.bitcast(b.gep(base, [I64(16 + 2 * tile)]), I16.as_pointer())
        b.store(I16(colsb), colsb_p)
        b.store(I8(rows), b.gep(base, [I64(48 + tile)]))
    b.call(t.decl.function("llvm.x86.ldtilecfg", VOID, [I8P]), [base])


def _tile_id(op: Operation, name: str = "tile") -> ir.Constant:
    return I8(op.properties[name].value.data)  # type: ignore[attr-defined]


def _tile_zero(t: Translator, f: FuncState, op: Operation) -> None:
    require_feature(t, op, "amx-tile")
    f.b.call(t.decl.function("llvm.x86.tilezero", VOID, [I8]), [_tile_id(op)])


def _row_stride_bytes(t: Translator, op: Operation) -> int:
    mt = op.operands[0].type
    strides = t.strides(mt)
    return strides[-2] * byte_size(llvm_type(mt.element_type))  # type: ignore[attr-defined]


def _tile_access(intrinsic: str):
    def h(t: Translator, f: FuncState, op: Operation) -> None:
        require_feature(t, op, "amx-tile")
        p = f.b.bitcast(address(t, f, op.operands[0], op.operands[1:]), I8P)
        fn = t.decl.function(f"llvm.x86.{intrinsic}", VOID, [I8, I8P, I64])
        f.b.call(fn, [_tile_id(op), p, I64(_row_stride_bytes(t, op))])

    return h


def _tdp(t: Translator, f: FuncState, op: Operation) -> None:
    from ziggurat.dialects.amx import TDP_KINDS

    intrinsic, feature, _, _ = TDP_KINDS[op.properties["kind"].data]  # type: ignore[attr-defined]
    require_feature(t, op, "amx-tile")
    require_feature(t, op, feature)
    fn = t.decl.function(f"llvm.x86.{intrinsic}", VOID, [I8, I8, I8])
    f.b.call(fn, [_tile_id(op, "dst"), _tile_id(op, "lhs"), _tile_id(op, "rhs")])


def _tile_release(t: Translator, f: FuncState, op: Operation) -> None:
    require_feature(t, op, "amx-tile")
    f.b.call(t.decl.function("llvm.x86.tilerelease", VOID, []), [])


X86_HANDLERS = {
    "x86vec.dpbusd": _dot,
    "x86vec.maddubs_dot": _maddubs_dot,
    "x86vec.maddwd_dot": _maddwd_dot,
    "x86vec.dpbf16ps": _dot,
    "x86vec.bcast_group": _bcast_group,
    "amx.tile_config": _tile_config,
    "amx.tile_zero": _tile_zero,
    "amx.tile_load": _tile_access("tileloadd64"),
    "amx.tile_store": _tile_access("tilestored64"),
    "amx.tdp": _tdp,
    "amx.tile_release": _tile_release,
}
