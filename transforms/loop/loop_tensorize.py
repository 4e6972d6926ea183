"""loop-tensorize: the tensorize schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopTensorizePass(ModulePass):
    """Replaces the nest rooted at loop number `loop` around block `block` with tensor intrinsic `intrin`.

    **Input:** loop-level kernels; the block is found by name in every kernel
    (or only in `kernel`). The nest from that loop inward must match the
    intrinsic's description (lowering/tensor_intrin.py): same trip counts,
    the same compute ops and data flow, the same element strides per loop,
    accesses varying only along their last dimension, and the same
    spatial/reduction kinds. Otherwise ScheduleError says what differs.

    **Output:** the intrinsic's implementation (hw and x86vec/amx ops) in place
    of the nest, addressing each buffer at the element the nest started from.

    **Options:** `block`, `loop`, `intrin` (a registered name, e.g.
    `x86_vnni_u8s8_16x4`), `kernel` (default: all kernels).

    Example (`loop-tensorize{block=qmm loop=3 intrin=x86_vnni_u8s8_16x4}`):
    ```mlir
    loop.for %ji = 0 to 16 serial {
      loop.for %ki = 0 to 4 serial {
        loop.block "qmm" [S %i = %i0, S %j = %jj, R %ko = %r0, R %k = %ki] {...}
      }
    }
    ```
    becomes
    ```mlir
    %a4 = hw.vload %A[%i0, %k0] : memref<8x64xi8> -> vector<4xi8>
    %q = x86vec.bcast_group %a4 : vector<4xi8> -> vector<64xi8>
    %bv = hw.vload %B[%r0, %j0] : memref<16x128xi8> -> vector<64xi8>
    %cv = hw.vload %C[%i0, %j16] : memref<8x32xi32> -> vector<16xi32>
    %r = x86vec.dpbusd %cv, %q, %bv : vector<16xi32>, vector<64xi8>, vector<64xi8>
    hw.vstore %r, %C[%i0, %j16] : vector<16xi32>, memref<8x32xi32>
    ```
    """

    name = "loop-tensorize"
    block: str = ""
    loop: int = 0
    intrin: str = ""
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "tensorize", "block": self.block, "loop": self.loop, "intrin": self.intrin})
