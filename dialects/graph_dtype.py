"""Element-type ops of the `graph` dialect: casts and bitcasts, integer and bitwise arithmetic,
and Gather with run-time indices.

These ops belong to the `graph` dialect (`dialects/graph.py` imports them and
lists them in `GRAPH_OPS`); they live in their own module to keep graph.py
readable. Element types follow `ziggurat/dtypes.py`: `f16/f32/f64`, signed
`i8..i64`, unsigned `ui8..ui64` and `i1` (bool).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IntegerAttr, IntegerType, StringAttr, TensorType, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from ziggurat.dialects.graph_base import BinaryOp, OpPattern, PatternKind, UnaryOp, require, shape_of
from ziggurat.dtypes import describe, is_int


def _elt(v: SSAValue) -> Attribute:
    return v.type.element_type  # type: ignore[attr-defined]


@irdl_op_definition
class CastOp(IRDLOperation):
    """Elementwise conversion to the result's element type (ONNX Cast):
    float -> integer truncates toward zero (saturating), integer -> integer
    wraps, anything -> bool is `x != 0`, bool -> number is 0 or 1; float8
    results round to nearest even and saturate unless `saturate = 0`;
    float8 e8m0 results keep the exponent, rounded by `round_mode` ("up",
    the default, "down" or "nearest").

    ```mlir
    %y = graph.cast %x : tensor<4xf32> -> tensor<4xi64>
    %e = graph.cast %x {round_mode = "nearest"} : tensor<4xf32> -> tensor<4xf8E8M0FNU>
    ```
    """

    name = "graph.cast"
    input = operand_def(TensorType)
    saturate = opt_prop_def(IntegerAttr)
    round_mode = opt_prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.ELEMWISE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, x: SSAValue, result_type: Attribute, saturate: bool = True, round_mode: str = "up"):
        props: dict[str, Attribute] = {} if saturate else {"saturate": IntegerAttr(0, i64)}
        if round_mode != "up":
            props["round_mode"] = StringAttr(round_mode)
        super().__init__(operands=[x], properties=props, result_types=[result_type])

    @property
    def rounding(self) -> str:
        """float8 e8m0 results: "up" (default), "down" or "nearest"."""
        return "up" if self.round_mode is None else self.round_mode.data

    @property
    def saturates(self) -> bool:
        """Float8 results: out-of-range values saturate (default) or become NaN/inf (`saturate = 0`)."""
        return self.saturate is None or bool(self.saturate.value.data)

    def verify_(self) -> None:
        require(shape_of(self.input) == shape_of(self.result), self, "input and result shapes differ")
        require(self.rounding in ("up", "down", "nearest"), self,
                 f"round_mode must be 'up', 'down' or 'nearest', got '{self.rounding}'")


def bit_width(elt: Attribute) -> int | None:
    """The width in bits of an element type as ONNX counts it (bool: 8, one
    byte; int4/uint4: 4; float8: 8), or None when it has none."""
    if isinstance(elt, IntegerType):
        return 8 if elt.width.data == 1 else elt.width.data
    return getattr(elt, "bitwidth", None)


@irdl_op_definition
class BitcastOp(IRDLOperation):
    """Elementwise reinterpretation of each element's bits as the result's
    element type of the same width (ONNX BitCast): float32 <-> int32, float16
    <-> bfloat16 <-> int16, float8 <-> (u)int8, int4 <-> uint4, ... A bool is
    one byte: to bool reads `byte != 0`, from bool gives 0 or 1.

    ```mlir
    %y = graph.bitcast %x : tensor<4xf32> -> tensor<4xi32>
    ```
    """

    name = "graph.bitcast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.ELEMWISE))
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, x: SSAValue, result_type: Attribute):
        super().__init__(operands=[x], result_types=[result_type])

    def verify_(self) -> None:
        require(shape_of(self.input) == shape_of(self.result), self, "input and result shapes differ")
        src, dst = _elt(self.input), _elt(self.result)
        width = bit_width(src)
        require(width is not None and width == bit_width(dst), self,
                 f"element types {describe(src)} and {describe(dst)} differ in bit width")


def _int_operands(op: BinaryOp | UnaryOp, what: str, allow_bool: bool) -> None:
    elt = _elt(op.results[0])
    ok = is_int(elt) or (allow_bool and elt == IntegerType(1))
    require(ok, op, f"{what} needs integer{' or bool' if allow_bool else ''} operands, got {describe(elt)}")


@irdl_op_definition
class ModOp(BinaryOp):
    """lhs mod rhs with broadcasting (ONNX Mod). `fmod = 0`: the result takes
    the divisor's sign (Python `%`, numpy `mod`); `fmod = 1`: the dividend's
    (C fmod). An integer zero divisor gives 0.

    ```mlir
    %z = graph.mod %x, %y {fmod = 0 : i64} : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
    ```
    """

    name = "graph.mod"
    fmod = prop_def(IntegerAttr)
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, lhs: SSAValue, rhs: SSAValue, fmod: int, result_type: Attribute):
        IRDLOperation.__init__(self, operands=[lhs, rhs], properties={"fmod": IntegerAttr(fmod, i64)},
                               result_types=[result_type])

    def verify_(self) -> None:
        super().verify_()
        require(self.fmod.value.data in (0, 1), self, "fmod must be 0 or 1")


@irdl_op_definition
class BitShiftOp(BinaryOp):
    """lhs shifted by rhs bits with broadcasting (ONNX BitShift); `direction`
    is "left" or "right", a right shift of a signed type is arithmetic.
    Shifting by the bit width or more (or by a negative amount) leaves the
    sign fill: -1 for a signed right shift of a negative value, else 0.

    ```mlir
    %z = graph.bitshift %x, %n {direction = "left"} : tensor<4xui8>, tensor<4xui8> -> tensor<4xui8>
    ```
    """

    name = "graph.bitshift"
    direction = prop_def(StringAttr)
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, lhs: SSAValue, rhs: SSAValue, direction: str, result_type: Attribute):
        IRDLOperation.__init__(self, operands=[lhs, rhs], properties={"direction": StringAttr(direction)},
                               result_types=[result_type])

    def verify_(self) -> None:
        super().verify_()
        require(self.direction.data in ("left", "right"), self, "direction must be 'left' or 'right'")
        _int_operands(self, "bitshift", allow_bool=False)


class _BitwiseOp(BinaryOp):
    def verify_(self) -> None:
        super().verify_()
        _int_operands(self, self.name, allow_bool=True)


@irdl_op_definition
class BitAndOp(_BitwiseOp):
    """Bitwise and with broadcasting, on integers and bools (ONNX BitwiseAnd, And).

    ```mlir
    %z = graph.bitand %a, %b : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
    ```
    """

    name = "graph.bitand"


@irdl_op_definition
class BitOrOp(_BitwiseOp):
    """Bitwise or with broadcasting, on integers and bools (ONNX BitwiseOr, Or).

    ```mlir
    %z = graph.bitor %a, %b : tensor<4xi32>, tensor<1xi32> -> tensor<4xi32>
    ```
    """

    name = "graph.bitor"


@irdl_op_definition
class BitXorOp(_BitwiseOp):
    """Bitwise xor with broadcasting, on integers and bools (ONNX BitwiseXor, Xor).

    ```mlir
    %z = graph.bitxor %a, %b : tensor<4xui8>, tensor<4xui8> -> tensor<4xui8>
    ```
    """

    name = "graph.bitxor"


@irdl_op_definition
class BitNotOp(UnaryOp):
    """Bitwise not, on integers and bools (ONNX BitwiseNot, Not).

    ```mlir
    %y = graph.bitnot %x : tensor<4xi1>
    ```
    """

    name = "graph.bitnot"

    def verify_(self) -> None:
        _int_operands(self, "bitnot", allow_bool=True)


@irdl_op_definition
class GatherOp(IRDLOperation):
    """ONNX Gather with run-time indices: result[a.., i.., b..] =
    input[a.., indices[i..], b..] with `a..` the dims before `axis`. Indices are
    integers; a negative one counts from the end, and one still out of range
    is clamped into the dim (ONNX leaves it undefined).

    ```mlir
    %y = graph.gather %x, %idx {axis = 0 : i64} : tensor<5x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
    ```
    """

    name = "graph.gather"
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
        x, idx, r = shape_of(self.input), shape_of(self.indices), shape_of(self.result)
        a = self.axis.value.data
        require(0 <= a < len(x), self, f"axis {a} out of range for rank {len(x)}")
        require(is_int(_elt(self.indices)), self, f"indices must be integers, got {describe(_elt(self.indices))}")
        expected: Sequence[int] = (*x[:a], *idx, *x[a + 1:])
        require(r == tuple(expected), self, f"result shape {r} should be {tuple(expected)}")
        require(_elt(self.input) == _elt(self.result), self, "input and result element types differ")


DTYPE_OPS: list[type[IRDLOperation]] = [CastOp, BitcastOp, ModOp, BitShiftOp, BitAndOp, BitOrOp, BitXorOp, BitNotOp,
                                        GatherOp]
