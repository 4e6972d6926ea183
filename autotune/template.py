"""Template knobs for reduction nests (GEMM, conv, dense): the search space of register-block plans.

The sketch rules of `space.py` only split, reorder, vectorize, parallelize and
unroll; they cannot build what makes the default schedule fast (a local
accumulator tile kept in registers, a blocked reduction, packed B panels), so
no sketch candidate beats it. The knobs of one nest are a `BlockPlan`
(transforms/schedule/plan.py) in JSON form (`BlockPlan.from_knobs`): the
default schedule's decisions (`default_knobs`) widened into a space to sample,
mutate and search around. The builder (transforms/schedule/block.py) and the
replay (transforms/schedule/replay.py) are the default schedule's own; this
module only draws knobs:

* `tile`: the register tile over spatial loops other than the vectorized
  last one `L`: up to two `[loop index, factor]` pairs (the default blocks one
  loop that no streamed read uses; here any divisor up to 16, of any loop,
  e.g. the output rows of a conv as well as its output channels);
* `nvec`: vectors along `L` per tile point (the default: 1); needs `L`'s
  extent to be a multiple of `nvec * vector-width`;
* `kc`: reduction block (0: none), a divisor of the outer reduction loop;
* `rorder`: the order of the reduction loops, outermost first (a conv's
  input-channel loop innermost keeps the padding masks of a filter tap
  loop-invariant);
* `sorder`: the order of the spatial loops other than `L`, outermost first
  (nests with at least two of them; absent: as they are). It also picks the
  parallel loop, the outermost one with more than one trip: a conv's output
  rows instead of its output-channel blocks, so that each thread reads its
  own band of the input rather than all of it;
* `pack`: pack the streamed operand's k-slices into `[panel][kc][width]`
  panels (plain 2-D matmul with `kc` only);
* `pack_a`: copy the register block's rows of A (per k-block) into a
  contiguous `[depth][rows]` sliver before the column loop (plain 2-D matmul
  whose tile blocks the row loop only: `block.pack_a_slivers`); with
  `jouter` every row block's sliver of the k-block, before the panel loop;
* `mc`: with `jouter`, the outermost spatial loop cut into blocks of `mc`
  (a multiple of its tile factor that divides it) outside the panel loop,
  so a panel stays in L1 while an mc-row block of A stays in L2 (GotoBLAS's
  ic / jr / ir loops; 0 or absent: no cut);
* `dot`: for nests the default gives a dot-product tile (dense with a
  transposed weight), the `[loop index, factor]` pairs of that tile.

A template trace is `{"template": [knobs per nest]}`; `replay.apply_template`
builds those plans and then runs the rest of the default LOOP stage
(`loop-default-schedule` leaves the already scheduled nests alone and
schedules any other, then `loop-parallelize-outer`, `loop-vectorize-innermost`).

```python
knobs = default_knobs(fn)                 # the default schedule's own plans
apply_trace(module, "matmul_0", {"template": knobs}, vector_width=16)
```
"""

from __future__ import annotations

import random
from typing import Any

from xdsl.dialects import func

from ziggurat.transforms.schedule.nest import ReduceNest, packable_a, packable_b
from ziggurat.transforms.schedule.plan import MAX_ACC, BlockPlan, default_plan, mc_choices
from ziggurat.transforms.schedule.replay import prepare, reduce_nests

MAX_TILE = 16
MAX_POINTS = 28  # accumulators (tile points x nvec): 32 zmm registers, a few for the operands
NARROW_REGISTERS = 16  # ymm registers of an 8-lane (AVX2) target
KC_CHOICES = (64, 128, 192, 256, 384, 512)


def fits(points: int, nvec: int, width: int) -> bool:
    """Whether `points` accumulators (tile points x nvec) fit the register file: 28 of the 32 zmm
    registers with 16 lanes; with 8 lanes at most `MAX_ACC` (12, as the default block), and the
    accumulators, the `nvec` streamed vectors and one broadcast within the 16 ymm registers (6 rows x 2
    vectors: 12 + 2 + 1; a conv block of 2 output-channel vectors x 7 rows spills and runs 2x slower)."""
    if width >= 16:
        return points <= MAX_POINTS
    return points <= MAX_ACC and points + nvec + 1 <= NARROW_REGISTERS


def _divisors(n: int, cap: int) -> list[int]:
    return [d for d in range(1, min(n, cap) + 1) if n % d == 0]


def default_knobs(fn: func.FuncOp, width: int = 16) -> list[dict[str, Any]]:
    """The default schedule's plans (`plan.default_plan`), one dict per reduction nest, in template
    form, read from the nests as the default schedule sees them (padded inputs copied, `replay.prepare`):
    the 2-D register block (rows x 2 vectors) where it applies, else the one-vector block or the
    dot-product tile. `fn` is left unchanged."""
    out = []
    for name, nest, _ in reduce_nests(prepare(fn.clone()), width):
        p = default_plan(nest, width)
        assert p is not None  # reduce_nests lists the nests the default plans
        out.append(p.to_knobs(name))
    return out


def random_nest_knobs(rng: random.Random, nest: ReduceNest, kind: str, width: int) -> dict[str, Any]:
    """Random template decisions for one reduction nest (always legal by construction)."""
    name = nest.update.block_name.data
    n = len(nest.spatial)
    if kind == "dot":
        cands = [d for d, f in enumerate(nest.spatial) if f.trip_count > 1]
        for _ in range(20):
            tile = []
            for d in sorted(rng.sample(cands, min(len(cands), rng.choice([1, 2])))):
                u = rng.choice(_divisors(nest.spatial[d].trip_count, MAX_TILE))
                if u > 1:
                    tile.append([d, u])
            if fits(tile_points(tile), 1, width):
                break
        else:
            tile = []
        return {"block": name, "kind": "dot", "dot": tile}
    ub = nest.spatial[-1].trip_count
    loops = [d for d in range(n - 1) if nest.spatial[d].trip_count > 1]
    red = nest.reduction[0].trip_count
    kcs = [k for k in KC_CHOICES if red >= k and red % k == 0]  # kc = red: one block (packed B, no reload)
    kc = rng.choice([0] + kcs) if kcs else 0
    pack = int(kc > 0 and packable_b(nest, kc, width) is not None and rng.random() < 0.8)
    nvecs = [1] + [v for v in (2, 3, 4) if ub % (v * width) == 0]  # one vector needs no divisor
    for _ in range(20):
        nvec = rng.choice(nvecs)
        tile = []
        for d in sorted(rng.sample(loops, min(len(loops), rng.choice([1, 1, 2])))):
            u = rng.choice(_divisors(nest.spatial[d].trip_count, MAX_TILE))
            if u > 1:
                tile.append([d, u])
        if fits(nvec * tile_points(tile), nvec, width):
            knobs = {"block": name, "kind": "vector", "tile": tile, "nvec": nvec, "kc": kc, "pack": pack,
                     "rorder": _random_order(rng, len(nest.reduction)),
                     "jouter": int((pack or nvec > 1) and rng.random() < 0.25),  # 10-40% slower on Zen 3
                     "pack_a": int(packable_a(nest, tile) is not None and rng.random() < 0.5)}
            if n > 2:
                knobs["sorder"] = _random_order(rng, n - 1)
            mcs = mc_choices(nest, BlockPlan.from_knobs(knobs), width)
            if mcs and rng.random() < 0.5:
                knobs["mc"] = rng.choice(mcs)
            return knobs
    return {"block": name, "kind": "vector", "tile": [], "nvec": 1, "kc": kc, "pack": pack,
            "rorder": list(range(len(nest.reduction)))}


def tile_points(tile: list[list[int]]) -> int:
    """Register-tile points of a `tile` / `dot` knob: the product of its factors."""
    points = 1
    for _, u in tile:
        points *= u
    return points


def dot_neighbours(nest: ReduceNest, k: dict[str, Any], width: int) -> list[dict[str, Any]]:
    """Neighbours of a default dot-product tile `k` to measure first: each loop of the tile at every
    factor whose accumulators fit the registers (`fits`), the others as they are. The default's
    `DOT_BLOCKING` stops at 4 rows; a one-row matrix-vector product reads from L3 with 8 (8 rows:
    8 weight streams, 8 FMA chains; measured 2% faster on mlp_784_512_256_10 and 4.7% slower on
    lstm_seq16_h128, so it is the tuner's choice, not the default's)."""
    out: list[dict[str, Any]] = []
    for i, (d, _) in enumerate(k["dot"]):
        for u in _divisors(nest.spatial[d].trip_count, MAX_TILE):
            tile = [list(t) for t in k["dot"]]
            tile[i] = [d, u]
            tile = [t for t in tile if t[1] > 1]
            v = {**k, "dot": tile}
            if v != k and v not in out and fits(tile_points(tile), 1, width):
                out.append(v)
    return out


def narrow_neighbours(nest: ReduceNest, k: dict[str, Any], width: int) -> list[dict[str, Any]]:
    """Neighbours of an 8-lane default block `k` (rows x nvec vectors) to measure first: every
    register-fitting rows x 1..4 vectors along the blocked loops, a kc of 0 or each legal choice
    (packed where the operand packs), packing toggled."""
    ub = nest.spatial[-1].trip_count
    red = nest.reduction[0].trip_count
    out: list[dict[str, Any]] = []

    def add(v: dict[str, Any]) -> None:
        if v.get("pack_a") and packable_a(nest, v["tile"]) is None:
            v = {**v, "pack_a": 0}
        if v != k and v not in out and fits(v["nvec"] * tile_points(v["tile"]), v["nvec"], width) \
                and not (v["pack"] and not v["kc"]):
            out.append(v)

    nvecs = [1] + [v for v in (2, 3, 4) if ub % (v * width) == 0]
    for i, (d, _) in enumerate(k["tile"]):
        for u in _divisors(nest.spatial[d].trip_count, MAX_TILE):
            tile = [list(t) for t in k["tile"]]
            tile[i] = [d, u]
            tile = [t for t in tile if t[1] > 1]
            for nvec in nvecs:
                add({**k, "tile": tile, "nvec": nvec,
                     "pack": int(k["kc"] > 0 and packable_b(nest, k["kc"], width) is not None)})
    for kc in [0] + [c for c in KC_CHOICES if red >= c and red % c == 0]:
        pack = int(kc > 0 and packable_b(nest, kc, width) is not None)
        add({**k, "kc": kc, "pack": pack})
        if pack:
            add({**k, "kc": kc, "pack": 0})
    if k["pack"]:
        add({**k, "pack": 0})
    if packable_a(nest, k["tile"]) is not None:  # the rows' A sliver copied (or not), at each kc
        for v in [k] + [v for v in out if v["tile"] == k["tile"] and v["nvec"] == k["nvec"] and not v.get("jouter")]:
            add({**v, "pack_a": 1 - v.get("pack_a", 0)})
    if k["pack"] or k["nvec"] > 1:  # the panel loop outside the rows, at each kc
        for kc in [c for c in [k["kc"]] + list(KC_CHOICES) if c == 0 or red >= c and red % c == 0]:
            v = {**k, "kc": kc, "pack": int(kc > 0 and packable_b(nest, kc, width) is not None), "jouter": 1}
            add(v)
            for mc in [m for m in mc_choices(nest, BlockPlan.from_knobs(v), width) if m in (32, 64, 128)]:  # rows cut outside it
                add({**v, "mc": mc})
    n_red = len(nest.reduction)
    if n_red > 1:  # the first reduction loop (a conv's input channels) innermost
        add({**k, "rorder": list(range(1, n_red)) + [0]})
    for order in outer_first(nest):  # another loop outermost (and so parallel)
        for v in [k] + [v for v in out if v["tile"] == k["tile"] and v["nvec"] == k["nvec"] and "sorder" not in v]:
            add({**v, "sorder": order})
    return out


def outer_first(nest: ReduceNest) -> list[list[int]]:
    """Spatial orders (`sorder`) that move one loop with more than one trip, other than the vectorized
    last one and the outermost such loop, to the front."""
    multi = [d for d in range(len(nest.spatial) - 1) if nest.spatial[d].trip_count > 1]
    return [[d] + [e for e in range(len(nest.spatial) - 1) if e != d] for d in multi[1:]]


def _random_order(rng: random.Random, n: int) -> list[int]:
    """The reduction loops in their order (half the time) or shuffled."""
    order = list(range(n))
    if n > 1 and rng.random() < 0.5:
        rng.shuffle(order)
    return order
