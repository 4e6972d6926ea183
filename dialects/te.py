"""The `te` dialect: tensor expressions, *what* each output element is.

The second of ziggurat's four levels, after `graph`. It mirrors TVM's tensor
expression language (`te.compute`, `te.reduce`), not an MLIR dialect. A te
function is a `func.func` over tensors whose body defines each result with an
index formula; nothing here says in which order or with which loops the
elements are computed. Scalar work inside a formula uses `arith` and `math`,
index arithmetic uses `arith` on `index`.

```mlir
func.func @relu_0(%x: tensor<1x512xf32>) -> tensor<1x512xf32> {
  %y = te.compute "relu" (%i, %j) : tensor<1x512xf32> {
    %v = te.read %x[%i, %j] : tensor<1x512xf32>
    %c = arith.constant 0.000000e+00 : f32
    %r = arith.maximumf %v, %c : f32
    te.yield %r : f32
  }
  func.return %y : tensor<1x512xf32>
}
```
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    base,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from ziggurat.dialects.access_syntax import parse_access, print_access, resolve_indices
from ziggurat.dialects.sym import DimsAttr
from ziggurat.symbolic import Dim, Sym

COMBINERS = ("add", "mul", "max", "min", "umax", "umin")
"""`umax`/`umin` compare integers as unsigned; `max`/`min` are signed (or float)."""


def _init_attr(value: float, elt: Attribute) -> Attribute:
    """The init value of a reduction as an attribute of the element type
    (integers: the value clamped into the type's range, infinities included)."""
    if not isinstance(elt, IntegerType):
        return FloatAttr(value, elt)  # type: ignore[arg-type]
    width = elt.width.data
    lo, hi = (0, 1) if width == 1 else (-(1 << (width - 1)), (1 << (width - 1)) - 1)
    return IntegerAttr(int(min(max(value, lo), hi)), elt)


def _require(cond: bool, op: IRDLOperation, message: str) -> None:
    if not cond:
        raise VerifyException(f"'{op.name}' op {message}")


def _print_args(printer: Printer, args: Sequence[SSAValue]) -> None:
    with printer.in_parens():
        printer.print_list(args, printer.print_ssa_value)


def _parse_index_args(parser: Parser) -> list[Parser.Argument]:
    unresolved = parser.parse_comma_separated_list(
        Parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
    )
    return [a.resolve(IndexType()) for a in unresolved]


@irdl_op_definition
class ComputeOp(IRDLOperation):
    """Defines a tensor element by element.

    The region's block arguments are the output indices (one `index` per result
    dim); the region yields the element's value.

    ```mlir
    %y = te.compute "relu" (%i, %j) : tensor<1x512xf32> {
      %v = te.read %x[%i, %j] : tensor<1x512xf32>
      %c = arith.constant 0.000000e+00 : f32
      %r = arith.maximumf %v, %c : f32
      te.yield %r : f32
    }
    ```
    """

    name = "te.compute"
    tag = prop_def(StringAttr)
    body = region_def("single_block")
    result = result_def(TensorType)

    def __init__(self, tag: str, result_type: TensorType, body: Region):
        super().__init__(properties={"tag": StringAttr(tag)}, regions=[body], result_types=[result_type])

    @staticmethod
    def make_body(rank: int) -> tuple[Region, Block]:
        block = Block(arg_types=[IndexType()] * rank)
        return Region(block), block

    def verify_(self) -> None:
        rank = len(self.result.type.get_shape())  # type: ignore[attr-defined]
        args = self.body.block.args
        _require(len(args) == rank, self, f"needs {rank} index arguments, has {len(args)}")
        _require(all(isinstance(a.type, IndexType) for a in args), self, "index arguments must be of type index")
        _require(isinstance(self.body.block.last_op, YieldOp), self, "body must end with te.yield")
        y = self.body.block.last_op
        elt = self.result.type.element_type  # type: ignore[attr-defined]
        _require(y.value.type == elt, self, f"yields {y.value.type}, result elements are {elt}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.tag)
        printer.print_string(" ")
        _print_args(printer, self.body.block.args)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> ComputeOp:
        tag = parser.parse_str_literal()
        args = _parse_index_args(parser)
        parser.parse_punctuation(":")
        result_type = parser.parse_type()
        body = parser.parse_region(args)
        op = cls(tag, result_type, body)  # type: ignore[arg-type]
        op.attributes |= parser.parse_optional_attr_dict()
        return op


@irdl_op_definition
class ReduceOp(IRDLOperation):
    """Defines a tensor as a commutative reduction over extra axes.

    Block arguments are the output indices followed by one index per reduction
    axis (with its extent). The body yields the value combined into the
    element with `combiner` (add, mul, max, min), starting from `init`. An
    extent may be symbolic (dialects/sym.py), written as its quoted expression:
    `reduce (%k : "sequence")`.

    ```mlir
    %y = te.reduce "dense" add init 0.000000e+00 : f32 (%i, %j) reduce (%k : 784) : tensor<1x512xf32> {
      %a = te.read %x[%i, %k] : tensor<1x784xf32>
      %b = te.read %w[%j, %k] : tensor<512x784xf32>
      %m = arith.mulf %a, %b : f32
      te.yield %m : f32
    }
    ```
    """

    name = "te.reduce"
    tag = prop_def(StringAttr)
    combiner = prop_def(StringAttr)
    init = prop_def(base(FloatAttr) | base(IntegerAttr))
    reduce_extents = prop_def(DenseArrayBase)
    reduce_syms = opt_prop_def(DimsAttr)
    body = region_def("single_block")
    result = result_def(TensorType)

    def __init__(
        self,
        tag: str,
        combiner: str,
        init: float,
        reduce_extents: Sequence[Dim],
        result_type: TensorType,
        body: Region,
    ):
        syms = [e for e in reduce_extents if isinstance(e, Sym)]
        props: dict = {
            "tag": StringAttr(tag),
            "combiner": StringAttr(combiner),
            "init": _init_attr(init, result_type.element_type),
            "reduce_extents": DenseArrayBase.from_list(i64, [-1 if isinstance(e, Sym) else int(e) for e in reduce_extents]),
        }
        if syms:
            props["reduce_syms"] = DimsAttr(syms)
        super().__init__(properties=props, regions=[body], result_types=[result_type])

    @property
    def extents(self) -> tuple[Dim, ...]:
        """The reduction axes' extents: ints, or `Sym` expressions where symbolic."""
        values = self.reduce_extents.get_values()
        if self.reduce_syms is None:
            return tuple(values)  # type: ignore[arg-type]
        syms = iter(self.reduce_syms.dims)
        return tuple(next(syms) if e == -1 else e for e in values)  # type: ignore[misc]

    @property
    def rank(self) -> int:
        return len(self.result.type.get_shape())  # type: ignore[attr-defined]

    def verify_(self) -> None:
        args = self.body.block.args
        _require(self.combiner.data in COMBINERS, self, f"combiner must be one of {COMBINERS}, got '{self.combiner.data}'")
        _require(len(args) == self.rank + len(self.extents), self, f"needs {self.rank} output and {len(self.extents)} reduction indices, has {len(args)} arguments")
        _require(all(isinstance(e, Sym) or e > 0 for e in self.extents), self,
                 f"reduction extents must be positive, got {self.extents}")
        _require(isinstance(self.body.block.last_op, YieldOp), self, "body must end with te.yield")
        elt = self.result.type.element_type  # type: ignore[attr-defined]
        _require(self.body.block.last_op.value.type == elt, self, f"must yield {elt}")  # type: ignore[union-attr]

    def print(self, printer: Printer) -> None:
        args = self.body.block.args
        printer.print_string(" ")
        printer.print_attribute(self.tag)
        printer.print_string(f" {self.combiner.data} init ")
        printer.print_attribute(self.init)
        printer.print_string(" ")
        _print_args(printer, args[: self.rank])
        printer.print_string(" reduce (")
        pairs = list(zip(args[self.rank :], self.extents))

        def print_axis(pair: tuple[SSAValue, Dim]) -> None:
            printer.print_ssa_value(pair[0])
            printer.print_string(f' : "{pair[1]}"' if isinstance(pair[1], Sym) else f" : {pair[1]}")

        printer.print_list(pairs, print_axis)
        printer.print_string(") : ")
        printer.print_attribute(self.result.type)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> ReduceOp:
        tag = parser.parse_str_literal()
        combiner = parser.parse_identifier()
        parser.parse_keyword("init")
        init = parser.parse_attribute()
        spatial = _parse_index_args(parser)
        parser.parse_keyword("reduce")

        def parse_axis() -> tuple[Parser.Argument, Dim]:
            arg = parser.parse_argument(expect_type=False).resolve(IndexType())
            parser.parse_punctuation(":")
            text = parser.parse_optional_str_literal()
            if text is not None:
                return arg, Sym.parse(text)
            return arg, parser.parse_integer(allow_boolean=False, allow_negative=False)

        axes = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parse_axis)
        parser.parse_punctuation(":")
        result_type = parser.parse_type()
        body = parser.parse_region([*spatial, *(a for a, _ in axes)])
        op = cls(tag, combiner, init.value.data, [e for _, e in axes], result_type, body)  # type: ignore[arg-type, attr-defined]
        op.attributes |= parser.parse_optional_attr_dict()
        return op


@irdl_op_definition
class ReadOp(IRDLOperation):
    """Reads one element of an input tensor at the given indices.

    With `pad`, indices may fall outside the tensor and the read then yields
    the pad value (zero padding for convolution, -inf for max pooling).

    ```mlir
    %v = te.read %x[%n, %c, %h, %w] pad 0.000000e+00 : f32 : tensor<1x3x32x32xf32>
    ```
    """

    name = "te.read"
    tensor = operand_def(TensorType)
    indices = var_operand_def(IndexType)
    pad = opt_prop_def(FloatAttr)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, tensor: SSAValue, indices: Sequence[SSAValue], pad: float | None = None):
        elt = tensor.type.element_type  # type: ignore[attr-defined]
        props = {"pad": FloatAttr(pad, elt)} if pad is not None else {}
        super().__init__(operands=[tensor, indices], properties=props, result_types=[elt])

    def verify_(self) -> None:
        rank = len(self.tensor.type.get_shape())  # type: ignore[attr-defined]
        _require(len(self.indices) == rank, self, f"needs {rank} indices, has {len(self.indices)}")
        _require(self.result.type == self.tensor.type.element_type, self, "result type must be the element type")  # type: ignore[attr-defined]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        print_access(printer, self.tensor, self.indices)
        if self.pad is not None:
            printer.print_string(" pad ")
            printer.print_attribute(self.pad)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.tensor.type)

    @classmethod
    def parse(cls, parser: Parser) -> ReadOp:
        tensor, indices = parse_access(parser)
        pad = parser.parse_attribute().value.data if parser.parse_optional_keyword("pad") else None  # type: ignore[attr-defined]
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        tensor_type = parser.parse_type()
        op = cls(
            parser.resolve_operand(tensor, tensor_type),
            resolve_indices(parser, indices),
            pad,
        )
        op.attributes |= attrs
        return op


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a te.compute or te.reduce body with the element value.

    ```mlir
    te.yield %r : f32
    ```
    """

    name = "te.yield"
    value = operand_def()
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(ComputeOp, ReduceOp)))
    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue):
        super().__init__(operands=[value])


def float_attr(value: float, elt: Attribute) -> FloatAttr:
    return FloatAttr(value, elt)  # type: ignore[arg-type]


def index_const(value: int) -> IntegerAttr:
    return IntegerAttr(value, IndexType())


@irdl_op_definition
class SymOp(IRDLOperation):
    """The value of a symbolic extent (dialects/sym.py) as an `index`, for index formulas that
    need it (a reshape's row length, a reversed axis).

    ```mlir
    %n = te.sym "2*sequence" : index
    ```
    """

    name = "te.sym"
    expr = prop_def(StringAttr)
    result = result_def(IndexType)
    traits = traits_def(Pure())
    assembly_format = "$expr attr-dict `:` type($result)"

    def __init__(self, expr: Dim):
        super().__init__(properties={"expr": StringAttr(str(expr))}, result_types=[IndexType()])

    @property
    def value(self) -> Dim:
        return Sym.parse(self.expr.data)

    def verify_(self) -> None:
        Sym.parse(self.expr.data)


TE = Dialect("te", [ComputeOp, ReduceOp, ReadOp, YieldOp, SymOp], [])
