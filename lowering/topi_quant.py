"""Compute definition of `graph.qgemm` (dialects/graph_quant.py).

`lowering/topi.py` merges `QUANT_COMPUTE_DEFS` into its `COMPUTE_DEFS`. The
body is exactly the dataflow of the `x86_vnni_u8s8_16x4` description (zero-
extend a, sign-extend b, multiply, add), with k split into (k/4, k%4) so
the packed b is read at `[k/4, 4*j + k%4]`: after splitting j by 16 the
(16 columns, 4 k) sub-nest matches the intrinsic.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import SSAValue

from ziggurat.dialects.graph_quant import QGemmOp
from ziggurat.lowering.qgemm import EXACT16_BLOCK
from ziggurat.lowering.te_builder import Expr, reduce
from ziggurat.lowering.topi_base import Define, Lookup, shape_of

I32 = IntegerType(32)


def define_qgemm(op: QGemmOp, b: Builder, x: Lookup) -> SSAValue:
    a, w = x(op.a), x(op.b)
    a_shape, b_shape = shape_of(a), shape_of(w)
    k = a_shape[-1]
    batch = len(a_shape) - 2
    b_batched = len(b_shape) > 2

    def body(e: Expr, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        ko, ki = r
        lead = list(i[:batch])
        row, col = i[batch], i[batch + 1]
        xa = e.read(a, lead + [row, e.affine([(ko, 4), (ki, 1)])])
        wb = e.read(w, (lead if b_batched else []) + [ko, e.affine([(col, 4), (ki, 1)])])
        xe = e._add(arith.ExtUIOp(xa, I32))
        we = e._add(arith.ExtSIOp(wb, I32))
        return e._add(arith.MuliOp(xe, we))

    tag = EXACT16_BLOCK if op.pairs16 is not None else "qgemm"  # lowering/qgemm.py: AVX2 takes qgemm_s16 only
    return reduce(b, tag, "add", 0, op.result.type, [k // 4, 4], body)  # type: ignore[arg-type]


QUANT_COMPUTE_DEFS: dict[type, Define] = {QGemmOp: define_qgemm}
