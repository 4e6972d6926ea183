"""The base pieces of the `graph` dialect that every op module builds on.

Op-pattern kinds (TVM's numbering) as a trait, shape helpers for verifiers,
and the bases of elementwise unary and broadcasting binary ops. `graph.py`
and the op modules (`graph_nn.py`, `graph_core.py`, ...) import from here, so
no op module imports `graph.py` back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    operand_def,
    result_def,
    traits_def,
)
from xdsl.traits import OpTrait, Pure
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
        out.append(db if da == 1 else da)  # a 1 stretches to the other dim, 0 included (numpy: (0,) * (1,) is (0,))
    return tuple(reversed(out))


def shape_of(value: SSAValue) -> tuple[int, ...]:
    """The shape of a tensor value: ints, and a `Sym` for each symbolic dim (dialects/sym.py)."""
    assert isinstance(value.type, TensorType)
    from ziggurat.dialects.sym import shape_of as type_shape

    return type_shape(value.type)  # type: ignore[return-value]


def ints_of(attr: DenseArrayBase | None) -> tuple[int, ...]:
    return tuple(attr.get_values()) if attr is not None else ()  # type: ignore[arg-type]


def int_array(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def require(cond: bool, op: Operation, message: str) -> None:
    if not cond:
        raise VerifyException(f"'{op.name}' op {message}")


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
            require(self.name in ("graph.relu", "graph.neg", "graph.abs") and signed, self,
                     f"is defined on floats{' and signed integers' if self.name in ('graph.relu', 'graph.neg', 'graph.abs') else ''}, got {elt}")


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
        a, b, r = shape_of(self.lhs), shape_of(self.rhs), shape_of(self.result)
        out = broadcast_shapes(a, b)
        require(out is not None, self, f"operand shapes {a} and {b} do not broadcast")
        require(out == r, self, f"result shape {r} is not the broadcast shape {out}")
        elts = {self.lhs.type.element_type, self.rhs.type.element_type}  # type: ignore[attr-defined]
        require(len(elts) == 1, self, "operands must have the same element type")
        require(self.result.type.element_type in elts, self, "result must have the operands' element type")  # type: ignore[attr-defined]
