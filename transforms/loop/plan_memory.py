"""plan-memory: static, liveness-based placement of the model's intermediates in one arena."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, MemRefType, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from ziggurat.arena import Slot, assign_offsets
from ziggurat.dialects import loop
from ziggurat.dialects.sym import is_symbolic_type
from ziggurat.errors import CompileError

ALIGN = 64


def memref_nbytes(t: MemRefType) -> int:
    """The bytes of a static memref (at least one per element)."""
    width = getattr(t.element_type, "bitwidth", 32)
    return t.element_count() * max(1, width // 8)


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


class Interval(Slot):
    """One arena buffer (arena.py `Slot`: size, live positions, offset) and its `loop.alloc`."""

    def __init__(self, alloc: loop.AllocOp, size: int, start: int, end: int, offset: int = -1, dynamic: bool = False):
        super().__init__(size, start, end, offset)
        self.alloc = alloc
        self.dynamic = dynamic  # placed per binding of the symbols (size unknown here)


def live_intervals(entry: func.FuncOp) -> list[Interval]:
    """Liveness of every `loop.alloc "global"` of `entry`, by top-level op index.

    A buffer is live from the first op that uses it (the call that writes it)
    to the last op that reads it; a use nested in a region counts at its
    top-level ancestor. Two buffers used by the same op overlap, so a kernel
    never reads and writes the same memory.
    """
    block = entry.body.block
    position = {op: n for n, op in enumerate(block.ops)}

    def top(op: Operation) -> int:
        while op not in position:
            parent = op.parent_op()
            assert parent is not None
            op = parent
        return position[op]

    allocs = [op for op in block.ops if isinstance(op, loop.AllocOp) and op.scope.data == "global"]
    # with a buffer sized at run time, every buffer is placed per binding (runtime/symbolic_model.py)
    dynamic = any(is_symbolic_type(op.result.type) for op in allocs)
    intervals = []
    for op in allocs:
        value: SSAValue = op.result
        uses = [top(u.operation) for u in value.uses]
        start, end = (min(uses), max(uses)) if uses else (position[op], position[op])
        size = 0 if dynamic else _aligned(memref_nbytes(op.result.type))  # type: ignore[arg-type]
        intervals.append(Interval(op, size, start, end, dynamic=dynamic))
    return intervals


def inplace_pairs(kernel: func.FuncOp) -> set[tuple[int, int]]:
    """(input arg, output arg) pairs of `kernel` that may share memory.

    Legal when both have the same type and every access to either is a
    load (input) or store (output) at exactly the variables of one spatial
    `loop.block`: element x of the input is then read only by the iteration
    that writes element x of the output, before it writes it.
    """
    args = list(kernel.body.block.args)
    if any(not isinstance(a.type, MemRefType) for a in args):
        return set()
    loads: dict[SSAValue, list[loop.LoadOp]] = {a: [] for a in args}
    stores: dict[SSAValue, list[loop.StoreOp]] = {a: [] for a in args}
    for a in args:
        for use in a.uses:
            user = use.operation
            if isinstance(user, loop.LoadOp) and user.operands[0] is a:
                loads[a].append(user)
            elif isinstance(user, loop.StoreOp) and user.operands[1] is a:
                stores[a].append(user)
            else:
                loads[a].append(None)  # type: ignore[arg-type]  # any other use: not elementwise

    def at_block_vars(op: Operation | None, indices: tuple[SSAValue, ...], shape) -> loop.BlockOp | None:
        blk = op.parent_op() if op is not None else None
        while blk is not None and not isinstance(blk, loop.BlockOp):
            blk = blk.parent_op()
        if blk is None or "R" in blk.iter_kinds.data or len(blk.vars) != len(indices):
            return None
        # A dim of extent 1 holds one element whatever the index says.
        if any(i is not v and n != 1 for i, v, n in zip(indices, blk.vars, shape)):
            return None
        return blk

    pairs = set()
    for o, out in enumerate(args):
        if loads[out] or len(stores[out]) != 1:
            continue
        shape = out.type.get_shape()  # type: ignore[attr-defined]
        home = at_block_vars(stores[out][0], tuple(stores[out][0].operands[2:]), shape)
        if home is None:
            continue
        for i, inp in enumerate(args):
            if inp is out or inp.type != out.type or stores[inp] or not loads[inp]:
                continue
            if all(ld is not None and at_block_vars(ld, tuple(ld.operands[1:]), shape) is home for ld in loads[inp]):
                pairs.add((i, o))
    return pairs


def share_inplace(entry: func.FuncOp, intervals: list[Interval], kernels: dict[str, func.FuncOp]) -> dict[loop.AllocOp, loop.AllocOp]:
    """Output buffers that take over a dying input's memory in an elementwise call.

    Returns output alloc -> input alloc; the input's interval grows to cover
    the output's, and the output's interval is dropped from `intervals`.
    """
    by_value = {iv.alloc.result: iv for iv in intervals}
    taken: dict[loop.AllocOp, loop.AllocOp] = {}
    position = {op: n for n, op in enumerate(entry.body.block.ops)}
    cache: dict[str, set[tuple[int, int]]] = {}
    for call in entry.body.block.ops:
        if not isinstance(call, func.CallOp):
            continue
        callee = kernels.get(call.callee.string_value())
        if callee is None:
            continue
        pairs = cache.setdefault(callee.sym_name.data, inplace_pairs(callee))
        for i, o in sorted(pairs):
            src, dst = by_value.get(call.arguments[i]), by_value.get(call.arguments[o])
            if src is None or dst is None or src is dst or dst.alloc in taken:
                continue
            if src.end != position[call] or dst.start != position[call]:
                continue  # the input is read later, or the output was written before
            if call.arguments.count(call.arguments[i]) != 1:
                continue
            src.end = dst.end
            taken[dst.alloc] = src.alloc
            by_value[dst.alloc.result] = src
            intervals.remove(dst)
    return taken


def _dynamic_plan(intervals: list[Interval], taken: dict[loop.AllocOp, loop.AllocOp]) -> None:
    """Buffers placed per binding: each gets its live range (`dyn_live`); an output that takes over
    a dying input's memory (`share_inplace`) becomes that input's buffer (its uses read the input's
    value, whose range `share_inplace` grew to cover them)."""
    for dst, src in taken.items():
        while src in taken:
            src = taken[src]
        dst.result.replace_all_uses_with(src.result)
        dst.detach()
        dst.erase()
    for iv in intervals:
        iv.alloc.attributes["dyn_live"] = DenseArrayBase.from_list(i64, [iv.start, iv.end])


@dataclass(frozen=True)
class PlanMemoryPass(ModulePass):
    """Assigns every intermediate of the model function an offset in one arena.

    **Input:** loop-level IR after `convert-te-to-loop`: the entry function
    (`entry`, default `main`) allocates each intermediate with
    `loop.alloc "global"` and passes it to kernel calls.

    **Output:** every such alloc gets an `arena_offset` attribute (bytes,
    64-byte aligned) that the LLVM backend honours. Buffers whose live
    ranges (first to last use among the entry's top-level ops) are disjoint
    share memory; placement is greedy best-fit, largest first. The module
    gets `plan.arena_bytes` (the planned arena) and `plan.unplanned_bytes`
    (the sum of all intermediates, what one slot each would take). A module
    without the entry function is left alone; allocs that already have an
    offset are an error (the pass ran twice). Where some buffer has a symbolic
    size (a model compiled for every shape, dialects/sym.py), every buffer gets
    its live range (`dyn_live`) instead: the executor places them at each new
    binding of the symbols, once their sizes are known, with the same best fit
    (arena.py), in an arena it passes to the entry; an in-place output is then
    the input's buffer itself.

    In-place: when a call's kernel is elementwise from an input to an output
    of the same type (`inplace_pairs`: every access at the variables of one
    spatial `loop.block`) and that input buffer dies at the call while the
    output is born there, the output takes the input's memory.

    **Options:** `entry` (str, default `main`): the model function;
    `inplace` (bool, default true): allow the in-place sharing above.

    Example:
    ```mlir
    %a = loop.alloc "global" : memref<1x64xf32>
    func.call @k0(%x, %a) : (memref<1x64xf32>, memref<1x64xf32>) -> ()
    %b = loop.alloc "global" : memref<1x64xf32>
    func.call @k1(%a, %b) : (memref<1x64xf32>, memref<1x64xf32>) -> ()
    %c = loop.alloc "global" : memref<1x64xf32>
    func.call @k2(%b, %c) : (memref<1x64xf32>, memref<1x64xf32>) -> ()
    ```
    becomes (`%c` reuses `%a`'s memory; arena 512 bytes instead of 768)
    ```mlir
    %a = loop.alloc "global" {arena_offset = 0 : i64} : memref<1x64xf32>
    %b = loop.alloc "global" {arena_offset = 256 : i64} : memref<1x64xf32>
    %c = loop.alloc "global" {arena_offset = 0 : i64} : memref<1x64xf32>
    ```
    """

    name = "plan-memory"
    entry: str = "main"
    inplace: bool = True

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        entry = next((f for f in op.ops if isinstance(f, func.FuncOp) and f.sym_name.data == self.entry), None)
        if entry is None or not entry.body.blocks:
            return
        intervals = live_intervals(entry)
        for iv in intervals:
            if "arena_offset" in iv.alloc.attributes:
                raise CompileError(
                    f"plan-memory: loop.alloc at {iv.alloc.location} in @{self.entry} already has an "
                    "arena_offset; run plan-memory once per module"
                )
        unplanned = sum(i.size for i in intervals)
        taken: dict[loop.AllocOp, loop.AllocOp] = {}
        if self.inplace:
            kernels = {f.sym_name.data: f for f in op.ops if isinstance(f, func.FuncOp) and f.body.blocks}
            taken = share_inplace(entry, intervals, kernels)
        if any(iv.dynamic for iv in intervals):
            _dynamic_plan(intervals, taken)
            intervals, taken = [], {}
        arena = assign_offsets(intervals)
        offsets = {iv.alloc: iv.offset for iv in intervals}
        for dst, src in taken.items():
            while src in taken:
                src = taken[src]
            offsets[dst] = offsets[src]
        for alloc, offset in offsets.items():
            alloc.attributes["arena_offset"] = IntegerAttr(offset, i64)
        op.attributes["plan.arena_bytes"] = IntegerAttr(arena, i64)
        op.attributes["plan.unplanned_bytes"] = IntegerAttr(unplanned, i64)
