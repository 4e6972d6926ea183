"""The `x86vec` dialect: x86 dot-product instructions on vector registers.

Part of the hardware-intrinsic level, next to `hw` (generic vector ops) and
`amx` (tile registers). Each op is one instruction, named as in MLIR's
`x86vector` dialect, and its verifier checks the register limits of the
instruction. The backend emits the LLVM intrinsic and needs the CPU feature in
`FEATURES` (from the target's `-mattr`, else the host).

```mlir
%q = x86vec.bcast_group %a4 : vector<4xi8> -> vector<64xi8>
%c1 = x86vec.dpbusd %c0, %q, %b : vector<16xi32>, vector<64xi8>, vector<64xi8>
%d1 = x86vec.maddubs_dot %d0, %q8, %b8 : vector<8xi32>, vector<32xi8>, vector<32xi8>
%e1 = x86vec.maddwd_dot %e0, %p16, %w16 : vector<8xi32>, vector<16xi16>, vector<16xi16>
%f1 = x86vec.dpbf16ps %f0, %x, %y : vector<16xf32>, vector<32xbf16>, vector<32xbf16>
```
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import BFloat16Type, Float32Type, IntegerType, VectorType
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import IRDLOperation, VarConstraint, base, irdl_op_definition, operand_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

REGISTER_BITS = (128, 256, 512)


def _lanes(op: IRDLOperation, vt: Attribute, what: str) -> tuple[int, Attribute]:
    if not isinstance(vt, VectorType) or len(vt.get_shape()) != 1:
        raise VerifyException(f"'{op.name}' op {what} must be a 1-D vector, got {vt}")
    return vt.get_shape()[0], vt.element_type


def _is_int(t: Attribute, width: int) -> bool:
    return isinstance(t, IntegerType) and t.width.data == width


class _DotOp(IRDLOperation):
    """acc[i] += sum over `group` products of a[group*i + g] * b[group*i + g]."""

    T: ClassVar = VarConstraint("T", base(VectorType))
    acc = operand_def(T)
    lhs = operand_def(VectorType)
    rhs = operand_def(VectorType)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$acc `,` $lhs `,` $rhs attr-dict `:` type($acc) `,` type($lhs) `,` type($rhs)"

    GROUP: ClassVar[int]
    ACC_KIND: ClassVar[str]
    IN_KIND: ClassVar[str]

    def __init__(self, acc: SSAValue, lhs: SSAValue, rhs: SSAValue):
        super().__init__(operands=[acc, lhs, rhs], result_types=[acc.type])

    def _acc_ok(self, t: Attribute) -> bool:
        raise NotImplementedError

    def _in_ok(self, t: Attribute) -> bool:
        raise NotImplementedError

    def verify_(self) -> None:
        n, et = _lanes(self, self.acc.type, "the accumulator")
        if not self._acc_ok(et):
            raise VerifyException(f"'{self.name}' op accumulates in {self.ACC_KIND}, got {self.acc.type}")
        if n * 32 not in REGISTER_BITS:
            raise VerifyException(f"'{self.name}' op needs a 128-, 256- or 512-bit accumulator, got {self.acc.type}")
        for what, v in (("lhs", self.lhs), ("rhs", self.rhs)):
            m, it = _lanes(self, v.type, what)
            if m != n * self.GROUP or not self._in_ok(it):
                raise VerifyException(
                    f"'{self.name}' op {what} must be vector<{n * self.GROUP}x{self.IN_KIND}> for a "
                    f"{n}-lane accumulator, got {v.type}")
        if self.result.type != self.acc.type:
            raise VerifyException(f"'{self.name}' op result type must equal the accumulator type")


class _IntDotOp(_DotOp):
    """Integer inputs of `IN_BITS` bits into i32 lanes."""

    ACC_KIND: ClassVar[str] = "i32"
    IN_BITS: ClassVar[int]

    def _acc_ok(self, t: Attribute) -> bool:
        return _is_int(t, 32)

    def _in_ok(self, t: Attribute) -> bool:
        return _is_int(t, self.IN_BITS)


class _U8S8DotOp(_IntDotOp):
    """Four unsigned bytes of `lhs` times four signed bytes of `rhs` into each i32 lane."""

    GROUP: ClassVar[int] = 4
    IN_KIND: ClassVar[str] = "i8"
    IN_BITS: ClassVar[int] = 8


@irdl_op_definition
class DpbusdOp(_U8S8DotOp):
    """`vpdpbusd`: each i32 lane adds the dot product of 4 unsigned bytes of
    `lhs` with 4 signed bytes of `rhs` (AVX512-VNNI; AVX-VNNI for 128/256 bits).

    ```mlir
    %c1 = x86vec.dpbusd %c0, %a_u8, %b_s8 : vector<16xi32>, vector<64xi8>, vector<64xi8>
    ```
    """

    name = "x86vec.dpbusd"


@irdl_op_definition
class MaddubsDotOp(_U8S8DotOp):
    """AVX2's int8 dot product, `vpmaddubsw` then `vpmaddwd` with ones: each i32 lane adds the
    products of 4 unsigned bytes of `lhs` with 4 signed bytes of `rhs`, summed in pairs with
    int16 saturation first (exact where no pair of products leaves [-32768, 32767]: the
    weights' `no_pair_saturates` check in lowering/qgemm.py, onnxruntime's `reduce_range`).

    ```mlir
    %c1 = x86vec.maddubs_dot %c0, %a_u8, %b_s8 : vector<8xi32>, vector<32xi8>, vector<32xi8>
    ```
    """

    name = "x86vec.maddubs_dot"


@irdl_op_definition
class MaddwdDotOp(_IntDotOp):
    """`vpmaddwd` then `vpaddd`: each i32 lane adds the products of 2 signed 16-bit values of `lhs`
    with 2 of `rhs`, summed in i32: exact for any int16 inputs but (-32768)^2 pairs (never reached
    by widened 8-bit values). AVX2's exact int8 GEMM for weights that would saturate
    `maddubs_dot`: both operands widened to int16 (lowering/qgemm.py `WIDE16_BLOCK`).

    ```mlir
    %c1 = x86vec.maddwd_dot %c0, %a_i16, %b_i16 : vector<8xi32>, vector<16xi16>, vector<16xi16>
    ```
    """

    name = "x86vec.maddwd_dot"
    GROUP: ClassVar[int] = 2
    IN_KIND: ClassVar[str] = "i16"
    IN_BITS: ClassVar[int] = 16


@irdl_op_definition
class Dpbf16psOp(_DotOp):
    """`vdpbf16ps`: each f32 lane adds the dot product of 2 bf16 pairs (AVX512-BF16).

    ```mlir
    %f1 = x86vec.dpbf16ps %f0, %a, %b : vector<16xf32>, vector<32xbf16>, vector<32xbf16>
    ```
    """

    name = "x86vec.dpbf16ps"
    GROUP: ClassVar[int] = 2
    ACC_KIND: ClassVar[str] = "f32"
    IN_KIND: ClassVar[str] = "bf16"

    def _acc_ok(self, t: Attribute) -> bool:
        return isinstance(t, Float32Type)

    def _in_ok(self, t: Attribute) -> bool:
        return isinstance(t, BFloat16Type)


@irdl_op_definition
class BcastGroupOp(IRDLOperation):
    """Broadcasts a 32-bit group of elements to every 32-bit lane (`vpbroadcastd`).

    The operand of a VNNI or BF16 dot product that is shared by all lanes: 4
    consecutive bytes (or 2 bf16) of one row of A.

    ```mlir
    %q = x86vec.bcast_group %a4 : vector<4xi8> -> vector<64xi8>
    ```
    """

    name = "x86vec.bcast_group"
    source = operand_def(VectorType)
    result = result_def(VectorType)
    traits = traits_def(Pure())
    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, result_type: VectorType):
        super().__init__(operands=[source], result_types=[result_type])

    def verify_(self) -> None:
        n, et = _lanes(self, self.source.type, "the source")
        m, rt = _lanes(self, self.result.type, "the result")
        bits = getattr(et, "bitwidth", 0)
        if et != rt:
            raise VerifyException(f"'{self.name}' op source and result element types differ")
        if n * bits != 32:
            raise VerifyException(f"'{self.name}' op broadcasts a 32-bit group, got {self.source.type}")
        if m * bits not in REGISTER_BITS:
            raise VerifyException(f"'{self.name}' op result must fill a 128-, 256- or 512-bit register, got {self.result.type}")


# Op name -> the LLVM target feature it needs, by register width in bits.
FEATURES: dict[str, dict[int, str]] = {
    DpbusdOp.name: {128: "avxvnni", 256: "avxvnni", 512: "avx512vnni"},
    MaddubsDotOp.name: {128: "avx", 256: "avx2", 512: "avx512bw"},
    MaddwdDotOp.name: {128: "avx", 256: "avx2", 512: "avx512bw"},
    Dpbf16psOp.name: {128: "avx512bf16", 256: "avx512bf16", 512: "avx512bf16"},
}

X86Vec = Dialect("x86vec", [DpbusdOp, MaddubsDotOp, MaddwdDotOp, Dpbf16psOp, BcastGroupOp], [])
