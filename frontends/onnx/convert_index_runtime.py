"""GatherND and ScatterElements/Scatter/ScatterND with indices known only at run time.

With compile-time indices these ops go through `convert_index.py`, which
resolves every position at import time. Here the integer indices are a run-time
tensor: they are cast to exact float32 positions (`graph.cast`), negative ones
wrapped, and clamped into range so that no read can leave a tensor. Then:

* GatherND (batch_dims = 0): the flat row of each index tuple (a dot product
  with the row strides) selects rows of the data viewed as [R, S] through
  `graph.gather_elements` with those run-time positions.
* Scatters: for every output position i along the scattered axis and every
  update j, hit[i, j] = (position[j] == i); reduction none takes the update of
  the last hit (a reduce-max of where(hit, j, -1), then a gather), and
  add/mul/max/min combine the data with a reduce over where(hit, update, identity).
  ScatterND scatters rows of the [R, S] view the same way. The pairwise
  [n, m] masks are refused above MAX_PAIRWISE elements.

```mlir
// ScatterElements, axis 1, data tensor<2x5xf32>, run-time indices tensor<2x2xi64>
%p = graph.cast %indices : tensor<2x2xi64> -> tensor<2x2xf32>
%hit = graph.compare %p4, %iota {kind = "eq"} : tensor<2x1x2x1xf32>, tensor<1x5x1x1xf32> -> tensor<2x5x2x1xf32>
%last = graph.reduce %w {kind = "max", axes = array<i64: 2>} : tensor<2x5x2x1xf32> -> tensor<2x5x1xf32>
```
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.dialects.builtin import TensorType, f32
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of
from ziggurat.frontends.onnx.convert_index import (
    MAX_EXACT_INDEX,
    MAX_PAIRWISE,
    compare,
    const,
    convert_cumsum,
    convert_gather_nd,
    convert_reverse_sequence,
    convert_scatter_elements,
    convert_scatter_nd,
    norm_axis,
    numpy_dtype,
    prefix_sum,
    reduce,
    where,
)
from ziggurat.frontends.onnx.convert_tfidf import convert_tfidf_vectorizer
from ziggurat.frontends.onnx.convert_window import like, reshape


def _positions(ctx: ConversionContext, name: str, extents: Sequence[int]) -> SSAValue:
    """The run-time integer tensor `name` as float32 positions; entries along the
    last axis (or all entries, for one extent) wrapped when negative and
    clamped into [0, extent)."""
    from ziggurat.dialects.graph_dtype import CastOp

    idx = ctx.value(name)
    elt = idx.type.element_type  # type: ignore[attr-defined]
    kind = numpy_dtype(elt).kind
    if kind not in "iu":
        raise ctx.unsupported(f"indices '{name}' must be integers, got {elt}")
    if max(extents) >= MAX_EXACT_INDEX:
        raise ctx.unsupported(f"extents {list(extents)} exceed the exact float32 index range")
    pos = ctx.emit(CastOp(idx, TensorType(f32, list(shape_of(idx)))))
    ext = const(ctx, pos, np.array(extents, np.float32), "extents")
    if kind == "i":
        wrapped = ctx.emit(graph.AddOp(pos, ext, pos.type))
        pos = where(ctx, compare(ctx, pos, const(ctx, pos, np.zeros(1), "zero"), "lt"), wrapped, pos)
    top = ctx.emit(graph.SubOp(ext, const(ctx, pos, np.ones(1), "one"), ext.type))
    low = ctx.emit(graph.MaxOp(pos, const(ctx, pos, np.zeros(1), "zero"), pos.type))
    return ctx.emit(graph.MinOp(low, top, pos.type))


def _rows(ctx: ConversionContext, pos: SSAValue, shape: Sequence[int]) -> SSAValue:
    """The flat row index of each index tuple (last axis of `pos`) into `shape`."""
    q = shape_of(pos)[-1]
    strides = [math.prod(shape[k + 1:q]) for k in range(q)]
    scaled = ctx.emit(graph.MulOp(pos, const(ctx, pos, np.array(strides), "strides"), pos.type))
    return reduce(ctx, scaled, "sum", [len(shape_of(pos)) - 1], False)


def _identity(data: SSAValue, reduction: str) -> float:
    dtype = numpy_dtype(data.type.element_type)  # type: ignore[attr-defined]
    if reduction == "mul":
        return 1.0
    if reduction in ("max", "min"):
        if dtype.kind == "f":
            return float("-inf") if reduction == "max" else float("inf")
        info = np.iinfo(dtype)
        return float(info.min if reduction == "max" else info.max)
    return 0.0


def _scatter_rows(ctx: ConversionContext, data3: SSAValue, upd3: SSAValue, pos4: SSAValue,
                  reduction: str) -> SSAValue:
    """data3 [P, n, Q] with upd3 [P, m, Q] scattered along axis 1 to the
    positions pos4 [P or 1, 1, m, Q or 1]."""
    p, n, q = shape_of(data3)
    m = shape_of(upd3)[1]
    if p * n * m * q > MAX_PAIRWISE:
        raise ctx.unsupported(f"a run-time-index scatter of {m} updates into {n} positions builds "
                              f"{p * n * m * q} pairs, more than {MAX_PAIRWISE}")
    iota_n = const(ctx, pos4, np.arange(n).reshape(1, n, 1, 1), "targets")
    hit = compare(ctx, pos4, iota_n, "eq")  # [., n, m, .]
    if reduction == "none":
        order = const(ctx, pos4, np.arange(m).reshape(1, 1, m, 1), "order")
        last = reduce(ctx, where(ctx, hit, order, const(ctx, pos4, np.array([-1.0]), "none")), "max", [2], False)
        table = last if shape_of(last) == (p, n, q) else ctx.emit(
            graph.BroadcastToOp(last, like(last, (p, n, q))))
        safe = ctx.emit(graph.MaxOp(table, const(ctx, pos4, np.zeros(1), "zero"), table.type))
        gathered = ctx.emit(graph.GatherElementsOp(upd3, safe, 1, like(upd3, (p, n, q))))
        written = compare(ctx, table, const(ctx, pos4, np.zeros(1), "zero"), "ge")
        return where(ctx, written, gathered, data3)
    kinds = {"add": ("sum", graph.AddOp), "mul": ("prod", graph.MulOp), "max": ("max", graph.MaxOp),
             "min": ("min", graph.MinOp)}
    if reduction not in kinds:
        raise ctx.unsupported(f"reduction '{reduction}' is not none, add, mul, max or min")
    kind, combine = kinds[reduction]
    fill = const(ctx, upd3, np.array([_identity(upd3, reduction)]), "identity")
    upd4 = reshape(ctx, upd3, (p, 1, m, q))
    total = reduce(ctx, where(ctx, hit, upd4, fill), kind, [2], False)  # [p, n, q]
    merged = ctx.emit(combine(data3, total, data3.type))
    if reduction in ("add", "mul"):
        return merged
    touched = reduce(ctx, hit, "max", [2], False)
    return where(ctx, touched, merged, data3)


def _runtime(ctx: ConversionContext, name: str) -> bool:
    return ctx.constant(name) is None


def convert_scatter_elements_any(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """ScatterElements/Scatter: run-time indices here, compile-time ones in convert_index."""
    if not _runtime(ctx, node.input[1]):
        return convert_scatter_elements(ctx, node)
    attrs = attributes(node)
    data, updates = ctx.value(node.input[0]), ctx.value(node.input[2])
    shape, ishape = shape_of(data), ctx.shape(node.input[1])
    axis = norm_axis(ctx, attrs.get("axis", 0), len(shape))
    if ishape != shape_of(updates) or len(ishape) != len(shape):
        raise ctx.shape_error(f"indices {ishape} and updates {shape_of(updates)} do not fit data {shape}")
    if any(ishape[d] != shape[d] for d in range(len(shape)) if d != axis):
        raise ctx.unsupported(f"run-time indices {ishape} must match the data {shape} outside axis {axis}")
    pre, n, post = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    m = ishape[axis]
    pos = reshape(ctx, _positions(ctx, node.input[1], [n]), (pre, 1, m, post))
    out = _scatter_rows(ctx, reshape(ctx, data, (pre, n, post)), reshape(ctx, updates, (pre, m, post)), pos,
                        attrs.get("reduction", "none"))
    return [reshape(ctx, out, shape)]


def convert_scatter_nd_any(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """ScatterND: run-time indices here, compile-time ones in convert_index."""
    if not _runtime(ctx, node.input[1]):
        return convert_scatter_nd(ctx, node)
    data, updates = ctx.value(node.input[0]), ctx.value(node.input[2])
    shape, ishape = shape_of(data), ctx.shape(node.input[1])
    q = ishape[-1] if ishape else 0
    if not ishape or not 1 <= q <= len(shape) or shape_of(updates) != (*ishape[:-1], *shape[q:]):
        raise ctx.shape_error(f"indices {ishape} and updates {shape_of(updates)} do not fit data {shape}")
    r, s, u = math.prod(shape[:q]), math.prod(shape[q:]), math.prod(ishape[:-1])
    rows = _rows(ctx, _positions(ctx, node.input[1], shape[:q]), shape)
    out = _scatter_rows(ctx, reshape(ctx, data, (1, r, s)), reshape(ctx, updates, (1, u, s)),
                        reshape(ctx, rows, (1, 1, u, 1)), attributes(node).get("reduction", "none"))
    return [reshape(ctx, out, shape)]


def convert_gather_nd_any(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """GatherND: run-time indices here, compile-time ones in convert_index.
    With batch_dims b, each index tuple of batch element n reads the rows of
    data[n]: its flat row plus n times the rows per batch element."""
    if not _runtime(ctx, node.input[1]):
        return convert_gather_nd(ctx, node)
    b = int(attributes(node).get("batch_dims", 0))
    data = ctx.value(node.input[0])
    shape, ishape = shape_of(data), ctx.shape(node.input[1])
    q = ishape[-1] if ishape else 0
    if not ishape or b < 0 or b >= len(ishape) or ishape[:b] != shape[:b] or not 1 <= q <= len(shape) - b:
        raise ctx.shape_error(f"indices shape {ishape} does not fit data shape {shape} with batch_dims {b}")
    batches, per_batch = math.prod(shape[:b]), math.prod(shape[b:b + q])
    r, s, u = batches * per_batch, math.prod(shape[b + q:]), math.prod(ishape[:-1])
    rows = _rows(ctx, _positions(ctx, node.input[1], shape[b:b + q]), shape[b:])
    if b:
        rows = reshape(ctx, rows, (batches, u // batches))
        offsets = const(ctx, rows, (np.arange(batches) * per_batch).reshape(batches, 1), "batch_rows")
        rows = ctx.emit(graph.AddOp(rows, offsets, rows.type))
    rows = reshape(ctx, rows, (u, 1))
    table = ctx.emit(graph.BroadcastToOp(rows, like(rows, (u, s))))
    gathered = ctx.emit(graph.GatherElementsOp(reshape(ctx, data, (r, s)), table, 0, like(data, (u, s))))
    return [reshape(ctx, gathered, (*ishape[:-1], *shape[b + q:]))]


def _runtime_scalar(ctx: ConversionContext, name: str) -> SSAValue:
    """A run-time integer scalar (or 1-element tensor) as a float32 [1] tensor."""
    from ziggurat.dialects.graph_dtype import CastOp

    value = ctx.value(name)
    if math.prod(shape_of(value)) != 1:
        raise ctx.shape_error(f"'{name}' must hold one value, got shape {shape_of(value)}")
    if numpy_dtype(value.type.element_type).kind not in "iu":  # type: ignore[attr-defined]
        raise ctx.unsupported(f"'{name}' must be an integer")
    return reshape(ctx, ctx.emit(CastOp(value, TensorType(f32, list(shape_of(value))))), [1])


def convert_cumsum_any(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """CumSum with a run-time axis: the prefix sums along every axis, the one the
    axis names picked by `graph.where` (the rank is static); a compile-time axis
    goes through convert_index."""
    if not _runtime(ctx, node.input[1]):
        return convert_cumsum(ctx, node)
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    rank = len(shape_of(x))
    if rank < 1:
        raise ctx.shape_error("input must have rank >= 1")
    axis = _runtime_scalar(ctx, node.input[1])
    exclusive, backwards = bool(attrs.get("exclusive", 0)), bool(attrs.get("reverse", 0))
    out: SSAValue | None = None
    for a in range(rank - 1, -1, -1):
        summed = prefix_sum(ctx, x, a, exclusive, backwards)
        if out is None:
            out = summed
            continue
        picked = ctx.emit(graph.MaxOp(compare(ctx, axis, const(ctx, axis, np.array([a]), "axis"), "eq"),
                                      compare(ctx, axis, const(ctx, axis, np.array([a - rank]), "axis"), "eq"),
                                      axis.type))
        out = where(ctx, picked, summed, out)
    assert out is not None
    return [out]


def convert_reverse_sequence_any(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """ReverseSequence with run-time sequence_lens: the time index table
    where(t < len[b], len[b] - 1 - t, t) computed at run time."""
    if not _runtime(ctx, node.input[1]):
        return convert_reverse_sequence(ctx, node)
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    t_axis, b_axis = attrs.get("time_axis", 0), attrs.get("batch_axis", 1)
    if len(shape) < 2 or {t_axis, b_axis} != {0, 1} or ctx.shape(node.input[1]) != (shape[b_axis],):
        raise ctx.shape_error(f"time_axis {t_axis}, batch_axis {b_axis} and lengths {ctx.shape(node.input[1])} "
                              f"do not fit {shape}")
    steps = shape[t_axis]
    lens = _positions(ctx, node.input[1], [steps + 1])  # clamped into [0, steps]
    lens = reshape(ctx, lens, (1, shape[b_axis]) if t_axis == 0 else (shape[b_axis], 1))
    t = const(ctx, lens, np.arange(steps).reshape((steps, 1) if t_axis == 0 else (1, steps)), "time")
    back = ctx.emit(graph.SubOp(ctx.emit(graph.SubOp(lens, const(ctx, lens, np.ones(1), "one"), lens.type)), t,
                                like(lens, shape[:2])))
    table = where(ctx, compare(ctx, t, lens, "lt"), back, t)
    table = reshape(ctx, table, (*shape[:2], *[1] * (len(shape) - 2)))
    table = table if shape_of(table) == tuple(shape) else ctx.emit(graph.BroadcastToOp(table, like(table, shape)))
    return [ctx.emit(graph.GatherElementsOp(x, table, t_axis, like(x, shape)))]


def convert_max_unpool(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """MaxUnpool (opsets 9+): the values scattered to their flat positions
    (run-time or compile-time indices) in zeros of the shape that kernel_shape,
    strides and pads give; a compile-time output_shape at least that large
    places this block at its origin and zero-fills the rest (the ONNX
    reference semantics, which the node tests follow)."""
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    xs = shape_of(x)
    kernel = list(attrs["kernel_shape"])
    dims = len(kernel)
    strides = list(attrs.get("strides", [1] * dims))
    pads = list(attrs.get("pads", [0] * 2 * dims))
    inferred = [*xs[:2], *[(xs[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[dims + i] for i in range(dims)]]
    out = inferred
    out_name = ctx.input(node, 2)
    if out_name is not None:
        target = ctx.shape_parameter(out_name)
        if target is None:
            raise ctx.unsupported(f"input 'output_shape' ('{out_name}') must be known at compile time")
        out = [int(v) for v in target.reshape(-1)]
    if len(out) != len(xs) or out[:2] != list(xs[:2]) or ctx.shape(node.input[1]) != xs:
        raise ctx.shape_error(f"indices {ctx.shape(node.input[1])} and output shape {out} do not fit input {xs}")
    if any(o < n for o, n in zip(out, inferred)):
        raise ctx.unsupported(f"output_shape {out} is smaller than the unpooled shape {inferred} that kernel_shape, "
                              "strides and pads give")
    size, m = math.prod(inferred), math.prod(xs)
    zeros = const(ctx, x, np.zeros((1, size, 1)), "zeros")
    if _runtime(ctx, node.input[1]):
        pos = reshape(ctx, _positions(ctx, node.input[1], [size]), (1, 1, m, 1))
    else:
        flat = np.clip(ctx.constant(node.input[1]), 0, size - 1).reshape(1, 1, m, 1)  # type: ignore[union-attr]
        pos = ctx.add_constant(flat.astype(np.float32), f"{ctx.node_label}.indices")
    y = reshape(ctx, _scatter_rows(ctx, zeros, reshape(ctx, x, (1, m, 1)), pos, "none"), inferred)
    for axis in range(2, len(out)):  # zero-fill up to output_shape after the unpooled block
        extra = out[axis] - shape_of(y)[axis]
        if extra:
            fill = [extra if d == axis else n for d, n in enumerate(shape_of(y))]
            grown = [out[axis] if d == axis else n for d, n in enumerate(shape_of(y))]
            y = ctx.emit(graph.ConcatOp([y, const(ctx, x, np.zeros(fill), f"fill{axis}")], axis, like(y, grown)))
    return [y]


def convert_tensor_scatter(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """TensorScatter (opset 24): writes `update` into `past_cache` along `axis`
    from position write_indices[b] (0 when absent) per batch b, wrapping in
    mode circular."""
    attrs = attributes(node)
    cache, update = ctx.value(node.input[0]), ctx.value(node.input[1])
    cs, us = shape_of(cache), shape_of(update)
    axis = norm_axis(ctx, attrs.get("axis", -2), len(cs))
    if axis == 0 or len(us) != len(cs) or any(us[d] != cs[d] for d in range(len(cs)) if d != axis):
        raise ctx.shape_error(f"update {us} does not fit past_cache {cs} along axis {axis}")
    b, n, m = cs[0], cs[axis], us[axis]
    mid, post = math.prod(cs[1:axis]), math.prod(cs[axis + 1:])
    name = ctx.input(node, 2)
    if name is None:
        start = ctx.add_constant(np.zeros((b, 1, 1), np.float32), f"{ctx.node_label}.starts")
    else:
        start = reshape(ctx, _positions(ctx, name, [n]), (b, 1, 1))
    steps = const(ctx, start, np.arange(m).reshape(1, 1, m), "steps")
    pos = ctx.emit(graph.AddOp(start, steps, like(start, (b, 1, m))))
    if attrs.get("mode", "linear") == "circular":
        wrapped = ctx.emit(graph.SubOp(pos, const(ctx, pos, np.array([n]), "n"), pos.type))
        pos = where(ctx, compare(ctx, pos, const(ctx, pos, np.array([n]), "n"), "ge"), wrapped, pos)
    pos = ctx.emit(graph.BroadcastToOp(pos, like(pos, (b, mid, m))))
    pos4 = reshape(ctx, pos, (b * mid, 1, m, 1))
    y = _scatter_rows(ctx, reshape(ctx, cache, (b * mid, n, post)), reshape(ctx, update, (b * mid, m, post)),
                      pos4, "none")
    return [reshape(ctx, y, cs)]


RUNTIME_INDEX_CONVERTERS = {
    "CumSum": convert_cumsum_any,
    "ReverseSequence": convert_reverse_sequence_any,
    "MaxUnpool": convert_max_unpool,
    "TensorScatter": convert_tensor_scatter,
    "GatherND": convert_gather_nd_any,
    "ScatterElements": convert_scatter_elements_any,
    "Scatter": convert_scatter_elements_any,
    "ScatterND": convert_scatter_nd_any,
    "TfIdfVectorizer": convert_tfidf_vectorizer,
}
"""ONNX op type -> converter, merged into the importer's table after convert_index's."""
