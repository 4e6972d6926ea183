"""Placing buffers in one arena by their live ranges (pure Python: the compiler and the runtime).

plan-memory (transforms/loop/plan_memory.py) places the static intermediates of a model at
compile time; a model compiled for every shape (runtime/symbolic_model.py) places its buffers
of symbolic size the same way at each new binding of its symbols, once their sizes are known.

    slots = [Slot(size=256, start=0, end=1), Slot(size=256, start=1, end=2), Slot(size=256, start=2, end=3)]
    assign_offsets(slots)   # 512: the third reuses the first's bytes
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ALIGN = 64


@dataclass
class Slot:
    """One buffer: its size in bytes and the positions (top-level ops) where it is live."""

    size: int
    start: int
    end: int
    offset: int = -1

    def overlaps(self, other: Slot) -> bool:
        return self.start <= other.end and other.start <= self.end


def assign_offsets(intervals: Sequence) -> int:
    """Greedy best fit, largest buffers first: the lowest offset clear of every live-overlapping
    buffer already placed (each item has `size`, `start`, `end`, `overlaps` and gets `offset`).
    Returns the arena size in bytes."""
    placed: list = []
    for iv in sorted(intervals, key=lambda i: (-i.size, i.start)):
        busy = sorted((p.offset, p.offset + p.size) for p in placed if p.overlaps(iv))
        offset = 0
        for lo, hi in busy:
            if offset + iv.size <= lo:
                break
            offset = max(offset, hi)
        iv.offset = offset
        placed.append(iv)
    return max((i.offset + i.size for i in intervals), default=0)
