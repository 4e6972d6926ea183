"""loop-dynamic-schedule: the default schedule of kernels over symbolic extents."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import StringAttr, UnitAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from ziggurat.dialects import loop
from ziggurat.dialects.sym import SYMBOLS_ATTR
from ziggurat.symbolic import Sym
from ziggurat.transforms.loop.sym_index import symbol_dims
from ziggurat.transforms.schedule import dynamic_block, dynamic_work
from ziggurat.transforms.schedule.copy_nest import match_copy_nest, split_divided_loops
from ziggurat.transforms.schedule.epilogue import fuse_epilogues
from ziggurat.transforms.schedule.fuse_rows import fuse_rows
from ziggurat.transforms.schedule.pad_dynamic import pad_dynamic_reads
from ziggurat.transforms.schedule.nest import chain, depends
from ziggurat.transforms.schedule.loop_parallelize_outer import _spatial_only
from ziggurat.transforms.schedule.mark import SCHEDULED, is_scheduled


def _loops(op: Operation) -> list[loop.ForOp]:
    return [o for o in op.regions[0].block.ops if isinstance(o, loop.ForOp)] if op.regions else []


def _is_innermost(f: loop.ForOp) -> bool:
    return not any(isinstance(o, loop.ForOp) for o in f.body.walk() if o is not f)


def _along_last(f: loop.ForOp, kinds: tuple[type, ...]) -> bool | None:
    """Whether every access of `kinds` under `f` moves with `f` in its last index only (None when
    none moves with it at all)."""
    moved = False
    for op in f.body.walk():
        if isinstance(op, kinds):
            blk = op.parent_op()
            while not isinstance(blk, loop.BlockOp):
                blk = blk.parent_op()  # type: ignore[union-attr]
            var = dynamic_block.block_var(blk, f.iv)
            memo: dict = {}
            moving = [k for k, i in enumerate(op.indices) if var is not None and depends(i, var, memo)]  # type: ignore[attr-defined]
            if moving and moving != [len(op.indices) - 1]:  # type: ignore[attr-defined]
                return False
            moved = moved or bool(moving)
    return moved if moved else None


def _interchange_reduction(top: loop.ForOp) -> bool:
    """A matmul-like nest `for .. j { init; for k { update } }` whose column loop `j` runs along
    the last index of the output store and of every read that depends on it becomes
    `for .. { for j { init } ; for k { for j { update } } }`: the column loop innermost, so its
    vectors are independent FMAs into the output row (one dependency chain per k otherwise, when
    convert-loop-to-hw vectorizes `j` around the reduction). Returns whether it did."""
    j = chain(top)[-1]
    ops = list(j.body.block.ops)
    if len(ops) != 2 or not isinstance(ops[0], loop.BlockOp) or not isinstance(ops[1], loop.ForOp):
        return False
    init, k = ops
    k_ops = list(k.body.block.ops)
    if len(k_ops) != 1 or not isinstance(k_ops[0], loop.BlockOp) or "R" not in k_ops[0].iter_kinds.data:
        return False
    update = k_ops[0]
    if j.step.value.data != 1 or (not j.is_dynamic and j.trip_count < 2) or not _spatial_only(j):
        return False
    if not _along_last(j, (loop.StoreOp,)) or _along_last(j, (loop.LoadOp,)) is False:
        return False
    parent = j.parent_block()
    assert parent is not None
    # for j { init }
    j_init = loop.ForOp(j.lower, j.upper, 1, "serial")
    j_init.iv.name_hint = j.iv.name_hint
    parent.insert_op_before(j_init, j)
    init.detach()
    j_init.body.block.add_op(init)
    # for k { for j { update } }
    k_new = loop.ForOp(k.lower, k.upper, k.step.value.data, "serial")
    k_new.iv.name_hint = k.iv.name_hint
    parent.insert_op_before(k_new, j)
    j_upd = loop.ForOp(j.lower, j.upper, 1, "serial")
    j_upd.iv.name_hint = j.iv.name_hint
    k_new.body.block.add_op(j_upd)
    update.detach()
    j_upd.body.block.add_op(update)
    j.iv.replace_all_uses_with(j_init.iv)
    for use in list(j_init.iv.uses):
        if j_upd.is_ancestor(use.operation):
            use.operation.operands[use.index] = j_upd.iv
    k.iv.replace_all_uses_with(k_new.iv)
    j.detach()
    j.erase()
    return True


def _split_divisions(top: loop.ForOp) -> None:
    """A copy nest (copy_nest.match_copy_nest: a reshape, a transpose) whose block divides a static
    loop's variable by a constant dividing its trip count gets that loop strip-mined and the
    division dropped (copy_nest.split_divided_loops; with the symbols' ranges loop-simplify-index
    then drops the divisions by run-time extents too)."""
    parts = match_copy_nest(top)
    if parts is not None:
        split_divided_loops(parts[0], parts[1])


def _parallel_loop(top: loop.ForOp, vecs: list[loop.ForOp]) -> loop.ForOp | None:
    """The loop of the nest to run on threads, among its outer spatial loops: a static one of two
    or more trips (heads, channel blocks) above the second loop with run-time bounds; else that
    second one (the outermost run-time loop is taken for a batch, often of one); else the first
    run-time one. A static loop below two run-time ones (a layout transform's channels inside its
    rows and columns) would fork once per point."""
    chain_, f = [], top
    while f not in vecs and _spatial_only(f):
        chain_.append(f)
        inner = _loops(f)
        if len(inner) != 1 or len(list(f.body.block.ops)) != 1:
            break
        f = inner[0]
    dynamic = [g for g in chain_ if g.is_dynamic]
    limit = chain_.index(dynamic[1]) if len(dynamic) > 1 else len(chain_)
    static = [g for g in chain_[:limit] if not g.is_dynamic and g.trip_count >= 2]
    if static:
        return static[0]
    if len(dynamic) > 1 and dynamic[0] is chain_[0]:
        return dynamic[1]
    return dynamic[0] if dynamic else None


def _vector_loops(top: loop.ForOp) -> list[loop.ForOp]:
    """`_vector_loop` of the nest, or of each nest below its loops where they hold several (the
    stages fuse_rows put under one row loop); a row block (dynamic_block.py) has its own."""
    if dynamic_block.BLOCKED in top.attributes:
        return []
    f = top
    while True:
        inner = _loops(f)
        if len(inner) != 1:
            break
        f = inner[0]
    if len(inner) > 1:
        return [v for nest in inner for v in _vector_loops(nest)]
    vec = _vector_loop(top)
    return [vec] if vec is not None else []


def _vector_loop(top: loop.ForOp) -> loop.ForOp | None:
    """The loop to vectorize in a nest: the innermost spatial loop along which every store moves
    in its last index and every read in its last index or not at all (an elementwise loop, or a
    matmul's column loop around its reduction, which convert-loop-to-hw vectorizes whole), else
    the innermost loop where its reads run along it (a row reduction: partial sums in lanes)."""
    chain, f = [], top
    while True:
        chain.append(f)
        inner = _loops(f)
        if len(inner) != 1:
            break
        f = inner[0]
    for f in reversed(chain):
        if not f.is_dynamic and f.trip_count < 2:  # one trip: nothing to spread over lanes
            continue
        if (f.step.value.data == 1 and _spatial_only(f) and _along_last(f, (loop.StoreOp,))
                and _along_last(f, (loop.LoadOp,)) is not False):
            return f
    last = chain[-1]
    if _is_innermost(last) and last.step.value.data == 1 and _along_last(last, (loop.LoadOp,)):
        return last
    return None


@dataclass(frozen=True)
class LoopDynamicSchedulePass(ModulePass):
    """Schedules the kernels whose extents are symbolic (issue 22: one compile for every shape).

    **Input:** loop-level kernel functions; those with `sym.symbols` (convert-te-to-loop gives it
    to a kernel over `#sym.dims` buffers) have loops with run-time bounds, which the static
    schedules refuse.

    **Output:** in each such kernel, the stages of a row reduction (softmax, layer norm) first
    run under one row loop with row-sized locals (transforms/schedule/fuse_rows.py); a copy nest
    (a reshape, a transpose) strip-mines a static loop that a constant division of its block
    splits (copy_nest.split_divided_loops, then loop-simplify-index's rewrite); a padded
    conv's input is read from a zero-padded copy of symbolic size filled in front of its nest
    (transforms/schedule/pad_dynamic.py: no tests in the reduction loops); a
    matmul-like nest gets a register block of 8 rows (4 at 8 lanes) by one vector of columns
    with its accumulators in a local buffer (transforms/schedule/dynamic_block.py), a conv's
    block 6 map columns (4 at 8 lanes) by 4 output channel blocks (2 at 8 lanes) by one
    vector, with the columns left over in blocks of 2 and 1 by as many channel blocks; the rows
    left over their column loop inside the reduction loop (`_interchange_reduction`:
    independent vector FMAs into the output row); then each
    top-level nest (or each nest under the fused row loop) gets one outer spatial loop
    `parallel` (`_parallel_loop`: a static loop of 2+ trips above the second run-time loop, else
    that second one, else the first; a run-time trip count is split over the threads at run
    time; its work as an expression of the symbols in `dyn.work`, so that the backend forks only
    where the call's extents make it reach 8192 ops, transforms/schedule/dynamic_work.py) and one
    loop `vectorized`:
    the innermost spatial loop along which every store moves in its last index (an elementwise
    loop; a matmul's column loop around its reduction loop, which convert-loop-to-hw vectorizes
    as a whole, with a masked tail), else the innermost loop (a row reduction: partial sums in
    lanes). Inner loops of every nest that are not chosen stay serial. The kernel is then
    marked `loop.scheduled`, so loop-default-schedule, loop-parallelize-outer and
    loop-vectorize-innermost leave it alone. Static kernels are untouched.

    This is the generic schedule: no weight packing and no tiling for the caches (those plan
    for static extents, transforms/schedule/plan.py); kernels over symbolic rows alone run
    static block kernels instead (transforms/te/te_row_blocks.py).

    **Options:** `vector-width` (the target's f32 lanes, default 16: the register block's rows).

    Example:
    ```mlir
    loop.for %i0 = 0 to %n serial {
      loop.for %i1 = 0 to 768 serial { loop.block "add" [S %a = %i0, S %b = %i1] {...} }
    }
    ```
    becomes
    ```mlir
    loop.for %i0 = 0 to %n parallel {
      loop.for %i1 = 0 to 768 vectorized { loop.block "add" [S %a = %i0, S %b = %i1] {...} }
    }
    ```
    """

    name = "loop-dynamic-schedule"
    vector_width: int = 16

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for fn in op.ops:
            if not isinstance(fn, func.FuncOp) or fn.sym_name.data == "main":
                continue
            if SYMBOLS_ATTR not in fn.attributes or is_scheduled(fn):
                continue
            fuse_rows(fn, min_bytes=0)  # softmax, layer norm: stages at the row loop, one row of locals
            syms = symbol_dims(fn)
            rows = dynamic_block.block_rows(self.vector_width)
            for top in [o for o in fn.body.block.ops if isinstance(o, loop.ForOp)]:
                _split_divisions(top)  # a reshape's `x % 64` over a static loop of 256: two loops, no division
                for update in [o for o in top.body.walk() if isinstance(o, loop.BlockOp) and "R" in o.iter_kinds.data]:
                    pad_dynamic_reads(fn, top, update)  # a padded conv's input: a zero-padded copy, no tests
            for top in [o for o in fn.body.block.ops if isinstance(o, loop.ForOp)]:
                nest = dynamic_block.match(top, rows)  # a matmul: rows x one vector of accumulators
                if nest is not None and dynamic_block.fits(nest, self.vector_width):
                    dynamic_block.build(nest, rows, self.vector_width)  # may replace `top` by two nests
            fuse_epilogues(fn)  # bias, ReLU, attention's scale and mask run in the blocks' store blocks
            for top in [o for o in fn.body.block.ops if isinstance(o, loop.ForOp)]:
                _interchange_reduction(top)
                vecs = _vector_loops(top)
                for vec in vecs:
                    vec.properties["kind"] = StringAttr("vectorized")
                if dynamic_block.LEFTOVER in top.attributes:
                    continue  # a register block's leftover rows (fewer than its rows): serial
                target = _parallel_loop(top, vecs)
                if target is not None:
                    target.properties["kind"] = StringAttr("parallel")
                    estimate = dynamic_work.work(target, syms, self.vector_width)
                    if isinstance(estimate, Sym):  # threads only where the call's extents make it worth a fork
                        target.attributes[dynamic_work.WORK] = StringAttr(str(estimate))
            fn.attributes[SCHEDULED] = UnitAttr()
