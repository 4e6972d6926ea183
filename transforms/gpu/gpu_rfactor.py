"""gpu-rfactor: a reduction with few results is shared out over threads (rfactor, TVM's cross-thread step).

gpu-default-schedule gives each point of a nest's spatial iteration space one
GPU thread, which then runs the reduction loops alone. A LayerNorm's row sums
(128 rows of 256), a GEMV (512 outputs of 784 products) or a global average
pool (960 channels of 49) then run on a few hundred threads, each walking a
long serial loop. Here such a reduction (spatial points below `max-points`,
reduced elements at least `min-extent`) is factored: its reduction loops are
fused and split by `f` (the largest divisor of the extent up to `lanes`), the
inner part moved outside the outer one, and `rfactor` on it makes it spatial:
one stage computes
`points x f` partial results, each over extent/f elements (neighbouring
threads read neighbouring elements), and a second stage combines the f
partials of each point. gpu-split-stages then runs the stages as launches.
Runs before gpu-split-stages, on unscheduled kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import StringAttr
from xdsl.passes import ModulePass

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.gpu.gpu_gemm import match_gemm
from ziggurat.transforms.gpu.implicit_gemm import MIN_IGEMM_BLOCKS, match_implicit_gemm, template_blocks
from ziggurat.transforms.loop.primitives.api import Schedule
from ziggurat.transforms.loop.primitives.loops import bound_kinds

ENTRY = "main"
GEMV_POINTS = 2048  # a matrix product with fewer results is factored (a GEMV); larger ones go to gpu-gemm
TEMPLATE_BLOCKS, LONG_K = 32, 1024  # ... and one whose few template blocks would each walk a long k


@dataclass(frozen=True)
class GpuRfactorPass(ModulePass):
    """Factors reductions with few results over `lanes` threads each.

    **Input:** loop-level kernels as TO_LOOP leaves them (reduction blocks with an `<name>_init` block).

    **Output:** each qualifying reduction as an rfactor partial stage (spatial over the partials) and a
    combining stage; other nests unchanged.

    **Options:** `max-points` (spatial points below which a reduction is factored; default 65536, about a
    quarter of the threads an H100 holds), `min-extent` (the least reduction extent factored; default 32),
    `lanes` (the largest factor; 32), `convolutions` (as gpu-gemm's, default true). A matrix product or
    convolution (gpu-gemm's patterns) is factored only below `GEMV_POINTS` results or where the GEMM
    template would get few blocks for a long k (`_factor_product`), a convolution also below
    `MIN_IGEMM_BLOCKS` blocks: the others are the template's.

    Example (`gpu-rfactor`), a row sum of 8 rows of 1024:
    ```mlir
    loop.for %i = 0 to 8 { init; loop.for %r = 0 to 1024 { loop.block "reduce_sum" [S .., R %k = %r] {...} } }
    ```
    becomes a block `reduce_sum_rf` over 8 x 32 partials (each summing 32 elements) and `reduce_sum`
    adding the 32 partials of each row.
    """

    name = "gpu-rfactor"
    convolutions: bool = True  # gpu-gemm's: whether convolutions go to the GEMM template
    max_points: int = 65536
    min_extent: int = 32
    lanes: int = 32

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.sym_name.data != ENTRY and f.body.blocks:
                _unique_block_names(f)
                for name in _candidates(f, self.max_points, self.min_extent, self.convolutions):
                    _factor(f, name, self.lanes)


def _unique_block_names(f: func.FuncOp) -> None:
    """Renames a block whose name an earlier block of `f` has (a ReduceMean's sum and its division are
    both `reduce_mean`): the schedule primitives find blocks by name."""
    seen: dict[str, int] = {}
    for blk in f.walk():
        if isinstance(blk, loop.BlockOp):
            name = blk.block_name.data
            if name in seen:
                seen[name] += 1
                blk.properties["block_name"] = StringAttr(f"{name}_{seen[name]}")
            else:
                seen[name] = 0


def _candidates(f: func.FuncOp, max_points: int, min_extent: int, convolutions: bool) -> list[str]:
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
            if reduce_ >= min_extent and points < max_points and _factor_product(f, loops[-1], points, reduce_, convolutions):
                out.append(blk.block_name.data)
    return out


def _factor_product(f: func.FuncOp, top: loop.ForOp, points: int, reduce_: int, convolutions: bool) -> bool:
    """Whether a nest that gpu-gemm would give the GEMM template is better factored: a GEMV (fewer than
    GEMV_POINTS results), or a product so small in m and n that the template's 64 x 64 tiles would be
    fewer than TEMPLATE_BLOCKS blocks, each walking a long k (LONG_K or more). A convolution of fewer than
    MIN_IGEMM_BLOCKS blocks (not the template's: gpu-gemm) and any other nest: yes."""
    spec = match_gemm(f, top, args_only=False)
    if spec is not None:
        blocks = template_blocks(math.prod(spec.batch), spec.m, spec.n)
    else:
        implicit = match_implicit_gemm(f, top, args_only=False) if convolutions else None
        blocks = implicit.blocks() if implicit is not None else 0
        if blocks < MIN_IGEMM_BLOCKS:  # not the template's (gpu-gemm): factor it
            return True
    return points < GEMV_POINTS or (blocks < TEMPLATE_BLOCKS and reduce_ >= LONG_K)


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
        outer, inner = sch.split(r, factor)
        inner, _ = sch.reorder(inner, outer)  # the partials' loop outside: spatial, next to the others
        rf = sch.rfactor(inner, name)
    except ScheduleError:
        return
    _merge_init(f, rf.name)


def _merge_init(f: func.FuncOp, name: str) -> None:
    """Moves the partials' zeroing (block `<name>_init`, a nest of its own) into the nest of block `name`,
    ahead of its reduction loop: `[points, f] { init; loop { reduce } }`, one launch instead of two. Only
    where the init nest's loops are the same as the first loops of `name`'s and bind it directly."""
    init = next((b for b in f.walk() if isinstance(b, loop.BlockOp) and b.block_name.data == f"{name}_init"), None)
    rf = next((b for b in f.walk() if isinstance(b, loop.BlockOp) and b.block_name.data == name), None)
    if init is None or rf is None:
        return
    init_loops, rf_loops = _enclosing(init), _enclosing(rf)
    n = len(init_loops)
    if n == 0 or len(rf_loops) != n + 1 or any(a.bounds != b.bounds for a, b in zip(init_loops, rf_loops)):
        return
    if list(init.bindings) != [lp.iv for lp in init_loops] or init_loops[0].parent is not rf_loops[0].parent:
        return
    if len(list(init_loops[-1].body.block.ops)) != 1 or any(len(list(lp.body.block.ops)) != 1
                                                           for lp in init_loops[:-1] + rf_loops[:-1]):
        return
    mapping = {a.iv: b.iv for a, b in zip(init_loops, rf_loops)}
    moved = init.clone(value_mapper=mapping)
    target = rf_loops[n - 1].body.block
    target.insert_op_before(moved, target.first_op)  # type: ignore[arg-type]
    top = init_loops[0]
    top.detach()
    top.erase()


def _enclosing(blk: loop.BlockOp) -> list[loop.ForOp]:
    """The loops around `blk`, outermost first."""
    out = []
    p = blk.parent_op()
    while isinstance(p, loop.ForOp):
        out.append(p)
        p = p.parent_op()
    return out[::-1]
