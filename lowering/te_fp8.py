"""float8/float4 <-> float32 conversions as te scalar code (bit arithmetic on i32).

ONNX's four float8 formats and FLOAT4E2M1 are storage types (one byte, an
`i8` below the graph level; float4 in the low 4 bits); `graph.cast` converts
them with these two routines:

| format      | exponent, mantissa bits | bias | specials                         | largest |
|-------------|-------------------------|------|----------------------------------|---------|
| E4M3FN      | 4, 3                    | 7    | NaN = S.1111.111, no inf         | 448     |
| E4M3FNUZ    | 4, 3                    | 8    | NaN = 0x80, no inf, no -0        | 240     |
| E5M2        | 5, 2                    | 15   | IEEE inf and NaN                 | 57344   |
| E5M2FNUZ    | 5, 2                    | 16   | NaN = 0x80, no inf, no -0        | 57344   |
| float4 E2M1 | 2, 1 (4 bits)           | 1    | no NaN, no inf                   | 6       |

Encoding rounds to nearest even. With saturate=1 (ONNX Cast's default) values
beyond the largest finite one, infinities included, become that value with
their sign; with saturate=0 they become NaN (E5M2: inf). NaN becomes the
format's NaN. float4 has neither: out of range always saturates, and NaN
becomes a zero of the opposite sign (ml_dtypes' conversion, which onnx's
reference uses). A normal float32
rounds on its bits (add the half-ulp minus one plus the kept lsb, shift, and
rebias the exponent, a carry moving into the exponent as it should); a value
below the format's normal range is scaled by a power of two (exact) and
rounded half-even to the subnormal mantissa. Decoding assembles the float32
bits of a normal value, scales a subnormal mantissa, and maps the specials.
Both agree bit for bit with onnx.numpy_helper.saturate_cast and ml_dtypes
over every byte, every tie between neighbours and random values
(tests/unit/test_onnx_dtypes.py).

FLOAT8E8M0 is an unsigned exponent byte: 2^(e - 127), 0xFF is NaN. Encoding
keeps float32's exponent field (the sign is dropped) and rounds it as
`onnx.numpy_helper.to_float8e8m0` does: "up" adds one for any nonzero
mantissa, "down" truncates, "nearest" adds one when the guard bit is set and
the round or sticky bit or the exponent is nonzero; with saturate the largest
exponent (0xFE) does not round up into NaN; inf and NaN become 0xFF.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float8E5M2FNUZType,
    Float8E5M2Type,
    Float4E2M1FNType,
    Float8E8M0FNUType,
    IntegerType,
    f32,
    i32,
)
from xdsl.ir import Attribute, SSAValue

I8 = IntegerType(8)


@dataclass(frozen=True)
class Fp8Format:
    exponent: int
    mantissa: int
    bias: int
    kind: str  # "fn" (NaN = S.all-ones), "ieee" (inf and NaN), "fnuz" (NaN = 0x80), "finite" (neither)
    max_code: int  # the largest finite value's bits, without the sign
    bits: int = 8  # the width; the sign is the top bit

    @property
    def sign(self) -> int:
        return 1 << (self.bits - 1)


FORMATS: dict[type, Fp8Format] = {
    Float8E4M3FNType: Fp8Format(4, 3, 7, "fn", 0x7E),
    Float8E4M3FNUZType: Fp8Format(4, 3, 8, "fnuz", 0x7F),
    Float8E5M2Type: Fp8Format(5, 2, 15, "ieee", 0x7B),
    Float8E5M2FNUZType: Fp8Format(5, 2, 16, "fnuz", 0x7F),
    Float4E2M1FNType: Fp8Format(2, 1, 1, "finite", 0x7, bits=4),
    Float8E8M0FNUType: Fp8Format(8, 0, 127, "e8m0", 0xFE),
}


def fp8_format(elt: Attribute) -> Fp8Format | None:
    return FORMATS.get(type(elt))


def encode(e, x: SSAValue, fmt: Fp8Format, saturate: bool = True, round_mode: str = "up") -> SSAValue:
    """float32 `x` -> the float8 bits (an i8), round to nearest even. Out of
    range (infinities included): the largest finite value with `saturate`,
    else NaN (inf for E5M2), as ml_dtypes' plain conversion. E8M0 rounds by
    `round_mode` instead (`encode_e8m0`)."""
    if fmt.kind == "e8m0":
        return encode_e8m0(e, x, saturate, round_mode)
    c = lambda v: e.const(v, i32)  # noqa: E731
    add = lambda a, b: e._add(arith.AddiOp(a, b))  # noqa: E731
    bits = e._add(arith.BitcastOp(x, i32))
    sign = e._add(arith.CmpiOp(bits, c(0), "slt"))
    a = e._add(arith.AndIOp(bits, c(0x7FFFFFFF)))
    shift = 23 - fmt.mantissa
    kept_lsb = e._add(arith.AndIOp(e._add(arith.ShRUIOp(a, c(shift))), c(1)))
    rounded = add(add(a, c((1 << (shift - 1)) - 1)), kept_lsb)
    normal = e._add(arith.SubiOp(e._add(arith.ShRUIOp(rounded, c(shift))), c((127 - fmt.bias) << fmt.mantissa)))
    is_normal = e._add(arith.CmpiOp(a, c((128 - fmt.bias) << 23), "sge"))  # target exponent >= 1
    scaled = e.mul(e._add(math.AbsFOp(x)), e.const(2.0 ** (fmt.bias + fmt.mantissa - 1), f32))
    scaled = e.min(scaled, e.const(float(1 << fmt.mantissa), f32))  # only used below the normal range
    sub = e._add(arith.FPToSIOp(e.roundeven(scaled), i32))
    code = e.select(is_normal, normal, sub)
    too_big = e._add(arith.CmpiOp(a, c(0x7F800000), "sge"))  # inf (and NaN, handled last)
    too_big = e._add(arith.OrIOp(too_big, e._add(arith.CmpiOp(code, c(fmt.max_code), "sgt"))))
    overflow = fmt.max_code if saturate or fmt.kind == "finite" else {"fn": 0x7F, "fnuz": 0x80, "ieee": 0x7C}[fmt.kind]
    code = e.select(too_big, c(overflow), code)
    signed = e._add(arith.OrIOp(code, c(fmt.sign)))
    if fmt.kind == "fnuz":  # no negative zero, and 0x80 (NaN) has no sign
        sign = e._add(arith.AndIOp(sign, e._add(arith.CmpiOp(code, c(0), "ne"))))
        sign = e._add(arith.AndIOp(sign, e._add(arith.CmpiOp(code, c(0x80), "ne"))))
    code = e.select(sign, signed, code)
    nan = e._add(arith.CmpiOp(a, c(0x7F800000), "sgt"))
    if fmt.kind == "finite":  # no NaN: a zero of the opposite sign, as ml_dtypes
        nan_code = e.select(e._add(arith.CmpiOp(bits, c(0), "slt")), c(0), c(fmt.sign))
    else:
        nan_code = c({"fn": 0x7F, "ieee": 0x7E, "fnuz": 0x80}[fmt.kind])
    code = e.select(nan, nan_code, code)
    return e._add(arith.TruncIOp(code, I8))


def decode(e, byte: SSAValue, fmt: Fp8Format) -> SSAValue:
    """float8 (float4) bits, an i8 -> the float32 value."""
    if fmt.kind == "e8m0":
        return decode_e8m0(e, byte)
    c = lambda v: e.const(v, i32)  # noqa: E731
    b = e._add(arith.ExtUIOp(byte, i32))
    if fmt.bits < 8:
        b = e._add(arith.AndIOp(b, c((1 << fmt.bits) - 1)))
    exp = e._add(arith.AndIOp(e._add(arith.ShRUIOp(b, c(fmt.mantissa))), c((1 << fmt.exponent) - 1)))
    man = e._add(arith.AndIOp(b, c((1 << fmt.mantissa) - 1)))
    f_exp = e._add(arith.ShLIOp(e._add(arith.AddiOp(exp, c(127 - fmt.bias))), c(23)))
    f_bits = e._add(arith.OrIOp(f_exp, e._add(arith.ShLIOp(man, c(23 - fmt.mantissa)))))
    normal = e._add(arith.BitcastOp(f_bits, f32))
    sub = e.mul(e._add(arith.SIToFPOp(man, f32)), e.const(2.0 ** (1 - fmt.bias - fmt.mantissa), f32))
    v = e.select(e._add(arith.CmpiOp(exp, c(0), "eq")), sub, normal)
    negative = e._add(arith.CmpiOp(e._add(arith.AndIOp(b, c(fmt.sign))), c(0), "ne"))
    v = e.select(negative, e._add(arith.NegfOp(v)), v)
    if fmt.kind == "finite":
        return v
    nan = e.const(float("nan"), f32)
    if fmt.kind == "fn":
        return e.select(e._add(arith.CmpiOp(e._add(arith.AndIOp(b, c(0x7F))), c(0x7F), "eq")), nan, v)
    if fmt.kind == "fnuz":
        return e.select(e._add(arith.CmpiOp(b, c(0x80), "eq")), nan, v)
    top = e._add(arith.CmpiOp(exp, c((1 << fmt.exponent) - 1), "eq"))
    inf = e.select(negative, e.const(float("-inf"), f32), e.const(float("inf"), f32))
    special = e.select(e._add(arith.CmpiOp(man, c(0), "eq")), inf, nan)
    return e.select(top, special, v)


def encode_e8m0(e, x: SSAValue, saturate: bool, round_mode: str) -> SSAValue:
    """float32 `x` -> the FLOAT8E8M0 byte (onnx.numpy_helper.to_float8e8m0)."""
    c = lambda v: e.const(v, i32)  # noqa: E731
    nonzero = lambda v, mask: e._add(arith.CmpiOp(e._add(arith.AndIOp(v, c(mask))), c(0), "ne"))  # noqa: E731
    bits = e._add(arith.BitcastOp(x, i32))
    exp = e._add(arith.AndIOp(e._add(arith.ShRUIOp(bits, c(23))), c(0xFF)))
    if round_mode == "up":
        up = nonzero(bits, 0x7FFFFF)
    elif round_mode == "nearest":
        rest = e._add(arith.OrIOp(nonzero(bits, 0x1FFFFF), e._add(arith.CmpiOp(exp, c(0), "ne"))))
        up = e._add(arith.AndIOp(nonzero(bits, 0x400000), rest))
    else:
        up = None
    code = exp
    if up is not None:
        if saturate:
            up = e._add(arith.AndIOp(up, e._add(arith.CmpiOp(exp, c(0xFE), "ne"))))
        code = e._add(arith.AddiOp(exp, e._add(arith.ExtUIOp(up, i32))))
    code = e.select(e._add(arith.CmpiOp(exp, c(0xFF), "eq")), c(0xFF), code)
    return e._add(arith.TruncIOp(code, I8))


def decode_e8m0(e, byte: SSAValue) -> SSAValue:
    """FLOAT8E8M0 byte -> 2^(e - 127) as float32 (0: the subnormal 2^-127; 0xFF: NaN)."""
    c = lambda v: e.const(v, i32)  # noqa: E731
    b = e._add(arith.ExtUIOp(byte, i32))
    bits = e.select(e._add(arith.CmpiOp(b, c(0), "eq")), c(0x00400000), e._add(arith.ShLIOp(b, c(23))))
    v = e._add(arith.BitcastOp(bits, f32))
    return e.select(e._add(arith.CmpiOp(b, c(0xFF), "eq")), e.const(float("nan"), f32), v)
