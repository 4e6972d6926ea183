"""bfloat16 arithmetic with ONNX's reference rounding.

ziggurat keeps bfloat16 as a storage type (dtypes.py): an op on bfloat16
tensors is computed in float32 and its result rounded to bfloat16 (round to
nearest even, `graph.cast`); `dtype_policy.convert_typed` does that per ONNX
node. That is exactly what onnx's reference (numpy on ml_dtypes' bfloat16)
computes for elementwise ops and MatMul (which accumulates in float32).

Ops the reference builds from several numpy steps round after every step, so
computing them in float32 and rounding once differs by a bfloat16 ulp (more
than the conformance tolerance). This module rebuilds those on float32 values
that are rounded to bfloat16 after each step:

* Softmax (opset 13+): `d = x - max(x)`, `e = exp(d)`, `s = sum(e)`, `e / s`,
  each rounded; numpy sums a bfloat16 axis one element after the other with a
  rounding after each add (no pairwise summation for ml_dtypes' types), so the
  sum is a chain of rounded adds over the axis's slices. Axes longer than
  `MAX_SEQUENTIAL` are summed in float32 and rounded once instead: more
  accurate than the reference, whose bfloat16 running sum drifts by several
  ulps over long axes, so those results differ from it beyond the
  conformance tolerance.

Other multi-step ops on bfloat16 (LogSoftmax, ReduceSum/Mean, the
normalizations, ...) are still computed in float32 and rounded once: more
accurate than the reference, and possibly a bfloat16 ulp away from it.

Example: `Softmax(x: bfloat16[2,6])` becomes `cast -> reduce max -> sub ->
round -> exp -> round -> 6 slices, 5 rounded adds -> div -> cast to bf16`.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
from xdsl.dialects.builtin import bf16, f32
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, like, shape_of, tensor_type

MAX_SEQUENTIAL = 16
"""Longest axis summed as a chain of rounded adds (one slice and add per
element; compile time grows quickly past this: 0.9 s at 6, 5.7 s at 32)."""


def to_bf16(ctx: ConversionContext, v: SSAValue) -> SSAValue:
    """float32 -> bfloat16 (round to nearest even)."""
    return ctx.emit(CastOp(v, tensor_type(shape_of(v), bf16)))


def rounded(ctx: ConversionContext, v: SSAValue) -> SSAValue:
    """A float32 tensor rounded to bfloat16 precision, kept as float32."""
    return ctx.emit(CastOp(to_bf16(ctx, v), tensor_type(shape_of(v), f32)))


def _binary(ctx: ConversionContext, op: type[graph.BinaryOp], a: SSAValue, b: SSAValue) -> SSAValue:
    shape = graph.broadcast_shapes(shape_of(a), shape_of(b))
    if shape is None:
        raise ctx.shape_error(f"shapes {shape_of(a)} and {shape_of(b)} do not broadcast")
    return ctx.emit(op(a, b, like(a, shape)))


def _reduce(ctx: ConversionContext, x: SSAValue, kind: str, axis: int) -> SSAValue:
    kept = tuple(1 if d == axis else n for d, n in enumerate(shape_of(x)))
    return ctx.emit(graph.ReduceOp(x, kind, [axis], True, like(x, kept)))


def sequential_sum(ctx: ConversionContext, x: SSAValue, axis: int) -> SSAValue:
    """Sum of float32 `x` (bfloat16 values) along `axis` (kept as size 1),
    rounded to bfloat16 after each add, first element to last (numpy's order)."""
    shape = shape_of(x)
    n = shape[axis]
    if n > MAX_SEQUENTIAL:
        return rounded(ctx, _reduce(ctx, x, "sum", axis))
    part = like(x, tuple(1 if d == axis else s for d, s in enumerate(shape)))

    def element(k: int) -> SSAValue:
        starts = [k if d == axis else 0 for d in range(len(shape))]
        return ctx.emit(graph.SliceOp(x, starts, [1] * len(shape), part))

    total = element(0)
    for k in range(1, n):
        total = rounded(ctx, _binary(ctx, graph.AddOp, total, element(k)))
    return total


def softmax(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Softmax (opset 13+) of a bfloat16 run-time tensor, rounded as onnx's reference does."""
    x = ctx.value(node.input[0])
    rank = len(shape_of(x))
    axis = attributes(node).get("axis", -1)
    if not -rank <= axis < rank:
        raise ctx.shape_error(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    if shape_of(x)[axis] == 0:
        return [x]
    xf = ctx.emit(CastOp(x, tensor_type(shape_of(x), f32)))
    centered = rounded(ctx, _binary(ctx, graph.SubOp, xf, _reduce(ctx, xf, "max", axis)))
    e = rounded(ctx, ctx.emit(graph.ExpOp(centered)))
    return [to_bf16(ctx, _binary(ctx, graph.DivOp, e, sequential_sum(ctx, e, axis)))]


STEPWISE = {"Softmax": (13, softmax)}
"""ONNX op -> (first opset, converter) for the ops above."""
