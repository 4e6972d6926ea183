"""gpu-fold-casts: a float16 matrix product reads its f16 operands instead of f32 copies.

ONNX MatMul on float16 arrives as `cast(a) -> matmul -> cast` (the importer
computes f16 ops in f32, frontends/onnx/dtype_policy.py): two kernels widen A
and B into f32 buffers and the product reads those. Here a cast kernel
(`load f16, arith.extf, store f32` over the same index space) whose only reader
is a matrix-product kernel (transforms/gpu/gpu_gemm.py `match_gemm`) is folded
into it: the product gets a variant that takes the f16 buffer and widens each
element as it loads it (`loop.load` of f16, `arith.extf`), the cast's call and
its f32 buffer go. The GEMM template then stages half the bytes and, where the
shape allows, multiplies on tensor cores (`mma.sync`, f32 accumulation).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, builtin, func
from xdsl.dialects.builtin import MemRefType, f16, f32
from xdsl.ir import Block, Region
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.transforms.gpu.gpu_gemm import match_gemm

ENTRY = "main"


@dataclass(frozen=True)
class GpuFoldCastsPass(ModulePass):
    """Folds f16 -> f32 cast kernels into the matrix products that alone read them.

    **Input:** a loop-level module after gpu-split-stages (before plan-memory).

    **Output:** each such product called with the f16 buffers through a variant `@<name>_f16`
    whose update block widens the f16 loads; the cast calls and their buffers removed.

    Example:
    ```mlir
    func.call @cast_0(%a, %1) : (memref<64x32xf16>, memref<64x32xf32>) -> ()
    func.call @matmul_0(%1, %2, %3) : (memref<64x32xf32>, ...) -> ()
    ```
    becomes `func.call @matmul_0_f16(%a, %2, %3)`, where `@matmul_0_f16` loads `%in0` as f16 and
    widens it (`%x = loop.load %in0[..] : memref<64x32xf16>`, `%y = arith.extf %x : f16 to f32`).
    """

    name = "gpu-fold-casts"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        funcs = {f.sym_name.data: f for f in op.ops if isinstance(f, func.FuncOp)}
        entry = funcs.get(ENTRY)
        if entry is None:
            return
        casts = {n for n, f in funcs.items() if n != ENTRY and f.body.blocks and _is_widening_cast(f)}
        gemms = {}
        for n, f in funcs.items():
            nests = [o for o in f.body.block.ops if isinstance(o, loop.ForOp)] if n != ENTRY and f.body.blocks else []
            spec = match_gemm(f, nests[0]) if len(nests) == 1 else None
            if spec is not None and not (spec.a_f16 or spec.b_f16):
                gemms[n] = spec
        variants: dict[tuple[str, tuple[int, ...]], func.FuncOp] = {}
        for call in [c for c in entry.body.block.ops if isinstance(c, func.CallOp)]:
            name = call.callee.root_reference.data
            spec = gemms.get(name)
            if spec is None:
                continue
            folds = {p: w for p in sorted({spec.a, spec.b}) if (w := _sole_cast_writer(call, p, casts)) is not None}
            if not folds:
                continue
            key = (name, tuple(folds))
            if key not in variants:
                variants[key] = _widening_variant(funcs[name], tuple(folds), {p: w.operands[0].type for p, w in folds.items()})
                op.body.block.insert_op_after(variants[key], funcs[name])
            args = [folds[p].operands[0] if p in folds else v for p, v in enumerate(call.operands)]
            Builder(InsertPoint.before(call)).insert(func.CallOp(variants[key].sym_name.data, args, []))
            call.detach()
            call.erase()  # drops its use of the f32 buffers: the casts' results are unread now
            for writer in folds.values():
                writer.detach()
                writer.erase()
        _drop_dead_allocs(entry)
        used = {c.callee.root_reference.data for c in entry.walk() if isinstance(c, func.CallOp)}
        for n in list(casts) + list(gemms):
            if n not in used:
                funcs[n].detach()
                funcs[n].erase()


def _is_widening_cast(f: func.FuncOp) -> bool:
    """`f(%in: memref<..xf16>, %out: memref<..xf32>)` storing `extf(load %in[v..])` to `%out[v..]`."""
    args = f.body.block.args
    if len(args) != 2 or not all(isinstance(a.type, MemRefType) for a in args):
        return False
    src, dst = args
    if src.type.element_type != f16 or dst.type.element_type != f32 or src.type.get_shape() != dst.type.get_shape():
        return False
    blocks = [o for o in f.walk() if isinstance(o, loop.BlockOp)]
    if len(blocks) != 1:
        return False
    ops = [o for o in blocks[0].body.block.ops]
    if len(ops) != 3 or not isinstance(ops[0], loop.LoadOp) or not isinstance(ops[1], arith.ExtFOp) \
            or not isinstance(ops[2], loop.StoreOp):
        return False
    load, ext, store = ops
    return (load.operands[0] is src and store.operands[1] is dst and ext.operands[0] is load.results[0]
            and store.operands[0] is ext.results[0] and list(load.operands[1:]) == list(store.operands[2:]))


def _sole_cast_writer(call: func.CallOp, pos: int, casts: set[str]) -> func.CallOp | None:
    """The call of a cast kernel that writes operand `pos` of `call`, when that buffer is an allocation
    used by nothing else (the cast writes it, the product reads it)."""
    buf = call.operands[pos]
    if not isinstance(buf.owner, loop.AllocOp):
        return None
    users = {u.operation for u in buf.uses}
    if len(users) != 2 or call not in users or sum(1 for o in call.operands if o is buf) != 1:
        return None
    (writer,) = users - {call}
    if not (isinstance(writer, func.CallOp) and writer.callee.root_reference.data in casts
            and writer.operands[1] is buf and writer.parent is call.parent):
        return None
    return writer


def _widening_variant(f: func.FuncOp, positions: tuple[int, ...], types: dict) -> func.FuncOp:
    """A copy of `f` named `<name>_f16` taking the f16 memref types at `positions`; each load of such an
    argument reads f16 and widens it with `arith.extf`."""
    clone = f.clone()
    old = clone.body.block
    new = Block(arg_types=[types.get(i, a.type) for i, a in enumerate(old.args)])
    for a, b in zip(old.args, new.args):
        b.name_hint = a.name_hint
    for o in list(old.ops):
        o.detach()
        new.add_op(o)
    for i, (a, b) in enumerate(zip(old.args, new.args)):
        if i not in positions:
            a.replace_all_uses_with(b)
            continue
        for use in list(a.uses):
            load = use.operation
            assert isinstance(load, loop.LoadOp), f"gpu-fold-casts: {load.name} reads a product operand"
            bld = Builder(InsertPoint.before(load))
            narrow = bld.insert(loop.LoadOp(b, list(load.operands[1:])))
            wide = bld.insert(arith.ExtFOp(narrow.results[0], f32))
            load.results[0].replace_all_uses_with(wide.results[0])
            load.detach()
            load.erase()
    name = f"{f.sym_name.data}_f16"
    out = func.FuncOp(name, ([a.type for a in new.args], []), Region(new))
    out.attributes.update({k: v for k, v in f.attributes.items() if k.startswith("graph.")})
    return out


def _drop_dead_allocs(entry: func.FuncOp) -> None:
    for o in list(entry.body.block.ops):
        if isinstance(o, loop.AllocOp) and not o.result.uses:
            o.detach()
            o.erase()

