"""The optimizers of the `ai.onnx.preview.training` domain: Adagrad, Adam and
Momentum (standard and nesterov), version 1.

Each is an elementwise update of one or more parameter tensors X from their
gradients G and accumulators, with a shared scalar learning rate R and int64
step count T. They follow onnx.reference.ops.aionnx_preview_training: the
step-dependent terms (Adagrad's decayed rate, Adam's bias correction,
Momentum's first-step coefficient) are computed at run time from T cast to
X's float type and selected with `graph.where` on T > 0. With n tensors the
inputs are R, T, X1..Xn, G1..Gn, (V1..Vn,) H1..Hn and the outputs X'1..X'n,
(V'1..V'n,) H'1..H'n.

```mlir
// Momentum (standard): v' = alpha * v + where(t > 0, beta, 1) * (norm * x + g); x' = x - r * v'
%t = graph.cast %T : tensor<i64> -> tensor<f32>
%first = graph.compare %t, %zero {kind = "gt"} : tensor<f32>, tensor<f32> -> tensor<f32>
%b = graph.where %first, %beta, %one : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
...
```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import Attribute, SSAValue

import ziggurat.dtypes as dtypes
from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, shape_of, tensor_type

TRAINING_DOMAIN = "ai.onnx.preview.training"


class _Math:
    """Elementwise graph ops in one float element type, with broadcasting."""

    def __init__(self, ctx: ConversionContext, elt: Attribute):
        self.ctx, self.elt = ctx, elt

    def cast(self, value: SSAValue) -> SSAValue:
        if element_type(value) == self.elt:
            return value
        return self.ctx.emit(CastOp(value, tensor_type(shape_of(value), self.elt)))

    def const(self, number: float, label: str) -> SSAValue:
        array = np.array(number, dtype=dtypes.to_numpy(self.elt))
        return self.ctx.add_constant(array, f"{self.ctx.node_label}.{label}")

    def _binary(self, op: type, a: SSAValue, b: SSAValue) -> SSAValue:
        out = graph.broadcast_shapes(shape_of(a), shape_of(b))
        return self.ctx.emit(op(a, b, tensor_type(out, self.elt)))

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._binary(graph.AddOp, a, b)

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._binary(graph.SubOp, a, b)

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._binary(graph.MulOp, a, b)

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._binary(graph.DivOp, a, b)

    def pow(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._binary(graph.PowOp, a, b)

    def sqrt(self, a: SSAValue) -> SSAValue:
        return self.ctx.emit(graph.SqrtOp(a))

    def where(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        out = graph.broadcast_shapes(shape_of(cond), graph.broadcast_shapes(shape_of(a), shape_of(b)))
        return self.ctx.emit(graph.WhereOp(cond, a, b, tensor_type(out, self.elt)))

    def positive(self, t: SSAValue) -> SSAValue:
        """The float mask t > 0."""
        zero = self.const(0.0, "zero")
        return self.ctx.emit(graph.CompareOp(t, zero, "gt", tensor_type(shape_of(t), self.elt)))


def _groups(ctx: ConversionContext, node: onnx.NodeProto, per_tensor: int) -> tuple[_Math, SSAValue, SSAValue,
                                                                                    list[list[SSAValue]]]:
    """(math, R, T as float, [[X_i, G_i, ...] for each tensor i]) of an optimizer node."""
    names = list(node.input)
    if len(names) < 2 + per_tensor or (len(names) - 2) % per_tensor or not all(names):
        raise ctx.shape_error(f"expects R, T and {per_tensor} inputs per optimized tensor, got {len(names)} inputs")
    values = [ctx.value(name) for name in names]
    elt = element_type(values[2])
    if not dtypes.is_float(elt):
        raise ctx.unsupported(f"input X has element type {dtypes.describe(elt)}; only float tensors are optimized")
    for name, value in zip(names[:2], values[:2]):
        if shape_of(value) not in ((), (1,)):
            raise ctx.shape_error(f"R and T must be scalars, '{name}' has shape {shape_of(value)}")
    math = _Math(ctx, elt)
    n = (len(names) - 2) // per_tensor
    tensors = [[math.cast(values[2 + j * n + i]) for j in range(per_tensor)] for i in range(n)]
    for group in tensors:
        if len({shape_of(v) for v in group}) != 1:
            raise ctx.shape_error(f"the inputs of one optimized tensor have different shapes "
                                  f"{[shape_of(v) for v in group]}")
    return math, math.cast(values[0]), math.cast(values[1]), tensors


def _transposed(results: list[tuple[SSAValue, ...]]) -> list[Value]:
    """[(X'_1, H'_1), (X'_2, H'_2)] -> [X'_1, X'_2, H'_1, H'_2]."""
    return [r[k] for k in range(len(results[0])) for r in results]


def convert_adagrad(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Adagrad: r' = r / (1 + t * decay); g' = norm * x + g; h' = h + g'^2;
    x' = x - r' * g' / (sqrt(h') + epsilon)."""
    attrs = attributes(node)
    math, r, t, tensors = _groups(ctx, node, 3)
    decay = math.const(attrs.get("decay_factor", 0.0), "decay_factor")
    rate = math.div(r, math.add(math.const(1.0, "one"), math.mul(t, decay)))
    norm, eps = math.const(attrs.get("norm_coefficient", 0.0), "norm"), math.const(attrs.get("epsilon", 0.0), "eps")
    results = []
    for x, g, h in tensors:
        gr = math.add(math.mul(norm, x), g)
        h_new = math.add(h, math.mul(gr, gr))
        x_new = math.sub(x, math.div(math.mul(rate, gr), math.add(math.sqrt(h_new), eps)))
        results.append((x_new, h_new))
    return _transposed(results)


def convert_adam(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Adam: g' = norm * x + g; v' = alpha * v + (1 - alpha) * g'; h' = beta * h + (1 - beta) * g'^2;
    r' = r * sqrt(1 - beta^t) / (1 - alpha^t) when t > 0 else r;
    x' = (1 - norm_post) * (x - r' * v' / (sqrt(h') + epsilon))."""
    attrs = attributes(node)
    math, r, t, tensors = _groups(ctx, node, 4)
    alpha_f, beta_f = attrs.get("alpha", 0.9), attrs.get("beta", 0.999)
    alpha, beta = math.const(alpha_f, "alpha"), math.const(beta_f, "beta")
    one = math.const(1.0, "one")
    corrected = math.div(math.mul(r, math.sqrt(math.sub(one, math.pow(beta, t)))), math.sub(one, math.pow(alpha, t)))
    rate = math.where(math.positive(t), corrected, r)
    norm, eps = math.const(attrs.get("norm_coefficient", 0.0), "norm"), math.const(attrs.get("epsilon", 0.0), "eps")
    keep = math.const(1.0 - attrs.get("norm_coefficient_post", 0.0), "keep")
    alpha_rest, beta_rest = math.const(1.0 - alpha_f, "alpha_rest"), math.const(1.0 - beta_f, "beta_rest")
    results = []
    for x, g, v, h in tensors:
        gr = math.add(math.mul(norm, x), g)
        v_new = math.add(math.mul(alpha, v), math.mul(alpha_rest, gr))
        h_new = math.add(math.mul(beta, h), math.mul(beta_rest, math.mul(gr, gr)))
        step = math.mul(rate, math.div(v_new, math.add(math.sqrt(h_new), eps)))
        results.append((math.mul(keep, math.sub(x, step)), v_new, h_new))
    return _transposed(results)


def convert_momentum(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Momentum: g' = norm * x + g; v' = alpha * v + (beta if t > 0 else 1) * g';
    standard: x' = x - r * v'; nesterov: x' = x - r * (g' + alpha * v')."""
    attrs = attributes(node)
    mode = attrs.get("mode", "standard")
    if mode not in ("standard", "nesterov"):
        raise ctx.unsupported(f"mode '{mode}' is not one of 'standard' and 'nesterov'")
    if not all(k in attrs for k in ("alpha", "beta", "norm_coefficient")):
        raise ctx.shape_error("attributes alpha, beta and norm_coefficient are required")
    math, r, t, tensors = _groups(ctx, node, 3)
    alpha = math.const(attrs["alpha"], "alpha")
    coefficient = math.where(math.positive(t), math.const(attrs["beta"], "beta"), math.const(1.0, "one"))
    norm = math.const(attrs["norm_coefficient"], "norm")
    results = []
    for x, g, v in tensors:
        gr = math.add(math.mul(norm, x), g)
        v_new = math.add(math.mul(alpha, v), math.mul(coefficient, gr))
        step = v_new if mode == "standard" else math.add(gr, math.mul(alpha, v_new))
        results.append((math.sub(x, math.mul(r, step)), v_new))
    return _transposed(results)


TRAINING_CONVERTERS = {
    (TRAINING_DOMAIN, "Adagrad"): convert_adagrad,
    (TRAINING_DOMAIN, "Adam"): convert_adam,
    (TRAINING_DOMAIN, "Momentum"): convert_momentum,
}
"""(domain, op type) -> converter, merged into the importer's table of other-domain ops."""

TRAINING_DEFAULT_OPSET = 12
"""The default-domain opset that version 1 of the training domain was defined with (ONNX 1.7)."""
