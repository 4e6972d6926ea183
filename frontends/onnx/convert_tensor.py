"""Converters for ONNX tensor-manipulation ops on run-time tensors, decomposed
onto the small core of `graph` ops: `graph.reshape`, `graph.slice`,
`graph.concat`, `graph.broadcast_to` and `graph.reduce`.

On import-time constants these ops never get here: `fold.py` evaluates them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
import ziggurat.dtypes as dtypes
from ziggurat.dialects.graph_dtype import CastOp, GatherOp
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, like, shape_of, tensor_type
from ziggurat.symbolic import Sym, SymbolicError


def _axis(ctx: ConversionContext, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise ctx.shape_error(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _const_ints(ctx: ConversionContext, node: onnx.NodeProto, index: int, what: str) -> list[int] | None:
    """Optional input `index` as a list of ints; it must be an import-time constant."""
    name = ctx.input(node, index)
    if name is None:
        return None
    array = ctx.shape_parameter(name)
    if array is None:
        raise ctx.unsupported(
            f"input '{what}' must be known at compile time (a constant or computed from shapes); "
            "it is a run-time tensor here"
        )
    return [int(v) for v in array.reshape(-1)]


def _axes_arg(ctx: ConversionContext, node: onnx.NodeProto, index: int, since: int) -> list[int] | None:
    """`axes` as an attribute before opset `since`, as input `index` from it."""
    if ctx.opset < since:
        axes = attributes(node).get("axes")
        return list(axes) if axes is not None else None
    return _const_ints(ctx, node, index, "axes")


def slice_value(ctx: ConversionContext, x: SSAValue, starts: Sequence[int], steps: Sequence[int],
                sizes: Sequence[int]) -> SSAValue:
    """A graph.slice of `x`, or `x` itself when the window is the whole tensor."""
    if list(starts) == [0] * len(sizes) and list(steps) == [1] * len(sizes) and tuple(sizes) == shape_of(x):
        return x
    return ctx.emit(graph.SliceOp(x, starts, steps, like(x, sizes)))


def convert_unsqueeze(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Unsqueeze (axes attribute before opset 13, input from 13): inserts size-1 dims."""
    shape = ctx.shape(node.input[0])
    axes = _axes_arg(ctx, node, 1, 13) or []
    rank = len(shape) + len(axes)
    axes = sorted(_axis(ctx, a, rank) for a in axes)
    if len(set(axes)) != len(axes):
        raise ctx.shape_error(f"axes {axes} repeat a dim")
    out, rest = [], iter(shape)
    for d in range(rank):
        out.append(1 if d in axes else next(rest))
    return [ctx.reshape(ctx.value(node.input[0]), out)]


def convert_squeeze(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Squeeze (axes attribute before opset 13, input from 13): drops size-1 dims,
    all of them when no axes are given."""
    shape = ctx.shape(node.input[0])
    axes = _axes_arg(ctx, node, 1, 13)
    if axes is None:
        axes = [d for d, n in enumerate(shape) if n == 1]
    axes = [_axis(ctx, a, len(shape)) for a in axes]
    if any(shape[a] != 1 for a in axes):
        raise ctx.shape_error(f"cannot squeeze axes {axes} of shape {shape}: not all have size 1")
    return [ctx.reshape(ctx.value(node.input[0]), [n for d, n in enumerate(shape) if d not in axes])]


MAX_SLICE_RUNS = 4
"""Gather indices that form more arithmetic runs than this use graph.gather_elements."""


def _take(ctx: ConversionContext, x: SSAValue, axis: int, indices: Sequence[int]) -> SSAValue:
    """The rows `indices` of `x` along `axis`: one strided slice when they form an
    arithmetic progression, else a concat of maximal progressions."""
    shape = shape_of(x)
    runs: list[tuple[int, int, int]] = []  # start, step, count
    for index in indices:
        if runs:
            start, step, count = runs[-1]
            if count == 1 and index != start:
                runs[-1] = (start, index - start, 2)
                continue
            if count > 1 and index == start + step * count:
                runs[-1] = (start, step, count + 1)
                continue
        runs.append((index, 1, 1))
    if len(runs) > MAX_SLICE_RUNS:  # one gather instead of many slices
        ref = ctx.add_constant(np.array(indices, np.int64), f"{ctx.node_label}.indices")
        out = [len(indices) if d == axis else n for d, n in enumerate(shape)]
        return ctx.emit(GatherOp(x, ref, axis, like(x, out)))
    parts = []
    for start, step, count in runs:
        starts = [start if d == axis else 0 for d in range(len(shape))]
        steps = [step if d == axis else 1 for d in range(len(shape))]
        sizes = [count if d == axis else n for d, n in enumerate(shape)]
        parts.append(slice_value(ctx, x, starts, steps, sizes))
    if len(parts) == 1:
        return parts[0]
    out = [len(indices) if d == axis else n for d, n in enumerate(shape)]
    return ctx.emit(graph.ConcatOp(parts, axis, like(x, out)))


def convert_gather_elements(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """GatherElements (opsets 11+): graph.gather_elements with integer indices
    (negative ones count from the end); compile-time indices are checked here,
    run-time ones are clamped into range by the kernel."""
    shape = ctx.shape(node.input[0])
    axis = _axis(ctx, attributes(node).get("axis", 0), len(shape))
    indices = ctx.constant(node.input[1])
    if indices is None:
        idx = ctx.value(node.input[1])
        if len(shape_of(idx)) != len(shape) or any(shape_of(idx)[d] > shape[d] for d in range(len(shape)) if d != axis):
            raise ctx.shape_error(f"indices shape {shape_of(idx)} does not fit data shape {shape} at axis {axis}")
        x = ctx.value(node.input[0])
        return [ctx.emit(graph.GatherElementsOp(x, idx, axis, like(x, shape_of(idx))))]
    if indices.ndim != len(shape) or any(indices.shape[d] > shape[d] for d in range(len(shape)) if d != axis):
        raise ctx.shape_error(f"indices shape {indices.shape} does not fit data shape {shape} at axis {axis}")
    table = np.where(indices < 0, indices + shape[axis], indices)
    if table.size == 0:
        raise ctx.unsupported("empty indices (a zero-size result) are not supported")
    if table.min() < 0 or table.max() >= shape[axis]:
        raise ctx.shape_error(f"indices leave dim {axis} of size {shape[axis]}")
    ref = ctx.add_constant(table.astype(np.int64), f"{node.input[1]}.i64")
    x = ctx.value(node.input[0])
    return [ctx.emit(graph.GatherElementsOp(x, ref, axis, like(x, table.shape)))]


def convert_gather(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Gather (opsets 1+): compile-time indices (negative ones count from the
    end) become strided slices, concatenated where needed; run-time integer
    indices a graph.gather."""
    shape = ctx.shape(node.input[0])
    if not shape:
        raise ctx.shape_error("data must have rank >= 1")
    axis = _axis(ctx, attributes(node).get("axis", 0), len(shape))
    indices = ctx.constant(node.input[1])
    if indices is None:
        idx, x = ctx.value(node.input[1]), ctx.value(node.input[0])
        out_shape = (*shape[:axis], *shape_of(idx), *shape[axis + 1:])
        if 0 in out_shape:
            raise ctx.unsupported("empty indices (a zero-size result) are not supported")
        if not shape_of(idx):  # a scalar index: gather one row, then drop the dim
            row = ctx.emit(GatherOp(x, ctx.reshape(idx, [1]), axis, like(x, (*shape[:axis], 1, *shape[axis + 1:]))))
            return [ctx.reshape(row, out_shape)]
        return [ctx.emit(GatherOp(x, idx, axis, like(x, out_shape)))]
    flat = [int(i) + shape[axis] if i < 0 else int(i) for i in indices.reshape(-1)]
    if any(not 0 <= i < shape[axis] for i in flat):
        raise ctx.shape_error(f"indices {indices.reshape(-1).tolist()} leave dim {axis} of size {shape[axis]}")
    out = (*shape[:axis], *indices.shape, *shape[axis + 1:])
    if not flat:
        raise ctx.unsupported("empty indices (a zero-size result) are not supported")
    return [ctx.reshape(_take(ctx, ctx.value(node.input[0]), axis, flat), out)]


def empty_like(ctx: ConversionContext, name: str, shape: Sequence[int]) -> np.ndarray:
    """A zero-size import-time array of `shape` with the element type of `name`."""
    value = ctx.lookup(name)
    dtype = value.dtype if isinstance(value, np.ndarray) else dtypes.to_numpy(element_type(value))
    return np.zeros(tuple(shape), dtype)


def slice_window(n: int, start: int, end: int, step: int) -> tuple[int, int, int]:
    """ONNX Slice clamping on one dim of size n: (first index, step, count).

    Python slicing is not quite it: a negative start that stays negative after
    adding n clamps to 0 for a negative step too (ONNX: [0, n-1]), where
    Python takes nothing (`range(1)[-2::-1]` is empty, Slice gives [0])."""
    start, end = start + n if start < 0 else start, end + n if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), n), min(max(end, 0), n)
    else:
        start, end = min(max(start, 0), n - 1), min(max(end, -1), n - 1)
    count = max(0, -(-(end - start) // step)) if n else 0
    return (start if count else 0), step, count


def _sym_window(ctx: ConversionContext, n, start, end, step: int) -> tuple[int, int, object]:
    """`slice_window` where the dim or a bound is symbolic (a symbolic import): step 1 and a
    constant start; the end is clamped to the dim by a constraint (`end <= n`) where no shape
    decides it, and the window must not be empty (`start + 1 <= end`)."""
    if step != 1 or isinstance(start, Sym):
        raise SymbolicError(f"Slice node '{ctx.node_label}': a symbolic slice needs step 1 and a constant start")
    start = start + n if start < 0 else start
    if isinstance(end, int) and end >= (1 << 62):  # "to the end"
        end = n
    elif isinstance(end, int) and end < 0:
        end = end + n
    if isinstance(start, Sym):
        raise SymbolicError(f"Slice node '{ctx.node_label}': a start relative to a symbolic dim")
    ctx.require(end, "<=", n)
    ctx.require(start + 1, "<=", end)
    return start, 1, end - start


def _const_dims(ctx: ConversionContext, node: onnx.NodeProto, index: int, what: str) -> list | None:
    """`_const_ints`, where an entry may be a symbolic extent (a symbolic import)."""
    name = ctx.input(node, index)
    array = ctx.shape_parameter(name) if name is not None else None
    if array is not None and array.dtype == object:
        return [v if isinstance(v, Sym) else int(v) for v in array.reshape(-1)]
    return _const_ints(ctx, node, index, what)


def convert_slice(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Slice: starts/ends/axes attributes before opset 10, inputs (with steps) from 10;
    negative axes, indices and steps, clamped like Python slicing."""
    shape = ctx.shape(node.input[0])
    rank = len(shape)
    if ctx.opset < 10:
        attrs = attributes(node)
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes, steps = attrs.get("axes"), None
    else:
        starts, ends = _const_dims(ctx, node, 1, "starts"), _const_dims(ctx, node, 2, "ends")
        axes, steps = _const_ints(ctx, node, 3, "axes"), _const_ints(ctx, node, 4, "steps")
    assert starts is not None and ends is not None
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.shape_error(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    first, step_of, sizes = [0] * rank, [1] * rank, list(shape)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if step == 0:
            raise ctx.shape_error("a step is 0")
        a = _axis(ctx, axis, rank, "axes entry")
        symbolic = any(isinstance(v, Sym) for v in (shape[a], start, end))
        window = _sym_window if symbolic else lambda _, *args: slice_window(*args)
        first[a], step_of[a], sizes[a] = window(ctx, shape[a], start, end, step)  # type: ignore[operator]
    if any(isinstance(s, int) and s == 0 for s in sizes):  # an empty result is known at import time: its shape and type are its value
        return [empty_like(ctx, node.input[0], sizes)]
    return [slice_value(ctx, ctx.value(node.input[0]), first, step_of, sizes)]


def convert_concat(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Concat (opsets 4+; negative axis from 11) of run-time tensors and constants."""
    names = [name for name in node.input if name and 0 not in ctx.shape(name)]
    if not names:
        raise ctx.unsupported("all inputs are empty; zero-size tensors are not supported")
    shapes = [ctx.shape(name) for name in names]
    axis = _axis(ctx, attributes(node)["axis"], len(shapes[0]))
    for s in shapes:
        if len(s) != len(shapes[0]) or s[:axis] + s[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:]:
            raise ctx.shape_error(f"input shapes {shapes} differ outside axis {axis}")
    values = [ctx.value(name) for name in names]
    if len(values) == 1:
        return [values[0]]
    out = [sum(s[axis] for s in shapes) if d == axis else n for d, n in enumerate(shapes[0])]
    if len({element_type(v) for v in values}) != 1:
        raise ctx.shape_error(f"inputs have different element types {[str(element_type(v)) for v in values]}")
    return [ctx.emit(graph.ConcatOp(values, axis, like(values[0], out)))]


def convert_split(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Split: `split` attribute before opset 13, input from 13; num_outputs from 18;
    equal parts (the last one smaller) when no sizes are given."""
    shape = ctx.shape(node.input[0])
    attrs = attributes(node)
    axis = _axis(ctx, attrs.get("axis", 0), len(shape))
    sizes = list(attrs["split"]) if ctx.opset < 13 and "split" in attrs else _const_ints(ctx, node, 1, "split")
    if sizes is None:
        parts = attrs.get("num_outputs", len(node.output))
        chunk = -(-shape[axis] // parts)
        sizes = [min(chunk, shape[axis] - k * chunk) for k in range(parts)]
    if sum(sizes) != shape[axis] or min(sizes) < 0:
        raise ctx.shape_error(f"split sizes {sizes} do not cover dim {axis} of size {shape[axis]}")
    x = ctx.value(node.input[0])
    results: list[Value] = []
    offset = 0
    for size in sizes:
        starts = [offset if d == axis else 0 for d in range(len(shape))]
        out = [size if d == axis else n for d, n in enumerate(shape)]
        # an empty part is an (empty) constant: fine while nothing computes with it
        empty = np.zeros(out, dtypes.to_numpy(element_type(x)))
        results.append(slice_value(ctx, x, starts, [1] * len(shape), out) if size else empty)
        offset += size
    return results


def convert_expand(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Expand (opsets 8+): bidirectional broadcasting to a compile-time shape."""
    shape = ctx.shape(node.input[0])
    target = _const_dims(ctx, node, 1, "shape")
    assert target is not None
    out = graph.broadcast_shapes(shape, target)
    if out is None:
        raise ctx.shape_error(f"input shape {shape} does not broadcast with {tuple(target)}")
    x = ctx.value(node.input[0])
    if out == shape:
        return [x]
    if math.prod(out) == math.prod(shape):
        return [ctx.reshape(x, out)]
    return [ctx.emit(graph.BroadcastToOp(x, like(x, out)))]


def convert_cast(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Cast (opsets 6+) and CastLike (15+) of a run-time tensor to float16/32/64,
    (u)int8-64 or bool: a graph.cast (nothing when the type does not change).
    CastLike of a constant to a run-time tensor's type folds to a constant."""
    if node.op_type == "CastLike":
        target = ctx.lookup(node.input[1])
        to = dtypes.from_numpy(target.dtype) if isinstance(target, np.ndarray) else element_type(target)
        label = str(target.dtype) if isinstance(target, np.ndarray) else str(to)
    else:
        code = attributes(node)["to"]
        to = dtypes.from_onnx(code)
        label = onnx.TensorProto.DataType.Name(code)
    if to is None:
        raise ctx.unsupported(f"casts to {label} are not supported; run-time tensors can be float16/32/64, "
                              "(u)int8-64 or bool")
    saturate = bool(attributes(node).get("saturate", 1))
    round_mode = attributes(node).get("round_mode", "up")
    round_mode = round_mode.decode() if isinstance(round_mode, bytes) else round_mode
    array = ctx.constant(node.input[0])
    if array is not None:
        if dtypes.is_e8m0(to):
            return [onnx.numpy_helper.to_float8e8m0(array.astype(np.float32), saturate, round_mode)]
        if dtypes.is_float8(to) and saturate:
            return [onnx.numpy_helper.saturate_cast(array.astype(np.float32), dtypes.to_numpy(to))]
        return [array.astype(dtypes.to_numpy(to))]
    x = ctx.value(node.input[0])
    if element_type(x) == to:
        return [x]
    honours = dtypes.is_float8(to) or dtypes.is_e8m0(to)  # saturate applies to these only
    return [ctx.emit(CastOp(x, tensor_type(shape_of(x), to), saturate or not honours, round_mode))]


# ---------------------------------------------------------------------------
# Reductions and normalization
# ---------------------------------------------------------------------------

REDUCE_KINDS = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min",
                "ReduceProd": "prod", "ReduceL1": "sum", "ReduceL2": "sum", "ReduceSumSquare": "sum",
                "ReduceLogSum": "sum", "ReduceLogSumExp": "sum"}
_AXES_INPUT_SINCE = {"ReduceSum": 13}
"""The opset from which `axes` is an input (18 for the others)."""


def reduce_value(ctx: ConversionContext, x: SSAValue, kind: str, axes: Sequence[int],
                 keepdims: bool) -> SSAValue:
    """graph.reduce of `x`, through keepdims + reshape where the result would be rank 0."""
    shape = shape_of(x)
    axes = sorted(set(axes))
    if any(shape[a] == 0 for a in axes):
        raise ctx.unsupported(f"reducing the empty axes {[a for a in axes if shape[a] == 0]} of shape {shape} "
                              "is not supported (zero-size tensors)")
    kept = tuple(1 if d in axes else n for d, n in enumerate(shape))
    dropped = tuple(n for d, n in enumerate(shape) if d not in axes)
    y = ctx.emit(graph.ReduceOp(x, kind, axes, True, like(x, kept)))
    return y if keepdims else ctx.reshape(y, dropped)


def convert_reduce(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp: axes attribute
    (input from opset 13 for ReduceSum, 18 for the others), keepdims and
    noop_with_empty_axes."""
    attrs = attributes(node)
    shape = ctx.shape(node.input[0])
    axes = _axes_arg(ctx, node, 1, _AXES_INPUT_SINCE.get(node.op_type, 18))
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return [ctx.value(node.input[0])]
        axes = list(range(len(shape)))
    axes = [_axis(ctx, a, len(shape), "axes entry") for a in axes]
    keepdims = bool(attrs.get("keepdims", 1))
    x = ctx.value(node.input[0])
    op = node.op_type
    if op == "ReduceL1":
        x = ctx.emit(graph.AbsOp(x))
    elif op in ("ReduceL2", "ReduceSumSquare"):
        x = ctx.emit(graph.MulOp(x, x, x.type))
    elif op == "ReduceLogSumExp":
        peak = reduce_value(ctx, x, "max", axes, True)
        centered = ctx.emit(graph.SubOp(x, peak, x.type))
        total = reduce_value(ctx, ctx.emit(graph.ExpOp(centered)), "sum", axes, True)
        y = ctx.emit(graph.AddOp(ctx.emit(graph.LogOp(total)), peak, total.type))
        return [y if keepdims else ctx.reshape(y, [n for d, n in enumerate(shape) if d not in axes])]
    y = reduce_value(ctx, x, REDUCE_KINDS[op], axes, keepdims)
    if op == "ReduceL2":
        y = ctx.emit(graph.SqrtOp(y))
    elif op == "ReduceLogSum":
        y = ctx.emit(graph.LogOp(y))
    return [y]


def scalar(ctx: ConversionContext, value: float, label: str) -> SSAValue:
    """A rank-0 float32 constant: it broadcasts against any shape without
    changing it (a [1] constant made a rank-0 operand's result [1])."""
    return ctx.add_constant(np.array(value, np.float32), f"{ctx.node_label}.{label}")


def convert_layer_norm(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """LayerNormalization (opset 17+): normalizes dims axis..rank-1, then scale
    and optional bias; decomposed as mean, centered, variance, rsqrt, affine."""
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    axis = _axis(ctx, attrs.get("axis", -1), len(shape))
    axes = list(range(axis, len(shape)))
    eps = float(np.float32(attrs.get("epsilon", 1e-5)))
    mean = reduce_value(ctx, x, "mean", axes, True)
    centered = ctx.emit(graph.SubOp(x, mean, x.type))
    var = reduce_value(ctx, ctx.emit(graph.MulOp(centered, centered, x.type)), "mean", axes, True)
    std = ctx.emit(graph.SqrtOp(ctx.emit(graph.AddOp(var, scalar(ctx, eps, "epsilon"), var.type))))
    y = ctx.emit(graph.DivOp(centered, std, x.type))
    norm_shape = shape[axis:]
    y = _affine(ctx, y, ctx.input(node, 1), norm_shape, graph.MulOp, "scale")
    y = _affine(ctx, y, ctx.input(node, 2), norm_shape, graph.AddOp, "bias")
    if len(node.output) == 1 or not any(node.output[1:]):
        return [y]
    inv_std = ctx.emit(graph.DivOp(scalar(ctx, 1.0, "one"), std, std.type))
    return [y, mean, inv_std]


def _affine(ctx: ConversionContext, y: SSAValue, name: str | None, norm_shape: Sequence[int],
            op: type[graph.BinaryOp], what: str) -> SSAValue:
    if name is None:
        return y
    p_shape = ctx.shape(name)
    if graph.broadcast_shapes(p_shape, shape_of(y)) != shape_of(y):
        raise ctx.shape_error(f"{what} shape {p_shape} does not broadcast to the normalized shape {tuple(norm_shape)}")
    return ctx.emit(op(y, ctx.value(name), y.type))
