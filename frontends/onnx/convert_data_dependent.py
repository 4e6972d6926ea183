"""ONNX ops whose output size is known only at run time: NonZero, Unique,
Compress with a run-time condition and TopK with a run-time k.

Each such output is computed at its upper bound (NonZero: every element of the
input; Unique: every element or slice; Compress: the whole axis; TopK: the
whole axis, sorted) and comes with an *extent*: an int64 `tensor<1xi64>`
holding how many entries are real along one axis. The importer records it in
`ctx.extents` (a `RuntimeExtent`, by ONNX value name); a graph output that has
one gets a hidden output after the model's own (signature.py `Extent`), and
the executor returns the output cut to it. The entries past the extent hold
harmless values (index 0, the input's first element), so the ops below that
treat the sized axis entry by entry may consume such a value and pass the
extent on (`carried_axis`): same-shape unary ops, broadcasting binary ops and
Where (float division only: a padding entry may be 0), Transpose, Gather,
GatherND, and Reshape, Squeeze, Unsqueeze and Flatten where the sized axis stays
one whole dim. Any other consumer (a reduction over the sized axis, a reshape
that merges it, a second data-dependent op) is refused with an error naming
both nodes.

Everything is built from the graph core with pairwise masks, as
convert_index.py does: slot r of the result takes the entry k that is kept and
has r kept entries before it (a prefix sum), so these ops cost O(n^2) for n
elements and are refused above `MAX_PAIRWISE`.

```mlir
// NonZero of tensor<2x2xi1>: coordinates at the upper bound 4, extent = count
%m = graph.cast %x : tensor<2x2xi1> -> tensor<2x2xf32>
%c = graph.reduce %f {kind = "sum", axes = array<i64: 0>, keepdims = true} : tensor<4xf32> -> tensor<1xf32>
%y = graph.cast %coords : tensor<2x4xf32> -> tensor<2x4xi64>
%n = graph.cast %c : tensor<1xf32> -> tensor<1xi64>
```
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import onnx
from xdsl.dialects.builtin import IntegerType, TensorType, f32, i64
from xdsl.ir import SSAValue

from ziggurat import dtypes
from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp, GatherOp
from ziggurat.frontends.onnx import convert_index
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, shape_of
from ziggurat.frontends.onnx.convert_index import (
    MAX_EXACT_INDEX,
    MAX_PAIRWISE,
    const,
    flag,
    mask,
    norm_axis,
    prefix_sum,
    reduce,
    where,
)
from ziggurat.frontends.onnx.convert_window import reshape, transpose


@dataclass(frozen=True)
class RuntimeExtent:
    """How many entries of a value are real along `axis`: `value` (tensor<1xi64>), computed by
    the node labelled `node` (an `op`)."""

    axis: int
    value: SSAValue
    node: str
    op: str


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _check_size(ctx: ConversionContext, elements: int, n: int) -> None:
    if n >= MAX_EXACT_INDEX:
        raise ctx.unsupported(f"{n} entries exceed the exact float32 index range")
    if elements > MAX_PAIRWISE:
        raise ctx.unsupported(f"its {n} entries build a pairwise comparison of {elements} elements, more than "
                              f"{MAX_PAIRWISE}; ziggurat computes run-time sized results that way")


def nonzero_mask(ctx: ConversionContext, x: SSAValue) -> SSAValue:
    """float32 1.0 where `x` is not zero (bool: true)."""
    if element_type(x) == IntegerType(1):
        return ctx.emit(CastOp(x, TensorType(f32, list(shape_of(x)))))
    return flag(ctx, x, const(ctx, x, np.zeros(1), "zero"), "ne")


def _count(ctx: ConversionContext, keep: SSAValue) -> SSAValue:
    """The number of ones of a 1-D float32 mask, as tensor<1xi64>."""
    total = reduce(ctx, keep, "sum", [0], True)
    return ctx.emit(CastOp(total, TensorType(i64, [1])))


def select_slots(ctx: ConversionContext, keep: SSAValue, slots: int) -> SSAValue:
    """[slots, n] float32: 1.0 at (r, k) where entry k of the 1-D mask `keep` is kept and has r
    kept entries before it (slot r of a compacted result takes entry k)."""
    n = shape_of(keep)[0]
    before = prefix_sum(ctx, keep, 0, True, False)
    ranks = const(ctx, before, np.arange(slots).reshape(slots, 1), "slots")
    hit = ctx.emit(graph.CompareOp(reshape(ctx, before, (1, n)), ranks, "eq", TensorType(f32, [slots, n])))
    return ctx.emit(graph.MulOp(hit, reshape(ctx, keep, (1, n)), hit.type))


def gather_slots(ctx: ConversionContext, chosen: SSAValue, table: np.ndarray, label: str) -> SSAValue:
    """[rows, slots] float32: per slot, the entry of each `table` row ([rows, n], exact in float32)
    at the position that `chosen` ([slots, n]) picks; 0 for an empty slot."""
    slots, n = shape_of(chosen)
    rows = table.shape[0]
    values = const(ctx, chosen, table.reshape(rows, 1, n), label)
    picked = where(ctx, reshape(ctx, chosen, (1, slots, n)), values, const(ctx, chosen, np.zeros(1), "none"))
    return reduce(ctx, picked, "sum", [2], False)


def record(ctx: ConversionContext, node: onnx.NodeProto, outputs: Sequence[int], axes: Sequence[int],
           count: SSAValue) -> None:
    """Notes that `node`'s outputs `outputs` hold `count` real entries along `axes`."""
    for i, axis in zip(outputs, axes, strict=True):
        if i < len(node.output) and node.output[i]:
            ctx.extents[node.output[i]] = RuntimeExtent(axis, count, ctx.node_label, node.op_type)


def convert_topk(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """TopK; a run-time K (opsets 10+) sorts every element along the axis, with K as the
    outputs' extent (the executor refuses a K outside [0, n])."""
    if ctx.opset < 10 or ctx.constant(node.input[1]) is not None:
        return convert_index.convert_topk(ctx, node)
    k = ctx.value(node.input[1])
    if math.prod(shape_of(k)) != 1:
        raise ctx.shape_error(f"K must hold one value, got shape {list(shape_of(k))}")
    results = convert_index.convert_topk(ctx, node, every=True)
    axis = norm_axis(ctx, attributes(node).get("axis", -1), len(ctx.shape(node.input[0])))
    record(ctx, node, [0, 1], [axis, axis], reshape(ctx, k, (1,)))
    return results


# ---------------------------------------------------------------------------
# NonZero, Compress, Unique
# ---------------------------------------------------------------------------


def convert_nonzero(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """NonZero (opsets 9+): int64 coordinates [rank, n] of the nonzero elements in row-major
    order, at the upper bound n = the input's size; the extent along axis 1 is their count."""
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    if not shape:
        raise ctx.unsupported("a scalar input (rank 0) is not supported; give it rank 1")
    n = math.prod(shape)
    _check_size(ctx, n * n * len(shape), n)
    keep = nonzero_mask(ctx, reshape(ctx, x, (n,)))
    chosen = select_slots(ctx, keep, n)
    coords = gather_slots(ctx, chosen, np.stack(np.unravel_index(np.arange(n), shape)), "coords")
    record(ctx, node, [0], [1], _count(ctx, keep))
    return [ctx.emit(CastOp(coords, TensorType(i64, [len(shape), n])))]


def convert_compress(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Compress with a run-time condition (convert_index.py's for a compile-time one): the slices
    along `axis` (the flattened input without one) where the condition holds, at the upper bound
    min(len(condition), dim); the extent along the axis is how many it keeps. Entries of a
    longer condition past the dim are ignored."""
    if ctx.constant(node.input[1]) is not None:
        return convert_index.convert_compress(ctx, node)
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    cond = ctx.value(node.input[1])
    if len(shape_of(cond)) != 1:
        raise ctx.shape_error(f"condition must be 1-D, got shape {list(shape_of(cond))}")
    axis = attributes(node).get("axis")
    if axis is None:
        x, shape, axis = reshape(ctx, x, (math.prod(shape),)), (math.prod(shape),), 0
    axis = norm_axis(ctx, axis, len(shape))
    m = min(shape_of(cond)[0], shape[axis])
    _check_size(ctx, m * m, m)
    if shape_of(cond)[0] > m:
        cond = ctx.emit(graph.SliceOp(cond, [0], [1], TensorType(element_type(cond), [m])))
    keep = nonzero_mask(ctx, cond)
    chosen = select_slots(ctx, keep, m)
    source = gather_slots(ctx, chosen, np.arange(m).reshape(1, m), "positions")
    index = ctx.emit(CastOp(reshape(ctx, source, (m,)), TensorType(i64, [m])))
    out = [m if d == axis else s for d, s in enumerate(shape)]
    record(ctx, node, [0], [axis], _count(ctx, keep))
    return [ctx.emit(GatherOp(x, index, axis, TensorType(element_type(x), out)))]


def convert_unique(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Unique (opsets 11+): the distinct elements (or slices along `axis`), sorted ascending
    (`sorted=1`, slices lexicographically) or in order of first occurrence; with the index of
    each one's first occurrence, each input entry's position in the result, and the counts.
    Y, indices and counts are at the upper bound n (every entry distinct) with the number of
    distinct entries as extent; inverse_indices has the static size n."""
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    attrs = attributes(node)
    axis = attrs.get("axis")
    if axis is None:
        x, shape, axis = reshape(ctx, x, (math.prod(shape),)), (math.prod(shape),), 0
    axis = norm_axis(ctx, axis, len(shape))
    n = shape[axis]
    m = math.prod(shape) // n if n else 0
    if n == 0:
        raise ctx.unsupported("an empty input is not supported")
    _check_size(ctx, n * n * m, n)
    # rows[k] = the k-th slice, flattened in row-major order: [n, m]
    perm = [axis, *(d for d in range(len(shape)) if d != axis)]
    rows = reshape(ctx, transpose(ctx, x, perm), (n, m))
    a, b = reshape(ctx, rows, (n, 1, m)), reshape(ctx, rows, (1, n, m))  # [j, k, p]: rows j and k
    differ = flag(ctx, a, b, "ne")
    same = ctx.emit(graph.SubOp(const(ctx, differ, np.ones(1), "one"), reduce(ctx, differ, "max", [2], False),
                                TensorType(f32, [n, n])))  # [j, k]
    earlier = mask(ctx, np.arange(n)[:, None] < np.arange(n)[None, :], "earlier")  # j < k
    seen = reduce(ctx, ctx.emit(graph.MulOp(same, earlier, same.type)), "max", [0], False)  # [k]
    first = ctx.emit(graph.SubOp(const(ctx, seen, np.ones(1), "one"), seen, seen.type))
    if attrs.get("sorted", 1):
        # row j < row k: at the first position where they differ, j's element is smaller
        positions = const(ctx, differ, np.arange(m).reshape(1, 1, m), "positions")
        where_first = reduce(ctx, where(ctx, differ, positions, const(ctx, differ, np.full(1, m), "end")), "min",
                             [2], True)  # [j, k, 1]
        at_first = ctx.emit(graph.CompareOp(positions, where_first, "eq", TensorType(f32, [n, n, m])))
        less = ctx.emit(graph.MulOp(flag(ctx, a, b, "lt"), at_first, at_first.type))
        order = reduce(ctx, less, "max", [2], False)  # [j, k]: row j sorts before row k
    else:
        order = earlier
    rank = reduce(ctx, ctx.emit(graph.MulOp(order, reshape(ctx, first, (n, 1)), order.type)), "sum", [0], False)
    slots = const(ctx, rank, np.arange(n).reshape(n, 1), "slots")
    chosen = ctx.emit(graph.MulOp(ctx.emit(graph.CompareOp(reshape(ctx, rank, (1, n)), slots, "eq",
                                                           TensorType(f32, [n, n]))),
                                  reshape(ctx, first, (1, n)), TensorType(f32, [n, n])))  # [r, k]
    zero = const(ctx, x, np.zeros(1), "zero")
    picked = where(ctx, reshape(ctx, chosen, (n, n, 1)), reshape(ctx, rows, (1, n, m)), zero)
    y_rows = reduce(ctx, picked, "sum", [1], False)  # [r, m]: one term each, exact for any type
    y_shape = [shape[d] for d in perm]
    y = transpose(ctx, reshape(ctx, y_rows, y_shape), list(np.argsort(perm)))
    count = _count(ctx, first)
    record(ctx, node, [0, 1, 3], [axis, 0, 0], count)
    results: list[Value] = [y]
    if len(node.output) > 1:
        results.append(_to_i64(ctx, gather_slots(ctx, chosen, np.arange(n).reshape(1, n), "indices"), n))
    if len(node.output) > 2:  # inverse[i] = the rank of the first entry equal to entry i
        firsts_of = ctx.emit(graph.MulOp(same, reshape(ctx, first, (1, n)), same.type))  # [i, k]
        ranked = ctx.emit(graph.MulOp(firsts_of, reshape(ctx, rank, (1, n)), same.type))
        results.append(_to_i64(ctx, reduce(ctx, ranked, "sum", [1], False), n))
    if len(node.output) > 3:
        counts = reshape(ctx, reduce(ctx, same, "sum", [0], False), (1, n))  # [k]: entries equal to entry k
        results.append(_to_i64(ctx, reduce(ctx, ctx.emit(graph.MulOp(chosen, counts, chosen.type)), "sum", [1],
                                           False), n))
    return results


def _to_i64(ctx: ConversionContext, value: SSAValue, n: int) -> SSAValue:
    return ctx.emit(CastOp(reshape(ctx, value, (n,)), TensorType(i64, [n])))


DATA_DEPENDENT_CONVERTERS = {"NonZero": convert_nonzero, "Unique": convert_unique, "Compress": convert_compress,
                             "TopK": convert_topk}
"""ONNX op type -> converter, merged into the importer's table after convert_index.py's (whose
Compress and TopK these call where the condition or K is known at compile time)."""


# ---------------------------------------------------------------------------
# Consumers of run-time sized values
# ---------------------------------------------------------------------------

SAME_SHAPE = frozenset({
    "Identity", "Cast", "CastLike", "Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal",
    "Floor", "Ceil", "Round", "Not", "Sign", "Erf", "Softplus", "Sin", "Cos", "IsNaN", "IsInf", "LeakyRelu", "Elu",
    "Selu", "HardSigmoid", "Clip", "BitwiseNot",
})
"""Ops whose output has the shape of input 0 and whose entries depend on that entry alone."""

BROADCASTING = frozenset({
    "Add", "Sub", "Mul", "Div", "Mod", "Pow", "Max", "Min", "And", "Or", "Xor", "Equal", "Less", "Greater",
    "LessOrEqual", "GreaterOrEqual", "Where", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
})
"""Elementwise ops with numpy broadcasting."""


def sized_inputs(ctx: ConversionContext, node: onnx.NodeProto) -> dict[int, RuntimeExtent]:
    """The inputs of `node` (by position) whose size along an axis is known only at run time."""
    if not ctx.extents:
        return {}
    return {i: ctx.extents[name] for i, name in enumerate(node.input) if name in ctx.extents}


RESHAPING = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten"})
"""Ops that only regroup dims: the extent passes where the sized axis stays whole (`_axis_kept`)."""


def carried_axis(ctx: ConversionContext, node: onnx.NodeProto, sized: dict[int, RuntimeExtent],
                 out_shape: tuple[int, ...] | None = None) -> RuntimeExtent | None:
    """The extent `node`'s output 0 takes from its run-time sized inputs `sized`; an
    `UnsupportedOpError` for an op that does not treat the sized axis entry by entry. A
    reshaping op is decided from its output shape: None until `out_shape` is given."""
    (first, extent), *others = sized.items()
    shapes = [ctx.shape(name) if name else () for name in node.input]
    if node.op_type in RESHAPING and first == 0 and not others:
        if out_shape is None:
            return None
        axis = _axis_kept(shapes[0], out_shape, extent.axis)
    else:
        axis = _axis_through(node, first, extent.axis, shapes)
    # every sized input must bring the same extent to the same output axis
    same = all(e.value is extent.value and _axis_through(node, i, e.axis, shapes) == axis for i, e in others)
    if node.op_type in ("Div", "Mod") and not dtypes.is_float(element_type(ctx.value(node.input[0]))):
        axis = None  # the padding past the extent may hold a zero divisor
    if axis is None or not same:
        name = node.input[first]
        raise ctx.unsupported(
            f"input '{name}' has a size along axis {extent.axis} known only at run time (from {extent.op} node "
            f"'{extent.node}'); ziggurat passes such a tensor only through elementwise ops, Transpose, Gather and "
            "GatherND, and reshapes that keep that axis whole, to a graph output. Compute this node before the "
            "data-dependent op, or fix its result's size in the model")
    return replace(extent, axis=axis)


def _axis_kept(shape: tuple[int, ...], out: tuple[int, ...], axis: int) -> int | None:
    """The dim of `out` that is `shape`'s dim `axis` whole (the same size, after as many elements),
    where one is; None where a reshape splits or merges it."""
    before = math.prod(shape[:axis])
    for j, size in enumerate(out):
        if math.prod(out[:j]) == before and size == shape[axis]:
            return j
    return None


def _axis_through(node: onnx.NodeProto, index: int, axis: int, shapes: list[tuple[int, ...]]) -> int | None:
    """Where axis `axis` of input `index` lands in `node`'s output 0, if the op maps it entry by entry."""
    op, attrs = node.op_type, attributes(node)
    if op in SAME_SHAPE:
        return axis if index == 0 else None
    if op in BROADCASTING:
        rank = max(len(s) for s in shapes)
        out_axis = axis + rank - len(shapes[index])
        for i, s in enumerate(shapes):  # the other operands must broadcast along it
            d = out_axis - (rank - len(s))
            if i != index and 0 <= d < len(s) and s[d] != 1 and s[d] != shapes[index][axis]:
                return None
        return out_axis
    if op == "Transpose":
        perm = list(attrs.get("perm", range(len(shapes[0]) - 1, -1, -1)))
        return perm.index(axis)
    if op == "Gather":
        gather_axis = attrs.get("axis", 0) % max(len(shapes[0]), 1)
        if index == 1:
            return gather_axis + axis
        return None if axis == gather_axis else (axis if axis < gather_axis else axis + len(shapes[1]) - 1)
    if op == "GatherND" and index == 1 and not attrs.get("batch_dims", 0):
        return axis if axis < len(shapes[1]) - 1 else None
    return None
