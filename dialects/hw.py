"""The `hw` dialect: vector registers and target instructions.

The lowest of ziggurat's four levels. Its ops say *which instructions* run:
vector loads and stores at the target's vector width, broadcasts, fused
multiply-adds and horizontal reductions. Plain vector arithmetic uses `arith`
and `math` on builtin `vector<...>` types. It resembles MLIR's `vector`
dialect restricted to 1-D registers, with limits checked against the hardware
(at most 512 bits per register, the AVX-512 width).

```mlir
%a = hw.vload %x[%i, %j] : memref<4x64xf32> -> vector<16xf32>
%s = hw.vbroadcast %w : f32 -> vector<16xf32>
%r = hw.vfma %a, %s, %acc : vector<16xf32>
hw.vstore %r, %y[%i, %j] : vector<16xf32>, memref<4x64xf32>
```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import IndexType, MemRefType, StringAttr, VectorType
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

MAX_VECTOR_BITS = 512
REDUCE_KINDS = ("add", "mul", "max", "min")


def _require(cond: bool, op: IRDLOperation, message: str) -> None:
    if not cond:
        raise VerifyException(f"'{op.name}' op {message}")


def _check_register(op: IRDLOperation, vt: Attribute) -> None:
    _require(isinstance(vt, VectorType) and len(vt.get_shape()) == 1, op, f"needs a 1-D vector, got {vt}")
    assert isinstance(vt, VectorType)
    bits = vt.get_shape()[0] * vt.element_type.bitwidth  # type: ignore[attr-defined]
    _require(bits <= MAX_VECTOR_BITS, op, f"{vt} is {bits} bits; registers hold at most {MAX_VECTOR_BITS}")


class _VectorAccess(IRDLOperation):
    def _check_access(self, vt: Attribute) -> None:
        _check_register(self, vt)
        mt = self.buffer.type  # type: ignore[attr-defined]
        rank = len(mt.get_shape())
        _require(len(self.indices) == rank, self, f"needs {rank} indices, has {len(self.indices)}")  # type: ignore[attr-defined]
        _require(vt.element_type == mt.element_type, self, "vector and buffer element types differ")  # type: ignore[attr-defined]
        width = vt.get_shape()[0]  # type: ignore[attr-defined]
        _require(rank >= 1 and mt.get_shape()[-1] >= width, self, f"the buffer's last dim is shorter than the vector width {width}")


@irdl_op_definition
class VLoadOp(_VectorAccess):
    """Loads consecutive elements along the last dim into a vector register.

    ```mlir
    %v = hw.vload %x[%i, %j] : memref<4x64xf32> -> vector<16xf32>
    ```
    """

    name = "hw.vload"
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(VectorType)

    def __init__(self, buffer: SSAValue, indices: Sequence[SSAValue], vector_type: VectorType):
        super().__init__(operands=[buffer, indices], result_types=[vector_type])

    def verify_(self) -> None:
        self._check_access(self.result.type)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.buffer)
        with printer.in_square_brackets():
            printer.print_list(self.indices, printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.buffer.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> VLoadOp:
        buf = parser.parse_unresolved_operand()
        idx = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        mt = parser.parse_type()
        parser.parse_punctuation("->")
        vt = parser.parse_type()
        op = cls(parser.resolve_operand(buf, mt), [parser.resolve_operand(i, IndexType()) for i in idx], vt)  # type: ignore[arg-type]
        op.attributes |= attrs
        return op


@irdl_op_definition
class VStoreOp(_VectorAccess):
    """Stores a vector register to consecutive elements along the last dim.

    ```mlir
    hw.vstore %v, %y[%i, %j] : vector<16xf32>, memref<4x64xf32>
    ```
    """

    name = "hw.vstore"
    value = operand_def(VectorType)
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)

    def __init__(self, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue]):
        super().__init__(operands=[value, buffer, indices])

    def verify_(self) -> None:
        self._check_access(self.value.type)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(", ")
        printer.print_ssa_value(self.buffer)
        with printer.in_square_brackets():
            printer.print_list(self.indices, printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.value.type)
        printer.print_string(", ")
        printer.print_attribute(self.buffer.type)

    @classmethod
    def parse(cls, parser: Parser) -> VStoreOp:
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        buf = parser.parse_unresolved_operand()
        idx = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        vt = parser.parse_type()
        parser.parse_punctuation(",")
        mt = parser.parse_type()
        op = cls(
            parser.resolve_operand(value, vt),
            parser.resolve_operand(buf, mt),
            [parser.resolve_operand(i, IndexType()) for i in idx],
        )
        op.attributes |= attrs
        return op


@irdl_op_definition
class VBroadcastOp(IRDLOperation):
    """Splats a scalar into every lane of a vector register.

    ```mlir
    %s = hw.vbroadcast %w : f32 -> vector<16xf32>
    ```
    """

    name = "hw.vbroadcast"
    scalar = operand_def()
    result = result_def(VectorType)
    traits = traits_def(Pure())
    assembly_format = "$scalar attr-dict `:` type($scalar) `->` type($result)"

    def __init__(self, scalar: SSAValue, vector_type: VectorType):
        super().__init__(operands=[scalar], result_types=[vector_type])

    def verify_(self) -> None:
        _check_register(self, self.result.type)
        _require(self.result.type.element_type == self.scalar.type, self, "scalar and lane types differ")  # type: ignore[attr-defined]


@irdl_op_definition
class VFmaOp(IRDLOperation):
    """Fused multiply-add on vector registers: a * b + c, one rounding.

    ```mlir
    %r = hw.vfma %a, %b, %c : vector<16xf32>
    ```
    """

    name = "hw.vfma"
    T: ClassVar = VarConstraint("T", base(VectorType))
    a = operand_def(T)
    b = operand_def(T)
    c = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$a `,` $b `,` $c attr-dict `:` type($result)"

    def __init__(self, a: SSAValue, b: SSAValue, c: SSAValue):
        super().__init__(operands=[a, b, c], result_types=[a.type])

    def verify_(self) -> None:
        _check_register(self, self.result.type)


@irdl_op_definition
class VReduceOp(IRDLOperation):
    """Horizontal reduction of all lanes (add, mul, max, min) to a scalar.

    ```mlir
    %s = hw.vreduce "add" %v : vector<16xf32> -> f32
    ```
    """

    name = "hw.vreduce"
    kind = prop_def(StringAttr)
    vector = operand_def(VectorType)
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$kind $vector attr-dict `:` type($vector) `->` type($result)"

    def __init__(self, kind: str, vector: SSAValue):
        elt = vector.type.element_type  # type: ignore[attr-defined]
        super().__init__(operands=[vector], properties={"kind": StringAttr(kind)}, result_types=[elt])

    def verify_(self) -> None:
        _check_register(self, self.vector.type)
        _require(self.kind.data in REDUCE_KINDS, self, f"kind must be one of {REDUCE_KINDS}")
        _require(self.result.type == self.vector.type.element_type, self, "result must be the lane type")  # type: ignore[attr-defined]


HW_OPS = [VLoadOp, VStoreOp, VBroadcastOp, VFmaOp, VReduceOp]

HW = Dialect("hw", HW_OPS, [])
