"""Element types: ONNX, xDSL and numpy spellings of the run-time tensor types.

ziggurat's run-time tensors have one of these element types:

| ONNX      | graph-level xDSL type | numpy    |
|-----------|-----------------------|----------|
| FLOAT     | f32                   | float32  |
| DOUBLE    | f64                   | float64  |
| FLOAT16   | f16                   | float16  |
| INT8..64  | i8 .. i64 (signless, read as signed) | int8 .. int64 |
| UINT8..64 | ui8 .. ui64           | uint8 .. uint64 |
| BOOL      | i1                    | bool     |

Signedness lives in the *tensor* types of the graph level only. Below it (te
bodies, loop buffers, LLVM) every integer is signless: the compute definitions
in `lowering/topi.py` pick the signed or unsigned instruction (divsi/divui,
cmpi slt/ult, extsi/extui, sitofp/uitofp) from the graph op's operand types,
and `scalar_type`/`signless_tensor` drop the signedness for the levels below.
A bool is `i1` in registers and one byte (0 or 1, numpy's layout) in memory.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import (
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    MemRefType,
    Signedness,
    TensorType,
    f16,
    f32,
    f64,
    i1,
)
from xdsl.ir import Attribute

_ONNX = {  # onnx.TensorProto data type numbers
    1: f32, 11: f64, 10: f16,
    3: IntegerType(8), 5: IntegerType(16), 6: IntegerType(32), 7: IntegerType(64),
    2: IntegerType(8, Signedness.UNSIGNED), 4: IntegerType(16, Signedness.UNSIGNED),
    12: IntegerType(32, Signedness.UNSIGNED), 13: IntegerType(64, Signedness.UNSIGNED),
    9: i1,
}

_NUMPY = {
    np.dtype(np.float32): f32, np.dtype(np.float64): f64, np.dtype(np.float16): f16,
    np.dtype(np.int8): IntegerType(8), np.dtype(np.int16): IntegerType(16),
    np.dtype(np.int32): IntegerType(32), np.dtype(np.int64): IntegerType(64),
    np.dtype(np.uint8): IntegerType(8, Signedness.UNSIGNED), np.dtype(np.uint16): IntegerType(16, Signedness.UNSIGNED),
    np.dtype(np.uint32): IntegerType(32, Signedness.UNSIGNED), np.dtype(np.uint64): IntegerType(64, Signedness.UNSIGNED),
    np.dtype(np.bool_): i1,
}
_TO_NUMPY = {v: k for k, v in _NUMPY.items()}


def from_onnx(elem_type: int) -> Attribute | None:
    """The graph-level element type of an ONNX TensorProto data type, or None when unsupported."""
    return _ONNX.get(elem_type)


def from_numpy(dtype: np.dtype) -> Attribute | None:
    """The graph-level element type of a numpy dtype, or None when unsupported."""
    return _NUMPY.get(np.dtype(dtype))


def to_numpy(elt: Attribute) -> np.dtype:
    """The numpy dtype of a graph-level (or signless) element type."""
    dtype = _TO_NUMPY.get(elt)
    if dtype is None:
        raise KeyError(f"no numpy dtype for element type {elt}")
    return dtype


def is_float(elt: Attribute) -> bool:
    return isinstance(elt, (Float16Type, Float32Type, Float64Type))


def is_int(elt: Attribute) -> bool:
    """An integer type other than bool (i1)."""
    return isinstance(elt, IntegerType) and elt.width.data > 1


def is_bool(elt: Attribute) -> bool:
    return elt == i1


def is_unsigned(elt: Attribute) -> bool:
    return isinstance(elt, IntegerType) and elt.signedness.data == Signedness.UNSIGNED


def kind(elt: Attribute) -> str:
    """'float', 'int' (signed), 'uint' or 'bool'."""
    if is_float(elt):
        return "float"
    if is_bool(elt):
        return "bool"
    if is_unsigned(elt):
        return "uint"
    if is_int(elt):
        return "int"
    raise KeyError(f"unsupported element type {elt}")


def scalar_type(elt: Attribute) -> Attribute:
    """`elt` without signedness: what te bodies, loop buffers and LLVM compute on."""
    if isinstance(elt, IntegerType) and elt.signedness.data != Signedness.SIGNLESS:
        return IntegerType(elt.width.data)
    return elt


def signless_tensor(t: Attribute) -> Attribute:
    """A tensor or memref type with its element type made signless."""
    if isinstance(t, TensorType):
        elt = scalar_type(t.element_type)
        return t if elt == t.element_type else TensorType(elt, t.get_shape())
    if isinstance(t, MemRefType):
        elt = scalar_type(t.element_type)
        return t if elt == t.element_type else MemRefType(elt, t.get_shape())
    return t


def element_of(value_type: Attribute) -> Attribute:
    """The element type of a tensor or memref type."""
    return value_type.element_type  # type: ignore[attr-defined]


def int_range(elt: Attribute) -> tuple[int, int]:
    """The smallest and largest value of an integer element type (bool: 0, 1)."""
    width = elt.width.data  # type: ignore[attr-defined]
    if width == 1:
        return 0, 1
    if is_unsigned(elt):
        return 0, (1 << width) - 1
    return -(1 << (width - 1)), (1 << (width - 1)) - 1


NAMES = {f32: "float32", f64: "float64", f16: "float16"}


def describe(elt: Attribute) -> str:
    """A readable name: float32, int64, uint8, bool, ..."""
    try:
        return str(to_numpy(elt))
    except KeyError:
        return str(elt)
