"""The `--time-passes` report of `ziggurat-opt` and `ziggurat compile`."""

from __future__ import annotations

import math


def seconds(value: float, digits: int = 4) -> str:
    """`value` in fixed notation with `digits` significant digits (0.01234, 1.234, 123.4)."""
    if value <= 0 or not math.isfinite(value):
        return f"{0:.{digits - 1}f}"
    decimals = max(0, digits - 1 - math.floor(math.log10(value)))
    return f"{value:.{decimals}f}"


def timing_table(timings: list[tuple[str, float]]) -> str:
    """Rows of (name, seconds) as a table: each row's seconds (4 significant digits) and share of
    the total, then the total (the `--time-passes` report, on stderr)."""
    total = sum(s for _, s in timings)
    width = max([len(n) for n, _ in timings] + [len("total")])
    cells = [(name, seconds(s), f"{s / total if total > 0 else 0.0:.1%}") for name, s in timings]
    cells.append(("total", seconds(total), f"{1:.1%}"))
    col = max(len("seconds"), *(len(c[1]) for c in cells))
    lines = [f"{'pass':{width}s}  {'seconds':>{col}s}  {'share':>6s}"]
    lines += [f"{name:{width}s}  {secs:>{col}s}  {share:>6s}" for name, secs, share in cells]
    return "\n".join(lines)
