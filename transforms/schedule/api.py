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
from ziggurat.transforms.schedule.decompose_reduction import decompose_reduction
from ziggurat.transforms.schedule.fuse import fuse
from ziggurat.transforms.schedule.loops import get_block, get_loops
from ziggurat.transforms.schedule.parallel import parallel
from ziggurat.transforms.schedule.reorder import reorder
from ziggurat.transforms.schedule.split import split
from ziggurat.transforms.schedule.unroll import unroll
from ziggurat.transforms.schedule.vectorize import vectorize


@dataclass(frozen=True)
class BlockRV:
    name: str


@dataclass(frozen=True)
class LoopRV:
    op: loop.ForOp
    block: str


PRIMITIVES = ("split", "fuse", "reorder", "parallel", "vectorize", "unroll", "decompose_reduction")


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

    # -- trace -------------------------------------------------------------------------
    def trace_json(self) -> str:
        return json.dumps(self.trace)

    def apply(self, step: dict[str, Any]) -> None:
        """Runs one trace step (as recorded by the methods above)."""
        prim = step.get("prim")
        if prim not in PRIMITIVES:
            raise ScheduleError(f"unknown schedule primitive '{prim}' in trace step {step}; known: {PRIMITIVES}")
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
