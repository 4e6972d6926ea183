"""The `graph` dialect: whole-model dataflow on immutable tensors.

This is the highest of ziggurat's four levels (graph -> te -> loop -> hw). A
value is a builtin `tensor<...>` with a static shape; ops say *which* operator
runs, never how. It plays the role of Relay/Relax in TVM and departs from any
MLIR dialect in two ways:

* every op carries its TVM op-pattern kind as a trait (`OpPattern`), which
  fusion reads instead of a list of op names;
* weights are held *by reference*: `graph.constant "fc1.weight"` names an
  entry of a side store (`ziggurat.frontends.weights.WeightStore`) so printed IR
  never spells a tensor out element by element.

Layouts: activations are NCHW, convolution weights OIHW (ONNX conventions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

from xdsl.dialects.builtin import (
    BoolAttr,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    TensorType,
    f64,
    i1,
    i64,
)
from xdsl.dialects.builtin import FloatData, IntAttr
from xdsl.ir import Attribute, Dialect, Operation, ParametrizedAttribute, Region, SSAValue
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import HasParent, IsTerminator, OpTrait, Pure
from xdsl.utils.exceptions import VerifyException

# ---------------------------------------------------------------------------
# Op-pattern kinds (TVM's numbering) as a trait
# ---------------------------------------------------------------------------


class PatternKind(IntEnum):
    """TVM's operator pattern kinds, ordered from most to least fusable."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    OPAQUE = 8


@dataclass(frozen=True)
class OpPattern(OpTrait):
    """Declares the op-pattern kind of a graph op; fusion reads this trait."""

    kind: PatternKind


def pattern_kind(op: Operation) -> PatternKind:
    """The op-pattern kind of `op` (OPAQUE for ops that declare none)."""
    trait = op.get_trait(OpPattern)
    return trait.kind if trait is not None else PatternKind.OPAQUE


# ---------------------------------------------------------------------------
# Shape helpers shared by verifiers and the frontend
# ---------------------------------------------------------------------------


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """Numpy broadcasting of two static shapes, or None when incompatible."""
    out: list[int] = []
    for i in range(max(len(a), len(b))):
        da = a[len(a) - 1 - i] if i < len(a) else 1
        db = b[len(b) - 1 - i] if i < len(b) else 1
        if da != db and 1 not in (da, db):
            return None
        out.append(max(da, db) if 1 in (da, db) else da)
    return tuple(reversed(out))


def _shape(value: SSAValue) -> tuple[int, ...]:
    assert isinstance(value.type, TensorType)
    return tuple(value.type.get_shape())


def _ints(attr: DenseArrayBase | None) -> tuple[int, ...]:
    return tuple(attr.get_values()) if attr is not None else ()  # type: ignore[arg-type]


def int_array(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def _require(cond: bool, op: Operation, message: str) -> None:
    if not cond:
        raise VerifyException(f"'{op.name}' op {message}")


# ---------------------------------------------------------------------------
# Constants and calls
# ---------------------------------------------------------------------------


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A weight or constant tensor, held by reference in the side store.

    `ref` names an entry of the weight store that travels with the module; the
    values are never printed.

    ```mlir
    %w = graph.constant "fc1.weight" : tensor<512x784xf32>
    ```
    """

    name = "graph.constant"
    ref = prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.OPAQUE))
    assembly_format = "$ref attr-dict `:` type($result)"

    def __init__(self, ref: str, result_type: TensorType):
        super().__init__(properties={"ref": StringAttr(ref)}, result_types=[result_type])


@irdl_op_definition
class CallKernelOp(IRDLOperation):
    """Calls a lower-level kernel function (a te or loop function) on tensors.

    It is what `convert-graph-to-te` leaves in the model function: one call per
    kernel, in the spirit of Relax `call_tir`.

    ```mlir
    %y = graph.call_kernel @relu_0(%x) : (tensor<1x8xf32>) -> tensor<1x8xf32>
    ```
    """

    name = "graph.call_kernel"
    callee = prop_def(StringAttr)
    args = var_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.OPAQUE))

    def __init__(self, callee: str, args: Sequence[SSAValue], result_type: Attribute):
        super().__init__(
            operands=[args], properties={"callee": StringAttr(callee)}, result_types=[result_type]
        )

    def print(self, printer) -> None:
        printer.print_string(f" @{self.callee.data}")
        printer.print_operands(self.args)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : (")
        printer.print_list([a.type for a in self.args], printer.print_attribute)
        printer.print_string(") -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser) -> CallKernelOp:
        callee = parser.parse_symbol_name().data
        unresolved = parser.parse_op_args_list()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        args = parser.resolve_operands(unresolved, types, pos)
        op = cls(callee, args, result_type)
        op.attributes |= attrs
        return op


# ---------------------------------------------------------------------------
# Elementwise unary ops
# ---------------------------------------------------------------------------


class UnaryOp(IRDLOperation):
    """Base of elementwise unary ops: same type in and out."""

    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure(), OpPattern(PatternKind.ELEMWISE))
    assembly_format = "$input attr-dict `:` type($result)"

    def __init__(self, input: SSAValue):
        super().__init__(operands=[input], result_types=[input.type])

    def verify_(self) -> None:
        elt = self.result.type.element_type  # type: ignore[attr-defined]
        if not isinstance(elt, (Float16Type, Float32Type, Float64Type)):
            signed = isinstance(elt, IntegerType) and elt.width.data > 1 and elt.signedness.data != Signedness.UNSIGNED
            _require(self.name in ("graph.relu", "graph.neg", "graph.abs") and signed, self,
                     f"is defined on floats{' and signed integers' if self.name in ('graph.relu', 'graph.neg', 'graph.abs') else ''}, got {elt}")


@irdl_op_definition
class ReluOp(UnaryOp):
    """max(x, 0), elementwise.

    ```mlir
    %y = graph.relu %x : tensor<1x512xf32>
    ```
    """

    name = "graph.relu"


@irdl_op_definition
class TanhOp(UnaryOp):
    """tanh(x), elementwise.

    ```mlir
    %y = graph.tanh %x : tensor<1x6x28x28xf32>
    ```
    """

    name = "graph.tanh"


@irdl_op_definition
class SigmoidOp(UnaryOp):
    """1 / (1 + exp(-x)), elementwise.

    ```mlir
    %y = graph.sigmoid %x : tensor<4xf32>
    ```
    """

    name = "graph.sigmoid"


@irdl_op_definition
class ExpOp(UnaryOp):
    """exp(x), elementwise.

    ```mlir
    %y = graph.exp %x : tensor<4xf32>
    ```
    """

    name = "graph.exp"


@irdl_op_definition
class SqrtOp(UnaryOp):
    """sqrt(x), elementwise.

    ```mlir
    %y = graph.sqrt %x : tensor<4xf32>
    ```
    """

    name = "graph.sqrt"


@irdl_op_definition
class NegOp(UnaryOp):
    """-x, elementwise.

    ```mlir
    %y = graph.neg %x : tensor<4xf32>
    ```
    """

    name = "graph.neg"


@irdl_op_definition
class ErfOp(UnaryOp):
    """erf(x), elementwise (the Gaussian error function).

    ```mlir
    %y = graph.erf %x : tensor<4xf32>
    ```
    """

    name = "graph.erf"


# ---------------------------------------------------------------------------
# Elementwise binary ops with numpy broadcasting
# ---------------------------------------------------------------------------


class BinaryOp(IRDLOperation):
    """Base of binary ops with numpy broadcasting of the two operands."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.BROADCAST))
    assembly_format = (
        "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"
    )

    def __init__(self, lhs: SSAValue, rhs: SSAValue, result_type: Attribute):
        super().__init__(operands=[lhs, rhs], result_types=[result_type])

    def verify_(self) -> None:
        a, b, r = _shape(self.lhs), _shape(self.rhs), _shape(self.result)
        out = broadcast_shapes(a, b)
        _require(out is not None, self, f"operand shapes {a} and {b} do not broadcast")
        _require(out == r, self, f"result shape {r} is not the broadcast shape {out}")
        elts = {self.lhs.type.element_type, self.rhs.type.element_type}  # type: ignore[attr-defined]
        _require(len(elts) == 1, self, "operands must have the same element type")
        _require(self.result.type.element_type in elts, self, "result must have the operands' element type")  # type: ignore[attr-defined]


@irdl_op_definition
class AddOp(BinaryOp):
    """lhs + rhs with broadcasting.

    ```mlir
    %z = graph.add %x, %b : tensor<1x512xf32>, tensor<512xf32> -> tensor<1x512xf32>
    ```
    """

    name = "graph.add"


@irdl_op_definition
class SubOp(BinaryOp):
    """lhs - rhs with broadcasting.

    ```mlir
    %z = graph.sub %x, %y : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
    """

    name = "graph.sub"


@irdl_op_definition
class MulOp(BinaryOp):
    """lhs * rhs with broadcasting.

    ```mlir
    %z = graph.mul %x, %s : tensor<2x4xf32>, tensor<1xf32> -> tensor<2x4xf32>
    ```
    """

    name = "graph.mul"


@irdl_op_definition
class DivOp(BinaryOp):
    """lhs / rhs with broadcasting.

    ```mlir
    %z = graph.div %x, %y : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
    """

    name = "graph.div"


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
        a, b, r = _shape(self.lhs), _shape(self.rhs), _shape(self.result)
        _require(len(a) >= 2 and len(b) >= 2, self, "operands must have rank >= 2")
        bk, bn = (b[-1], b[-2]) if self.is_transpose_b else (b[-2], b[-1])
        _require(a[-1] == bk, self, f"contracting dims differ: {a[-1]} vs {bk}")
        batch = broadcast_shapes(a[:-2], b[:-2])
        _require(batch is not None, self, f"batch dims {a[:-2]} and {b[:-2]} do not broadcast")
        _require(r == (*batch, a[-2], bn), self, f"result shape {r} should be {(*batch, a[-2], bn)}")


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
        x, w, r = _shape(self.input), _shape(self.weight), _shape(self.result)
        _require(len(x) == 4 and len(w) == 4, self, "expects NCHW input and OIHW weight")
        s, p, d = _ints(self.strides), _ints(self.pads), _ints(self.dilations)
        _require(len(s) == 2 and len(d) == 2 and len(p) == 4, self, "needs 2 strides, 2 dilations, 4 pads")
        g = self.groups.value.data
        _require(g >= 1 and x[1] % g == 0 and w[0] % g == 0, self, f"groups={g} must divide C_in={x[1]} and C_out={w[0]}")
        _require(w[1] * g == x[1], self, f"weight has {w[1]} input channels per group, input has {x[1]} for {g} groups")
        oh = (x[2] + p[0] + p[2] - d[0] * (w[2] - 1) - 1) // s[0] + 1
        ow = (x[3] + p[1] + p[3] - d[1] * (w[3] - 1) - 1) // s[1] + 1
        _require(r == (x[0], w[0], oh, ow), self, f"result shape {r} should be {(x[0], w[0], oh, ow)}")


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
        x, r = _shape(self.input), _shape(self.result)
        _require(len(x) == 4, self, "expects an NCHW input")
        k, s, p, d = _ints(self.kernel), _ints(self.strides), _ints(self.pads), _ints(self.dilations)
        _require(len(k) == 2 and len(s) == 2 and len(d) == 2 and len(p) == 4, self, "needs 2-D kernel/strides/dilations and 4 pads")
        ceil = self.ceil_mode is not None and bool(self.ceil_mode.value.data)
        oh = pool_output_size(x[2], k[0], s[0], p[0], p[2], d[0], ceil)
        ow = pool_output_size(x[3], k[1], s[1], p[1], p[3], d[1], ceil)
        _require(r == (x[0], x[1], oh, ow), self, f"result shape {r} should be {(x[0], x[1], oh, ow)}")


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
        x, r = _shape(self.input), _shape(self.result)
        _require(len(x) >= 3, self, "expects rank >= 3 (N, C, spatial...)")
        _require(r == (x[0], x[1]) + (1,) * (len(x) - 2), self, f"result shape {r} is wrong for input {x}")


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
        x = _shape(self.input)
        _require(len(x) >= 2, self, "expects rank >= 2")
        for v in (self.scale, self.bias, self.mean, self.var):
            _require(_shape(v) == (x[1],), self, f"parameters must have shape ({x[1]},), got {_shape(v)}")
        _require(_shape(self.result) == x, self, "result must have the input's shape")


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
        rank = len(_shape(self.input))
        a = self.axis.value.data
        _require(0 <= a < rank, self, f"axis {a} out of range for rank {rank} (normalize negative axes first)")


# ---------------------------------------------------------------------------
# Injective data movement
# ---------------------------------------------------------------------------


@irdl_op_definition
class ReshapeOp(IRDLOperation):
    """Reinterprets the elements in row-major order under a new static shape.

    ```mlir
    %y = graph.reshape %x : tensor<1x16x5x5xf32> -> tensor<1x400xf32>
    ```
    """

    name = "graph.reshape"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.INJECTIVE))
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, x: SSAValue, result_type: Attribute):
        super().__init__(operands=[x], result_types=[result_type])

    def verify_(self) -> None:
        a, b = self.input.type, self.result.type
        assert isinstance(a, TensorType) and isinstance(b, TensorType)
        _require(a.element_count() == b.element_count(), self, f"element counts differ: {a.element_count()} vs {b.element_count()}")
        _require(a.element_type == b.element_type, self, "element types differ")


@irdl_op_definition
class TransposeOp(IRDLOperation):
    """Permutes dimensions: result dim i is input dim perm[i].

    ```mlir
    %y = graph.transpose %x {perm = array<i64: 0, 2, 1>} : tensor<1x32x128xf32> -> tensor<1x128x32xf32>
    ```
    """

    name = "graph.transpose"
    input = operand_def(TensorType)
    perm = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.INJECTIVE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, x: SSAValue, perm: Sequence[int], result_type: Attribute):
        super().__init__(operands=[x], properties={"perm": int_array(perm)}, result_types=[result_type])

    def verify_(self) -> None:
        x, r, p = _shape(self.input), _shape(self.result), _ints(self.perm)
        _require(sorted(p) == list(range(len(x))), self, f"perm {p} is not a permutation of {len(x)} dims")
        _require(r == tuple(x[i] for i in p), self, f"result shape {r} should be {tuple(x[i] for i in p)}")


# ---------------------------------------------------------------------------
# Core ops the ONNX frontend decomposes onto (slicing, concatenation,
# reductions, broadcasting, more elementwise math)
# ---------------------------------------------------------------------------


@irdl_op_definition
class AbsOp(UnaryOp):
    """|x|, elementwise.

    ```mlir
    %y = graph.abs %x : tensor<4xf32>
    ```
    """

    name = "graph.abs"


@irdl_op_definition
class LogOp(UnaryOp):
    """Natural logarithm, elementwise.

    ```mlir
    %y = graph.log %x : tensor<4xf32>
    ```
    """

    name = "graph.log"


@irdl_op_definition
class FloorOp(UnaryOp):
    """floor(x), elementwise.

    ```mlir
    %y = graph.floor %x : tensor<4xf32>
    ```
    """

    name = "graph.floor"


@irdl_op_definition
class CeilOp(UnaryOp):
    """ceil(x), elementwise.

    ```mlir
    %y = graph.ceil %x : tensor<4xf32>
    ```
    """

    name = "graph.ceil"


@irdl_op_definition
class SinOp(UnaryOp):
    """sin(x), elementwise (radians).

    ```mlir
    %y = graph.sin %x : tensor<4xf32>
    ```
    """

    name = "graph.sin"


@irdl_op_definition
class CosOp(UnaryOp):
    """cos(x), elementwise (radians).

    ```mlir
    %y = graph.cos %x : tensor<4xf32>
    ```
    """

    name = "graph.cos"


@irdl_op_definition
class AtanOp(UnaryOp):
    """atan(x), elementwise, in (-pi/2, pi/2).

    ```mlir
    %y = graph.atan %x : tensor<4xf32>
    ```
    """

    name = "graph.atan"


@irdl_op_definition
class RoundOp(UnaryOp):
    """x rounded to the nearest integer, halves to even (ONNX Round).

    ```mlir
    %y = graph.round %x : tensor<4xf32>
    ```
    """

    name = "graph.round"


@irdl_op_definition
class PowOp(BinaryOp):
    """lhs ** rhs with broadcasting.

    ```mlir
    %z = graph.pow %x, %y : tensor<4xf32>, tensor<1xf32> -> tensor<4xf32>
    ```
    """

    name = "graph.pow"


@irdl_op_definition
class MaxOp(BinaryOp):
    """max(lhs, rhs) with broadcasting (NaN propagates).

    ```mlir
    %z = graph.max %x, %y : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
    """

    name = "graph.max"


@irdl_op_definition
class MinOp(BinaryOp):
    """min(lhs, rhs) with broadcasting (NaN propagates).

    ```mlir
    %z = graph.min %x, %y : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
    """

    name = "graph.min"


COMPARE_KINDS = ("lt", "le", "gt", "ge", "eq", "ne")


@irdl_op_definition
class CompareOp(IRDLOperation):
    """lhs `kind` rhs with broadcasting, as a float mask: 1.0 where it holds, else
    0.0 (`ne` also holds for NaN; the others do not). Masks feed `graph.where`
    and mask arithmetic (and = mul, or = max, not = 1 - m).

    ```mlir
    %m = graph.compare %x, %y {kind = "lt"} : tensor<4xf32>, tensor<1xf32> -> tensor<4xf32>
    ```
    """

    name = "graph.compare"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    kind = prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.BROADCAST))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, kind: str, result_type: Attribute):
        super().__init__(operands=[lhs, rhs], properties={"kind": StringAttr(kind)}, result_types=[result_type])

    def verify_(self) -> None:
        _require(self.kind.data in COMPARE_KINDS, self, f"kind must be one of {COMPARE_KINDS}, got '{self.kind.data}'")
        a, b, r = _shape(self.lhs), _shape(self.rhs), _shape(self.result)
        _require(broadcast_shapes(a, b) == r, self, f"result shape {r} is not the broadcast shape of {a} and {b}")
        elt = self.lhs.type.element_type  # type: ignore[attr-defined]
        _require(self.rhs.type.element_type == elt, self, "operands must have the same element type")  # type: ignore[attr-defined]
        out = self.result.type.element_type  # type: ignore[attr-defined]
        _require(out == i1 or (out == elt and isinstance(elt, (Float16Type, Float32Type, Float64Type))), self,
                 f"result elements must be i1 (bool) or the operands' float type (a 1.0/0.0 mask), got {out}")


@irdl_op_definition
class WhereOp(IRDLOperation):
    """Elementwise `cond != 0 ? lhs : rhs`, the three operands broadcast together
    (`cond` is a float mask, as `graph.compare` makes).

    ```mlir
    %y = graph.where %m, %x, %ninf : tensor<4x4xf32>, tensor<4x4xf32>, tensor<1xf32> -> tensor<4x4xf32>
    ```
    """

    name = "graph.where"
    cond = operand_def(TensorType)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.BROADCAST))
    assembly_format = (
        "$cond `,` $lhs `,` $rhs attr-dict `:` type($cond) `,` type($lhs) `,` type($rhs) `->` type($result)"
    )

    def __init__(self, cond: SSAValue, lhs: SSAValue, rhs: SSAValue, result_type: Attribute):
        super().__init__(operands=[cond, lhs, rhs], result_types=[result_type])

    def verify_(self) -> None:
        c, a, b, r = _shape(self.cond), _shape(self.lhs), _shape(self.rhs), _shape(self.result)
        ab = broadcast_shapes(a, b)
        out = broadcast_shapes(c, ab) if ab is not None else None
        _require(out == r, self, f"result shape {r} is not the broadcast shape of {c}, {a} and {b}")
        elt = self.result.type.element_type  # type: ignore[attr-defined]
        _require(self.lhs.type.element_type == elt == self.rhs.type.element_type, self,  # type: ignore[attr-defined]
                 "both branches and the result must have one element type")
        cond = self.cond.type.element_type  # type: ignore[attr-defined]
        _require(cond == i1 or isinstance(cond, (Float16Type, Float32Type, Float64Type)), self,
                 f"the condition must be i1 (bool) or a float mask, got {cond}")


@irdl_op_definition
class GatherElementsOp(IRDLOperation):
    """result[i] = input[i with dim `axis` replaced by indices[i]] (ONNX
    GatherElements). `indices` holds exact non-negative integers in float32
    (exact below 2^24) and has the result's shape; every index must be smaller
    than the input's extent along `axis`.

    ```mlir
    %y = graph.gather_elements %x, %idx {axis = 1 : i64} : tensor<3x5xf32>, tensor<3x2xf32> -> tensor<3x2xf32>
    ```
    """

    name = "graph.gather_elements"
    input = operand_def(TensorType)
    indices = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.INJECTIVE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input `,` $indices attr-dict `:` type($input) `,` type($indices) `->` type($result)"

    def __init__(self, x: SSAValue, indices: SSAValue, axis: int, result_type: Attribute):
        super().__init__(operands=[x, indices], properties={"axis": IntegerAttr(axis, i64)}, result_types=[result_type])

    def verify_(self) -> None:
        x, idx, r = _shape(self.input), _shape(self.indices), _shape(self.result)
        a = self.axis.value.data
        _require(0 <= a < len(x), self, f"axis {a} out of range for rank {len(x)}")
        _require(idx == r and len(r) == len(x), self, f"indices {idx} and result {r} must have one shape of the input's rank")
        _require(all(r[d] <= x[d] for d in range(len(x)) if d != a), self,
                 f"result {r} exceeds the input {x} outside axis {a}")
        ie = self.indices.type.element_type  # type: ignore[attr-defined]
        _require(ie == Float32Type() or (isinstance(ie, IntegerType) and ie.width.data > 1), self,
                 f"indices must be integers (or exact float32), got {ie}")
        _require(self.input.type.element_type == self.result.type.element_type, self,  # type: ignore[attr-defined]
                 "input and result element types differ")


@irdl_op_definition
class SliceOp(IRDLOperation):
    """A strided window: result[i] = input[starts + i * steps], dim by dim.

    The result type gives the number of elements taken along each dim; `steps`
    may be negative (walking backwards from `starts`). Every index read must lie
    inside the input.

    ```mlir
    %y = graph.slice %x {starts = array<i64: 0, 4>, steps = array<i64: 1, 2>} : tensor<2x16xf32> -> tensor<2x4xf32>
    ```
    """

    name = "graph.slice"
    input = operand_def(TensorType)
    starts = prop_def(DenseArrayBase)
    steps = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.INJECTIVE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, x: SSAValue, starts: Sequence[int], steps: Sequence[int], result_type: Attribute):
        props = {"starts": int_array(starts), "steps": int_array(steps)}
        super().__init__(operands=[x], properties=props, result_types=[result_type])

    def verify_(self) -> None:
        x, r = _shape(self.input), _shape(self.result)
        starts, steps = _ints(self.starts), _ints(self.steps)
        _require(len(starts) == len(x) == len(steps) == len(r), self, f"needs one start and step per dim of {x}")
        for d, (n, start, step, size) in enumerate(zip(x, starts, steps, r)):
            _require(step != 0, self, f"step of dim {d} is 0")
            last = start + (size - 1) * step
            _require(size >= 1 and 0 <= start < n and 0 <= last < n, self,
                     f"dim {d}: {size} elements from {start} by {step} leave the input extent {n}")
        _require(self.input.type.element_type == self.result.type.element_type, self, "element types differ")  # type: ignore[attr-defined]


@irdl_op_definition
class ConcatOp(IRDLOperation):
    """Joins tensors along `axis`; all other dims agree.

    ```mlir
    %y = graph.concat %a, %b {axis = 1 : i64} : tensor<2x3xf32>, tensor<2x5xf32> -> tensor<2x8xf32>
    ```
    """

    name = "graph.concat"
    inputs = var_operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.INJECTIVE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$inputs attr-dict `:` type($inputs) `->` type($result)"

    def __init__(self, inputs: Sequence[SSAValue], axis: int, result_type: Attribute):
        super().__init__(operands=[inputs], properties={"axis": IntegerAttr(axis, i64)}, result_types=[result_type])

    def verify_(self) -> None:
        shapes, r = [_shape(v) for v in self.inputs], _shape(self.result)
        a = self.axis.value.data
        _require(len(shapes) >= 1, self, "needs at least one input")
        _require(0 <= a < len(r), self, f"axis {a} out of range for rank {len(r)}")
        for s in shapes:
            _require(len(s) == len(r) and s[:a] + s[a + 1:] == r[:a] + r[a + 1:], self,
                     f"input shape {s} does not match result {r} outside axis {a}")
        total = sum(s[a] for s in shapes)
        _require(total == r[a], self, f"result dim {a} is {r[a]}, the inputs sum to {total}")


REDUCE_KINDS = ("sum", "mean", "max", "min", "prod")


@irdl_op_definition
class ReduceOp(IRDLOperation):
    """Reduces `axes` (sorted, non-negative) with `kind` in sum, mean, max, min, prod;
    `keepdims` keeps them as size-1 dims.

    ```mlir
    %y = graph.reduce %x {kind = "mean", axes = array<i64: 2>, keepdims = true} : tensor<1x32x128xf32> -> tensor<1x32x1xf32>
    ```
    """

    name = "graph.reduce"
    input = operand_def(TensorType)
    kind = prop_def(StringAttr)
    axes = prop_def(DenseArrayBase)
    keepdims = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.COMM_REDUCE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, x: SSAValue, kind: str, axes: Sequence[int], keepdims: bool, result_type: Attribute):
        props: dict[str, Attribute] = {"kind": StringAttr(kind), "axes": int_array(axes)}
        if keepdims:
            props["keepdims"] = BoolAttr.from_bool(True)
        super().__init__(operands=[x], properties=props, result_types=[result_type])

    @property
    def keeps_dims(self) -> bool:
        return self.keepdims is not None and bool(self.keepdims.value.data)

    def verify_(self) -> None:
        x, r, axes = _shape(self.input), _shape(self.result), _ints(self.axes)
        _require(self.kind.data in REDUCE_KINDS, self, f"kind must be one of {REDUCE_KINDS}, got '{self.kind.data}'")
        _require(list(axes) == sorted(set(axes)) and all(0 <= a < len(x) for a in axes), self,
                 f"axes {axes} must be sorted, distinct and in [0, {len(x)})")
        if self.keeps_dims:
            expected = tuple(1 if d in axes else n for d, n in enumerate(x))
        else:
            expected = tuple(n for d, n in enumerate(x) if d not in axes)
        _require(r == expected, self, f"result shape {r} should be {expected}")


@irdl_op_definition
class BroadcastToOp(IRDLOperation):
    """Repeats the input to a larger shape under numpy broadcasting (ONNX Expand).

    ```mlir
    %y = graph.broadcast_to %x : tensor<1x128xf32> -> tensor<4x128xf32>
    ```
    """

    name = "graph.broadcast_to"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.BROADCAST))
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, x: SSAValue, result_type: Attribute):
        super().__init__(operands=[x], result_types=[result_type])

    def verify_(self) -> None:
        x, r = _shape(self.input), _shape(self.result)
        _require(broadcast_shapes(x, r) == r, self, f"input shape {x} does not broadcast to {r}")


# ---------------------------------------------------------------------------
# Fused groups (made by the fuse-ops pass; one kernel each after lowering)
# ---------------------------------------------------------------------------


@irdl_op_definition
class FusedOp(IRDLOperation):
    """A group of graph ops that becomes one kernel.

    `fuse-ops` builds it. The block arguments stand for the group's external
    inputs (the operands, in order); the body is ordinary graph ops and ends
    with `graph.yield` of the group's results. `convert-graph-to-te` turns the
    whole body into one te kernel. It is OPAQUE to a second fusion round.

    ```mlir
    %y = graph.fused (%x, %w) : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
    ^bb0(%a: tensor<1x3x8x8xf32>, %b: tensor<4x3x3x3xf32>):
      %c = graph.conv2d %a, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
      %r = graph.relu %c : tensor<1x4x6x6xf32>
      graph.yield %r : tensor<1x4x6x6xf32>
    }
    ```
    """

    name = "graph.fused"
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    body = region_def("single_block")
    traits = traits_def(Pure(), OpPattern(PatternKind.OPAQUE))

    def __init__(self, inputs: Sequence[SSAValue], result_types: Sequence[Attribute], body: Region):
        super().__init__(operands=[inputs], result_types=[result_types], regions=[body])

    def verify_(self) -> None:
        block = self.body.block
        arg_types = [a.type for a in block.args]
        _require(arg_types == [v.type for v in self.inputs], self, "block argument types must match the inputs")
        last = block.last_op
        _require(isinstance(last, YieldOp), self, "body must end with graph.yield")
        yielded = [v.type for v in last.operands]  # type: ignore[union-attr]
        _require(yielded == [r.type for r in self.outputs], self, "graph.yield types must match the results")

    def print(self, printer) -> None:
        printer.print_string(" ")
        with printer.in_parens():
            printer.print_list(self.inputs, printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        with printer.in_parens():
            printer.print_list([v.type for v in self.inputs], printer.print_attribute)
        printer.print_string(" -> ")
        types = [r.type for r in self.outputs]
        if len(types) == 1:
            printer.print_attribute(types[0])
        else:
            with printer.in_parens():
                printer.print_list(types, printer.print_attribute)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)

    @classmethod
    def parse(cls, parser) -> FusedOp:
        unresolved = parser.parse_op_args_list()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        parser.parse_punctuation("->")
        if parser.parse_optional_punctuation("(") is not None:
            results = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
            parser.parse_punctuation(")")
        else:
            results = [parser.parse_type()]
        inputs = parser.resolve_operands(unresolved, types, pos)
        op = cls(inputs, results, parser.parse_region())
        op.attributes |= attrs
        return op


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a `graph.fused` body and names the group's results.

    ```mlir
    graph.yield %r : tensor<1x4x6x6xf32>
    ```
    """

    name = "graph.yield"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(FusedOp), Pure(), OpPattern(PatternKind.OPAQUE))
    assembly_format = "$values attr-dict `:` type($values)"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])


GRAPH_OPS: list[type[IRDLOperation]] = [
    ConstantOp,
    CallKernelOp,
    FusedOp,  # fuse-ops groups
    YieldOp,
    ReluOp,
    TanhOp,
    SigmoidOp,
    ExpOp,
    SqrtOp,
    NegOp,
    ErfOp,
    AddOp,
    SubOp,
    MulOp,
    DivOp,
    MatmulOp,
    Conv2dOp,
    MaxPool2dOp,
    AvgPool2dOp,
    GlobalAvgPoolOp,
    BatchNormOp,
    SoftmaxOp,
    ReshapeOp,
    TransposeOp,
    # ONNX decomposition core
    AbsOp,
    LogOp,
    FloorOp,
    CeilOp,
    SinOp,
    CosOp,
    AtanOp,
    RoundOp,
    PowOp,
    MaxOp,
    MinOp,
    CompareOp,
    WhereOp,
    GatherElementsOp,
    SliceOp,
    ConcatOp,
    ReduceOp,
    BroadcastToOp,
]

# ---------------------------------------------------------------------------
# Cost annotations (the feedback channel: annotate-costs, fuse-ops{cost-guided})
# ---------------------------------------------------------------------------


@irdl_attr_definition
class CostAttr(ParametrizedAttribute):
    """The estimated cost of the kernel an op (or `graph.fused` group) lowers to:
    time in microseconds, float ops, bytes of distinct data touched, and the
    oracle source that gave it ("database", "model" or "roofline").

    `#graph.cost<time_us = 1.2500, flops = 4096, bytes = 8192, source = "roofline">`
    """

    name = "graph.cost"
    time_us: FloatData
    flops: IntAttr
    bytes: IntAttr
    source: StringAttr

    def __init__(self, time_us: float, flops: int, nbytes: int, source: str):
        super().__init__(FloatData(round(float(time_us), 4)), IntAttr(int(flops)), IntAttr(int(nbytes)),
                         StringAttr(source))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        values: dict[str, object] = {}
        with parser.in_angle_brackets():
            for i, key in enumerate(("time_us", "flops", "bytes", "source")):
                if i:
                    parser.parse_punctuation(",")
                parser.parse_keyword(key)
                parser.parse_punctuation("=")
                values[key] = parser.parse_str_literal() if key == "source" else parser.parse_number()
        return (FloatData(float(values["time_us"])), IntAttr(int(values["flops"])),  # type: ignore[arg-type]
                IntAttr(int(values["bytes"])), StringAttr(str(values["source"])))  # type: ignore[arg-type]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f'<time_us = {self.time_us.data:.4f}, flops = {self.flops.data}, '
                             f'bytes = {self.bytes.data}, source = "{self.source.data}">')


# Blocked-layout ops (NCHW[x]c, convert-layout): dialects/graph_layout.py.
from ziggurat.dialects.graph_layout import LAYOUT_OPS, Conv2dNchwcOp, LayoutTransformOp, MaxPool2dNchwcOp  # noqa: E402,F401

GRAPH_OPS += LAYOUT_OPS

# Element-type ops (casts, integer and bitwise arithmetic, run-time Gather): dialects/graph_dtype.py.
from ziggurat.dialects.graph_dtype import DTYPE_OPS  # noqa: E402

GRAPH_OPS += DTYPE_OPS

# Quantized ops (the VNNI int8 GEMM): dialects/graph_quant.py.
from ziggurat.dialects.graph_quant import QUANT_OPS, QGemmOp  # noqa: E402,F401

GRAPH_OPS += QUANT_OPS

Graph = Dialect("graph", GRAPH_OPS, [CostAttr])
