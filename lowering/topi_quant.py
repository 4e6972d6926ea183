"""Compute definitions of `graph.qgemm` and `graph.lookup` (dialects/graph_quant.py).

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
from xdsl.dialects.builtin import IndexType, IntegerType, f32
from xdsl.ir import SSAValue

from ziggurat.dtypes import is_unsigned
from ziggurat.dialects.graph_quant import LookupOp, QGemmOp
from ziggurat.lowering.qgemm import EXACT16_BLOCK, SWAP16_BLOCK, WIDE16_BLOCK
from ziggurat.lowering.te_builder import Expr, compute, reduce
from ziggurat.lowering.topi_base import Define, Lookup, shape_of

I32 = IntegerType(32)


def define_qgemm(op: QGemmOp, b: Builder, x: Lookup) -> SSAValue:
    a, w = x(op.a), x(op.b)
    a_shape, b_shape = shape_of(a), shape_of(w)
    k = a_shape[-1]
    batch = len(a_shape) - 2
    b_batched = len(b_shape) > 2

    g = op.group

    def body(e: Expr, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        ko, ki = r
        lead = list(i[:batch])
        row, col = i[batch], i[batch + 1]
        xa = e.read(a, lead + [row, e.affine([(ko, g), (ki, 1)])])
        wb = e.read(w, (lead if b_batched else []) + [ko, e.affine([(col, g), (ki, 1)])])
        xe = e._add(arith.ExtUIOp(xa, I32) if a_unsigned else arith.ExtSIOp(xa, I32))
        we = e._add(arith.ExtUIOp(wb, I32) if b_unsigned else arith.ExtSIOp(wb, I32))
        return e._add(arith.MuliOp(xe, we))

    # each operand extended as its own element type says: ui8 x i8, i8 x ui8 (pairs16, swapped), i16 x i16
    a_unsigned = is_unsigned(op.a.type.element_type)  # type: ignore[attr-defined]
    b_unsigned = is_unsigned(op.b.type.element_type)  # type: ignore[attr-defined]
    # lowering/qgemm.py: AVX2 takes qgemm_s16 / qgemm_x16 (vpmaddubsw) and qgemm_w16 (vpmaddwd) only
    tag = (WIDE16_BLOCK if g == 2 else "qgemm" if op.pairs16 is None else
           EXACT16_BLOCK if a_unsigned else SWAP16_BLOCK)
    return reduce(b, tag, "add", 0, op.result.type, [k // g, g], body)  # type: ignore[arg-type]


def define_lookup(op: LookupOp, b: Builder, x: Lookup) -> SSAValue:
    """`table[i[dims].., clamp(x - offset, 0, n - 1)]` (the entry index at the op's `entry_dim`), the
    index made in float32 lanes (integers converted first; NaN gives entry 0) so that the vectorizer
    keeps it in 32-bit lanes and reads the table with one gather (convert-loop-to-hw's `hw.vlookup`)."""
    inp, table = x(op.input), x(op.table)
    n = shape_of(table)[op.entry_dim]
    dims = op.table_dims
    offset = op.offset.value.data
    unsigned = is_unsigned(op.input.type.element_type)  # type: ignore[attr-defined]

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        v = e.read(inp, i)
        if v.type != f32:
            v = e.cast(v, f32, unsigned)
        if offset:
            v = e.sub(v, e.const(float(offset), f32))
        t = e.min(e.max(v, e.const(0.0, f32)), e.const(float(n - 1), f32))
        t = e.select(e.cmpf(v, v, "uno"), e.const(0.0, f32), t)
        k = e._add(arith.IndexCastOp(e._add(arith.FPToSIOp(t, I32)), IndexType()))
        return e.read(table, op.table_index([i[d] for d in dims], k))

    return compute(b, "lookup", op.result.type, body)  # type: ignore[arg-type]


QUANT_COMPUTE_DEFS: dict[type, Define] = {QGemmOp: define_qgemm, LookupOp: define_lookup}
