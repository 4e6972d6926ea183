"""Built-in x86 tensor intrinsics (registered on first use of the registry).

- `x86_vnni_u8s8_16x4`: 16 int32 lanes, each += the dot product of 4 unsigned
  bytes of `a` (shared by all lanes) with 4 signed bytes of `b`; `b` holds
  the 4 bytes of lane j at 4*j..4*j+3 (the `[k/4][N][4]` packed layout).
  One `vpdpbusd` (AVX512-VNNI).
- `x86_bf16_16x2`: the same with bf16 pairs into 16 f32 lanes, one
  `vdpbf16ps` (AVX512-BF16); `b` is packed `[k/2][N][2]`.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects.builtin import BFloat16Type, Float32Type, IntegerType, VectorType

from ziggurat.dialects import hw, x86vec
from ziggurat.lowering.tensor_intrin import Access, TensorIntrin, register_intrin

I8 = IntegerType(8)
I32 = IntegerType(32)
BF16 = BFloat16Type()
F32 = Float32Type()

VNNI_DESC = """
func.func @vnni_u8s8_16x4(%a: memref<4xi8>, %b: memref<64xi8>, %c: memref<16xi32>) {
  loop.for %j = 0 to 16 serial {
    loop.for %k = 0 to 4 serial {
      loop.block "vnni" [S %vj = %j, R %vk = %k] {
        %c4 = arith.constant 4 : index
        %j4 = arith.muli %vj, %c4 : index
        %bk = arith.addi %j4, %vk : index
        %x = loop.load %a[%vk] : memref<4xi8>
        %w = loop.load %b[%bk] : memref<64xi8>
        %xe = arith.extui %x : i8 to i32
        %we = arith.extsi %w : i8 to i32
        %p = arith.muli %xe, %we : i32
        %acc = loop.load %c[%vj] : memref<16xi32>
        %s = arith.addi %acc, %p : i32
        loop.store %s, %c[%vj] : memref<16xi32>
      }
    }
  }
  func.return
}
"""

BF16_DESC = """
func.func @bf16_16x2(%a: memref<2xbf16>, %b: memref<32xbf16>, %c: memref<16xf32>) {
  loop.for %j = 0 to 16 serial {
    loop.for %k = 0 to 2 serial {
      loop.block "dpbf16" [S %vj = %j, R %vk = %k] {
        %c2 = arith.constant 2 : index
        %j2 = arith.muli %vj, %c2 : index
        %bk = arith.addi %j2, %vk : index
        %x = loop.load %a[%vk] : memref<2xbf16>
        %w = loop.load %b[%bk] : memref<32xbf16>
        %xe = arith.extf %x : bf16 to f32
        %we = arith.extf %w : bf16 to f32
        %p = arith.mulf %xe, %we : f32
        %acc = loop.load %c[%vj] : memref<16xf32>
        %s = arith.addf %acc, %p : f32
        loop.store %s, %c[%vj] : memref<16xf32>
      }
    }
  }
  func.return
}
"""


def _dot_emitter(group_t: VectorType, wide_t: VectorType, acc_t: VectorType, op_cls):
    """Broadcast a's group, load b and c, one dot-product instruction, store c."""

    def emit(b: Builder, acc: dict[str, Access]) -> None:
        (abuf, aidx), (bbuf, bidx), (cbuf, cidx) = acc["a"], acc["b"], acc["c"]
        group = b.insert(hw.VLoadOp(abuf, aidx, group_t)).result
        shared = b.insert(x86vec.BcastGroupOp(group, wide_t)).result
        rhs = b.insert(hw.VLoadOp(bbuf, bidx, wide_t)).result
        c0 = b.insert(hw.VLoadOp(cbuf, cidx, acc_t)).result
        c1 = b.insert(op_cls(c0, shared, rhs)).result
        b.insert(hw.VStoreOp(c1, cbuf, cidx))

    return emit


register_intrin(TensorIntrin(
    name="x86_vnni_u8s8_16x4",
    description=VNNI_DESC,
    implement=_dot_emitter(VectorType(I8, [4]), VectorType(I8, [64]), VectorType(I32, [16]), x86vec.DpbusdOp),
    features=("avx512vnni",),
    doc="16 i32 lanes += 4 u8 (broadcast) x 4 s8 per lane: one vpdpbusd",
))

register_intrin(TensorIntrin(
    name="x86_bf16_16x2",
    description=BF16_DESC,
    implement=_dot_emitter(VectorType(BF16, [2]), VectorType(BF16, [32]), VectorType(F32, [16]), x86vec.Dpbf16psOp),
    features=("avx512bf16",),
    doc="16 f32 lanes += 2 bf16 (broadcast) x 2 bf16 per lane: one vdpbf16ps",
))
