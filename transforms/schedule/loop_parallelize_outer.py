"""loop-parallelize-outer: the default thread-level parallel decision."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.split import split
from ziggurat.transforms.schedule.mark import is_scheduled


def _uses(v, iv, memo: dict) -> bool:
    """`v` is `iv` or computed from it by ops inside the loop (index arithmetic)."""
    if v is iv:
        return True
    if v in memo:
        return memo[v]
    owner = v.owner
    memo[v] = False
    memo[v] = isinstance(owner, Operation) and any(_uses(o, iv, memo) for o in owner.operands)
    return memo[v]


# Work-estimate lanes: a `vectorized` loop counts its trips over min(vector-width, WORK_LANES).
# `min-work` was set with 8-lane (AVX2) ops; counting AVX-512's 16 lanes as half the work moved
# the parallel decision of small nests and changed the -O3 code of lenet5, vgg_small_bn,
# efficientnet_b0, regnet_y_small, segformer_b0 and llama_tiny_lm at 2 threads (2026-11-26),
# which no paired benchmark justified. Narrower targets (SSE, 4 lanes) count their real width.
WORK_LANES = 8


def _work(op: Operation, lanes: int, trips: int = 1) -> int:
    """Ops executed in the blocks under `op`, each loop multiplying by its trip count (a loop already
    marked `vectorized`, such as a dot-product tile's reduction, by its trip count over `lanes`)."""
    if isinstance(op, loop.BlockOp):
        return trips * max(1, len(list(op.body.block.ops)))
    if isinstance(op, loop.ForOp):
        n = op.trip_count
        trips *= -(-n // lanes) if op.kind.data == "vectorized" else n
    return sum(_work(o, lanes, trips) for r in op.regions for b in r.blocks for o in b.ops)


def _spatial_only(f: loop.ForOp) -> bool:
    """Every block under `f` binds its variable (or an index computed from
    it) only as a spatial iterator."""
    memo: dict = {}
    for blk in f.body.walk():
        if not isinstance(blk, loop.BlockOp):
            continue
        for kind, bound in zip(blk.iter_kinds.data, blk.bindings):
            if kind != "S" and _uses(bound, f.iv, memo):
                return False
    return True


# An innermost loop chosen to run in parallel is cut into chunks of CHUNK_VECTORS vectors: the chunks
# run in parallel, each chunk's loop stays serial for loop-vectorize-innermost.
CHUNK_VECTORS = 64


def _strip_mine(f: loop.ForOp, vector_width: int) -> loop.ForOp:
    """The loop to mark `parallel` in place of `f`. An innermost loop (a 1-D elementwise kernel)
    whose trip count is a multiple of two or more chunks of CHUNK_VECTORS vectors is split: a
    parallel loop over the chunks around a serial loop over one chunk, which loop-vectorize-innermost
    then vectorizes. Marked `parallel` whole, the loop would never be vectorized."""
    chunk = vector_width * CHUNK_VECTORS
    n = f.trip_count
    if vector_width <= 0 or n < 2 * chunk or n % chunk or any(isinstance(o, loop.ForOp) for o in f.body.walk()):
        return f
    outer, _ = split(f, chunk)
    return outer


@dataclass(frozen=True)
class LoopParallelizeOuterPass(ModulePass):
    """Marks the outermost loop with enough spatial iterations `parallel`.

    **Input:** loop-level kernel functions (not the model entry `@main`).

    **Output:** in each top-level loop nest, the first serial loop from the
    outside whose trip count is at least `min-extent` and whose variable every
    block binds as spatial (`S`) becomes `parallel`; loops of extent 1 on the
    way are skipped. Nests with no such loop are left serial. With one thread
    the backend runs `parallel` loops serially.

    An innermost loop chosen this way (a 1-D elementwise kernel) whose trip
    count is a multiple of two or more chunks of 64 vectors (`vector-width`
    x 64 iterations) is split first: the loop over the chunks becomes
    `parallel`, and the loop over one chunk stays serial, so that
    loop-vectorize-innermost vectorizes it.

    A nest whose work (ops executed in its blocks, counting loop trips; a
    loop already `vectorized`, such as a dot tile's reduction, counts its
    trips over min(`vector-width`, 8) lanes: the work-estimate lanes,
    `WORK_LANES`, that `min-work` was set with) is below `min-work` stays
    serial: a parallel region costs a few microseconds, more than such a
    nest takes on one thread.

    The decision does not depend on `threads` yet: with one thread the
    backend runs `parallel` loops serially (the same code as unmarked
    loops), `min-work` was set at two threads, and the tuner's replays
    (`transforms/schedule/replay.py`, `autotune/space.py`) schedule kernels
    with `threads=1` whatever thread count the model then runs on, so a
    rule such as "one thread: leave every loop serial" would drop the
    parallel loops of tuned kernels.

    **Options:** `min-extent` (default 2), `min-work` (default 8192),
    `vector-width` (the target's f32 lanes; default 0: 8), `threads` (the
    target's thread count, 0: not given; validated, recorded in the
    pipeline). The default pipelines pass both from their `Target`.

    Example:
    ```mlir
    loop.for %i0 = 0 to 1 serial {
      loop.for %i1 = 0 to 64 serial { loop.block "relu" [S %a = %i0, S %b = %i1] {...} }
    }
    ```
    becomes
    ```mlir
    loop.for %i0 = 0 to 1 serial {
      loop.for %i1 = 0 to 64 parallel { loop.block "relu" [S %a = %i0, S %b = %i1] {...} }
    }
    ```
    """

    name = "loop-parallelize-outer"
    min_extent: int = 2
    min_work: int = loop.MIN_WORK
    vector_width: int = 0
    threads: int = 0

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.vector_width < 0 or self.threads < 0:
            raise ScheduleError(f"loop-parallelize-outer: vector-width and threads must be positive (or 0: not given), "
                                f"got vector-width={self.vector_width}, threads={self.threads}")
        lanes = min(self.vector_width or WORK_LANES, WORK_LANES)
        for fn in op.ops:
            if not isinstance(fn, func.FuncOp) or fn.sym_name.data == "main":
                continue
            if is_scheduled(fn):  # apply-tuning replayed a record's schedule
                continue
            for top in fn.body.block.ops:
                if isinstance(top, loop.ForOp) and _work(top, lanes) >= self.min_work:
                    self._parallelize(top)

    def _parallelize(self, f: loop.ForOp) -> None:
        while True:
            if f.kind.data != "serial":
                return
            if not _spatial_only(f):
                # A reduction loop around spatial nests (a blocked reduction,
                # its packing): look for the parallel loop in each of them.
                for inner in [o for o in f.body.block.ops if isinstance(o, loop.ForOp)]:
                    self._parallelize(inner)
                return
            if f.trip_count >= self.min_extent:
                f = _strip_mine(f, self.vector_width)
                f.properties["kind"] = StringAttr("parallel")
                return
            inner = [o for o in f.body.block.ops if isinstance(o, loop.ForOp)]
            if len(inner) != 1 or len(list(f.body.block.ops)) != 1:
                return
            f = inner[0]
