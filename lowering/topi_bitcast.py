"""Compute definition of `graph.bitcast` (ONNX BitCast).

`lowering/topi.py` merges `BITCAST_COMPUTE_DEFS` into its `COMPUTE_DEFS`.
Below the graph level each element is its scalar type (`dtypes.scalar_type`):
signless integers, f16/f32/f64, bfloat16 as its i16 bits, float8 and the 4-/2-bit
types as one i8 (the 4-/2-bit value masked into the low bits, ml_dtypes'
layout, so int4 <-> uint4 keeps the byte). So a bitcast is

* nothing, where both sides have the same scalar type (int32 <-> uint32,
  bfloat16 <-> int16, float8 <-> uint8, int4 <-> uint4);
* `arith.bitcast`, between a float and an integer of one width (f32 <-> i32,
  f16 <-> bfloat16's i16);
* `byte != 0` to bool and a zero-extension from bool (one byte, 0 or 1).

Example: `graph.bitcast %x : tensor<4xf32> -> tensor<4xi32>` becomes a
`te.compute` whose body is `arith.bitcast %v : f32 to i32`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import i1
from xdsl.ir import SSAValue

from ziggurat.dialects.graph_dtype import BitcastOp
from ziggurat.dtypes import scalar_type
from ziggurat.lowering.te_builder import Expr, compute
from ziggurat.lowering.topi_base import Define, Lookup


def define_bitcast(op: BitcastOp, b: Builder, x: Lookup) -> SSAValue:
    inp = x(op.input)
    src = scalar_type(op.input.type.element_type)  # type: ignore[attr-defined]
    dst = scalar_type(op.result.type.element_type)  # type: ignore[attr-defined]

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        v = e.read(inp, i)
        if src == dst:
            return v
        if dst == i1:
            return e.cast(v, i1)
        if src == i1:
            return e._add(arith.ExtUIOp(v, dst))
        return e._add(arith.BitcastOp(v, dst))

    return compute(b, "bitcast", op.result.type, body)  # type: ignore[arg-type]


BITCAST_COMPUTE_DEFS: dict[type, Define] = {BitcastOp: define_bitcast}  # type: ignore[dict-item]
