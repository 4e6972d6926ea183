"""Converters for ONNX activation and normalization ops that decompose onto
the elementwise and reduction graph ops (max/min against zero in place of a
select, `graph.reduce` for statistics)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import SSAValue

import ziggurat.dtypes as dtypes
from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, like, shape_of, tensor_type
from ziggurat.frontends.onnx.convert_tensor import reduce_value, scalar


class _Ops:
    """Shorthands for emitting same-shape elementwise ops on one node."""

    def __init__(self, ctx: ConversionContext):
        self.ctx = ctx
        self.n = 0

    def c(self, value: float) -> SSAValue:
        self.n += 1
        return scalar(self.ctx, value, f"c{self.n}")

    def bin(self, op: type[graph.BinaryOp], a: SSAValue, b: SSAValue) -> SSAValue:
        shape = graph.broadcast_shapes(shape_of(a), shape_of(b))
        if shape is None:
            raise self.ctx.shape_error(f"shapes {shape_of(a)} and {shape_of(b)} do not broadcast")
        return self.ctx.emit(op(a, b, like(a, shape)))

    def add(self, a, b):
        return self.bin(graph.AddOp, a, b)

    def sub(self, a, b):
        return self.bin(graph.SubOp, a, b)

    def mul(self, a, b):
        return self.bin(graph.MulOp, a, b)

    def div(self, a, b):
        return self.bin(graph.DivOp, a, b)

    def max(self, a, b):
        return self.bin(graph.MaxOp, a, b)

    def min(self, a, b):
        return self.bin(graph.MinOp, a, b)

    def un(self, op: type[graph.UnaryOp], a: SSAValue) -> SSAValue:
        return self.ctx.emit(op(a))

    def softplus(self, x):
        return self.un(graph.LogOp, self.add(self.un(graph.ExpOp, x), self.c(1.0)))

    def hard_sigmoid(self, x, alpha: float, beta: float):
        return self.max(self.min(self.add(self.mul(x, self.c(alpha)), self.c(beta)), self.c(1.0)), self.c(0.0))


def convert_activation(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Elu, LeakyRelu, Selu, Celu, HardSigmoid, HardSwish, Softplus, Softsign, Mish,
    Gelu (none/tanh), with their default attributes."""
    attrs = attributes(node)
    o = _Ops(ctx)
    x = ctx.value(node.input[0])
    op = node.op_type
    if op == "Softplus":
        return [o.softplus(x)]
    if op == "Softsign":
        return [o.div(x, o.add(o.un(graph.AbsOp, x), o.c(1.0)))]
    if op == "Mish":
        return [o.mul(x, o.un(graph.TanhOp, o.softplus(x)))]
    if op == "HardSigmoid":
        return [o.hard_sigmoid(x, attrs.get("alpha", 0.2), attrs.get("beta", 0.5))]
    if op == "HardSwish":
        return [o.mul(x, o.hard_sigmoid(x, 1.0 / 6.0, 0.5))]
    if op == "Gelu":
        approx = attrs.get("approximate", "none")
        if approx == "tanh":
            inner = o.mul(o.add(x, o.mul(o.mul(o.mul(x, x), x), o.c(0.044715))), o.c(math.sqrt(2.0 / math.pi)))
            return [o.mul(o.mul(x, o.c(0.5)), o.add(o.un(graph.TanhOp, inner), o.c(1.0)))]
        if approx != "none":
            raise ctx.unsupported(f"approximate='{approx}' is not 'none' or 'tanh'")
        erf = o.un(graph.ErfOp, o.mul(x, o.c(1.0 / math.sqrt(2.0))))
        return [o.mul(o.mul(x, o.c(0.5)), o.add(erf, o.c(1.0)))]
    pos, neg = o.max(x, o.c(0.0)), o.min(x, o.c(0.0))
    if op == "LeakyRelu":
        return [o.add(pos, o.mul(neg, o.c(attrs.get("alpha", 0.01))))]
    if op == "Celu":
        alpha = attrs.get("alpha", 1.0)
        expm1 = o.sub(o.un(graph.ExpOp, o.div(x, o.c(alpha))), o.c(1.0))
        return [o.add(pos, o.min(o.mul(expm1, o.c(alpha)), o.c(0.0)))]
    alpha = attrs.get("alpha", 1.0 if op == "Elu" else 1.67326319217681884765625)
    elu = o.add(pos, o.mul(o.sub(o.un(graph.ExpOp, neg), o.c(1.0)), o.c(alpha)))
    if op == "Elu":
        return [elu]
    return [o.mul(elu, o.c(attrs.get("gamma", 1.05070102214813232421875)))]  # Selu


ACTIVATIONS = ("Elu", "LeakyRelu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Mish", "Gelu")


def convert_prelu(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """PRelu (opsets 7+): max(x, 0) + slope * min(x, 0), slope broadcast to x."""
    o = _Ops(ctx)
    x, slope = ctx.value(node.input[0]), ctx.value(node.input[1])
    if graph.broadcast_shapes(shape_of(slope), shape_of(x)) != shape_of(x):
        raise ctx.shape_error(f"slope {shape_of(slope)} does not broadcast to X {shape_of(x)}")
    return [o.add(o.max(x, o.c(0.0)), o.mul(o.min(x, o.c(0.0)), slope))]


def convert_clip(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Clip: min/max attributes before opset 11, optional scalar inputs from 11."""
    o = _Ops(ctx)
    x = ctx.value(node.input[0])
    if ctx.opset < 11:
        attrs = attributes(node)
        lo = o.c(attrs["min"]) if "min" in attrs else None
        hi = o.c(attrs["max"]) if "max" in attrs else None
    else:
        lo, hi = (ctx.value(n) if n else None for n in (ctx.input(node, 1), ctx.input(node, 2)))
    for bound in (lo, hi):
        if bound is not None and math.prod(shape_of(bound)) != 1:
            raise ctx.shape_error(f"min and max must be scalars, got shape {shape_of(bound)}")
    if lo is not None:
        x = o.max(x, ctx.reshape(lo, [1] * len(shape_of(x))))
    if hi is not None:
        x = o.min(x, ctx.reshape(hi, [1] * len(shape_of(x))))
    return [x]


def convert_dropout(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Dropout where it is deterministic: in inference (no or a false
    training_mode) or with ratio 0, the identity with an all-true mask (a
    compile-time constant; bool from opset 10, the input's type before).
    training_mode and ratio are shape parameters (bound by value when they are
    graph inputs); training with a ratio > 0 is random and refused."""
    mode = ctx.input(node, 2)
    if mode is not None:
        training = ctx.shape_parameter(mode)
        if training is None:
            raise ctx.unsupported("training_mode must be known at compile time; export the model in eval mode")
        if bool(training.reshape(-1)[0]):
            name = ctx.input(node, 1)
            ratio = np.array(0.5) if name is None else ctx.shape_parameter(name)
            if ratio is None:
                raise ctx.unsupported("in training mode the ratio must be known at compile time")
            if float(ratio.reshape(-1)[0]) != 0.0:
                raise ctx.unsupported(f"training_mode is true with ratio {float(ratio.reshape(-1)[0])}: random "
                                      "dropout is not supported; export the model in eval mode")
    outputs: list[Value] = [ctx.value(node.input[0])]
    if len(node.output) > 1 and node.output[1]:
        x = ctx.lookup(node.input[0])
        dtype = np.dtype(bool) if ctx.opset >= 10 else (
            x.dtype if isinstance(x, np.ndarray) else dtypes.to_numpy(dtypes.element_of(x.type)))
        outputs.append(np.ones(ctx.shape(node.input[0]), dtype))
    return outputs


def convert_log_softmax(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """LogSoftmax: x - max - log(sum(exp(x - max))) along `axis` (opsets < 13
    flatten to 2-D at `axis` first, default 1; from 13 the default is -1)."""
    o = _Ops(ctx)
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    axis = attributes(node).get("axis", 1 if ctx.opset < 13 else -1)
    if not -len(shape) <= axis < len(shape):
        raise ctx.shape_error(f"axis {axis} is out of range for rank {len(shape)}")
    axis = axis + len(shape) if axis < 0 else axis
    axes = list(range(axis, len(shape))) if ctx.opset < 13 else [axis]
    centered = o.sub(x, reduce_value(ctx, x, "max", axes, True))
    total = reduce_value(ctx, o.un(graph.ExpOp, centered), "sum", axes, True)
    return [o.sub(centered, o.un(graph.LogOp, total))]


def convert_global_max_pool(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """GlobalMaxPool (opsets 1+): max over all spatial dims, kept as size-1 dims."""
    x = ctx.value(node.input[0])
    rank = len(shape_of(x))
    if rank < 3:
        raise ctx.shape_error(f"input shape {shape_of(x)} needs rank >= 3 (N, C, spatial...)")
    return [reduce_value(ctx, x, "max", list(range(2, rank)), True)]


def _normalize(ctx: ConversionContext, o: _Ops, x: SSAValue, axes: list[int], eps: float) -> SSAValue:
    """(x - mean) / sqrt(var + eps) over `axes`."""
    centered = o.sub(x, reduce_value(ctx, x, "mean", axes, True))
    var = reduce_value(ctx, o.mul(centered, centered), "mean", axes, True)
    return o.div(centered, o.un(graph.SqrtOp, o.add(var, o.c(eps))))


def convert_instance_norm(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """InstanceNormalization (opsets 6+): per (N, C) statistics over the spatial
    dims, then per-channel scale and bias."""
    o = _Ops(ctx)
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    if len(shape) < 3:
        raise ctx.shape_error(f"input shape {shape} needs rank >= 3")
    eps = float(np.float32(attributes(node).get("epsilon", 1e-5)))
    y = _normalize(ctx, o, x, list(range(2, len(shape))), eps)
    per_channel = (shape[1],) + (1,) * (len(shape) - 2)
    for name, op in ((node.input[1], graph.MulOp), (node.input[2], graph.AddOp)):
        if ctx.shape(name) != (shape[1],):
            raise ctx.shape_error(f"scale and B must have shape ({shape[1]},), got {ctx.shape(name)}")
        y = o.bin(op, y, ctx.reshaped(name, per_channel))
    return [y]


def convert_mvn(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """MeanVarianceNormalization (opsets 9+): (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9),
    over `axes` (default [0, 2, 3]), as ONNX's function body defines it."""
    o = _Ops(ctx)
    x = ctx.value(node.input[0])
    rank = len(shape_of(x))
    axes = sorted(a + rank if a < 0 else a for a in attributes(node).get("axes", [0, 2, 3]))
    mean = reduce_value(ctx, x, "mean", axes, True)
    var = o.sub(reduce_value(ctx, o.mul(x, x), "mean", axes, True), o.mul(mean, mean))
    return [o.div(o.sub(x, mean), o.add(o.un(graph.SqrtOp, var), o.c(1e-9)))]


def convert_lp_norm(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """LpNormalization (opsets 1+): x / ||x||_p along `axis`, p in {1, 2}."""
    o = _Ops(ctx)
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    rank = len(shape_of(x))
    axis = attrs.get("axis", -1)
    axis = axis + rank if axis < 0 else axis
    p = attrs.get("p", 2)
    if p not in (1, 2):
        raise ctx.unsupported(f"p={p} is not 1 or 2")
    if p == 1:
        norm = reduce_value(ctx, o.un(graph.AbsOp, x), "sum", [axis], True)
    else:
        norm = o.un(graph.SqrtOp, reduce_value(ctx, o.mul(x, x), "sum", [axis], True))
    # A zero norm comes from an all-zero slice, which stays zero (as the ONNX reference has it).
    return [o.div(x, o.max(norm, o.c(float(np.finfo(np.float32).tiny))))]


def convert_rms_norm(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """RMSNormalization (opset 23+): x / sqrt(mean(x^2) + epsilon) * scale over dims axis..rank-1."""
    o = _Ops(ctx)
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    rank = len(shape_of(x))
    axis = attrs.get("axis", -1)
    if not -rank <= axis < rank:
        raise ctx.shape_error(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    eps = float(np.float32(attrs.get("epsilon", 1e-5)))
    mean_sq = reduce_value(ctx, o.mul(x, x), "mean", list(range(axis, rank)), True)
    y = o.div(x, o.un(graph.SqrtOp, o.add(mean_sq, o.c(eps))))
    scale = ctx.value(node.input[1])
    if graph.broadcast_shapes(shape_of(scale), shape_of(x)) != shape_of(x):
        raise ctx.shape_error(f"scale {shape_of(scale)} does not broadcast to X {shape_of(x)}")
    return [o.mul(y, scale)]


def convert_trig(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Sin, Cos, Atan, Round map to graph ops; Tan, Asin, Acos and the hyperbolic
    functions decompose onto them, exp, log and sqrt."""
    o = _Ops(ctx)
    x = ctx.value(node.input[0])
    op = node.op_type
    direct = {"Sin": graph.SinOp, "Cos": graph.CosOp, "Atan": graph.AtanOp, "Round": graph.RoundOp}
    if op in direct:
        return [o.un(direct[op], x)]
    if op == "Tan":
        return [o.div(o.un(graph.SinOp, x), o.un(graph.CosOp, x))]
    if op in ("Asin", "Acos"):
        asin = o.un(graph.AtanOp, o.div(x, o.un(graph.SqrtOp, o.sub(o.c(1.0), o.mul(x, x)))))
        return [asin if op == "Asin" else o.sub(o.c(math.pi / 2), asin)]
    if op in ("Sinh", "Cosh"):
        ex, enx = o.un(graph.ExpOp, x), o.un(graph.ExpOp, o.un(graph.NegOp, x))
        return [o.mul(o.sub(ex, enx) if op == "Sinh" else o.add(ex, enx), o.c(0.5))]
    if op == "Asinh":  # odd: asinh(x) = sign(x) * log(|x| + sqrt(x^2 + 1)), written without sign()
        ax = o.un(graph.AbsOp, x)
        mag = o.un(graph.LogOp, o.add(ax, o.un(graph.SqrtOp, o.add(o.mul(x, x), o.c(1.0)))))
        return [o.div(o.mul(mag, x), o.max(ax, o.c(float(np.finfo(np.float32).tiny))))]
    if op == "Acosh":
        return [o.un(graph.LogOp, o.add(x, o.un(graph.SqrtOp, o.sub(o.mul(x, x), o.c(1.0)))))]
    # Atanh
    return [o.mul(o.un(graph.LogOp, o.div(o.add(o.c(1.0), x), o.sub(o.c(1.0), x))), o.c(0.5))]


TRIG = ("Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Round")

ACTIVATION_CONVERTERS = {
    **dict.fromkeys(TRIG, convert_trig),
    "RMSNormalization": convert_rms_norm,
    **dict.fromkeys(ACTIVATIONS, convert_activation),
    "PRelu": convert_prelu,
    "Clip": convert_clip,
    "Dropout": convert_dropout,
    "LogSoftmax": convert_log_softmax,
    "GlobalMaxPool": convert_global_max_pool,
    "InstanceNormalization": convert_instance_norm,
    "MeanVarianceNormalization": convert_mvn,
    "LpNormalization": convert_lp_norm,
}
"""ONNX op type -> converter, merged into the importer's table."""
