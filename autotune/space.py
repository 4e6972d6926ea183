"""The search space: schedule traces for one loop-level kernel, from sketch rules.

Template-free rules in Ansor's manner, applied through the Schedule API
(`transforms/loop/primitives/api.py`) to each top-level loop nest of the kernel:

* every spatial loop is split into up to three tile levels (outer, middle,
  inner) with factors drawn from its divisors, powers of two preferred;
* the tiles are reordered outer-level first (`S0 S1 .. | S0' S1' .. | ...`),
  the reduction loops staying inside the innermost spatial tile;
* the outer tile loops are optionally fused and parallelized;
* the innermost spatial tile (outer-loop vectorization) or the innermost loop
  is vectorized, or nothing is;
* optionally (`reduce_outer`) the init block is decomposed out and the
  reduction loops move outside the innermost spatial tile (a register tile of
  partial sums: `S0 .. | S1 .. | R | S2 ..`, innermost loop vectorized;
  only without the unroll split below);
* the innermost reduction loop is optionally split by 2..16 and the inner part
  unrolled (never more than `MAX_UNROLL` = 16 iterations: full unrolling of a
  large loop makes LLVM compile for minutes).

A candidate's decisions are its `knobs` (plain JSON, one dict per nest); its
`trace` is the Schedule trace they produce (what records store and compile
time replays). `DEFAULT_TRACE` stands for the default schedule
(`lowering/pipelines.py` LOOP stage without convert-loop-to-hw). Traces are
replayed by `apply_trace` (transforms/schedule/replay.py, re-exported here),
the same code the compile-time `apply-tuning` pass runs. Every candidate is
built on a fresh copy of the kernel; a `ScheduleError` means the decisions
are illegal and the candidate is skipped, never recorded.

```python
space = SearchSpace(kernel_text, "matmul_0", vector_width=16)
cands = space.sample(random.Random(0), 16)     # legal Candidates only
cands[0].trace, cands[0].mlir                  # JSON trace, scheduled MLIR text
apply_trace(module, "matmul_0", cands[0].trace, vector_width=16)
```
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import builtin, func
from xdsl.parser import Parser

from ziggurat.database import DEFAULT_TRACE, structural_hash
from ziggurat.transforms.costs.features import extract_features
from ziggurat.autotune.template import (
    MAX_POINTS,
    default_knobs,
    dot_neighbours,
    fits,
    narrow_neighbours,
    random_nest_knobs,
    tile_points,
)
from ziggurat.dialects import loop, make_context
from ziggurat.errors import ScheduleError
from ziggurat.target import Target
from ziggurat.transforms.loop.primitives.api import Schedule
from ziggurat.transforms.loop.primitives.loops import bound_kinds, get_loops
from ziggurat.transforms.schedule.nest import ReduceNest, packable_a
from ziggurat.transforms.schedule.replay import apply_trace, kernel_of, reduce_nests

__all__ = ["DEFAULT_TRACE", "Candidate", "Nest", "SearchSpace", "apply_trace", "find_nests"]

TEMPLATE_SHARE = 0.9
MEMO_SIZE = 1024
MAX_UNROLL = 16
VECTORIZE = ("spatial", "innermost", "none")


@dataclass(frozen=True)
class Nest:
    """One top-level loop nest: its anchor block, and how many spatial / reduction loops surround it."""

    block: str
    extents: tuple[int, ...]
    n_spatial: int

    @property
    def n_reduce(self) -> int:
        return len(self.extents) - self.n_spatial


@dataclass
class Candidate:
    """A schedule of the kernel: decisions, the trace they produce, the scheduled module and its features.

    `mlir` (the scheduled text, what the builder compiles) is printed on first use: most candidates
    are only scored by the cost model, never measured."""

    knobs: Any
    trace: Any
    module: builtin.ModuleOp = field(repr=False)
    features: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    _text: str | None = field(default=None, repr=False, compare=False)

    @property
    def mlir(self) -> str:
        if self._text is None:
            self._text = str(self.module)
        return self._text

    @property
    def trace_hash(self) -> str:
        return structural_hash(self.trace)


def find_nests(fn: func.FuncOp) -> list[Nest]:
    """The schedulable top-level nests of `fn` (anchored at a block named once in `fn`)."""
    counts: dict[str, int] = {}
    for b in fn.walk():
        if isinstance(b, loop.BlockOp):
            counts[b.block_name.data] = counts.get(b.block_name.data, 0) + 1
    nests = []
    for top in fn.body.block.ops:
        if not isinstance(top, loop.ForOp):
            continue
        blocks = [b for b in top.walk() if isinstance(b, loop.BlockOp) and counts[b.block_name.data] == 1]
        if not blocks:
            continue
        anchor = max(blocks, key=lambda b: len(get_loops(b)))
        loops = get_loops(anchor)
        if any(f.kind.data != "serial" or f.bounds[0] != 0 or f.bounds[2] != 1 for f in loops):
            continue
        ns = 0
        while ns < len(loops) and "R" not in bound_kinds(loops[ns]):
            ns += 1
        nests.append(Nest(anchor.block_name.data, tuple(f.trip_count for f in loops), ns))
    return nests


def _divisors(n: int, cap: int) -> list[int]:
    return [d for d in range(1, min(n, cap) + 1) if n % d == 0]


def _pick_factor(rng: random.Random, n: int, cap: int) -> int:
    """A divisor of n up to cap; powers of two twice as likely."""
    ds = _divisors(n, cap)
    weights = [2.0 if d & (d - 1) == 0 else 1.0 for d in ds]
    return rng.choices(ds, weights)[0]


class SearchSpace:
    """Sketch-rule candidates for kernel `name` of a loop-level module (given as MLIR text)."""

    def __init__(self, kernel_text: str, name: str, vector_width: int = 16, num_threads: int = 1,
                 target: Target | None = None):
        self.text = kernel_text
        self.name = name
        self.vector_width = vector_width
        # what candidates are scheduled for: the tuner's target, else a target of `vector_width` lanes
        self.target: Target | int = target if target is not None else vector_width
        self.num_threads = num_threads
        self.module = Parser(make_context(), kernel_text).parse_module()
        self.nests = find_nests(kernel_of(self.module, name))
        self.templates = reduce_nests(kernel_of(self.module, name), vector_width)
        self._memo: dict[str, Candidate | None] = {}

    # -- template decisions (autotune/template.py) ----------------------------------
    def random_template(self, rng: random.Random) -> dict[str, Any]:
        return {"template": [random_nest_knobs(rng, nest, kind, self.vector_width)
                             for _, nest, kind in self.templates]}

    def seeds(self) -> list[dict[str, Any]]:
        """Template decisions to measure first: the default schedule's own, and its neighbours with
        more accumulators (a second tiled loop, 2 or 4 vectors per tile point; a dot-product tile at
        other factors)."""
        if not self.templates:
            return []
        base = default_knobs(kernel_of(self.module, self.name), self.vector_width)
        out = [{"template": base}]
        for i, ((_, nest, kind), k) in enumerate(zip(self.templates, base)):
            if kind == "dot":  # the tile's loops at every factor that fits the registers
                variants = dot_neighbours(nest, k, self.vector_width)
            elif self.vector_width < 16:  # 8 lanes: rows x 1..4 vectors, kc and packing around the 2-D block
                variants = narrow_neighbours(nest, k, self.vector_width)
            else:
                variants = self._wide_neighbours(nest, k)
            for v in variants:
                knobs = [dict(x) for x in base]
                knobs[i] = v
                out.append({"template": knobs})
        return out

    def _wide_neighbours(self, nest: ReduceNest, k: dict[str, Any]) -> list[dict[str, Any]]:
        """Neighbours of a 16-lane default block `k`: 2 or 4 vectors per tile point, a second tiled
        loop, and the input-channel reduction loop moved inward."""
        ub = nest.spatial[-1].trip_count
        variants = []
        for nvec in (2, 4):
            if ub % (nvec * self.vector_width) == 0:
                variants.append({**k, "nvec": nvec, "tile": [[d, u] for d, u in k["tile"]]})
        blocked = {d for d, _ in k["tile"]}
        for d in range(len(nest.spatial) - 1):
            trips = nest.spatial[d].trip_count
            if d in blocked or trips < 2:
                continue
            u = next((u for u in (2, 4, 3) if trips % u == 0), 0)
            if u and k["tile"] and k["tile"][0][1] * u <= MAX_POINTS:
                variants.append({**k, "tile": sorted([list(t) for t in k["tile"]] + [[d, u]])})
        n_red = len(nest.reduction)
        orders = []
        if n_red > 1:  # the first reduction loop (input channels) innermost, or next to innermost
            orders.append(list(range(1, n_red)) + [0])
        if n_red > 2:
            orders.append(list(range(1, n_red - 1)) + [0, n_red - 1])
        return variants + [{**v, "rorder": o} for o in orders for v in [k] + variants]

    # -- decisions -------------------------------------------------------------------
    def random_nest_knobs(self, rng: random.Random, nest: Nest) -> dict[str, Any]:
        tiles = []
        for n in nest.extents[:nest.n_spatial]:
            inner = _pick_factor(rng, n, 64)
            mid = _pick_factor(rng, n // inner, 16) if rng.random() < 0.5 else 1
            tiles.append([mid, inner])
        red = nest.extents[-1] if nest.n_reduce else 1
        unroll = _pick_factor(rng, red, MAX_UNROLL) if nest.n_reduce and rng.random() < 0.5 else 1
        return {"tiles": tiles, "parallel": rng.choice([0, 1, 2]) if self.num_threads > 1 else 0,
                "vectorize": rng.choices(VECTORIZE, [0.6, 0.25, 0.15])[0], "unroll": unroll,
                "reduce_outer": int(nest.n_reduce > 0 and rng.random() < 0.4)}

    def random_knobs(self, rng: random.Random) -> list[dict[str, Any]]:
        """Sketch-rule decisions, one dict per nest."""
        return [self.random_nest_knobs(rng, n) for n in self.nests]

    def random_decisions(self, rng: random.Random) -> Any:
        """Template decisions (`TEMPLATE_SHARE` of the time, when the kernel has a reduction nest the
        templates cover) or sketch-rule decisions: what `sample` draws."""
        if self.templates and rng.random() < TEMPLATE_SHARE:
            return self.random_template(rng)
        return self.random_knobs(rng)

    def mutate(self, rng: random.Random, knobs: Any) -> Any:
        """A copy of `knobs` with one decision of one nest redrawn."""
        new = json.loads(json.dumps(knobs))
        if isinstance(new, dict):
            i = rng.randrange(len(new["template"]))
            old = new["template"][i]
            _, nest, kind = self.templates[i]
            fresh = random_nest_knobs(rng, nest, kind, self.vector_width)
            what = "dot" if kind == "dot" else rng.choice(["tile", "tile", "nvec", "kc", "pack", "rorder", "sorder",
                                                           "jouter", "pack_a"])
            old[what] = fresh.get(what, 0)
            if what == "sorder" and "sorder" not in fresh:  # a nest with one spatial loop outside the vector
                del old["sorder"]
            if kind == "vector":
                if old.get("pack_a") and packable_a(nest, old["tile"]) is None:
                    old["pack_a"] = 0
                if old["pack"] and not old["kc"]:
                    old["pack"] = 0
                if what == "pack" and old["pack"] and not fresh["pack"]:
                    old["pack"] = 0
                if not fits(old["nvec"] * tile_points(old["tile"]), old["nvec"], self.vector_width):
                    new["template"][i] = fresh
            return new
        if not new:
            return new
        i = rng.randrange(len(new))
        fresh = self.random_nest_knobs(rng, self.nests[i])
        choices = ["vectorize", "unroll", "reduce_outer"] + (["parallel"] if self.num_threads > 1 else [])
        choices += [("tiles", a) for a in range(len(fresh["tiles"]))]
        what = rng.choice(choices)
        if isinstance(what, tuple):
            new[i]["tiles"][what[1]] = fresh["tiles"][what[1]]
        else:
            new[i][what] = fresh[what]
        return new

    # -- building ----------------------------------------------------------------------
    def _schedule_nest(self, sch: Schedule, nest: Nest, k: dict[str, Any]) -> None:
        loops = sch.get_loops(nest.block)
        spatial, reduce = loops[:nest.n_spatial], loops[nest.n_spatial:]
        levels: list[list] = [[], [], []]  # outer, middle, inner tile loops, per axis
        for rv, n, (mid, inner) in zip(spatial, nest.extents, k["tiles"]):
            parts = [rv]
            if inner > 1 and inner < n:
                parts = list(sch.split(parts[-1], inner))
            if mid > 1 and len(parts) == 2 and mid < n // inner:
                parts = list(sch.split(parts[0], mid)) + [parts[1]]
            for lvl, p in zip(range(3 - len(parts), 3), parts):
                levels[lvl].append(p)
        order = [rv for lvl in levels for rv in lvl]
        if len(order) > len(spatial):
            order = sch.reorder(*order)
        outer = order[:len(levels[0])]
        pos = len(order) - len(levels[2])
        if k.get("reduce_outer") and k["unroll"] <= 1 and reduce and 0 < pos < len(order):
            # register tile: S.. | R | inner spatial tile (init block decomposed into its own nest first)
            sch.decompose_reduction(nest.block, sch.get_loops(nest.block)[pos])
            loops = sch.get_loops(nest.block)
            sch.reorder(*loops[len(order):], *loops[pos:len(order)])
            if k["parallel"] and order:
                sch.parallel(order[0])
            if k["vectorize"] != "none":
                sch.vectorize(sch.get_loops(nest.block)[-1])
            return
        if k["parallel"] == 2 and len(outer) >= 2:
            sch.parallel(sch.fuse(outer[0], outer[1]))
        elif k["parallel"] and order:
            sch.parallel(order[0])
        if k["unroll"] > 1 and reduce:
            _, inner_r = sch.split(reduce[-1], k["unroll"])
            sch.unroll(inner_r)
        if k["vectorize"] == "spatial" and order:
            sch.vectorize(sch.get_loops(nest.block)[len(order) - (k["parallel"] == 2 and len(outer) >= 2) - 1])
        elif k["vectorize"] == "innermost":
            sch.vectorize(sch.get_loops(nest.block)[-1])

    def build(self, knobs: Any) -> Candidate | None:
        """The candidate for `knobs` (or the default schedule), or None when illegal (memoized: the
        search rebuilds the same decisions often)."""
        memo_key = json.dumps(knobs, sort_keys=True)
        if memo_key not in self._memo:
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            self._memo[memo_key] = self._build(knobs)
        return self._memo[memo_key]

    def _build(self, knobs: Any) -> Candidate | None:
        module = self.module.clone()
        try:
            if knobs == DEFAULT_TRACE or isinstance(knobs, dict):
                apply_trace(module, self.name, knobs, self.target)
                trace: Any = knobs
            else:
                sch = Schedule(kernel_of(module, self.name))
                for nest, k in zip(self.nests, knobs):
                    self._schedule_nest(sch, nest, k)
                trace = sch.trace
                module.verify()  # template decisions are legal by construction (and verified when built)
        except ScheduleError:
            return None
        except Exception as err:  # noqa: BLE001 - a verifier failure of a sketch is an illegal candidate too
            if "verif" not in type(err).__name__.lower():
                raise
            return None
        return Candidate(knobs, trace, module, extract_features(module, self.name))

    def default(self) -> Candidate:
        cand = self.build(DEFAULT_TRACE)
        assert cand is not None
        return cand

    def sample(self, rng: random.Random, n: int, max_tries: int | None = None) -> list[Candidate]:
        """Up to `n` distinct legal candidates from random decisions."""
        out: dict[str, Candidate] = {}
        for _ in range(max_tries or 10 * n):
            if len(out) >= n:
                break
            cand = self.build(self.random_decisions(rng))
            if cand is not None:
                out.setdefault(cand.trace_hash, cand)
        return list(out.values())
