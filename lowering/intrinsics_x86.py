"""Built-in x86 tensor intrinsics (`X86_INTRINSICS`, registered by lowering/intrinsics.py on first use).

- `x86_vnni_u8s8_16x4`: 16 int32 lanes, each += the dot product of 4 unsigned
  bytes of `a` (shared by all lanes) with 4 signed bytes of `b`; `b` holds
  the 4 bytes of lane j at 4*j..4*j+3 (the `[k/4][N][4]` packed layout).
  One `vpdpbusd` (AVX512-VNNI).
- `x86_avx2_u8s8_8x4`: the same at 8 lanes with AVX2's `vpmaddubsw` +
  `vpmaddwd` (`x86vec.maddubs_dot`): exact where no pair of products
  saturates int16 (lowering/qgemm.py `no_pair_saturates` decides where it is used).
- `x86_avx2_s8u8_8x4`: the same instruction with the operands' roles swapped: 4 signed
  bytes of `a` (shared) times 4 unsigned bytes of `b` per lane (`vpmaddubsw`'s unsigned
  operand is the packed weight plus 128). Activations near their zero point 128 then
  keep the pairs small where the unsigned-activation form saturates (lowering/qgemm.py
  `SWAP16_BLOCK`).
- `x86_avx2_s16_8x2`: 8 i32 lanes, each += 2 int16 of `a` (shared) times
  that lane's 2 int16 of `b` (`[k/2][N][2]`), one `vpmaddwd` + `vpaddd`
  (`x86vec.maddwd_dot`): exact for widened 8-bit operands, AVX2's int8 GEMM
  for weights that would saturate `vpmaddubsw`.
- `x86_bf16_16x2`: the same with bf16 pairs into 16 f32 lanes, one
  `vdpbf16ps` (AVX512-BF16); `b` is packed `[k/2][N][2]`.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects.builtin import BFloat16Type, Float32Type, IntegerType, VectorType

from ziggurat.dialects import hw, x86vec
from ziggurat.lowering.tensor_intrin import Access, TensorIntrin

I8 = IntegerType(8)
I16 = IntegerType(16)
I32 = IntegerType(32)
BF16 = BFloat16Type()
F32 = Float32Type()

def dot_description(name: str, group: int, lanes: int, in_t: str, acc_t: str, ext_a: str, ext_b: str,
                    mul: str, add: str) -> str:
    """A loop-level description: `lanes` accumulators each += `group` products of a
    shared group of `a` with that lane's group of `b` (b packed lane-major)."""
    wide = group * lanes
    return f"""
func.func @{name}(%a: memref<{group}x{in_t}>, %b: memref<{wide}x{in_t}>, %c: memref<{lanes}x{acc_t}>) {{
  loop.for %j = 0 to {lanes} serial {{
    loop.for %k = 0 to {group} serial {{
      loop.block "{name}" [S %vj = %j, R %vk = %k] {{
        %g = arith.constant {group} : index
        %jg = arith.muli %vj, %g : index
        %bk = arith.addi %jg, %vk : index
        %x = loop.load %a[%vk] : memref<{group}x{in_t}>
        %w = loop.load %b[%bk] : memref<{wide}x{in_t}>
        %xe = {ext_a} %x : {in_t} to {acc_t}
        %we = {ext_b} %w : {in_t} to {acc_t}
        %p = {mul} %xe, %we : {acc_t}
        %acc = loop.load %c[%vj] : memref<{lanes}x{acc_t}>
        %s = {add} %acc, %p : {acc_t}
        loop.store %s, %c[%vj] : memref<{lanes}x{acc_t}>
      }}
    }}
  }}
  func.return
}}
"""


VNNI_DESC = dot_description("vnni_u8s8_16x4", 4, 16, "i8", "i32", "arith.extui", "arith.extsi", "arith.muli", "arith.addi")
AVX2_DESC = dot_description("avx2_u8s8_8x4", 4, 8, "i8", "i32", "arith.extui", "arith.extsi", "arith.muli", "arith.addi")
AVX2_SWAP_DESC = dot_description("avx2_s8u8_8x4", 4, 8, "i8", "i32", "arith.extsi", "arith.extui", "arith.muli", "arith.addi")
AVX2_S16_DESC = dot_description("avx2_s16_8x2", 2, 8, "i16", "i32", "arith.extsi", "arith.extsi", "arith.muli", "arith.addi")
BF16_DESC = dot_description("bf16_16x2", 2, 16, "bf16", "f32", "arith.extf", "arith.extf", "arith.mulf", "arith.addf")


def _dot_emitter(group_t: VectorType, wide_t: VectorType, acc_t: VectorType, op_cls, swap: bool = False):
    """Broadcast a's group, load b and c, one dot-product instruction (`swap`: b is the
    instruction's first operand), store c."""

    def emit(b: Builder, acc: dict[str, Access]) -> None:
        (abuf, aidx), (bbuf, bidx), (cbuf, cidx) = acc["a"], acc["b"], acc["c"]
        group = b.insert(hw.VLoadOp(abuf, aidx, group_t)).result
        shared = b.insert(x86vec.BcastGroupOp(group, wide_t)).result
        rhs = b.insert(hw.VLoadOp(bbuf, bidx, wide_t)).result
        c0 = b.insert(hw.VLoadOp(cbuf, cidx, acc_t)).result
        c1 = b.insert(op_cls(c0, rhs, shared) if swap else op_cls(c0, shared, rhs)).result
        b.insert(hw.VStoreOp(c1, cbuf, cidx))

    return emit


X86_INTRINSICS = (TensorIntrin(
    name="x86_vnni_u8s8_16x4",
    description=VNNI_DESC,
    implement=_dot_emitter(VectorType(I8, [4]), VectorType(I8, [64]), VectorType(I32, [16]), x86vec.DpbusdOp),
    features=("avx512vnni",),
    doc="16 i32 lanes += 4 u8 (broadcast) x 4 s8 per lane: one vpdpbusd",
), TensorIntrin(
    name="x86_avx2_u8s8_8x4",
    description=AVX2_DESC,
    implement=_dot_emitter(VectorType(I8, [4]), VectorType(I8, [32]), VectorType(I32, [8]), x86vec.MaddubsDotOp),
    features=("avx2",),
    doc="8 i32 lanes += 4 u8 (broadcast) x 4 s8 per lane: vpmaddubsw, vpmaddwd with ones, vpaddd "
        "(pairs of products saturate int16: used where the weights keep them in range)",
), TensorIntrin(
    name="x86_avx2_s8u8_8x4",
    description=AVX2_SWAP_DESC,
    implement=_dot_emitter(VectorType(I8, [4]), VectorType(I8, [32]), VectorType(I32, [8]), x86vec.MaddubsDotOp,
                           swap=True),
    features=("avx2",),
    doc="8 i32 lanes += 4 s8 (broadcast) x 4 u8 per lane: vpmaddubsw with the lanes' bytes unsigned, "
        "vpmaddwd with ones, vpaddd (pairs saturate int16)",
), TensorIntrin(
    name="x86_avx2_s16_8x2",
    description=AVX2_S16_DESC,
    implement=_dot_emitter(VectorType(I16, [2]), VectorType(I16, [16]), VectorType(I32, [8]), x86vec.MaddwdDotOp),
    features=("avx2",),
    doc="8 i32 lanes += 2 i16 (broadcast) x 2 i16 per lane: vpmaddwd, vpaddd (exact)",
), TensorIntrin(
    name="x86_bf16_16x2",
    description=BF16_DESC,
    implement=_dot_emitter(VectorType(BF16, [2]), VectorType(BF16, [32]), VectorType(F32, [16]), x86vec.Dpbf16psOp),
    features=("avx512bf16",),
    doc="16 f32 lanes += 2 bf16 (broadcast) x 2 bf16 per lane: one vdpbf16ps",
))
