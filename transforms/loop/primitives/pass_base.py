"""What the one-primitive passes (loop-split, loop-reorder, ...) share: find
every kernel function holding the named block and apply one trace step."""

from __future__ import annotations

from typing import Any

from xdsl.dialects import builtin, func

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.api import Schedule


def apply_step(module: builtin.ModuleOp, kernel: str, step: dict[str, Any]) -> None:
    """Applies `step` in every kernel (or the one named `kernel`) that has the block."""
    name = step["block"]
    hits = 0
    for fn in [f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data != "main"]:
        if kernel and fn.sym_name.data != kernel:
            continue
        if not any(isinstance(b, loop.BlockOp) and b.block_name.data == name for b in fn.walk()):
            continue
        Schedule(fn).apply(step)
        hits += 1
    if not hits:
        where = f"kernel @{kernel}" if kernel else "any kernel"
        raise ScheduleError(f"{step['prim']}: no block '{name}' in {where}")
