"""The `graph` dialect: whole-model dataflow on immutable tensors.

This is the highest of ziggurat's four levels (graph -> te -> loop -> hw). A
value is a builtin `tensor<...>` with a static shape; ops say *which* operator
runs, never how. It plays the role of Relay/Relax in TVM and departs from any
MLIR dialect in two ways:

* every op carries its TVM op-pattern kind as a trait (`OpPattern`), which
  fusion reads instead of a list of op names;
* weights are held *by reference*: `graph.constant "fc1.weight"` names an
  entry of a side store (`ziggurat.weights.WeightStore`) so printed IR
  never spells a tensor out element by element.

Layouts: activations are NCHW, convolution weights OIHW (ONNX conventions).

The op definitions are split by kind: this module holds the base pieces
(op patterns, constants, unary/binary elementwise, reshape/transpose, fused
groups, the cost attribute); `graph_nn.py` (matmul, conv, pooling, norms,
softmax), `graph_core.py` (the ONNX decomposition core), `graph_layout.py`,
`graph_dtype.py` and `graph_quant.py` hold the rest. All are registered in
the one `Graph` dialect below and re-exported here (`graph.Conv2dOp`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DenseArrayBase,
    StringAttr,
    TensorType,
)
from xdsl.dialects.builtin import FloatData, IntAttr
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute, Region, SSAValue
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import HasParent, IsTerminator, Pure

from ziggurat.symbolic import SymbolicError
from ziggurat.symbolic import prod as sym_prod
from ziggurat.dialects.graph_base import (  # noqa: F401 - re-exported as graph.X
    BinaryOp,
    OpPattern,
    PatternKind,
    UnaryOp,
    broadcast_shapes,
    int_array,
    ints_of,
    pattern_kind,
    require,
    shape_of,
)

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
        na, nb = sym_prod(shape_of(self.input)), sym_prod(shape_of(self.result))
        require(na == nb, self, f"element counts differ: {na} vs {nb}")
        require(a.element_type == b.element_type, self, "element types differ")


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
        x, r, p = shape_of(self.input), shape_of(self.result), ints_of(self.perm)
        require(sorted(p) == list(range(len(x))), self, f"perm {p} is not a permutation of {len(x)} dims")
        require(r == tuple(x[i] for i in p), self, f"result shape {r} should be {tuple(x[i] for i in p)}")


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
        require(arg_types == [v.type for v in self.inputs], self, "block argument types must match the inputs")
        last = block.last_op
        require(isinstance(last, YieldOp), self, "body must end with graph.yield")
        yielded = [v.type for v in last.operands]  # type: ignore[union-attr]
        require(yielded == [r.type for r in self.outputs], self, "graph.yield types must match the results")

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
    ReshapeOp,
    TransposeOp,
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


# Linear algebra, convolution, pooling, normalization: dialects/graph_nn.py.
from ziggurat.dialects.graph_nn import (  # noqa: E402,F401
    NN_OPS,
    MatmulOp,
    Conv2dOp,
    pool_output_size,
    Pool2dOp,
    MaxPool2dOp,
    AvgPool2dOp,
    GlobalAvgPoolOp,
    BatchNormOp,
    SoftmaxOp,
)

GRAPH_OPS += NN_OPS

# The ONNX decomposition core (slice, concat, reductions, compare, ...): dialects/graph_core.py.
from ziggurat.dialects.graph_core import (  # noqa: E402,F401
    CORE_OPS,
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
    COMPARE_KINDS,
    CompareOp,
    WhereOp,
    GatherElementsOp,
    SliceOp,
    ConcatOp,
    REDUCE_KINDS,
    ReduceOp,
    BroadcastToOp,
)

GRAPH_OPS += CORE_OPS

# Blocked-layout ops (NCHW[x]c, convert-layout): dialects/graph_layout.py.
from ziggurat.dialects.graph_layout import (  # noqa: E402,F401
    LAYOUT_OPS, Conv2dNchwcOp, DepthwiseConv2dNchwcOp, GroupedConv2dNchwcOp, LayoutTransformOp, MatmulPanelsOp,
    MaxPool2dNchwcOp)

GRAPH_OPS += LAYOUT_OPS

# Element-type ops (casts, integer and bitwise arithmetic, run-time Gather): dialects/graph_dtype.py.
from ziggurat.dialects.graph_dtype import DTYPE_OPS  # noqa: E402

GRAPH_OPS += DTYPE_OPS

# Quantized ops (the VNNI int8 GEMM): dialects/graph_quant.py.
from ziggurat.dialects.graph_quant import QUANT_OPS, LookupOp, QGemmOp  # noqa: E402,F401

GRAPH_OPS += QUANT_OPS

# Winograd F(2x2, 3x3) transforms (winograd-conv): dialects/graph_winograd.py.
from ziggurat.dialects.graph_winograd import WINOGRAD_OPS, WinogradInputOp, WinogradOutputOp  # noqa: E402,F401

GRAPH_OPS += WINOGRAD_OPS

# Run-time shape values of a model compiled for every shape: dialects/graph_symbolic.py.
from ziggurat.dialects.graph_symbolic import SYMBOLIC_OPS, DimsOp, IotaOp  # noqa: E402,F401

GRAPH_OPS += SYMBOLIC_OPS



def _tolerate_symbols(op_class: type[IRDLOperation]) -> None:
    """Shape checks on symbolic extents (dialects/sym.py) that only a binding could decide (is
    `sequence` within a 512-row table?) pass at compile time: the importer recorded what the
    model needs as constraints, which each call checks (runtime/symbolic_model.py)."""
    inner = op_class.verify_

    def verify_(self) -> None:
        try:
            inner(self)
        except SymbolicError:
            pass

    op_class.verify_ = verify_  # type: ignore[method-assign]


for _op in GRAPH_OPS:
    _tolerate_symbols(_op)

Graph = Dialect("graph", GRAPH_OPS, [CostAttr])
