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
| BFLOAT16  | bf16                  | bfloat16 (onnx's ml_dtypes type) |
| INT4, INT2 / UINT4, UINT2 | i4, i2 / ui4, ui2 | int4, int2 / uint4, uint2 (ml_dtypes) |
| FLOAT8E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ | f8E4M3FN, ... | float8_* (ml_dtypes) |
| FLOAT4E2M1 | f4E2M1FN              | float4_e2m1fn (ml_dtypes) |
| FLOAT8E8M0 | f8E8M0FNU             | float8_e8m0fnu (ml_dtypes) |

Signedness lives in the *tensor* types of the graph level only. Below it (te
bodies, loop buffers, LLVM) every integer is signless: the compute definitions
in `lowering/topi.py` pick the signed or unsigned instruction (divsi/divui,
cmpi slt/ult, extsi/extui, sitofp/uitofp) from the graph op's operand types,
and `scalar_type`/`signless_tensor` drop the signedness for the levels below.
A bool is `i1` in registers and one byte (0 or 1, numpy's layout) in memory.
A bfloat16 is a storage type: its bits are an `i16` below the graph level, and
`graph.cast` converts it to and from float32 (round to nearest even); Cast,
Where and data movement take it as is, and every other op computes in float32
with its result rounded to bfloat16 (the frontend's element-type policy,
`frontends/onnx/dtype_policy.py` and `bf16_math.py`). The 4- and
2-bit integers are storage types too: one byte per element holding the value
in its low bits (ml_dtypes' layout, an `i8` below the graph level); only data
movement, Where and Cast handle them. So do the float8 formats, float4
e2m1 and float8 e8m0 (one byte each, float4 in the low 4 bits;
`lowering/te_fp8.py` converts them).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float4E2M1FNType,
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float8E5M2FNUZType,
    Float8E5M2Type,
    Float8E8M0FNUType,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    MemRefType,
    Signedness,
    TensorType,
    bf16,
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
    16: bf16,
}

_NUMPY = {
    np.dtype(np.float32): f32, np.dtype(np.float64): f64, np.dtype(np.float16): f16,
    np.dtype(np.int8): IntegerType(8), np.dtype(np.int16): IntegerType(16),
    np.dtype(np.int32): IntegerType(32), np.dtype(np.int64): IntegerType(64),
    np.dtype(np.uint8): IntegerType(8, Signedness.UNSIGNED), np.dtype(np.uint16): IntegerType(16, Signedness.UNSIGNED),
    np.dtype(np.uint32): IntegerType(32, Signedness.UNSIGNED), np.dtype(np.uint64): IntegerType(64, Signedness.UNSIGNED),
    np.dtype(np.bool_): i1,
}
SUB_BYTE = {21: IntegerType(4, Signedness.UNSIGNED), 22: IntegerType(4), 25: IntegerType(2, Signedness.UNSIGNED),
            26: IntegerType(2)}
"""ONNX UINT4, INT4, UINT2, INT2: one byte per element in memory."""
FLOAT8 = {17: Float8E4M3FNType(), 18: Float8E4M3FNUZType(), 19: Float8E5M2Type(), 20: Float8E5M2FNUZType()}
"""ONNX FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ: one byte per element."""
FLOAT4 = {23: Float4E2M1FNType()}
"""ONNX FLOAT4E2M1: one element per byte, its 4 bits in the low half (ml_dtypes' layout)."""
E8M0 = {24: Float8E8M0FNUType()}
"""ONNX FLOAT8E8M0: a power of two 2^(e - 127) per byte (0xFF is NaN), for scales."""
_ONNX.update(SUB_BYTE)
_ONNX.update(FLOAT8)
_ONNX.update(FLOAT4)
_ONNX.update(E8M0)
try:  # bfloat16 and the sub-byte integers have no numpy dtypes of their own; onnx brings ml_dtypes' ones
    import onnx

    for _code, _elt in {16: bf16, **SUB_BYTE, **FLOAT8, **FLOAT4, **E8M0}.items():
        _NUMPY[np.dtype(onnx.helper.tensor_dtype_to_np_dtype(_code))] = _elt
except (ImportError, KeyError, TypeError, ValueError):  # pragma: no cover - older onnx
    pass
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
    """float16/32/64 and bfloat16 (a storage type: it computes as float32)."""
    return isinstance(elt, (Float16Type, Float32Type, Float64Type, BFloat16Type))


def is_int(elt: Attribute) -> bool:
    """An integer type other than bool (i1)."""
    return isinstance(elt, IntegerType) and elt.width.data > 1


def is_float8(elt: Attribute) -> bool:
    """One of ONNX's four float8 formats (storage types, one byte)."""
    return isinstance(elt, (Float8E4M3FNType, Float8E4M3FNUZType, Float8E5M2Type, Float8E5M2FNUZType))


def is_float4(elt: Attribute) -> bool:
    """ONNX's FLOAT4E2M1 (a storage type, one element per byte)."""
    return isinstance(elt, Float4E2M1FNType)


def is_e8m0(elt: Attribute) -> bool:
    """ONNX's FLOAT8E8M0 (a storage type: an exponent byte)."""
    return isinstance(elt, Float8E8M0FNUType)


def is_sub_byte(elt: Attribute) -> bool:
    """A 2- or 4-bit integer (stored one per byte)."""
    return isinstance(elt, IntegerType) and elt.width.data in (2, 4)


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
    """`elt` without signedness: what te bodies, loop buffers and LLVM compute on
    (bfloat16: its bits, an i16)."""
    if (isinstance(elt, IntegerType) and elt.width.data in (2, 4)) or is_float8(elt) or is_float4(elt) or is_e8m0(elt):
        return IntegerType(8)
    if isinstance(elt, IntegerType) and elt.signedness.data != Signedness.SIGNLESS:
        return IntegerType(elt.width.data)
    if isinstance(elt, BFloat16Type):
        return IntegerType(16)
    return elt


def signless_tensor(t: Attribute) -> Attribute:
    """A tensor or memref type with its element type made signless."""
    if isinstance(t, TensorType):
        elt = scalar_type(t.element_type)
        return t if elt == t.element_type else TensorType(elt, t.get_shape(), t.encoding)
    if isinstance(t, MemRefType):
        elt = scalar_type(t.element_type)
        return t if elt == t.element_type else MemRefType(elt, t.get_shape(), t.layout)
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


def describe(elt: Attribute) -> str:
    """A readable name: float32, int64, uint8, bool, ..."""
    try:
        return str(to_numpy(elt))
    except KeyError:
        return str(elt)
