"""loop-default-schedule: the fast default schedule for reduction nests (conv2d, matmul, dense)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.passes import ModulePass

from ziggurat.dialects import loop
from ziggurat.transforms.schedule.mark import is_scheduled
from ziggurat.errors import ScheduleError, ZigguratError
from ziggurat.lowering.locations import name_source
from ziggurat.lowering.qgemm import QGEMM_BLOCKS, schedule_qgemm
from ziggurat.transforms.schedule.fuse_rows import fuse_rows
from ziggurat.transforms.schedule.block import build_block
from ziggurat.transforms.schedule.copy_nest import schedule_copy
from ziggurat.transforms.schedule.epilogue import fuse_epilogues
from ziggurat.transforms.schedule.nest import match_reduce_nest
from ziggurat.transforms.schedule.pad import pad_clamped_reads
from ziggurat.transforms.schedule.plan import default_plan


@dataclass(frozen=True)
class LoopDefaultSchedulePass(ModulePass):
    """Gives naive reduction nests (conv2d, matmul, ...) a register-blocked vector schedule.

    **Input:** loop-level kernels as convert-te-to-loop emits them. A nest is
    scheduled when it is spatial loops around an init block and reduction
    loops around one update block, the last spatial loop (`L`, trip count >= 8)
    indexes the last dim of the output, and every input read that depends on
    `L` reads it contiguously (stride 1, possibly clamped by padding) in its
    last index and nowhere else. Other nests (elementwise, reductions along
    the contiguous axis such as softmax) are left to the other loop passes.

    **Output:** `L` moves outside the reduction loops and becomes
    `vectorized` (convert-loop-to-hw vectorizes it as an outer loop, with a
    masked tail). The accumulators live in a `loop.alloc "local"` buffer
    `acc[U, ub(L) + vector-width]` that LLVM keeps in registers across the
    reduction loops; a `<tag>_store` block writes them to the output at the
    end. A spatial loop that no `L`-dependent read uses (output channels of a
    conv, rows of a matmul) is register-blocked: it steps by `U` (8, 6, 4, 3
    or 2, a divisor of its trip count) and the init/update/store blocks are
    repeated `U` times, so each loaded input vector feeds `U` FMAs. The
    innermost reduction loop, where it has 2-7 trips (a conv's `kw`), is
    marked `unrolled` (LLVM unrolls it; its own unrolling heuristics are off,
    backends/llvm/jit.py `optimize`). When the
    outer reduction loop is longer than 512 and a multiple of 256 (matmul
    1024^3), it is blocked by 256 and moved outside: the output is initialized
    by its own nest, and each block loads the partial sums into the
    accumulators (`<tag>_load`), so a 256-deep slice of the streamed operand
    stays in L2.

    A nest that fails those tests but whose innermost reduction loop (trip
    count >= vector-width) reads contiguously (dense with a transposed
    weight, row sums) gets a dot-product register tile instead: up to two
    spatial loops step by 4, 3 or 2, the init and update blocks are repeated
    per tile point and the reduction loop becomes `vectorized` (one vector
    accumulator per tile point, convert-loop-to-hw's vector reduction).

    A `graph.qgemm` kernel (block `qgemm`, u8 x packed s8 -> i32) gets the
    int8 schedule of lowering/qgemm.py instead: with AMX-INT8, blocks of up to 2 x 2
    tiles (32 x 32) held in tile registers over all of K, `tdpbusd` on 16 x 64
    byte steps (lowering/qgemm_amx.py); with VNNI, register blocks of up
    to 8 rows by 32 columns, the k loop outside the block, and every 16-column x
    4-k step tensorized onto `x86_vnni_u8s8_16x4`; on AVX2, blocks of up to 4
    rows by 16 columns and 8-column steps on `x86_avx2_u8s8_8x4` (block `qgemm_s16`),
    `x86_avx2_s8u8_8x4` (`qgemm_x16`, the swapped signs of `-int8=saturate`) or
    `x86_avx2_s16_8x2` (`qgemm_w16`, int16 operands) (docs/hw-level.md).

    With 8 lanes (`vector-width=8`, AVX2: 16 registers) the block is 2-D
    instead (transforms/schedule/plan.py): `U` rows (6, 4, 3 or 2) times two
    vectors, along `L` (`L` walks 8-lane panels two at a time) or, when `L`
    is one vector (a conv in NCHW8c), over a second output-channel block, at
    most 12 accumulators (fewer than 8 in flight, a 14x14 map's 2 rows x 2
    blocks, give way to a longer one-vector block: 7 columns; an odd number
    of channel blocks steps by 3 or 5; on equal factors the output columns
    are blocked, not the rows); a matmul's B is packed as one block for k of 512
    up to 1024 (`plan.ONE_BLOCK`) and k = 256 with >= 32 rows (B
    packed once, no init nest, no reload of partial sums), and k-blocked by
    256 and packed beyond; a dot-product tile keeps at most 4 x 2 points.
    Vector width 16 (AVX-512, 32 registers) takes the same 2-D block with up
    to 24 accumulators and rows up to 8 (7 on the 7x7 and 14x14 maps of late
    conv stages, where no factor of 8, 6 or 4 divides the row loop); where
    that declines, the one-vector schedule above. At either width a padded
    conv's clamped input read becomes a read of a zero-padded local copy
    (transforms/schedule/pad.py; only its halo is zeroed, then the interior
    copied), so the register block has no per-row tests.

    A copy nest (one block storing a read at the loops' own indices: conv's
    boundary layout transforms) gets its divided loops strip-mined, the lane
    innermost, and its zero padding peeled into halo nests, so that LLVM
    vectorizes the copy (transforms/schedule/copy_nest.py). A concatenation's
    select chain in a copy nest is split into one nest per input, each a
    plain copy without tests (transforms/schedule/split_ranges.py). A copy
    nest that computes (an int8 model's requantization) keeps its store
    contiguous, and when it reads its input transposed, the loop along that
    read's contiguous dim is strip-mined by a 64-byte line, the strip moved
    just outside the lane loop, or inside each vector of a lane loop of
    several (transforms/schedule/transpose_tiles.py).

    Then, at either width, the elementwise stages of a fused group that read
    a register block's result at their own indices (bias, activation,
    residual add) move into the block's `<tag>_store` blocks
    (transforms/schedule/epilogue.py): they run on the tile in registers, and
    their local intermediates disappear.

    **Options:** `vector-width` (default 16); `vector-registers` (the
    target's vector registers, for the register budget of plan.py; 0, the
    default, takes x86's for the width: 32 at 16 lanes, else 16; the default
    pipelines pass 32 for AArch64's 4 NEON lanes); `int8-dot` (`amx`: the target
    has AMX-INT8, tile blocks; `vnni`: the target has AVX512-VNNI, 16-lane `vpdpbusd` blocks; `avx2`: 8-lane `vpmaddubsw` +
    `vpmaddwd` blocks; `none`: leave qgemm nests scalar; `auto`: what the
    default target, `Target.parse("llvm")`, has; the default pipelines
    pass the kind of their target); `fuse-epilogues` (default
    true: the epilogue fusion above); `copy-nests` (default true: the copy
    nest schedule above); `pack-a` (default false: the 8-lane 2-D block of a
    plain matmul also copies its rows x k-block of A into a contiguous local
    `[depth, rows]` sliver, `<tag>_pack_a`; on the Zen 3 AVX2 host matmul
    1024^3 ran 0.96-1.01x the time without it, within noise, so it is the
    tuner's knob); `fuse-rows` (default true: a kernel of row reductions and
    the elementwise stages between them, a softmax or a layer norm over 512 KB
    or more, runs its stages under one row loop with row-sized local buffers,
    transforms/schedule/fuse_rows.py, before the nests are scheduled).

    The nest's schedule is a value: `plan.default_plan` chooses a `BlockPlan`
    from the shape and the vector width, and `block.build_block` (the builder
    the tuner's templates use too) rewrites the nest by it.

    Example (matmul 16x32x8, U = 8):
    ```mlir
    loop.for %i0 = 0 to 16 serial {
      loop.for %i1 = 0 to 32 serial {
        loop.block "matmul_init" [...] {...}
        loop.for %r0 = 0 to 8 serial { loop.block "matmul" [...] {...} }
      }
    }
    ```
    becomes
    ```mlir
    loop.for %i0 = 0 to 16 step 8 serial {
      %acc = loop.alloc "local" : memref<8x48xf32>
      loop.for %i1 = 0 to 32 vectorized {
        loop.block "matmul_init" [...] {...}   // x8, into %acc
        loop.for %r0 = 0 to 8 serial { loop.block "matmul" [...] {...} }   // x8
        loop.block "matmul_store" [...] {...}  // x8, %acc -> output
      }
    }
    ```
    """

    name = "loop-default-schedule"
    vector_width: int = 16
    int8_dot: str = "auto"
    fuse_epilogues: bool = True
    copy_nests: bool = True
    pack_a: bool = False
    vector_registers: int = 0
    fuse_rows: bool = True

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.int8_dot not in ("auto", "amx", "vnni", "avx2", "none"):
            raise ScheduleError(f"loop-default-schedule: int8-dot must be auto, amx, vnni, avx2 or none, got "
                                f"'{self.int8_dot}'")
        for fn in op.ops:
            if not isinstance(fn, func.FuncOp) or fn.sym_name.data == "main":
                continue
            if is_scheduled(fn):  # apply-tuning replayed a record's schedule
                continue
            try:
                self._schedule(fn)
            except ZigguratError as err:  # name the kernel's source (ONNX) nodes
                raise name_source(err, fn) from None

    def _schedule(self, fn: func.FuncOp) -> None:
        """The default schedule of kernel `fn`, loop nest by loop nest."""
        if self.fuse_rows:
            fuse_rows(fn)  # softmax, layer norm: the stages at the row loop (fuse_rows.py)
        for top in [o for o in fn.body.block.ops if isinstance(o, loop.ForOp)]:
            nest = match_reduce_nest(top)
            if nest is None:
                if self.copy_nests:  # layout transforms: no div/rem, no padding tests
                    schedule_copy(top, self.vector_width)
                continue
            name = nest.update.block_name.data
            if name in QGEMM_BLOCKS:  # graph.qgemm: int8 dot register blocks (lowering/qgemm.py)
                if self.int8_dot != "none":
                    schedule_qgemm(fn, name, dot=None if self.int8_dot == "auto" else self.int8_dot)
                continue
            pad_clamped_reads(nest)  # padded conv input: no tests in the register block
            plan = default_plan(nest, self.vector_width, self.pack_a, self.vector_registers)  # transforms/schedule/plan.py
            if plan is not None:
                build_block(nest, plan, self.vector_width)
        if self.fuse_epilogues:
            fuse_epilogues(fn)  # bias, GELU, residual adds run on the register tile (epilogue.py)
