"""NonMaxSuppression: the selected [batch, class, box] triples, sized at run time.

Greedy NMS visits each (batch, class) group's boxes by descending score (ties:
lower index first), keeps a box unless a box kept before it overlaps it by
more than the IoU threshold, and stops after `max_output_boxes_per_class`. In
graph ops, with `before[j, i]` (box j is visited before box i) and `over[i, j]`
(their IoU exceeds the threshold, computed as onnx's reference does, in the
same float32 steps), the kept set is the fixed point of

    kept_i = candidate_i and not any_j(kept_j and before[j, i] and over[i, j])

which N - 1 rounds from `kept = candidate` reach (after r rounds the first r + 1
boxes in visiting order are right). The rounds are unrolled, so N (boxes per
batch) is limited to `MAX_BOXES`. The cap keeps the boxes with fewer than
`max_output_boxes_per_class` kept boxes before them; each kept box's row in the
output is its group's offset (a prefix sum over the groups) plus that count.
The output is int64 [batches * classes * boxes, 3] at its upper bound, with the
number of selected boxes as its run-time extent along axis 0
(convert_data_dependent.py). Thresholds and the cap may be run-time inputs.

```mlir
// one round: a box stays kept when no kept box visited before it overlaps it
%w = graph.mul %m, %kept4 : tensor<1x1x6x6xf32>, tensor<1x1x6x1xf32> -> tensor<1x1x6x6xf32>
%b = graph.reduce %w {kind = "max", axes = array<i64: 2>} : tensor<1x1x6x6xf32> -> tensor<1x1x6xf32>
%kept = graph.mul %cand, %free : tensor<1x1x6xf32>, tensor<1x1x6xf32> -> tensor<1x1x6xf32>
```
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.dialects.builtin import TensorType, f32, i64
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, shape_of
from ziggurat.frontends.onnx.convert_data_dependent import gather_slots, record
from ziggurat.frontends.onnx.convert_index import MAX_PAIRWISE, compare, const, prefix_sum, reduce
from ziggurat.frontends.onnx.convert_quant import _bin
from ziggurat.frontends.onnx.convert_window import reshape, transpose

MAX_BOXES = 256
"""Boxes per batch: the fixed point takes one unrolled round per box, O(N^3) work in all
(256 boxes, 4 classes: 2.4 s to compile, 7 ms a call on the AVX-512 host; 1,000 boxes took 2.2 s a call)."""


def _all(ctx: ConversionContext, *masks: SSAValue) -> SSAValue:
    result = masks[0]
    for m in masks[1:]:
        result = _bin(ctx, graph.MulOp, result, m)
    return result


def _scalar_input(ctx: ConversionContext, node: onnx.NodeProto, index: int, default: float | None) -> SSAValue | None:
    """Optional input `index` (one value) as tensor<1xf32>; `default` where it is absent or empty."""
    name = node.input[index] if index < len(node.input) else ""
    value = ctx.constant(name) if name else None
    if not name or (value is not None and value.size == 0):
        return None if default is None else ctx.add_constant(np.full(1, default, np.float32), f"{ctx.node_label}.{index}")
    if value is not None:
        return ctx.add_constant(np.full(1, value.reshape(-1)[0], np.float32), f"{ctx.node_label}.{index}")
    x = ctx.value(name)
    if math.prod(shape_of(x)) != 1:
        raise ctx.shape_error(f"input {index} ('{name}') must hold one value, got shape {list(shape_of(x))}")
    x = reshape(ctx, x, (1,))
    return x if element_type(x) == f32 else ctx.emit(CastOp(x, TensorType(f32, [1])))


def _extents(ctx: ConversionContext, boxes: SSAValue, center: bool) -> list[SSAValue]:
    """x_min, x_max, y_min, y_max of each box: [B, N] each."""
    b, n, _ = shape_of(boxes)
    part = [reshape(ctx, ctx.emit(graph.SliceOp(boxes, [0, 0, k], [1, 1, 1], TensorType(f32, [b, n, 1]))), (b, n))
            for k in range(4)]
    if center:  # [x_center, y_center, width, height]
        half = const(ctx, boxes, np.full(1, 2.0), "two")
        w, h = _bin(ctx, graph.DivOp, part[2], half), _bin(ctx, graph.DivOp, part[3], half)
        return [_bin(ctx, graph.SubOp, part[0], w), _bin(ctx, graph.AddOp, part[0], w),
                _bin(ctx, graph.SubOp, part[1], h), _bin(ctx, graph.AddOp, part[1], h)]
    # [y1, x1, y2, x2], either corner first
    return [_bin(ctx, graph.MinOp, part[1], part[3]), _bin(ctx, graph.MaxOp, part[1], part[3]),
            _bin(ctx, graph.MinOp, part[0], part[2]), _bin(ctx, graph.MaxOp, part[0], part[2])]


def _overlaps(ctx: ConversionContext, boxes: SSAValue, center: bool, iou: SSAValue) -> SSAValue:
    """[B, N(i), N(j)] 1.0 where box i and box j overlap by more than `iou`."""
    b, n, _ = shape_of(boxes)
    x0, x1, y0, y1 = _extents(ctx, boxes, center)
    zero = const(ctx, boxes, np.zeros(1), "zero")

    def pair(v: SSAValue) -> tuple[SSAValue, SSAValue]:
        return reshape(ctx, v, (b, n, 1)), reshape(ctx, v, (b, 1, n))

    (xi0, xj0), (xi1, xj1), (yi0, yj0), (yi1, yj1) = pair(x0), pair(x1), pair(y0), pair(y1)
    wide = _bin(ctx, graph.SubOp, _bin(ctx, graph.MinOp, xi1, xj1), _bin(ctx, graph.MaxOp, xi0, xj0))
    tall = _bin(ctx, graph.SubOp, _bin(ctx, graph.MinOp, yi1, yj1), _bin(ctx, graph.MaxOp, yi0, yj0))
    inter = _bin(ctx, graph.MulOp, wide, tall)
    area = _bin(ctx, graph.MulOp, _bin(ctx, graph.SubOp, x1, x0), _bin(ctx, graph.SubOp, y1, y0))
    ai, aj = pair(area)
    union = _bin(ctx, graph.SubOp, _bin(ctx, graph.AddOp, ai, aj), inter)
    ratio = _bin(ctx, graph.DivOp, inter, union)  # inf/NaN only where a mask below is 0
    return _all(ctx, compare(ctx, wide, zero, "gt"), compare(ctx, tall, zero, "gt"), compare(ctx, inter, zero, "gt"),
                compare(ctx, ai, zero, "gt"), compare(ctx, aj, zero, "gt"), compare(ctx, union, zero, "gt"),
                compare(ctx, ratio, iou, "gt"))


def convert_nms(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """NonMaxSuppression (opsets 10+): boxes [B, N, 4], scores [B, C, N], optional
    max_output_boxes_per_class, iou_threshold and score_threshold (compile-time or run-time),
    center_point_box; int64 [B * C * N, 3] selected indices, cut at run time."""
    boxes, scores = ctx.value(node.input[0]), ctx.value(node.input[1])
    if element_type(boxes) != f32 or element_type(scores) != f32:
        raise ctx.unsupported("boxes and scores must be float32")
    if len(shape_of(boxes)) != 3 or shape_of(boxes)[2] != 4 or len(shape_of(scores)) != 3:
        raise ctx.shape_error(f"boxes must be [batches, boxes, 4] and scores [batches, classes, boxes], got "
                              f"{list(shape_of(boxes))} and {list(shape_of(scores))}")
    b, n, _ = shape_of(boxes)
    _, c, n_scores = shape_of(scores)
    if shape_of(scores)[0] != b or n_scores != n:
        raise ctx.shape_error(f"scores {list(shape_of(scores))} do not match boxes {list(shape_of(boxes))}")
    g = b * c
    if n > MAX_BOXES or (g * n) ** 2 > MAX_PAIRWISE:
        raise ctx.unsupported(f"{n} boxes per batch ({g * n} candidates in all): ziggurat's NonMaxSuppression "
                              f"unrolls one round per box and takes at most {MAX_BOXES} boxes per batch and "
                              f"{int(math.isqrt(MAX_PAIRWISE))} candidates")
    cap = _scalar_input(ctx, node, 2, 0.0)
    iou = _scalar_input(ctx, node, 3, 0.0)
    threshold = _scalar_input(ctx, node, 4, None)
    over = reshape(ctx, _overlaps(ctx, boxes, bool(attributes(node).get("center_point_box", 0)), iou), (b, 1, n, n))
    # before[j, i]: box j is visited before box i (higher score, or the same score and a lower index)
    sj, si = reshape(ctx, scores, (b, c, n, 1)), reshape(ctx, scores, (b, c, 1, n))
    lower = const(ctx, scores, (np.arange(n)[:, None] < np.arange(n)[None, :]).reshape(1, 1, n, n), "lower")
    before = _bin(ctx, graph.AddOp, compare(ctx, sj, si, "gt"), _all(ctx, compare(ctx, sj, si, "eq"), lower))
    candidate = const(ctx, scores, np.ones((b, c, n)), "all") if threshold is None else \
        compare(ctx, scores, threshold, "gt")  # [B, C, N]
    blocks = _all(ctx, before, over)  # [j, i]: box j, once kept, blocks box i (over is symmetric)
    kept = candidate
    one = const(ctx, scores, np.ones((1, 1, 1)), "one")  # the rounds' rank: no reshape per round
    for _ in range(n - 1):
        blocked = reduce(ctx, _bin(ctx, graph.MulOp, blocks, reshape(ctx, kept, (b, c, n, 1))), "max", [2], False)
        kept = _bin(ctx, graph.MulOp, candidate, _bin(ctx, graph.SubOp, one, blocked))
    rank = reduce(ctx, _bin(ctx, graph.MulOp, before, reshape(ctx, kept, (b, c, n, 1))), "sum", [2], False)
    kept = _bin(ctx, graph.MulOp, kept, compare(ctx, rank, cap, "lt"))  # the first `cap` of each group
    per_group = reduce(ctx, reshape(ctx, kept, (g, n)), "sum", [1], False)  # [G]
    offset = prefix_sum(ctx, per_group, 0, True, False)
    row = reshape(ctx, _bin(ctx, graph.AddOp, reshape(ctx, rank, (g, n)), reshape(ctx, offset, (g, 1))), (g * n,))
    slots = const(ctx, row, np.arange(g * n).reshape(g * n, 1), "slots")
    chosen = _bin(ctx, graph.MulOp, compare(ctx, reshape(ctx, row, (1, g * n)), slots, "eq"),
                     reshape(ctx, kept, (1, g * n)))  # [slot, candidate]
    group, box = np.divmod(np.arange(g * n), n)
    table = np.stack([group // c, group % c, box])  # [3, G * N]
    triples = gather_slots(ctx, chosen, table, "triples")  # [3, G * N]
    total = ctx.emit(CastOp(reduce(ctx, per_group, "sum", [0], True), TensorType(i64, [1])))
    record(ctx, node, [0], [0], total)
    return [ctx.emit(CastOp(transpose(ctx, triples, [1, 0]), TensorType(i64, [g * n, 3])))]


NMS_CONVERTERS = {"NonMaxSuppression": convert_nms}
"""ONNX op type -> converter, merged into the importer's table."""
