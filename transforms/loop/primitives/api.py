"""`Schedule`: a TensorIR-style API over one loop-level kernel that records a
replayable, JSON-serializable trace.

```python
sch = Schedule(module, "matmul_0")          # or Schedule(func_op)
blk = sch.get_block("matmul")
i, j, k = sch.get_loops(blk)
io, ii = sch.split(i, 4)
sch.reorder(io, j, ii)  # raises ScheduleError when illegal
sch.parallel(io)
text = sch.trace_json()                     # replay on a fresh lowering:
Schedule(fresh_module, "matmul_0").replay(json.loads(text))
```

The block-level primitives compose the way TensorIR schedules do, e.g. a
packed panel of B per column tile and a write-back per row of C:

```python
b_pack = sch.cache_read("matmul", 1)            # copy block "matmul_read1"
sch.compute_at(b_pack, sch.get_loops("matmul")[1])
c_tile = sch.cache_write("matmul")              # write-back block "matmul_write0"
sch.reverse_compute_at(c_tile, sch.get_loops("matmul")[0])
```
or, on a fresh lowering, a reduction split into 16 vector lanes of partial sums:
```python
rf = sch.rfactor(sch.split(sch.get_loops("matmul")[2], 16)[1])   # block "matmul_rf"
sch.vectorize(sch.get_loops(rf)[-1])
```

Every step of these primitives first runs on a copy of the function, so a
ScheduleError leaves the IR and the trace as they were.

A loop handle is a `LoopRV`: the block it was reached from and its position
among that block's loops *when the primitive runs*; the trace stores exactly
that, so a replay finds the same loops in a freshly lowered function.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import builtin, func

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.cache_read import cache_read
from ziggurat.transforms.loop.primitives.cache_write import cache_write
from ziggurat.transforms.loop.primitives.compute_at import compute_at
from ziggurat.transforms.loop.primitives.compute_inline import compute_inline
from ziggurat.transforms.loop.primitives.decompose_reduction import decompose_reduction
from ziggurat.transforms.loop.primitives.fuse import fuse
from ziggurat.transforms.loop.primitives.loops import get_block, get_loops
from ziggurat.transforms.loop.primitives.parallel import parallel
from ziggurat.transforms.loop.primitives.reorder import reorder
from ziggurat.transforms.loop.primitives.reverse_compute_at import reverse_compute_at
from ziggurat.transforms.loop.primitives.rfactor import rfactor
from ziggurat.transforms.loop.primitives.split import split
from ziggurat.transforms.loop.primitives.storage_align import storage_align
from ziggurat.transforms.loop.primitives.tensorize import tensorize
from ziggurat.transforms.loop.primitives.tile import tile
from ziggurat.transforms.loop.primitives.unroll import unroll
from ziggurat.transforms.loop.primitives.vectorize import vectorize


@dataclass(frozen=True)
class BlockRV:
    name: str


@dataclass(frozen=True)
class LoopRV:
    op: loop.ForOp
    block: str


# Steps of the primitives below tile: {"prim", "block", ...} with these further keys.
STEP_KEYS = {
    "tile": ("loops", "factors"),
    "compute_at": ("at", "loop"),
    "reverse_compute_at": ("at", "loop"),
    "compute_inline": (),
    "cache_read": ("buffer",),
    "cache_write": ("buffer",),
    "rfactor": ("loop",),
    "storage_align": ("buffer", "axis", "factor", "offset"),
    "tensorize": ("loop", "intrin"),
}
PRIMITIVES = ("split", "fuse", "reorder", "parallel", "vectorize", "unroll", "decompose_reduction", *STEP_KEYS)


def _name(blk: BlockRV | str) -> str:
    return blk.name if isinstance(blk, BlockRV) else blk


class Schedule:
    """Schedules one kernel function in place and records the trace."""

    def __init__(self, target: builtin.ModuleOp | func.FuncOp, kernel: str | None = None):
        if isinstance(target, func.FuncOp):
            self.func = target
        else:
            kernels = [f for f in target.ops if isinstance(f, func.FuncOp) and f.sym_name.data != "main"
                       and (kernel is None or f.sym_name.data == kernel)]
            if len(kernels) != 1:
                names = [f.sym_name.data for f in target.ops if isinstance(f, func.FuncOp)]
                raise ScheduleError(f"Schedule: name one kernel function (kernel=...) among {names}")
            self.func = kernels[0]
        self.trace: list[dict[str, Any]] = []
        self._probe = False

    # -- lookup ------------------------------------------------------------------
    def get_block(self, name: str) -> BlockRV:
        get_block(self.func, name)
        return BlockRV(name)

    def get_loops(self, blk: BlockRV | str) -> list[LoopRV]:
        name = blk.name if isinstance(blk, BlockRV) else blk
        return [LoopRV(f, name) for f in get_loops(get_block(self.func, name))]

    def _index(self, rv: LoopRV) -> int:
        loops = get_loops(get_block(self.func, rv.block))
        for n, f in enumerate(loops):
            if f is rv.op:
                return n
        raise ScheduleError(f"a loop handle of block '{rv.block}' no longer exists (a primitive replaced it); "
                            "get the loops again with get_loops")

    # -- primitives ----------------------------------------------------------------
    def split(self, rv: LoopRV, factor: int) -> tuple[LoopRV, LoopRV]:
        """Inner loop of `factor` iterations (`[None, factor]` is accepted too)."""
        if isinstance(factor, (list, tuple)):
            factor = factor[-1]
        step = {"prim": "split", "block": rv.block, "loop": self._index(rv), "factor": int(factor)}
        outer, inner = split(rv.op, int(factor))
        self.trace.append(step)
        return LoopRV(outer, rv.block), LoopRV(inner, rv.block)

    def fuse(self, outer: LoopRV, inner: LoopRV) -> LoopRV:
        step = {"prim": "fuse", "block": outer.block, "loop": self._index(outer), "inner": self._index(inner)}
        fused = fuse(outer.op, inner.op)
        self.trace.append(step)
        return LoopRV(fused, outer.block)

    def reorder(self, *rvs: LoopRV) -> list[LoopRV]:
        step = {"prim": "reorder", "block": rvs[0].block, "loops": [self._index(r) for r in rvs]}
        new = reorder([r.op for r in rvs])
        self.trace.append(step)
        return [LoopRV(f, rvs[0].block) for f in new]

    def _mark(self, prim: str, rv: LoopRV, fn) -> None:
        step = {"prim": prim, "block": rv.block, "loop": self._index(rv)}
        fn(rv.op)
        self.trace.append(step)

    def parallel(self, rv: LoopRV) -> None:
        self._mark("parallel", rv, parallel)

    def vectorize(self, rv: LoopRV) -> None:
        self._mark("vectorize", rv, vectorize)

    def unroll(self, rv: LoopRV) -> None:
        self._mark("unroll", rv, unroll)

    def decompose_reduction(self, blk: BlockRV | str, rv: LoopRV) -> BlockRV:
        """Moves the init block of reduction `blk` into its own nest before loop `rv`; returns the init block."""
        name = blk.name if isinstance(blk, BlockRV) else blk
        update = get_block(self.func, name)
        inits = [b for b in self.func.walk() if isinstance(b, loop.BlockOp) and b.block_name.data == f"{name}_init"]
        if rv.block != name:
            found = [n for n, f in enumerate(get_loops(update)) if f is rv.op]
            if not found:
                raise ScheduleError(f"decompose_reduction: loop handle of block '{rv.block}' is not a loop around "
                                    f"block '{name}'")
            rv = LoopRV(rv.op, name)
        step = {"prim": "decompose_reduction", "block": name, "loop": self._index(rv)}
        decompose_reduction(update, inits[0] if len(inits) == 1 else None, rv.op)
        self.trace.append(step)
        return BlockRV(f"{name}_init")

    def tile(self, loops: list[LoopRV], factors: list[int]) -> list[LoopRV]:
        """Splits each loop by its factor; returns the outer loops then the inner loops."""
        blk = loops[0].block
        step = {"prim": "tile", "block": blk, "loops": [self._index(LoopRV(r.op, blk)) for r in loops],
                "factors": [int(k) for k in factors]}
        return [LoopRV(f, blk) for f in self._run(step)]

    def compute_at(self, blk: BlockRV | str, rv: LoopRV) -> None:
        """Moves producer `blk` under loop `rv` (of its consumer), computing only the region read there."""
        self._run({"prim": "compute_at", "block": _name(blk), "at": rv.block, "loop": self._index(rv)})

    def reverse_compute_at(self, blk: BlockRV | str, rv: LoopRV) -> None:
        """Moves consumer `blk` under loop `rv` (of its producer), consuming the region finished there."""
        self._run({"prim": "reverse_compute_at", "block": _name(blk), "at": rv.block, "loop": self._index(rv)})

    def compute_inline(self, blk: BlockRV | str) -> None:
        self._run({"prim": "compute_inline", "block": _name(blk)})

    def cache_read(self, blk: BlockRV | str, buffer: int) -> BlockRV:
        """Copies the `buffer`-th buffer `blk` reads into a local one; returns the copy block."""
        return BlockRV(self._run({"prim": "cache_read", "block": _name(blk), "buffer": int(buffer)}).block_name.data)

    def cache_write(self, blk: BlockRV | str, buffer: int = 0) -> BlockRV:
        """Makes `blk` write its `buffer`-th output to a local buffer; returns the write-back block."""
        return BlockRV(self._run({"prim": "cache_write", "block": _name(blk), "buffer": int(buffer)}).block_name.data)

    def rfactor(self, rv: LoopRV, blk: BlockRV | str | None = None) -> BlockRV:
        """Turns reduction loop `rv` of `blk` (default: the block `rv` came from) into a partial-result axis;
        returns the block computing the partial results."""
        name = rv.block if blk is None else _name(blk)
        step = {"prim": "rfactor", "block": name, "loop": self._index(LoopRV(rv.op, name))}
        return BlockRV(self._run(step).block_name.data)

    def storage_align(self, blk: BlockRV | str, buffer: int, axis: int, factor: int, offset: int) -> None:
        self._run({"prim": "storage_align", "block": _name(blk), "buffer": int(buffer), "axis": int(axis),
                   "factor": int(factor), "offset": int(offset)})

    def tensorize(self, rv: LoopRV, intrin: str) -> None:
        """Replaces the loop nest rooted at `rv` with tensor intrinsic `intrin` (see lowering/tensor_intrin.py)."""
        self._run({"prim": "tensorize", "block": rv.block, "loop": self._index(rv), "intrin": str(intrin)})

    def _run(self, step: dict[str, Any]) -> Any:
        """Runs a step of the primitives above: first on a copy of the function, so that a ScheduleError
        leaves the IR untouched, then for real."""
        if not self._probe:
            probe = Schedule(self.func.clone())
            probe._probe = True
            probe._run(step)
        out = self._exec(step)
        self.trace.append(step)
        return out

    def _exec(self, step: dict[str, Any]) -> Any:
        prim, fn = step["prim"], self.func
        blk = get_block(fn, step["block"])

        def loop_of(block: str, n: int) -> loop.ForOp:
            loops = get_loops(get_block(fn, block))
            if not 0 <= n < len(loops):
                raise ScheduleError(f"{prim}: block '{block}' has {len(loops)} loops, there is no loop {n}")
            return loops[n]

        if prim == "tile":
            return tile([loop_of(step["block"], n) for n in step["loops"]], step["factors"])
        if prim == "compute_at":
            return compute_at(fn, blk, loop_of(step["at"], step["loop"]))
        if prim == "reverse_compute_at":
            return reverse_compute_at(fn, blk, loop_of(step["at"], step["loop"]))
        if prim == "compute_inline":
            return compute_inline(fn, blk)
        if prim == "cache_read":
            return cache_read(fn, blk, step["buffer"])
        if prim == "cache_write":
            return cache_write(fn, blk, step["buffer"])
        if prim == "tensorize":
            return tensorize(fn, loop_of(step["block"], step["loop"]), step["intrin"])
        if prim == "rfactor":
            return rfactor(fn, blk, loop_of(step["block"], step["loop"]))
        return storage_align(fn, blk, step["buffer"], step["axis"], step["factor"], step["offset"])

    # -- trace -------------------------------------------------------------------------
    def trace_json(self) -> str:
        return json.dumps(self.trace)

    def apply(self, step: dict[str, Any]) -> None:
        """Runs one trace step (as recorded by the methods above)."""
        prim = step.get("prim")
        if prim not in PRIMITIVES:
            raise ScheduleError(f"unknown schedule primitive '{prim}' in trace step {step}; known: {PRIMITIVES}")
        if prim in STEP_KEYS:
            missing = [k for k in ("block", *STEP_KEYS[prim]) if k not in step]
            if missing:
                raise ScheduleError(f"{prim}: trace step {step} lacks {missing}")
            self._run(step)
            return
        loops = self.get_loops(step["block"])

        def at(n: int) -> LoopRV:
            if not 0 <= n < len(loops):
                raise ScheduleError(f"{prim}: block '{step['block']}' has {len(loops)} loops, there is no loop {n}")
            return loops[n]

        if prim == "split":
            self.split(at(step["loop"]), step["factor"])
        elif prim == "fuse":
            self.fuse(at(step["loop"]), at(step["inner"]))
        elif prim == "reorder":
            self.reorder(*(at(n) for n in step["loops"]))
        elif prim == "decompose_reduction":
            self.decompose_reduction(step["block"], at(step["loop"]))
        else:
            getattr(self, prim)(at(step["loop"]))

    def replay(self, trace: list[dict[str, Any]]) -> None:
        for step in trace:
            self.apply(step)
