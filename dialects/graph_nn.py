"""Linear algebra, convolution, pooling, normalization and softmax ops of the
`graph` dialect (dialects/graph.py registers them; `graph.MatmulOp` etc. are
re-exported there).
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import BoolAttr, DenseArrayBase, FloatAttr, IntegerAttr, TensorType, f64, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from ziggurat.dialects.graph_base import OpPattern, PatternKind, broadcast_shapes, int_array, ints_of, require, shape_of


# ---------------------------------------------------------------------------
# Linear algebra and convolution
# ---------------------------------------------------------------------------


@irdl_op_definition
class MatmulOp(IRDLOperation):
    """numpy.matmul of two tensors of rank >= 2, batch dims broadcast.

    With `transpose_b`, the last two dims of `rhs` are swapped first (the dense
    layer form `x @ W^T` with W stored as [out, in]).

    ```mlir
    %y = graph.matmul %x, %w {transpose_b = true} : tensor<1x784xf32>, tensor<512x784xf32> -> tensor<1x512xf32>
    ```
    """

    name = "graph.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    transpose_b = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.OUT_ELEMWISE_FUSABLE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"
    )

    def __init__(self, lhs: SSAValue, rhs: SSAValue, result_type: Attribute, transpose_b=False):
        props = {"transpose_b": BoolAttr.from_bool(True)} if transpose_b else {}
        super().__init__(operands=[lhs, rhs], properties=props, result_types=[result_type])

    @property
    def is_transpose_b(self) -> bool:
        return self.transpose_b is not None and bool(self.transpose_b.value.data)

    def verify_(self) -> None:
        a, b, r = shape_of(self.lhs), shape_of(self.rhs), shape_of(self.result)
        require(len(a) >= 2 and len(b) >= 2, self, "operands must have rank >= 2")
        bk, bn = (b[-1], b[-2]) if self.is_transpose_b else (b[-2], b[-1])
        require(a[-1] == bk, self, f"contracting dims differ: {a[-1]} vs {bk}")
        batch = broadcast_shapes(a[:-2], b[:-2])
        require(batch is not None, self, f"batch dims {a[:-2]} and {b[:-2]} do not broadcast")
        require(r == (*batch, a[-2], bn), self, f"result shape {r} should be {(*batch, a[-2], bn)}")


@irdl_op_definition
class Conv2dOp(IRDLOperation):
    """2-D convolution, NCHW input, OIHW weight, with groups.

    `pads` is [top, left, bottom, right] (ONNX order), `strides` and `dilations`
    are [h, w]. The weight has shape [C_out, C_in / groups, KH, KW].

    ```mlir
    %y = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x32x32xf32>, tensor<32x3x3x3xf32> -> tensor<1x32x32x32xf32>
    ```
    """

    name = "graph.conv2d"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    groups = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.OUT_ELEMWISE_FUSABLE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$input `,` $weight attr-dict `:` type($input) `,` type($weight) `->` type($result)"
    )

    def __init__(self, input, weight, result_type, strides, pads, dilations, groups=1):
        super().__init__(
            operands=[input, weight],
            properties={
                "strides": int_array(strides),
                "pads": int_array(pads),
                "dilations": int_array(dilations),
                "groups": IntegerAttr(groups, i64),
            },
            result_types=[result_type],
        )

    def verify_(self) -> None:
        x, w, r = shape_of(self.input), shape_of(self.weight), shape_of(self.result)
        require(len(x) == 4 and len(w) == 4, self, "expects NCHW input and OIHW weight")
        s, p, d = ints_of(self.strides), ints_of(self.pads), ints_of(self.dilations)
        require(len(s) == 2 and len(d) == 2 and len(p) == 4, self, "needs 2 strides, 2 dilations, 4 pads")
        g = self.groups.value.data
        require(g >= 1 and x[1] % g == 0 and w[0] % g == 0, self, f"groups={g} must divide C_in={x[1]} and C_out={w[0]}")
        require(w[1] * g == x[1], self, f"weight has {w[1]} input channels per group, input has {x[1]} for {g} groups")
        oh = (x[2] + p[0] + p[2] - d[0] * (w[2] - 1) - 1) // s[0] + 1
        ow = (x[3] + p[1] + p[3] - d[1] * (w[3] - 1) - 1) // s[1] + 1
        require(r == (x[0], w[0], oh, ow), self, f"result shape {r} should be {(x[0], w[0], oh, ow)}")


# ---------------------------------------------------------------------------
# Pooling and normalization
# ---------------------------------------------------------------------------


def pool_output_size(size: int, k: int, s: int, p0: int, p1: int, d: int, ceil: bool) -> int:
    span = size + p0 + p1 - d * (k - 1) - 1
    out = (span + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= size + p0:  # last window must start inside the input
        out -= 1
    return out


class Pool2dOp(IRDLOperation):
    """Base of 2-D window pooling over NCHW."""

    input = operand_def(TensorType)
    kernel = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    ceil_mode = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.OUT_ELEMWISE_FUSABLE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def verify_(self) -> None:
        x, r = shape_of(self.input), shape_of(self.result)
        require(len(x) == 4, self, "expects an NCHW input")
        k, s, p, d = ints_of(self.kernel), ints_of(self.strides), ints_of(self.pads), ints_of(self.dilations)
        require(len(k) == 2 and len(s) == 2 and len(d) == 2 and len(p) == 4, self, "needs 2-D kernel/strides/dilations and 4 pads")
        ceil = self.ceil_mode is not None and bool(self.ceil_mode.value.data)
        oh = pool_output_size(x[2], k[0], s[0], p[0], p[2], d[0], ceil)
        ow = pool_output_size(x[3], k[1], s[1], p[1], p[3], d[1], ceil)
        require(r == (x[0], x[1], oh, ow), self, f"result shape {r} should be {(x[0], x[1], oh, ow)}")


@irdl_op_definition
class MaxPool2dOp(Pool2dOp):
    """Max over each window; padding never wins.

    ```mlir
    %y = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x32x32x32xf32> -> tensor<1x32x16x16xf32>
    ```
    """

    name = "graph.max_pool2d"


@irdl_op_definition
class AvgPool2dOp(Pool2dOp):
    """Mean over each window; `count_include_pad` divides by the full window.

    ```mlir
    %y = graph.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x6x28x28xf32> -> tensor<1x6x14x14xf32>
    ```
    """

    name = "graph.avg_pool2d"
    count_include_pad = opt_prop_def(BoolAttr)


@irdl_op_definition
class GlobalAvgPoolOp(IRDLOperation):
    """Mean over all spatial positions: [N, C, H, W] -> [N, C, 1, 1].

    ```mlir
    %y = graph.global_avg_pool %x : tensor<1x64x7x7xf32> -> tensor<1x64x1x1xf32>
    ```
    """

    name = "graph.global_avg_pool"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.COMM_REDUCE))
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def verify_(self) -> None:
        x, r = shape_of(self.input), shape_of(self.result)
        require(len(x) >= 3, self, "expects rank >= 3 (N, C, spatial...)")
        require(r == (x[0], x[1]) + (1,) * (len(x) - 2), self, f"result shape {r} is wrong for input {x}")


@irdl_op_definition
class BatchNormOp(IRDLOperation):
    """Inference batch normalization over axis 1:
    `(x - mean) * scale / sqrt(var + epsilon) + bias`.

    ```mlir
    %y = graph.batch_norm %x, %scale, %bias, %mean, %var {epsilon = 1.0e-05 : f64} : tensor<1x32x8x8xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32> -> tensor<1x32x8x8xf32>
    ```
    """

    name = "graph.batch_norm"
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = operand_def(TensorType)
    mean = operand_def(TensorType)
    var = operand_def(TensorType)
    epsilon = prop_def(FloatAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.BROADCAST))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$input `,` $scale `,` $bias `,` $mean `,` $var attr-dict `:` type($input) `,` "
        "type($scale) `,` type($bias) `,` type($mean) `,` type($var) `->` type($result)"
    )

    def __init__(self, x, scale, bias, mean, var, epsilon: float):
        super().__init__(
            operands=[x, scale, bias, mean, var],
            properties={"epsilon": FloatAttr(epsilon, f64)},
            result_types=[x.type],
        )

    def verify_(self) -> None:
        x = shape_of(self.input)
        require(len(x) >= 2, self, "expects rank >= 2")
        for v in (self.scale, self.bias, self.mean, self.var):
            require(shape_of(v) == (x[1],), self, f"parameters must have shape ({x[1]},), got {shape_of(v)}")
        require(shape_of(self.result) == x, self, "result must have the input's shape")


@irdl_op_definition
class SoftmaxOp(IRDLOperation):
    """exp(x - max) / sum(exp(x - max)) along `axis`.

    ```mlir
    %y = graph.softmax %x {axis = 1 : i64} : tensor<1x10xf32>
    ```
    """

    name = "graph.softmax"
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    axis = prop_def(IntegerAttr)
    result = result_def(T)
    traits = traits_def(Pure(), OpPattern(PatternKind.OPAQUE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($result)"

    def __init__(self, x: SSAValue, axis: int):
        super().__init__(operands=[x], properties={"axis": IntegerAttr(axis, i64)}, result_types=[x.type])

    def verify_(self) -> None:
        rank = len(shape_of(self.input))
        a = self.axis.value.data
        require(0 <= a < rank, self, f"axis {a} out of range for rank {rank} (normalize negative axes first)")


NN_OPS: list[type[IRDLOperation]] = [
    MatmulOp,
    Conv2dOp,
    MaxPool2dOp,
    AvgPool2dOp,
    GlobalAvgPoolOp,
    BatchNormOp,
    SoftmaxOp,
]
