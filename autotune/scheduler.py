"""The task scheduler of whole-model tuning: which kernel gets the next batch of trials.

A model's estimated latency is the sum over its distinct kernels of calls x best time so far
(`estimated_latency`; kernels without a measurement count at their default time, or not at all
before that is known). Tuning is worth what it takes off that sum, so, as in Ansor's task
scheduler (Zheng et al., OSDI 2020, section 6), the next batch goes to the kernel whose time is
expected to fall fastest per trial, weighted by its calls:

    gain_i = calls_i * (alpha * backward_i + (1 - alpha) * forward_i)

* `backward_i`: how fast its best time fell over its last `window` trials (seconds per trial);
* `forward_i`: an optimistic guess of how fast it can still fall, best_i / trials_i (a kernel
  tried little has the most left to find);
* a kernel below `min_share` (1%) of the estimated latency gets nothing after its first batch:
  no speedup of it can show in the model;
* a kernel whose search ran dry (`dry`) gets nothing, and one whose first batch measured nothing that
  ran has a gain of 0 (it is tried again only when no other kernel is expected to gain).

Every kernel's first batch (its default schedule is measured in it) comes before any other, in
order of calls x default time when that is known (a resumed run), else in the order given.

```python
sched = TaskScheduler(tasks)          # objects with .name, .calls, .best_cost, .default_cost, .trials
t = sched.next()                      # None when no task is left
... tune t for a batch ...
sched.observe(t)                      # after each batch: remembers (trials, best) for the gradient
```
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class _Task(Protocol):
    name: str
    calls: int
    best_cost: float
    default_cost: float
    trials: int


ALPHA = 0.2  # Ansor's weight of the backward gradient
WINDOW = 3  # batches over which the backward gradient is taken
MIN_SHARE = 0.01  # kernels under this share of the estimated latency are not tuned further


def _finite(x: float) -> bool:
    return math.isfinite(x) and x > 0


def time_of(t: _Task) -> float:
    """The task's time per call that the estimate uses: its best, else its default, else 0."""
    return t.best_cost if _finite(t.best_cost) else t.default_cost if _finite(t.default_cost) else 0.0


def estimated_latency(tasks: Sequence[_Task]) -> float:
    """Sum of calls x best time (seconds) over the tasks: the kernels' part of a model call."""
    return sum(t.calls * time_of(t) for t in tasks)


def default_latency(tasks: Sequence[_Task]) -> float:
    """Sum of calls x default time over the tasks whose default was measured."""
    return sum(t.calls * t.default_cost for t in tasks if _finite(t.default_cost))


def speedup(tasks: Sequence[_Task]) -> float:
    """Estimated model speedup over the default schedules (default latency / best latency, over the
    tasks with both measured); 1.0 before anything is known."""
    both = [t for t in tasks if _finite(t.default_cost) and _finite(t.best_cost)]
    best = sum(t.calls * t.best_cost for t in both)
    return sum(t.calls * t.default_cost for t in both) / best if best > 0 else 1.0


@dataclass
class TaskScheduler:
    """Hands out batches over `tasks` (see the module docstring)."""

    tasks: Sequence[Any]
    alpha: float = ALPHA
    window: int = WINDOW
    min_share: float = MIN_SHARE
    dry: set[str] = field(default_factory=set)
    history: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # name -> (trials, best) per batch
    _first: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        untried = [t for t in self.tasks if not _finite(t.best_cost)]
        self._first = sorted(untried, key=lambda t: -t.calls * time_of(t))  # stable: given order on ties
        for t in self.tasks:
            self.history.setdefault(t.name, [(t.trials, t.best_cost)] if _finite(t.best_cost) else [])

    def observe(self, t: Any) -> None:
        """Records task `t`'s trials and best after a batch."""
        self.history.setdefault(t.name, []).append((t.trials, t.best_cost))

    def mark_dry(self, t: Any) -> None:
        """Task `t`'s search space has nothing left to measure."""
        self.dry.add(t.name)

    def gain(self, t: Any) -> float:
        """Expected seconds per model call saved per trial of `t`."""
        best = t.best_cost
        if not _finite(best):  # its first batch measured nothing that ran: nothing known to gain
            return 0.0
        hist = self.history.get(t.name, [])
        backward = 0.0
        if len(hist) > 1:
            (n0, b0), (n1, b1) = hist[max(0, len(hist) - 1 - self.window)], hist[-1]
            if n1 > n0 and _finite(b0):
                backward = max(0.0, (b0 - b1) / (n1 - n0))
        forward = best / max(t.trials, 1)
        return t.calls * (self.alpha * backward + (1 - self.alpha) * forward)

    def skipped(self, t: Any) -> bool:
        """Whether `t` is under `min_share` of the estimated latency (after its first batch)."""
        total = estimated_latency(self.tasks)
        return _finite(t.best_cost) and total > 0 and t.calls * t.best_cost < self.min_share * total

    def next(self) -> Any | None:
        """The task for the next batch, or None when none is left to tune."""
        while self._first:
            t = self._first.pop(0)
            if t.name not in self.dry and not _finite(t.best_cost):
                return t
        live = [t for t in self.tasks if t.name not in self.dry and not self.skipped(t)]
        if not live:
            return None
        return max(live, key=self.gain)  # first of the ties: the given order


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str | float) -> float:
    """Seconds of a duration written `600`, `90s`, `10m`, `1.5h`; ValueError naming the text otherwise."""
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        s = text.strip().lower()
        scale = _UNITS.get(s[-1:], None)
        try:
            seconds = float(s[:-1] if scale else s) * (scale or 1.0)
        except ValueError:
            raise ValueError(f"'{text}' is not a duration; write seconds (600, 90s), minutes (10m) or hours (1h)") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"'{text}' is not a positive duration")
    return seconds
