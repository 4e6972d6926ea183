"""Index-computing ONNX ops decomposed onto the graph core.

No graph op is added for these; each is a small composition of `graph.compare`,
`graph.where`, `graph.reduce`, `graph.gather_elements`, `graph.reshape` and
constants computed at import time:

* CumSum: where(T, x, 0) summed over the input position, where the constant
  mask T[i, k] says whether input k counts for output i (exclusive/reverse
  only change T); no multiplication, so inf and NaN stay where they belong.
* Hardmax: x == max(x) along the axis, keeping the first hit (a CumSum of
  the hits equal to 1).
* ArgMax/ArgMin: the smallest (largest with select_last_index) position where
  x equals its max/min, as a reduce-min of where(hit, position, n).
* TopK: each element's rank (how many beat it, ties broken by position), then
  for each output slot r the element whose rank is r.
* Trilu: where(constant triangle, x, 0).
* GatherND, ScatterElements/Scatter/ScatterND, ReverseSequence, Compress with
  compile-time indices: the index arithmetic is done at import time on
  numpy arrays; the run-time data moves through graph.gather_elements over a
  flat view, and scatters combine the data with the gathered updates under
  constant masks, one gather per level of duplicate indices (so reductions
  add/mul/max/min see every update in order).

Index inputs computed at run time are refused with UnsupportedOpError naming
the input. Integer outputs (ArgMax, TopK indices) are made with graph.cast
to int64 from an exact float position.

```mlir
// CumSum along axis 0 of tensor<3xf32>
%m = graph.constant "cumsum.mask" : tensor<3x3xf32>
%z = graph.constant "cumsum.zero" : tensor<1xf32>
%x2 = graph.reshape %x : tensor<3xf32> -> tensor<1x1x3x1xf32>
%w = graph.where %m3, %x2, %z : ... -> tensor<1x3x3x1xf32>
%s = graph.reduce %w {kind = "sum", axes = array<i64: 2>} : tensor<1x3x3x1xf32> -> tensor<1x3x1xf32>
```
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import onnx
from xdsl.dialects.builtin import Float16Type, Float32Type, Float64Type, IntegerType, Signedness, TensorType, f32, i64
from xdsl.ir import Attribute, SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of
from ziggurat.frontends.onnx.convert_tensor import empty_like
from ziggurat.frontends.onnx.convert_window import like, reshape

MAX_PAIRWISE = 1 << 24
"""TopK builds an [n, n] comparison per row; larger ones are refused."""

MAX_EXACT_INDEX = 1 << 24
"""Positions are carried as float32 and must stay exact."""


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def numpy_dtype(elt: Attribute) -> np.dtype:
    """The numpy dtype of a graph element type."""
    if isinstance(elt, Float32Type):
        return np.dtype(np.float32)
    if isinstance(elt, Float64Type):
        return np.dtype(np.float64)
    if isinstance(elt, Float16Type):
        return np.dtype(np.float16)
    if isinstance(elt, IntegerType):
        width = elt.width.data
        if width == 1:
            return np.dtype(np.bool_)
        unsigned = elt.signedness.data == Signedness.UNSIGNED
        return np.dtype(f"{'u' if unsigned else ''}int{width}")
    raise TypeError(f"no numpy dtype for {elt}")


def _is_float(value: SSAValue) -> bool:
    return isinstance(value.type.element_type, (Float16Type, Float32Type, Float64Type))  # type: ignore[attr-defined]


def const(ctx: ConversionContext, like_value: SSAValue, array: np.ndarray, label: str) -> SSAValue:
    """A constant with `like_value`'s element type."""
    dtype = numpy_dtype(like_value.type.element_type)  # type: ignore[attr-defined]
    return ctx.add_constant(np.ascontiguousarray(np.asarray(array).astype(dtype)), f"{ctx.node_label}.{label}")


def mask(ctx: ConversionContext, array: np.ndarray, label: str) -> SSAValue:
    """A float32 1.0/0.0 mask constant (graph.where's condition)."""
    return ctx.add_constant(np.ascontiguousarray(array, dtype=np.float32), f"{ctx.node_label}.{label}")


def index_table(ctx: ConversionContext, table: np.ndarray, label: str) -> SSAValue:
    """Exact non-negative positions as a float32 gather table."""
    if table.size and int(table.max()) >= MAX_EXACT_INDEX:
        raise ctx.unsupported(f"positions up to {int(table.max())} exceed the exact float32 index range")
    return ctx.add_constant(np.ascontiguousarray(table, dtype=np.float32), f"{ctx.node_label}.{label}")


def const_input(ctx: ConversionContext, node: onnx.NodeProto, index: int, what: str) -> np.ndarray | None:
    """Optional input `index`; it must be known at compile time."""
    name = ctx.input(node, index)
    if name is None:
        return None
    array = ctx.shape_parameter(name)
    if array is None:
        raise ctx.unsupported(f"input '{what}' ('{name}') must be known at compile time (a constant or "
                              "computed from shapes); it is a run-time tensor here")
    return array


def norm_axis(ctx: ConversionContext, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ctx.shape_error(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def require_float(ctx: ConversionContext, value: SSAValue, what: str = "input") -> None:
    if not _is_float(value):
        raise ctx.unsupported(f"{what} of element type {value.type.element_type} is not supported; "  # type: ignore[attr-defined]
                              "only floating-point tensors")


def where(ctx: ConversionContext, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
    out = graph.broadcast_shapes(shape_of(cond), graph.broadcast_shapes(shape_of(a), shape_of(b)))  # type: ignore[arg-type]
    return ctx.emit(graph.WhereOp(cond, a, b, like(a, out)))  # type: ignore[arg-type]


def compare(ctx: ConversionContext, a: SSAValue, b: SSAValue, kind: str) -> SSAValue:
    """A 1.0/0.0 mask of a `kind` b in a's float type."""
    out = graph.broadcast_shapes(shape_of(a), shape_of(b))
    return ctx.emit(graph.CompareOp(a, b, kind, like(a, out)))  # type: ignore[arg-type]


def flag(ctx: ConversionContext, a: SSAValue, b: SSAValue, kind: str) -> SSAValue:
    """float32 1.0/0.0 where `a kind b` (broadcast), compared exactly in their own element type
    (integers through an i1 result and a cast)."""
    out = list(graph.broadcast_shapes(shape_of(a), shape_of(b)))
    if a.type.element_type == f32:  # type: ignore[attr-defined]
        return ctx.emit(graph.CompareOp(a, b, kind, TensorType(f32, out)))
    from ziggurat.dialects.graph_dtype import CastOp

    hit = ctx.emit(graph.CompareOp(a, b, kind, TensorType(IntegerType(1), out)))
    return ctx.emit(CastOp(hit, TensorType(f32, out)))


def reduce(ctx: ConversionContext, x: SSAValue, kind: str, axes: Sequence[int], keepdims: bool) -> SSAValue:
    shape = shape_of(x)
    out = [1 if d in axes else n for d, n in enumerate(shape)] if keepdims else \
        [n for d, n in enumerate(shape) if d not in axes]
    return ctx.emit(graph.ReduceOp(x, kind, sorted(axes), keepdims, like(x, out)))


def to_int64(ctx: ConversionContext, value: SSAValue) -> SSAValue:
    """An exact float position tensor as int64 (graph.cast)."""
    try:
        from ziggurat.dialects.graph_dtype import CastOp
    except ImportError:
        raise ctx.unsupported("its int64 output needs run-time int64 tensors, which are not supported") from None
    return ctx.emit(CastOp(value, TensorType(i64, list(shape_of(value)))))


def three_d(shape: Sequence[int], axis: int) -> tuple[int, int, int]:
    """(before, along, after) element counts around `axis`."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def prefix_sum(ctx: ConversionContext, x: SSAValue, axis: int, exclusive: bool, reverse: bool) -> SSAValue:
    """CumSum of `x` along `axis` as where(T, x, 0) summed over the input position."""
    shape = shape_of(x)
    pre, n, post = three_d(shape, axis)
    i, k = np.arange(n)[:, None], np.arange(n)[None, :]
    t = (k > i if exclusive else k >= i) if reverse else (k < i if exclusive else k <= i)
    pair = ctx.emit(graph.WhereOp(mask(ctx, t.reshape(1, n, n, 1), "mask"), reshape(ctx, x, (pre, 1, n, post)),
                                  const(ctx, x, np.zeros(1), "zero"), like(x, (pre, n, n, post))))
    return reshape(ctx, reduce(ctx, pair, "sum", [2], False), shape)


# ---------------------------------------------------------------------------
# CumSum, Hardmax, ArgMax/ArgMin, TopK, Trilu
# ---------------------------------------------------------------------------


def convert_cumsum(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """CumSum (opsets 11+) along a compile-time axis; exclusive and reverse."""
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    axis_value = const_input(ctx, node, 1, "axis")
    assert axis_value is not None
    if axis_value.size != 1:
        raise ctx.shape_error(f"axis must hold one value, got {axis_value.reshape(-1).tolist()}")
    shape = shape_of(x)
    if not shape:
        raise ctx.shape_error("input must have rank >= 1")
    axis = norm_axis(ctx, int(axis_value.reshape(-1)[0]), len(shape))
    return [prefix_sum(ctx, x, axis, bool(attrs.get("exclusive", 0)), bool(attrs.get("reverse", 0)))]


def convert_hardmax(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Hardmax: opsets 1-12 coerce the input to 2-D at `axis` (default 1);
    13+ work along `axis` (default -1). 1 at the first maximum, else 0."""
    x = ctx.value(node.input[0])
    require_float(ctx, x)
    shape = shape_of(x)
    axis = norm_axis(ctx, attributes(node).get("axis", 1 if ctx.opset < 13 else -1), len(shape))
    y = x
    if ctx.opset < 13:
        y = reshape(ctx, x, (math.prod(shape[:axis]), math.prod(shape[axis:])))
        axis = 1
    peak = reduce(ctx, y, "max", [axis], True)
    hits = compare(ctx, y, peak, "eq")
    first = compare(ctx, prefix_sum(ctx, hits, axis, False, False), const(ctx, y, np.ones(1), "one"), "eq")
    return [reshape(ctx, ctx.emit(graph.MulOp(hits, first, hits.type)), shape)]


def _positions(ctx: ConversionContext, x: SSAValue, axis: int, label: str) -> SSAValue:
    """0, 1, ..., n-1 along `axis` (size 1 elsewhere) in x's float type."""
    rank = len(shape_of(x))
    n = shape_of(x)[axis]
    if n >= MAX_EXACT_INDEX:
        raise ctx.unsupported(f"dim {axis} of size {n} exceeds the exact float32 index range")
    return const(ctx, x, np.arange(n).reshape([n if d == axis else 1 for d in range(rank)]), label)


def arg_extreme(ctx: ConversionContext, x: SSAValue, axis: int, largest: bool, last: bool) -> SSAValue:
    """The float position of the first (last) max/min along `axis`, keepdims."""
    n = shape_of(x)[axis]
    peak = reduce(ctx, x, "max" if largest else "min", [axis], True)
    hits = compare(ctx, x, peak, "eq")
    fallback = const(ctx, x, np.array([-1.0 if last else float(n)]), "none")
    candidates = where(ctx, hits, _positions(ctx, x, axis, "positions"), fallback)
    return reduce(ctx, candidates, "max" if last else "min", [axis], True)


def convert_arg(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """ArgMax/ArgMin (opsets 1+): axis (negative from 11), keepdims,
    select_last_index (12+); int64 positions."""
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    require_float(ctx, x)
    shape = shape_of(x)
    if not shape:
        raise ctx.shape_error("input must have rank >= 1")
    axis = norm_axis(ctx, attrs.get("axis", 0), len(shape))
    pos = arg_extreme(ctx, x, axis, node.op_type == "ArgMax", bool(attrs.get("select_last_index", 0)))
    if not attrs.get("keepdims", 1):
        pos = reshape(ctx, pos, [n for d, n in enumerate(shape) if d != axis])
    return [to_int64(ctx, pos)]


def convert_topk(ctx: ConversionContext, node: onnx.NodeProto, every: bool = False) -> Sequence[Value]:
    """TopK: k as attribute (opsets 1-9) or compile-time input (10+; `every`: all n
    elements, for a run-time k), axis, largest and sorted (11+; the result is always sorted). Ties keep the lower
    position first, as ONNX says. Float or integer values and int64 indices."""
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    axis = norm_axis(ctx, attrs.get("axis", -1), len(shape))
    pre, n, post = three_d(shape, axis)
    if ctx.opset < 10:
        k = int(attrs["k"])
    elif every:  # a run-time K: every element, sorted (convert_data_dependent.py cuts it to k)
        k = n
    else:
        k_value = const_input(ctx, node, 1, "K")
        assert k_value is not None
        k = int(k_value.reshape(-1)[0])
    if not 1 <= k <= n:
        raise (ctx.unsupported("k = 0 (an empty result) is not supported") if k == 0
               else ctx.shape_error(f"k = {k} is out of range for dim {axis} of size {n}"))
    if pre * n * n * post > MAX_PAIRWISE:
        raise ctx.unsupported(f"TopK over {n} elements builds a pairwise comparison of "
                              f"{pre * n * n * post} elements, more than {MAX_PAIRWISE}")
    largest = bool(attrs.get("largest", 1))
    # rank[i] = #{j : x[j] beats x[i]} + #{j < i : x[j] == x[i]}
    xi = reshape(ctx, x, (pre, n, 1, post))
    xj = reshape(ctx, x, (pre, 1, n, post))

    # integer inputs compare exactly in their own type; the masks and ranks are float32 (exact below 2**24)
    beats = flag(ctx, xj, xi, "gt" if largest else "lt")
    earlier = mask(ctx, (np.arange(n)[None, :] < np.arange(n)[:, None]).reshape(1, n, n, 1), "earlier")
    ties = ctx.emit(graph.MulOp(flag(ctx, xj, xi, "eq"), earlier, beats.type))
    rank = reduce(ctx, ctx.emit(graph.AddOp(beats, ties, beats.type)), "sum", [2], False)  # [pre, n, post]
    # slot r takes the element whose rank is r
    slots = const(ctx, rank, np.arange(k).reshape(1, k, 1, 1), "slots")
    chosen = compare(ctx, reshape(ctx, rank, (pre, 1, n, post)), slots, "eq")  # [pre, k, n, post]
    zero = const(ctx, x, np.zeros(1), "zero")
    values = reduce(ctx, where(ctx, chosen, xj, zero), "sum", [2], False)  # one term: exact for any type
    out_shape = [k if d == axis else s for d, s in enumerate(shape)]
    results: list[Value] = [reshape(ctx, values, out_shape)]
    if len(node.output) > 1 and node.output[1]:
        positions = const(ctx, rank, np.arange(n).reshape(1, 1, n, 1), "positions")
        rank_zero = const(ctx, rank, np.zeros(1), "rank_zero")
        indices = reduce(ctx, where(ctx, chosen, positions, rank_zero), "sum", [2], False)
        results.append(to_int64(ctx, reshape(ctx, indices, out_shape)))
    return results


def convert_trilu(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Trilu (opsets 14+): keeps the upper (upper=1) or lower triangle of the
    last two dims from diagonal k (a compile-time input), zeros elsewhere."""
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    if len(shape) < 2:
        raise ctx.shape_error(f"input shape {shape} needs rank >= 2")
    if 0 in shape:  # an empty result is known at import time, whatever k is
        return [empty_like(ctx, node.input[0], shape)]
    rows, cols = shape[-2:]
    diff = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    upper = bool(attributes(node).get("upper", 1))
    zero = const(ctx, x, np.zeros(1), "zero")
    k_name = ctx.input(node, 1)
    if k_name is not None and ctx.constant(k_name) is None:  # k at run time: compare the diagonals with it
        from ziggurat.dialects.graph_dtype import CastOp

        k_value = ctx.value(k_name)
        k_f = reshape(ctx, ctx.emit(CastOp(k_value, TensorType(Float32Type(), list(shape_of(k_value))))), [1])
        keep = compare(ctx, mask(ctx, diff, "diagonals"), k_f, "ge" if upper else "le")
        return [where(ctx, keep, x, zero)]
    k_value = const_input(ctx, node, 1, "k")
    k = 0 if k_value is None else int(k_value.reshape(-1)[0])
    keep_array = diff >= k if upper else diff <= k
    return [where(ctx, mask(ctx, keep_array, "triangle"), x, zero)]


# ---------------------------------------------------------------------------
# Gathers and scatters with compile-time indices
# ---------------------------------------------------------------------------


def _flat_gather(ctx: ConversionContext, x: SSAValue, sources: np.ndarray, label: str) -> SSAValue:
    """out[p] = x.flat[sources[p]], shaped like `sources`."""
    flat = reshape(ctx, x, (math.prod(shape_of(x)),))
    table = index_table(ctx, sources.reshape(-1), label)
    gathered = ctx.emit(graph.GatherElementsOp(flat, table, 0, like(x, (sources.size,))))
    return reshape(ctx, gathered, sources.shape)


def _int_indices(ctx: ConversionContext, node: onnx.NodeProto, index: int, what: str) -> np.ndarray:
    array = const_input(ctx, node, index, what)
    assert array is not None
    if array.dtype.kind not in "iu":
        raise ctx.shape_error(f"{what} must be integers, got {array.dtype}")
    return array.astype(np.int64)


def convert_gather_nd(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """GatherND (opsets 11+; batch_dims from 12) with compile-time indices."""
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    indices = _int_indices(ctx, node, 1, "indices")
    b = attributes(node).get("batch_dims", 0)
    q = indices.shape[-1] if indices.ndim else 0
    if indices.ndim < 1 or not 1 <= q <= len(shape) - b or indices.shape[:b] != tuple(shape[:b]):
        raise ctx.shape_error(f"indices shape {indices.shape} does not fit data shape {shape} with batch_dims={b}")
    if indices.size == 0:
        raise ctx.unsupported("empty indices (a zero-size result) are not supported")
    ids = np.arange(math.prod(shape)).reshape(shape)
    bounds = np.array(shape[b:b + q])
    idx = np.where(indices < 0, indices + bounds, indices)
    if (idx < 0).any() or (idx >= bounds).any():
        raise ctx.shape_error(f"indices leave the data shape {shape}")
    batch = math.prod(shape[:b])
    ids_b = ids.reshape(batch, *shape[b:])
    idx_b = idx.reshape(batch, -1, q)
    parts = [ids_b[i][tuple(idx_b[i].T)] for i in range(batch)]
    sources = np.stack(parts).reshape(*indices.shape[:-1], *shape[b + q:])
    return [_flat_gather(ctx, x, sources, "sources")]


def _scatter(ctx: ConversionContext, data: SSAValue, updates: SSAValue, targets: np.ndarray,
             reduction: str) -> SSAValue:
    """Applies update element j (in order) to data.flat[targets[j]] with
    `reduction`; one masked gather of the updates per level of duplicates."""
    size = math.prod(shape_of(data))
    order: dict[int, list[int]] = {}
    for j, t in enumerate(targets.reshape(-1).tolist()):
        order.setdefault(t, []).append(j)
    if reduction == "none":  # the last write wins
        order = {t: js[-1:] for t, js in order.items()}
    combine: dict[str, Callable[[SSAValue, SSAValue], graph.BinaryOp] | None] = {
        "none": None, "add": lambda a, b: graph.AddOp(a, b, a.type), "mul": lambda a, b: graph.MulOp(a, b, a.type),
        "max": lambda a, b: graph.MaxOp(a, b, a.type), "min": lambda a, b: graph.MinOp(a, b, a.type)}
    if reduction not in combine:
        raise ctx.unsupported(f"reduction '{reduction}' is not none, add, mul, max or min")
    shape = shape_of(data)
    out = data
    for level in range(max(len(js) for js in order.values())):
        sources = np.zeros(size, np.int64)
        hit = np.zeros(size, bool)
        for t, js in order.items():
            if level < len(js):
                sources[t], hit[t] = js[level], True
        gathered = _flat_gather(ctx, updates, sources.reshape(shape), f"sources{level}")
        fn = combine[reduction]
        value = gathered if fn is None else ctx.emit(fn(out, gathered))
        out = value if hit.all() else where(ctx, mask(ctx, hit.reshape(shape), f"hit{level}"), value, out)
    return out


def convert_scatter_elements(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """ScatterElements (opsets 11+; reduction add/mul from 16, max/min from 18)
    and Scatter (opsets 9-10) with compile-time indices."""
    attrs = attributes(node)
    data, updates = ctx.value(node.input[0]), ctx.value(node.input[2])
    shape = shape_of(data)
    indices = _int_indices(ctx, node, 1, "indices")
    axis = norm_axis(ctx, attrs.get("axis", 0), len(shape))
    if indices.shape != shape_of(updates) or indices.ndim != len(shape) or \
            any(indices.shape[d] > shape[d] for d in range(len(shape)) if d != axis):
        raise ctx.shape_error(f"indices {indices.shape} and updates {shape_of(updates)} do not fit data {shape}")
    if indices.size == 0:
        return [data]
    idx = np.where(indices < 0, indices + shape[axis], indices)
    if idx.min() < 0 or idx.max() >= shape[axis]:
        raise ctx.shape_error(f"indices leave dim {axis} of size {shape[axis]}")
    coords = list(np.indices(indices.shape))
    coords[axis] = idx
    targets = np.ravel_multi_index(tuple(coords), shape)
    return [_scatter(ctx, data, updates, targets, attrs.get("reduction", "none"))]


def convert_scatter_nd(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """ScatterND (opsets 11+; reduction add/mul from 16, max/min from 18) with
    compile-time indices."""
    data, updates = ctx.value(node.input[0]), ctx.value(node.input[2])
    shape = shape_of(data)
    indices = _int_indices(ctx, node, 1, "indices")
    q = indices.shape[-1] if indices.ndim else 0
    expected = (*indices.shape[:-1], *shape[q:])
    if indices.ndim < 1 or not 1 <= q <= len(shape) or shape_of(updates) != expected:
        raise ctx.shape_error(f"indices {indices.shape} and updates {shape_of(updates)} do not fit data {shape}")
    if indices.size == 0:
        return [data]
    bounds = np.array(shape[:q])
    idx = np.where(indices < 0, indices + bounds, indices).reshape(-1, q)
    if (idx < 0).any() or (idx >= bounds).any():
        raise ctx.shape_error(f"indices leave the data shape {shape}")
    ids = np.arange(math.prod(shape)).reshape(shape)
    targets = np.concatenate([ids[tuple(row)].reshape(-1) for row in idx])
    return [_scatter(ctx, data, updates, targets, attributes(node).get("reduction", "none"))]


def convert_reverse_sequence(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """ReverseSequence (opsets 10+): reverses the first sequence_lens[b] steps
    along time_axis for each b along batch_axis (compile-time lengths)."""
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    lens = _int_indices(ctx, node, 1, "sequence_lens").reshape(-1)
    t_axis, b_axis = attrs.get("time_axis", 0), attrs.get("batch_axis", 1)
    if len(shape) < 2 or {t_axis, b_axis} != {0, 1} or lens.size != shape[b_axis]:
        raise ctx.shape_error(f"time_axis {t_axis}, batch_axis {b_axis} and {lens.size} lengths do not fit {shape}")
    if (lens < 0).any() or (lens > shape[t_axis]).any():
        raise ctx.shape_error(f"sequence_lens {lens.tolist()} leave the time extent {shape[t_axis]}")
    t = np.arange(shape[t_axis])[:, None]
    table = np.where(t < lens[None, :], lens[None, :] - 1 - t, t)  # [time, batch]
    if t_axis == 1:
        table = table.T
    table = np.broadcast_to(table.reshape(*table.shape, *[1] * (len(shape) - 2)), shape)
    ref = index_table(ctx, table, "time_index")
    return [ctx.emit(graph.GatherElementsOp(x, ref, t_axis, like(x, shape)))]


def convert_compress(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Compress (opsets 9+; negative axis from 11): keeps the slices where the
    compile-time condition is true (the input flattened when no axis is given;
    a run-time condition: convert_data_dependent.py)."""
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    cond = const_input(ctx, node, 1, "condition")
    assert cond is not None
    axis = attributes(node).get("axis")
    if axis is None:
        x, shape, axis = reshape(ctx, x, (math.prod(shape),)), (math.prod(shape),), 0
    axis = norm_axis(ctx, axis, len(shape))
    keep = np.flatnonzero(cond.reshape(-1)[:shape[axis]])
    if keep.size == 0:
        raise ctx.unsupported("the condition keeps nothing (a zero-size result); zero-size tensors are not supported")
    pre, n, post = three_d(shape, axis)
    ids = np.arange(math.prod(shape)).reshape(pre, n, post)[:, keep, :]
    return [_flat_gather(ctx, x, ids.reshape([keep.size if d == axis else s for d, s in enumerate(shape)]),
                         "kept")]


INDEX_CONVERTERS = {
    "CumSum": convert_cumsum,
    "Hardmax": convert_hardmax,
    "ArgMax": convert_arg,
    "ArgMin": convert_arg,
    "TopK": convert_topk,
    "Trilu": convert_trilu,
    "GatherND": convert_gather_nd,
    "ScatterElements": convert_scatter_elements,
    "Scatter": convert_scatter_elements,
    "ScatterND": convert_scatter_nd,
    "ReverseSequence": convert_reverse_sequence,
    "Compress": convert_compress,
}
"""ONNX op type -> converter, merged into the importer's table."""
