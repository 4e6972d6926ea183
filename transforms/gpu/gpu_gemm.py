"""gpu-gemm: matrix-product nests run by the GPU GEMM template (a tensor intrinsic for a whole tile).

A kernel whose one loop nest is a (batched) matrix product as the te level
writes it,
```mlir
loop.for %b .. { loop.for %i .. { loop.for %j .. {
  loop.block "matmul_init" [S %vb = %b, S %vi = %i, S %vj = %j] { store 0.0 -> C[%vb, %vi, %vj] }
  loop.for %k .. { loop.block "matmul" [S .., R %vk = %k] { C[b, i, j] += A[.., i, k] * B[.., k, j] } } } } }
```
(f32 buffers indexed by the iteration variables, each operand in any dimension
order: a transposed A or B, a B shared by every batch; A and B may be f16
widened by `arith.extf` as they are loaded, gpu-fold-casts), is marked with
`gpu.gemm`: the operands' kernel-argument positions, the extents m, n, k and
the batch extents, each operand's element strides (batch dims, then its two
matrix dims) and the tile (`128` or `64`). backends/cuda/gemm.py emits the
kernel for it: per block one tile of C, 256 threads of 8x8 (or 4x4)
accumulators in registers, A and B staged through double-buffered shared
memory, k in steps of 8 (or 32 for 64-wide tiles). The nest itself stays in the IR: it is the
description of what the template computes (as a tensor intrinsic's is).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, builtin, func
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, f16, f32, i64
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from ziggurat.dialects import loop
from ziggurat.backends.llvm.lltypes import memref_strides
from ziggurat.lowering.convert_loop_to_hw import const_int
from ziggurat.transforms.gpu.implicit_gemm import (IGEMM_ATTR, MIN_BLOCKS_128, MIN_IGEMM_BLOCKS, const_float, k_step,
                                                   match_implicit_gemm, template_blocks)

ENTRY = "main"
GEMM_ATTR = "gpu.gemm"
TILES = (128, 64)


@dataclass(frozen=True)
class GpuGemmPass(ModulePass):
    """Marks every kernel that is one f32 (batched) matrix product for the GPU GEMM template.

    **Input:** loop-level kernels of one loop nest each (gpu-split-stages), unscheduled.

    **Output:** the nests that are matrix products carry `gpu.gemm` (see the module docstring), the
    convolutions that are implicit ones `gpu.igemm` (transforms/gpu/implicit_gemm.py);
    gpu-default-schedule leaves them alone and backends/cuda emits the template for them.

    **Options:** `tile` (0: chosen per product, 128 or 64); `convolutions` (also mark convolutions of
    `MIN_IGEMM_BLOCKS` or more 64x64 tiles, `gpu.igemm`; on by default, `false` leaves every convolution
    a thread per output); `deep-k` (64-wide tiles step k by 32 instead of 8, fewer steps for a small
    product's latency-bound blocks; on by default); `min-blocks` (the least 64x64 tiles of a convolution
    marked, `MIN_IGEMM_BLOCKS`: gpu-rfactor factors smaller ones first). Both were measured on an H100 against the paths
    without them (docs/benchmarks.md, "CUDA GPU (H100)").

    Example: `func.func @matmul_0(%in0: memref<128x256xf32>, %in1: memref<256x64xf32>, %out0: memref<128x64xf32>)`
    holding the nest above gets
    ```mlir
    loop.for %i0 = 0 to 128 serial {...} {gpu.gemm = {a = 0, b = 1, c = 2, m = 128, n = 64, k = 256,
        batch = [], a_strides = [256, 1], b_strides = [64, 1], c_strides = [64, 1], tile = 64}}
    ```
    """

    name = "gpu-gemm"
    tile: int = 0
    convolutions: bool = True
    deep_k: bool = True
    min_blocks: int = MIN_IGEMM_BLOCKS

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.sym_name.data != ENTRY and f.body.blocks:
                nests = [o for o in f.body.block.ops if isinstance(o, loop.ForOp)]
                if len(nests) == 1 and GEMM_ATTR not in nests[0].attributes and IGEMM_ATTR not in nests[0].attributes:
                    spec = match_gemm(f, nests[0])
                    if spec is not None:
                        nests[0].attributes[GEMM_ATTR] = spec.attr(self.tile, self.deep_k)
                        continue
                    implicit = match_implicit_gemm(f, nests[0]) if self.convolutions else None
                    if implicit is not None and implicit.blocks() >= self.min_blocks:
                        nests[0].attributes[IGEMM_ATTR] = implicit.attr(self.tile, self.deep_k)


@dataclass
class GemmSpec:
    """A matched product: argument positions, extents and element strides (batch dims first)."""

    a: int
    b: int
    c: int
    m: int
    n: int
    k: int
    batch: list[int]
    a_strides: list[int]
    b_strides: list[int]
    c_strides: list[int]
    a_f16: bool = False  # the operand is float16, widened to f32 as it is loaded (gpu-fold-casts)
    b_f16: bool = False

    def choose_tile(self) -> int:
        return 128 if template_blocks(math.prod(self.batch), self.m, self.n, 128) >= MIN_BLOCKS_128 else 64

    def attr(self, tile: int = 0, deep_k: bool = False) -> DictionaryAttr:
        def ints(v: list[int]) -> Attribute:
            return builtin.ArrayAttr([IntegerAttr(x, i64) for x in v])

        fields: dict[str, Attribute] = {k: IntegerAttr(int(getattr(self, k)), i64)
                                        for k in ("a", "b", "c", "m", "n", "k", "a_f16", "b_f16")}
        fields.update(batch=ints(self.batch), a_strides=ints(self.a_strides), b_strides=ints(self.b_strides),
                      c_strides=ints(self.c_strides), tile=IntegerAttr(tile or self.choose_tile(), i64),
                      bk=IntegerAttr(k_step(tile or self.choose_tile(), deep_k), i64))
        return DictionaryAttr(fields)


def read_gemm(attr: DictionaryAttr) -> dict[str, object]:
    """The fields of a `gpu.gemm` attribute as Python ints and lists."""
    out: dict[str, object] = {}
    for key, v in attr.data.items():
        out[key] = [x.value.data for x in v.data] if isinstance(v, builtin.ArrayAttr) else v.value.data  # type: ignore[attr-defined]
    return out


def match_gemm(f: func.FuncOp, top: loop.ForOp, args_only: bool = True) -> GemmSpec | None:
    """The GemmSpec of `top` when it is a plain f32 matrix-product nest of `f`, else None. `args_only=False`
    accepts operands that are not `f`'s arguments (a kernel's own buffers before gpu-split-stages; the
    positions in the spec are then meaningless)."""
    spatial: list[loop.ForOp] = []
    cur: Operation = top
    while isinstance(cur, loop.ForOp):
        if cur.kind.data != "serial" or cur.bounds[0] != 0 or cur.bounds[2] != 1:
            return None
        ops = [o for o in cur.body.block.ops]
        if len(ops) == 1 and isinstance(ops[0], loop.ForOp):
            spatial.append(cur)
            cur = ops[0]
            continue
        spatial.append(cur)
        break
    body = list(spatial[-1].body.block.ops)
    if len(body) != 2 or not isinstance(body[0], loop.BlockOp) or not isinstance(body[1], loop.ForOp):
        return None
    init, red = body
    red_ops = list(red.body.block.ops)
    if red.kind.data != "serial" or red.bounds[0] != 0 or red.bounds[2] != 1 or len(red_ops) != 1 \
            or not isinstance(red_ops[0], loop.BlockOp):
        return None
    upd = red_ops[0]
    ivs = [s.iv for s in spatial]
    extent = {s.iv: s.trip_count for s in spatial} | {red.iv: red.trip_count}
    var_of_init = _direct_bindings(init, ivs)
    var_of_upd = _direct_bindings(upd, ivs + [red.iv])
    if var_of_init is None or var_of_upd is None or upd.iter_kinds.data != "S" * len(ivs) + "R":
        return None
    if init.iter_kinds.data != "S" * len(ivs):
        return None
    # init: C[ivs] = 0.0
    ist = [o for o in init.body.block.ops if isinstance(o, loop.StoreOp)]
    if len(ist) != 1 or len(list(init.body.block.ops)) != 2 or not const_float(ist[0].operands[0], 0.0):
        return None
    # update: C = C + A * B
    uops = [o for o in upd.body.block.ops if not isinstance(o, arith.ConstantOp)]
    st = uops[-1] if uops else None
    if not isinstance(st, loop.StoreOp):
        return None
    add = st.operands[0].owner
    if not isinstance(add, arith.AddfOp):
        return None
    lc, mul = _split(add, loop.LoadOp, arith.MulfOp)
    if lc is None or mul is None:
        return None
    la, lb = (_widened_load(v) for v in mul.operands)
    if la is None or lb is None or len(uops) != 6 + sum(isinstance(o, arith.ExtFOp) for o in uops):
        return None
    accesses = {}
    for name, acc, var_of in (("c", st, var_of_upd), ("cl", lc, var_of_upd), ("a", la, var_of_upd),
                              ("b", lb, var_of_upd), ("ci", ist[0], var_of_init)):
        dims = _dims(acc, var_of)
        if dims is None:
            return None
        accesses[name] = dims
    c_buf, a_buf, b_buf = st.operands[1], la.operands[0], lb.operands[0]
    if lc.operands[0] is not c_buf or ist[0].operands[1] is not c_buf:
        return None
    if args_only and not all(isinstance(v, BlockArgument) and v.owner is f.body.block for v in (c_buf, a_buf, b_buf)):
        return None
    if _elt(c_buf) != f32 or any(_elt(v) not in (f32, f16) for v in (a_buf, b_buf)):
        return None
    c_vars, k = accesses["c"], red.iv
    if set(c_vars) != set(ivs) or accesses["cl"] != accesses["c"] or accesses["ci"] != accesses["c"]:
        return None
    a_vars, b_vars = set(accesses["a"]), set(accesses["b"])
    if k not in a_vars or k not in b_vars:
        return None
    only_a = [v for v in ivs if v in a_vars and v not in b_vars]
    only_b = [v for v in ivs if v in b_vars and v not in a_vars]
    if len(only_a) != 1 or len(only_b) != 1:
        return None
    i, j = only_a[0], only_b[0]
    batch = [v for v in ivs if v not in (i, j)]
    if any(v not in c_vars for v in a_vars | b_vars if v is not k):
        return None

    def strides(buf: SSAValue, vars_: dict, order: list) -> list[int]:
        st_of = memref_strides(buf.type)  # type: ignore[arg-type]
        return [st_of[vars_[v]] if v in vars_ else 0 for v in order]

    return GemmSpec(
        a=_pos(f, a_buf), b=_pos(f, b_buf), c=_pos(f, c_buf), m=extent[i], n=extent[j], k=extent[k],
        batch=[extent[v] for v in batch],
        a_strides=strides(a_buf, accesses["a"], batch + [i, k]),
        b_strides=strides(b_buf, accesses["b"], batch + [k, j]),
        c_strides=strides(c_buf, accesses["c"], batch + [i, j]),
        a_f16=_elt(a_buf) == f16, b_f16=_elt(b_buf) == f16)


def _widened_load(v: SSAValue) -> loop.LoadOp | None:
    """The load that gives `v`: `v` itself, or widened f16 -> f32 by one `arith.extf`."""
    o = v.owner
    if isinstance(o, arith.ExtFOp):
        o = o.operands[0].owner
        if not (isinstance(o, loop.LoadOp) and _elt(o.operands[0]) == f16):
            return None
    return o if isinstance(o, loop.LoadOp) else None


def _pos(f: func.FuncOp, buf: SSAValue) -> int:
    args = list(f.body.block.args)
    return args.index(buf) if buf in args else -1


def _direct_bindings(blk: loop.BlockOp, ivs: list[SSAValue]) -> dict[SSAValue, SSAValue] | None:
    """Block argument -> loop variable, when the block binds exactly the loop variables `ivs` in order."""
    if len(blk.bindings) != len(ivs) or any(b is not v for b, v in zip(blk.bindings, ivs)):
        return None
    return dict(zip(blk.body.block.args, ivs))


def _dims(acc: Operation, var_of: dict) -> dict | None:
    """Loop variable -> memref dimension of a load/store whose indices are block arguments (each at
    most once) or constant 0 on a dimension of extent 1."""
    if isinstance(acc, loop.LoadOp):
        buf, idx = acc.operands[0], list(acc.operands[1:])
    else:
        buf, idx = acc.operands[1], list(acc.operands[2:])
    shape = buf.type.get_shape()  # type: ignore[attr-defined]
    if len(idx) != len(shape):
        return None
    out: dict = {}
    for d, v in enumerate(idx):
        if v in var_of:
            lv = var_of[v]
            if lv in out:
                return None
            out[lv] = d
        elif not (shape[d] == 1 and const_int(v) == 0):
            return None
    return out


def _elt(v: SSAValue) -> Attribute:
    return v.type.element_type  # type: ignore[attr-defined]


def _split(op: Operation, t1: type, t2: type) -> tuple:
    a, b = (o.owner for o in op.operands)
    if isinstance(a, t1) and isinstance(b, t2):
        return a, b
    if isinstance(b, t1) and isinstance(a, t2):
        return b, a
    return None, None
