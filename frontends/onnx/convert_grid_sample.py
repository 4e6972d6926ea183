"""GridSample decomposed onto elementwise graph ops and graph.gather_elements.

For each spatial dim the grid coordinate is denormalized (align_corners or
not), rounded half-to-even for mode nearest, and moved inside by the padding
mode (border clamps, reflection folds at the borders) exactly where ONNX's
reference does. The interpolation taps (1 for nearest, 2 per dim for linear,
4 per dim for cubic with A = -0.75) of a dim are computed together on an
[N, taps, Q] tensor (index, weight, in-range mask); the dims' taps combine by
broadcasting into flat indices into X viewed as [N, C, H*W] (or D*H*W), and
ONE `graph.gather_elements` with indices computed at run time reads all taps.
Taps outside the input read 0 under zeros padding (a `graph.where`, never a
multiplication by 0); the weighted taps are summed by one `graph.reduce`.

```mlir
// bilinear GridSample on tensor<1x1x3x2xf32>, grid tensor<1x2x4x2xf32>: 4 taps x 8 points
%i = graph.broadcast_to %flat : tensor<1x1x32xf32> -> tensor<1x1x32xf32>
%v = graph.gather_elements %x3, %i {axis = 2 : i64} : tensor<1x1x6xf32>, tensor<1x1x32xf32> -> tensor<1x1x32xf32>
%y = graph.reduce %vw {kind = "sum", axes = array<i64: 2>} : tensor<1x1x4x8xf32> -> tensor<1x1x8xf32>
```
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of
from ziggurat.frontends.onnx.convert_index import compare, const, reduce, require_float, where
from ziggurat.frontends.onnx.convert_window import like, reshape

CUBIC_A = -0.75
_MODES = {"bilinear": "linear", "linear": "linear", "nearest": "nearest", "bicubic": "cubic", "cubic": "cubic"}


class _Ops:
    """Elementwise helpers on float tensors of one shape (scalars broadcast)."""

    def __init__(self, ctx: ConversionContext, like_value: SSAValue):
        self.ctx, self.like = ctx, like_value

    def c(self, value: float) -> SSAValue:
        return const(self.ctx, self.like, np.array([value]), "c")

    def _bin(self, op: type[graph.BinaryOp], a: SSAValue, b: SSAValue | float) -> SSAValue:
        b = self.c(b) if isinstance(b, (int, float)) else b
        out = graph.broadcast_shapes(shape_of(a), shape_of(b))
        return self.ctx.emit(op(a, b, like(a, out)))  # type: ignore[arg-type]

    def add(self, a, b):
        return self._bin(graph.AddOp, a, b)

    def sub(self, a, b):
        return self._bin(graph.SubOp, a, b)

    def mul(self, a, b):
        return self._bin(graph.MulOp, a, b)

    def div(self, a, b):
        return self._bin(graph.DivOp, a, b)

    def max(self, a, b):
        return self._bin(graph.MaxOp, a, b)

    def min(self, a, b):
        return self._bin(graph.MinOp, a, b)

    def floor(self, a):
        return self.ctx.emit(graph.FloorOp(a))

    def cmp(self, a, b, kind: str):
        return compare(self.ctx, a, self.c(b) if isinstance(b, (int, float)) else b, kind)

    def select(self, cond, a, b):
        a = self.c(a) if isinstance(a, (int, float)) else a
        b = self.c(b) if isinstance(b, (int, float)) else b
        return where(self.ctx, cond, a, b)

    def clamp(self, a, lo: float, hi: float):
        return self.min(self.max(a, lo), hi)

    def reflect(self, x, lo: float, hi: float):
        """ONNX's _gs_reflect: fold x into [lo, hi] by the near border."""
        span = hi - lo
        if span <= 0:
            return self.select(self.cmp(x, x, "eq"), lo, x)  # a single position (NaN stays NaN)
        below, above = self.cmp(x, lo, "lt"), self.cmp(x, hi, "gt")
        dx = self.select(below, self.sub(self.c(lo), x), self.sub(x, self.c(hi)))
        n = self.floor(self.div(dx, span))
        r = self.sub(dx, self.mul(n, span))
        even = self.cmp(self.sub(n, self.mul(self.floor(self.mul(n, 0.5)), 2.0)), 0.0, "eq")
        from_lo, from_hi = self.add(r, lo), self.sub(self.c(hi), r)
        low_side = self.select(even, from_lo, from_hi)
        high_side = self.select(even, from_hi, from_lo)
        return self.select(below, low_side, self.select(above, high_side, x))


def _cubic_weight(o: _Ops, s: SSAValue) -> SSAValue:
    """Keys' cubic convolution kernel (A = -0.75) at distances s in [0, 2]."""
    a = CUBIC_A
    far = o.sub(o.mul(o.add(o.mul(o.sub(o.mul(s, a), 5 * a), s), 8 * a), s), 4 * a)  # 1 <= s <= 2
    near = o.add(o.mul(o.mul(o.sub(o.mul(s, a + 2), a + 3), s), s), 1.0)  # s <= 1
    return o.select(o.cmp(s, 1.0, "lt"), near, far)


def convert_grid_sample(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """GridSample (opsets 16+; N-D from 20): modes nearest/linear/cubic,
    padding zeros/border/reflection, align_corners."""
    attrs = attributes(node)
    x, grid = ctx.value(node.input[0]), ctx.value(node.input[1])
    require_float(ctx, x)
    require_float(ctx, grid, "grid")
    xs, gs = shape_of(x), shape_of(grid)
    dims = len(xs) - 2
    if dims < 1 or len(gs) != dims + 2 or gs[0] != xs[0] or gs[-1] != dims:
        raise ctx.shape_error(f"grid shape {gs} does not fit input shape {xs}")
    mode = _MODES.get(attrs.get("mode", "linear" if ctx.opset >= 20 else "bilinear"))
    padding = attrs.get("padding_mode", "zeros")
    if mode is None or padding not in ("zeros", "border", "reflection"):
        raise ctx.unsupported(f"mode '{attrs.get('mode')}' / padding_mode '{padding}' is not supported")
    align = bool(attrs.get("align_corners", 0))
    n, c, spatial = xs[0], xs[1], xs[2:]
    out_spatial = gs[1:-1]
    q = math.prod(out_spatial)
    o = _Ops(ctx, x)
    per_dim: list[tuple[SSAValue, SSAValue | None, SSAValue | None, int]] = []  # index, weight, valid, taps
    for d, size in enumerate(spatial):
        comp = dims - 1 - d  # the grid lists coordinates innermost dim first
        g = ctx.emit(graph.SliceOp(grid, [0] * len(gs[:-1]) + [comp], [1] * len(gs), like(grid, [*gs[:-1], 1])))
        g = reshape(ctx, g, (n, 1, q))
        scale = (size - 1) / 2.0 if align else size / 2.0
        pos = o.add(o.mul(g, scale), (size - 1) / 2.0)
        if mode == "nearest":
            pos = ctx.emit(graph.RoundOp(pos))
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if padding == "border":
            outside = o.max(o.cmp(pos, lo, "lt"), o.cmp(pos, hi, "gt"))
            pos = o.select(outside, o.clamp(pos, 0.0, size - 1.0), pos)
        elif padding == "reflection":
            pos = o.reflect(pos, lo, hi)
        # all taps of this dim at once: [N, T, Q]
        if mode == "nearest":
            index, weight, taps = pos, None, 1
        else:
            base = o.floor(pos)
            offsets = [0.0, 1.0] if mode == "linear" else [-1.0, 0.0, 1.0, 2.0]
            taps = len(offsets)
            off = const(ctx, x, np.array(offsets).reshape(1, taps, 1), "offsets")
            index = o.add(base, off)
            dist = ctx.emit(graph.AbsOp(o.sub(o.sub(pos, base), off)))  # |t - offset|
            weight = o.sub(o.c(1.0), dist) if mode == "linear" else _cubic_weight(o, dist)
        valid = None
        if padding == "zeros":
            valid = o.mul(o.cmp(index, 0.0, "ge"), o.cmp(index, size - 1.0, "le"))
            index = o.clamp(index, 0.0, size - 1.0)
        elif padding == "border":
            index = o.clamp(index, 0.0, size - 1.0)
        else:
            folded = o.floor(o.max(o.reflect(index, lo, hi), 0.0))  # int() of a value >= -0.5
            index = o.min(folded, size - 1.0)
        per_dim.append((index, weight, valid, taps))
    # every combination of taps: [N, T_1, ..., T_d, Q], the dims' taps on their own axes
    flat: SSAValue | None = None
    weight_all: SSAValue | None = None
    valid_all: SSAValue | None = None
    for d, (index, weight, valid, taps) in enumerate(per_dim):
        spread = [n, *[taps if e == d else 1 for e in range(dims)], q]
        term = reshape(ctx, index, spread)
        stride = math.prod(spatial[d + 1:])
        term = o.mul(term, float(stride)) if stride != 1 else term
        flat = term if flat is None else o.add(flat, term)
        if weight is not None:
            w = reshape(ctx, weight, spread)
            weight_all = w if weight_all is None else o.mul(weight_all, w)
        if valid is not None:
            v = reshape(ctx, valid, spread)
            valid_all = v if valid_all is None else o.mul(valid_all, v)
    assert flat is not None
    total_taps = math.prod(t for *_, t in per_dim)
    width = total_taps * q
    x3 = reshape(ctx, x, (n, c, math.prod(spatial)))
    flat = reshape(ctx, flat, (n, 1, width))
    table = ctx.emit(graph.BroadcastToOp(flat, like(flat, (n, c, width))))
    value = ctx.emit(graph.GatherElementsOp(x3, table, 2, like(x3, (n, c, width))))
    if valid_all is not None:
        value = o.select(reshape(ctx, valid_all, (n, 1, width)), value, 0.0)
    if weight_all is not None:
        value = o.mul(value, reshape(ctx, weight_all, (n, 1, width)))
    if total_taps > 1:
        value = reduce(ctx, reshape(ctx, value, (n, c, total_taps, q)), "sum", [2], False)
    return [reshape(ctx, value, (n, c, *out_spatial))]


GRID_SAMPLE_CONVERTERS = {"GridSample": convert_grid_sample}
"""ONNX op type -> converter, merged into the importer's table."""
