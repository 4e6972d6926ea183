"""Replay of tuning traces: a kernel scheduled by a recorded trace, without the tuner.

A trace (what a tuning record stores) is one of three things:

* `DEFAULT_TRACE` (`"default"`): the default schedule (the LOOP stage of
  `lowering/pipelines.py` before convert-loop-to-hw);
* `{"template": [knobs per nest]}`: one `BlockPlan` per naive reduction nest
  in template form (`BlockPlan.from_knobs`, autotune/template.py draws them),
  each built by `block.build_block`, then the rest of the default LOOP stage
  (loop-default-schedule schedules any other nest, then
  loop-parallelize-outer and loop-vectorize-innermost);
* a list of `Schedule` primitive steps (transforms/loop/primitives/api.py).

The compile-time `apply-tuning` pass and the tuner both replay through
`apply_trace`; the search space (autotune/space.py, template.py) stays in the
tuner.

```python
apply_trace(module, "matmul_0", {"template": [{"block": "matmul", "kind": "vector", "tile": [[0, 8]],
                                               "nvec": 1, "kc": 0, "pack": 0}]}, vector_width=16)
```
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import builtin, func

from ziggurat.database import DEFAULT_TRACE
from ziggurat.dialects import loop, make_context
from ziggurat.errors import ScheduleError, TuningError
from ziggurat.lowering.qgemm import QGEMM_BLOCKS
from ziggurat.target import Target
from ziggurat.transforms.loop.primitives.api import Schedule
from ziggurat.transforms.schedule.block import build_block
from ziggurat.transforms.schedule.loop_default_schedule import LoopDefaultSchedulePass
from ziggurat.transforms.schedule.loop_parallelize_outer import LoopParallelizeOuterPass
from ziggurat.transforms.schedule.loop_vectorize_innermost import LoopVectorizeInnermostPass
from ziggurat.transforms.schedule.nest import ReduceNest, match_reduce_nest, packable_a
from ziggurat.transforms.schedule.pad import pad_clamped_reads
from ziggurat.transforms.schedule.plan import BlockPlan, mc_choices, plan_dot, plan_parts


def kernel_of(module: builtin.ModuleOp, name: str) -> func.FuncOp:
    """Kernel function `name` of `module` (TuningError when there is none)."""
    for f in module.ops:
        if isinstance(f, func.FuncOp) and f.sym_name.data == name:
            return f
    raise TuningError(f"no kernel function @{name} in the module to tune")


def as_target(target: Target | int) -> Target:
    """`target`, or for a bare vector width a target of that width and no other instruction sets
    (`Target.for_width`: no VNNI, so an int8 GEMM gets the plain integer nest)."""
    return target if isinstance(target, Target) else Target.for_width(target)


def default_loop_pipeline(target: Target | int) -> str:
    """The default schedule passes for `target` (the O3 LOOP stage before convert-loop-to-hw)."""
    from ziggurat.lowering import pipelines

    return pipelines.schedule_stage(3, as_target(target))


# the passes of the default LOOP stage (what its pipeline string is parsed against)
_SCHEDULE_PASSES = (LoopDefaultSchedulePass, LoopParallelizeOuterPass, LoopVectorizeInnermostPass)


def _finish_default(module: builtin.ModuleOp, name: str, fn: func.FuncOp, target: Target | int) -> None:
    """Runs the default LOOP stage on `fn` (a copy of kernel `name`, alone in a module) and puts it
    in place of the kernel in `module`."""
    tmp = builtin.ModuleOp([fn])
    ctx = make_context()
    from ziggurat.lowering import pipelines

    for p in pipelines.instantiate(default_loop_pipeline(target), _SCHEDULE_PASSES):
        p.apply(ctx, tmp)
    old = kernel_of(module, name)
    fn.detach()
    module.body.block.insert_op_before(fn, old)
    old.detach()
    old.erase()


def prepare(fn: func.FuncOp) -> func.FuncOp:
    """`fn` as loop-default-schedule sees its reduction nests: every clamped, zero-selected read
    (a padded conv input) reads a zero-padded copy (`pad_clamped_reads`), so the register block has
    no per-row tests. Changes `fn` in place; returns it."""
    for top in [o for o in fn.body.block.ops if isinstance(o, loop.ForOp)]:
        nest = match_reduce_nest(top)
        if nest is not None and nest.update.block_name.data not in QGEMM_BLOCKS:
            pad_clamped_reads(nest)
    return fn


def reduce_nests(fn: func.FuncOp, width: int = 16) -> list[tuple[str, ReduceNest, str]]:
    """(update block name, naive nest, template kind) of each top-level reduction nest of `fn` the
    default schedule handles: kind `vector` (a vector block along the last spatial loop,
    `plan_parts`) or `dot` (`plan_dot`)."""
    out = []
    for top in [o for o in fn.body.block.ops if isinstance(o, loop.ForOp)]:
        nest = match_reduce_nest(top)
        if nest is None:
            continue
        if plan_parts(nest) is not None:
            out.append((nest.update.block_name.data, nest, "vector"))
        elif plan_dot(nest, width) is not None:
            out.append((nest.update.block_name.data, nest, "dot"))
    return out


def check_plan(nest: ReduceNest, p: BlockPlan, width: int, name: str) -> None:
    """ScheduleError unless plan `p` (the template knobs of block `name`) is legal for `nest`."""
    n = len(nest.spatial)
    for d, u in p.tile:
        if not (0 <= d < n) or u < 1 or nest.spatial[d].trip_count % u:
            raise ScheduleError(f"template tile [{d}, {u}] of block '{name}': the factor must divide loop {d}'s "
                                f"trip count; re-tune the kernel")
    if p.vector != "spatial":
        return
    if any(d == n - 1 for d, _ in p.tile):
        raise ScheduleError(f"template tile of block '{name}' blocks the vectorized last loop; use nvec")
    if nest.spatial[-1].trip_count % (p.nvec * width) and p.nvec > 1:
        raise ScheduleError(f"template nvec={p.nvec} of block '{name}' does not divide the last loop")
    red = nest.reduction[0].trip_count
    if p.sorder is not None and sorted(p.sorder) != list(range(n - 1)):
        raise ScheduleError(f"template sorder={p.sorder} of block '{name}' is not a permutation of its "
                            f"{n - 1} spatial loops outside the vectorized one")
    if p.rorder is not None and sorted(p.rorder) != list(range(len(nest.reduction))):
        raise ScheduleError(f"template rorder={p.rorder} of block '{name}' is not a permutation of its "
                            f"{len(nest.reduction)} reduction loops")
    if p.kc and (red % p.kc or red < p.kc):
        raise ScheduleError(f"template kc={p.kc} of block '{name}' must divide the reduction extent {red}")
    if p.pack_a and packable_a(nest, p.tile) is None:
        raise ScheduleError(f"template pack_a=1 of block '{name}': A slivers need a plain 2-D matmul "
                            f"whose tile blocks the row loop only (tile [[0, rows]]); set pack_a to 0")
    if p.mc and p.mc not in mc_choices(nest, p, width):
        raise ScheduleError(f"template mc={p.mc} of block '{name}': needs jouter=1 with a panel loop (pack or "
                            f"nvec > 1), and a multiple of the outermost loop's tile factor that divides it; "
                            f"legal: {mc_choices(nest, p, width) or 'none'}")


def apply_template(module: builtin.ModuleOp, name: str, trace: dict[str, Any], target: Target | int = 16) -> None:
    """Schedules kernel `name` by a template trace, then runs the rest of the default LOOP stage for
    `target` (a `Target`, or only its vector width)."""
    vector_width = as_target(target).vector_width
    knobs = trace.get("template")
    if not isinstance(knobs, list):
        raise ScheduleError(f"a template trace is {{'template': [knobs per nest]}}, got {trace!r:.80}")
    fn = prepare(kernel_of(module, name).clone())
    nests = {block: (nest, kind) for block, nest, kind in reduce_nests(fn, vector_width)}
    for k in knobs:
        nest, kind = nests.pop(k.get("block"), (None, None))
        if nest is None or kind != k.get("kind"):
            raise ScheduleError(f"template decisions name block '{k.get('block')}', which is not a naive "
                                f"reduction nest of kernel '{name}'; re-tune the kernel")
        p = BlockPlan.from_knobs(k)
        check_plan(nest, p, vector_width, k["block"])
        build_block(nest, p, vector_width)
    _finish_default(module, name, fn, target)


def apply_trace(module: builtin.ModuleOp, name: str, trace: Any, target: Target | int = 16) -> None:
    """Schedules kernel `name` of `module` in place by `trace` (or the default schedule) for `target`
    (a `Target`, or only its vector width: see `as_target`)."""
    if trace == DEFAULT_TRACE:
        _finish_default(module, name, kernel_of(module, name).clone(), target)
        return
    if isinstance(trace, dict) and "template" in trace:
        apply_template(module, name, trace, target)
        return
    if not isinstance(trace, list):
        raise ScheduleError(f"a tuning trace is a list of schedule steps or '{DEFAULT_TRACE}', got {trace!r:.80}")
    Schedule(kernel_of(module, name)).replay(trace)
