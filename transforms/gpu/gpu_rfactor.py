"""gpu-rfactor: a reduction with few results is shared out over threads (rfactor, TVM's cross-thread step).

gpu-default-schedule gives each point of a nest's spatial iteration space one
GPU thread, which then runs the reduction loops alone. A LayerNorm's row sums
(128 rows of 256), a GEMV (512 outputs of 784 products) or a global average
pool (960 channels of 49) then run on a few hundred threads, each walking a
long serial loop. Here such a reduction (spatial points below `max-points`,
reduced elements at least `min-extent`) is factored: its reduction loops are
fused and split by `f` (the largest divisor of the extent up to `lanes`), and
`rfactor` on the inner part makes it spatial, so that one stage computes
`points x f` partial results, each over extent/f elements (neighbouring
threads read neighbouring elements), and a second stage combines the f
partials of each point. gpu-split-stages then runs the stages as launches.
Runs before gpu-split-stages, on unscheduled kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.passes import ModulePass

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.api import Schedule
from ziggurat.transforms.loop.primitives.loops import bound_kinds

ENTRY = "main"


@dataclass(frozen=True)
class GpuRfactorPass(ModulePass):
    """Factors reductions with few results over `lanes` threads each.

    **Input:** loop-level kernels as TO_LOOP leaves them (reduction blocks with an `<name>_init` block).

    **Output:** each qualifying reduction as an rfactor partial stage (spatial over the partials) and a
    combining stage; other nests unchanged.

    **Options:** `max-points` (spatial points below which a reduction is factored; default 4096),
    `min-extent` (the least reduction extent factored; default 64), `lanes` (the largest factor; 32).

    Example (`gpu-rfactor`), a row sum of 8 rows of 1024:
    ```mlir
    loop.for %i = 0 to 8 { init; loop.for %r = 0 to 1024 { loop.block "reduce_sum" [S .., R %k = %r] {...} } }
    ```
    becomes a block `reduce_sum_rf` over 8 x 32 partials (each summing 32 elements) and `reduce_sum`
    adding the 32 partials of each row.
    """

    name = "gpu-rfactor"
    max_points: int = 4096
    min_extent: int = 64
    lanes: int = 32

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.sym_name.data != ENTRY and f.body.blocks:
                for name in _candidates(f, self.max_points, self.min_extent):
                    _factor(f, name, self.lanes)


def _candidates(f: func.FuncOp, max_points: int, min_extent: int) -> list[str]:
    """Names of the reduction blocks of `f` with few spatial points and a long reduction."""
    out = []
    for blk in f.walk():
        if not isinstance(blk, loop.BlockOp) or "R" not in blk.iter_kinds.data:
            continue
        loops = []
        p = blk.parent_op()
        while isinstance(p, loop.ForOp):
            loops.append(p)
            p = p.parent_op()
        if any(lp.kind.data != "serial" for lp in loops):
            continue
        points = reduce_ = 1
        for lp in loops:
            kinds = bound_kinds(lp)
            if kinds == {"R"}:
                reduce_ *= lp.trip_count
            elif kinds == {"S"}:
                points *= lp.trip_count
            else:
                break
        else:
            if points < max_points and reduce_ >= min_extent:
                out.append(blk.block_name.data)
    return out


def _factor(f: func.FuncOp, name: str, lanes: int) -> None:
    """Fuses the reduction loops of block `name` (the innermost ones), splits them by the largest divisor
    of their extent up to `lanes` and rfactors the inner loop. A step that does not apply stops it: fuse
    and split leave an equivalent nest, rfactor's failure leaves its input as it was."""
    sch = Schedule(f)
    try:
        loops = sch.get_loops(name)
        reds = [rv for rv in loops if bound_kinds(rv.op) == {"R"}]
        if not reds or loops[-len(reds):] != reds:
            return
        r = reds[0]
        for _ in reds[1:]:
            r = sch.fuse(r, sch.get_loops(name)[len(loops) - len(reds) + 1])
        extent = r.op.trip_count
        factor = max((d for d in range(4, lanes + 1) if extent % d == 0), default=0)
        if factor == 0:
            return
        _, inner = sch.split(r, factor)
        sch.rfactor(inner, name)
    except ScheduleError:
        return
