"""Template knobs for reduction nests (GEMM, conv, dense): a tunable default schedule.

The sketch rules of `space.py` only split, reorder, vectorize, parallelize and
unroll; they cannot build what makes the default schedule fast (a local
accumulator tile kept in registers, a blocked reduction, packed B panels), so
no sketch candidate beats it. This module exposes the default schedule's
decisions (`transforms/schedule/loop_default_schedule.py`) as knobs and widens them:

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
  whose tile blocks the row loop only: `plan.pack_a_sliver`); with
  `jouter` every row block's sliver of the k-block, before the panel loop;
* `mc`: with `jouter`, the outermost spatial loop cut into blocks of `mc`
  (a multiple of its tile factor that divides it) outside the panel loop,
  so a panel stays in L1 while an mc-row block of A stays in L2 (GotoBLAS's
  ic / jr / ir loops; 0 or absent: no cut);
* `dot`: for nests the default gives a dot-product tile (dense with a
  transposed weight), the `[loop index, factor]` pairs of that tile.

A template trace is `{"template": [knobs per nest]}`; `apply_template` runs
those decisions and then the rest of the default LOOP stage
(`loop-default-schedule` leaves the already scheduled nests alone and
schedules any other, then `loop-parallelize-outer`, `loop-vectorize-innermost`).

```python
knobs = default_knobs(fn)                 # the default schedule's own decisions
apply_template(module, "matmul_0", {"template": knobs}, vector_width=16)
```
"""

from __future__ import annotations

import random
from typing import Any

from xdsl.builder import Builder
from xdsl.dialects import arith, builtin, func
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType
from xdsl.rewriter import InsertPoint, Rewriter

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.schedule.loop_default_schedule import (
    _clone_redirected,
    _packable,
    k_block_and_pack,
    match_reduce_nest,
    plan,
    _plan_parts,
    plan_dot,
    prepacked,
    schedule_dot,
)
from ziggurat.transforms.schedule.pad import pad_clamped_reads
from ziggurat.transforms.schedule.plan import MAX_ACC, pack_a_sliver, packable_a, plan_narrow

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


def prepare(fn: func.FuncOp, width: int) -> func.FuncOp:
    """`fn` as loop-default-schedule sees its reduction nests: on 8-lane targets every clamped,
    zero-selected read (a padded conv input) reads a zero-padded copy (`pad_clamped_reads`), so the
    register block has no per-row tests. Changes `fn` in place; returns it."""
    if width < 16:
        for top in [o for o in fn.body.block.ops if isinstance(o, loop.ForOp)]:
            nest = match_reduce_nest(top)
            if nest is not None and nest.update.block_name.data != "qgemm":
                pad_clamped_reads(nest)
    return fn


def reduce_nests(fn: func.FuncOp, width: int = 16) -> list[tuple[str, Any, str]]:
    """(update block name, naive nest, template kind) of each top-level reduction nest of `fn` the
    default schedule handles: kind `vector` (outer-loop vectorized, `plan`) or `dot` (`plan_dot`)."""
    out = []
    for top in [o for o in fn.body.block.ops if isinstance(o, loop.ForOp)]:
        nest = match_reduce_nest(top)
        if nest is None:
            continue
        if plan(nest) is not None:
            out.append((nest.update.block_name.data, nest, "vector"))
        elif plan_dot(nest, width) is not None:
            out.append((nest.update.block_name.data, nest, "dot"))
    return out


def _divisors(n: int, cap: int) -> list[int]:
    return [d for d in range(1, min(n, cap) + 1) if n % d == 0]


def default_knobs(fn: func.FuncOp, width: int = 16) -> list[dict[str, Any]]:
    """The default schedule's decisions, one dict per reduction nest, in template form: on 8-lane
    targets the 2-D register block of `transforms/schedule/plan.py` (`plan_narrow`: rows x 2
    vectors), else (or where it declines) `plan`'s one-vector block. `fn` is left unchanged."""
    out = []
    for name, nest, kind in reduce_nests(prepare(fn.clone(), width) if width < 16 else fn, width):
        parts = _plan_parts(nest) if kind == "vector" and width < 16 else None
        block = plan_narrow(nest, width, *parts) if parts is not None else None
        if block is not None:
            out.append({"block": name, "kind": "vector", "tile": [list(t) for t in block.tile],
                        "nvec": block.nvec, "kc": block.kc, "pack": int(block.pack),
                        "rorder": list(range(len(nest.reduction)))} | ({"pack_a": 1} if block.pack_a else {}))
            continue
        decision = plan(nest)
        if kind == "vector" and decision is not None:
            blocked, factor, kc = decision
            tile = [[blocked, factor]] if blocked >= 0 and factor > 1 else []
            pack = int(_packable(nest, kc, width) is not None)
            out.append({"block": name, "kind": "vector", "tile": tile, "nvec": 1, "kc": kc, "pack": pack,
                        "rorder": list(range(len(nest.reduction)))})
            continue
        dot = plan_dot(nest, width)
        out.append({"block": name, "kind": "dot", "dot": [list(t) for t in dot or []]})
    return out


def random_nest_knobs(rng: random.Random, nest: Any, kind: str, width: int) -> dict[str, Any]:
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
    pack = int(kc > 0 and _packable(nest, kc, width) is not None and rng.random() < 0.8)
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
            mcs = mc_choices(nest, knobs, width)
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


def dot_neighbours(nest: Any, k: dict[str, Any], width: int) -> list[dict[str, Any]]:
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


def narrow_neighbours(nest: Any, k: dict[str, Any], width: int) -> list[dict[str, Any]]:
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
                     "pack": int(k["kc"] > 0 and _packable(nest, k["kc"], width) is not None)})
    for kc in [0] + [c for c in KC_CHOICES if red >= c and red % c == 0]:
        pack = int(kc > 0 and _packable(nest, kc, width) is not None)
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
            v = {**k, "kc": kc, "pack": int(kc > 0 and _packable(nest, kc, width) is not None), "jouter": 1}
            add(v)
            for mc in [m for m in mc_choices(nest, v, width) if m in (32, 64, 128)]:  # rows cut outside it
                add({**v, "mc": mc})
    n_red = len(nest.reduction)
    if n_red > 1:  # the first reduction loop (a conv's input channels) innermost
        add({**k, "rorder": list(range(1, n_red)) + [0]})
    for order in outer_first(nest):  # another loop outermost (and so parallel)
        for v in [k] + [v for v in out if v["tile"] == k["tile"] and v["nvec"] == k["nvec"] and "sorder" not in v]:
            add({**v, "sorder": order})
    return out


def outer_first(nest: Any) -> list[list[int]]:
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


def _check(nest: Any, k: dict[str, Any], width: int) -> None:
    n = len(nest.spatial)
    name = k.get("block")
    for d, u in k.get("tile", []) + k.get("dot", []):
        if not (0 <= d < n) or u < 1 or nest.spatial[d].trip_count % u:
            raise ScheduleError(f"template tile [{d}, {u}] of block '{name}': the factor must divide loop {d}'s "
                                f"trip count; re-tune the kernel")
    if k["kind"] == "vector":
        if any(d == n - 1 for d, _ in k["tile"]):
            raise ScheduleError(f"template tile of block '{name}' blocks the vectorized last loop; use nvec")
        if nest.spatial[-1].trip_count % (k["nvec"] * width) and k["nvec"] > 1:
            raise ScheduleError(f"template nvec={k['nvec']} of block '{name}' does not divide the last loop")
        red = nest.reduction[0].trip_count
        sorder = k.get("sorder")
        if sorder is not None and sorted(sorder) != list(range(n - 1)):
            raise ScheduleError(f"template sorder={sorder} of block '{name}' is not a permutation of its "
                                f"{n - 1} spatial loops outside the vectorized one")
        rorder = k.get("rorder")
        if rorder is not None and sorted(rorder) != list(range(len(nest.reduction))):
            raise ScheduleError(f"template rorder={rorder} of block '{name}' is not a permutation of its "
                                f"{len(nest.reduction)} reduction loops")
        if k["kc"] and (red % k["kc"] or red < k["kc"]):
            raise ScheduleError(f"template kc={k['kc']} of block '{name}' must divide the reduction extent {red}")
        if k.get("pack_a") and packable_a(nest, k["tile"]) is None:
            raise ScheduleError(f"template pack_a=1 of block '{name}': A slivers need a plain 2-D matmul "
                                f"whose tile blocks the row loop only (tile [[0, rows]]); set pack_a to 0")
        mc = k.get("mc", 0)
        if mc and mc not in mc_choices(nest, k, width):
            raise ScheduleError(f"template mc={mc} of block '{name}': needs jouter=1 with a panel loop (pack or "
                                f"nvec > 1), and a multiple of the outermost loop's tile factor that divides it; "
                                f"legal: {mc_choices(nest, k, width) or 'none'}")


def mc_choices(nest: Any, k: dict[str, Any], width: int) -> list[int]:
    """Legal `mc` for knobs `k` (see the module docstring): multiples of the outermost spatial loop's
    tile factor that divide its extent, below it; none without `jouter` and a panel loop."""
    if not k.get("jouter") or not (k["pack"] or k["nvec"] > 1 or prepacked(nest, width) is not None):
        return []
    d0 = (k.get("sorder") or [0])[0]
    ub = nest.spatial[d0].trip_count
    step = dict((d, u) for d, u in k["tile"]).get(d0, 1)
    return [m for m in range(step, ub, step) if ub % m == 0]


def schedule_vector_nest(nest: Any, tile: list[list[int]], nvec: int, kc: int, pack: bool, width: int,
                         rorder: list[int] | None = None, jouter: bool = False, pack_a: bool = False,
                         sorder: list[int] | None = None, mc: int = 0) -> None:
    """The default schedule (`schedule_reduce_nest`) generalized to a 2-D register tile, `nvec` vectors
    and a permutation `rorder` of the reduction loops (outermost first). With `jouter` (and a panel
    loop: packed or nvec > 1) the panel loop runs outside the spatial loops (inside the kc block):
    one panel of the streamed operand stays in L1 while the rows sweep past it (GotoBLAS order).
    With `pack_a` each row block's k-block of A is first copied into a contiguous sliver. `sorder`
    permutes the spatial loops outside the vectorized one (outermost first). With `jouter` and `mc`
    (a multiple of the row block dividing the row loop) the rows are first cut into blocks of `mc`
    outside the panel loop: one panel stays in L1 while an mc x kc block of A stays in L2
    (GotoBLAS's ic / jr / ir order)."""
    n = len(nest.spatial)
    last = nest.spatial[-1]
    pre = prepacked(nest, width)  # B stored in panels: read as panels whatever `pack` says
    kb, packed = k_block_and_pack(nest, _packable(nest, kc, width) if pack or pre else None, kc, width)
    for d, u in tile:
        nest.spatial[d].properties["step"] = IntegerAttr(u, builtin.i64)
    n_rows = 1
    for _, u in tile:
        n_rows *= u
    elt = nest.out.type.element_type  # type: ignore[attr-defined]
    ub = last.bounds[1]
    before = Builder(InsertPoint.before(last))
    acc = before.insert(loop.AllocOp(MemRefType(elt, [n_rows, ub + width]), "local")).result
    read_a = packable_a(nest, tile) if pack_a else None
    packed_a = None
    whole_a = read_a is not None and jouter and (pack or nvec > 1)
    depth_a = kc or nest.reduction[0].trip_count
    if read_a is not None and whole_a:
        packed_a = (read_a, _pack_a_whole(nest, read_a, n_rows, depth_a, kb))
    elif read_a is not None:
        packed_a = (read_a, pack_a_sliver(before, nest, read_a, n_rows, depth_a, kb))
    jo = None
    if packed is None and nvec == 1:
        vec = before.insert(loop.ForOp(0, ub, 1, "vectorized"))
        vec.iv.name_hint = last.iv.name_hint
        b = Builder(InsertPoint.at_end(vec.body.block))
        lvals = [vec.iv]
        panels: list[Any] = [None]
    else:  # the column loop walks panels of `width`, nvec of them per step
        jo = before.insert(loop.ForOp(0, ub // width, nvec))
        jo.iv.name_hint = last.iv.name_hint + "p"
        vec = Builder(InsertPoint.at_end(jo.body.block)).insert(loop.ForOp(0, width, 1, "vectorized"))
        vec.iv.name_hint = last.iv.name_hint + "l"
        b = Builder(InsertPoint.at_end(vec.body.block))
        w = b.insert(arith.ConstantOp(IntegerAttr(width, IndexType()))).result
        lvals, panels = [], []
        for p in range(nvec):
            pj = jo.iv
            if p:
                pj = b.insert(arith.AddiOp(jo.iv, b.insert(arith.ConstantOp(IntegerAttr(p, IndexType()))).result)).result
            panels.append(pj)
            lvals.append(b.insert(arith.AddiOp(b.insert(arith.MuliOp(pj, w)).result, vec.iv)).result)
    base = [f.iv for f in nest.spatial[:-1]]
    rows: list[list[Any]] = [list(base)]
    for d, u in tile:
        grown = []
        for c in range(u):
            off = base[d]
            if c:
                off = b.insert(arith.AddiOp(base[d], b.insert(arith.ConstantOp(IntegerAttr(c, IndexType()))).result)).result
            grown += [r[:d] + [off] + r[d + 1:] for r in rows]
        rows = grown
    points = [(r, p, rows[r] + [lvals[p]]) for r in range(len(rows)) for p in range(nvec)]
    tag = nest.update.block_name.data
    for r, _, ivs in points:
        if kb is None:
            _clone_redirected(nest.init, b, ivs, nest.out, acc, r, n - 1)
            continue
        lb = b.insert(loop.BlockOp(f"{tag}_load", "S" * n, ivs))
        bb = Builder(InsertPoint.at_end(lb.body.block))
        row = bb.insert(arith.ConstantOp(IntegerAttr(r, IndexType()))).result
        v = bb.insert(loop.LoadOp(nest.out, list(lb.vars))).result
        bb.insert(loop.StoreOp(v, acc, [row, lb.vars[-1]]))
    if whole_a:
        rows_c = b.insert(arith.ConstantOp(IntegerAttr(n_rows, IndexType()))).result
        depth_c = b.insert(arith.ConstantOp(IntegerAttr(depth_a, IndexType()))).result
        base_a = b.insert(arith.MuliOp(b.insert(arith.DivUIOp(nest.spatial[0].iv, rows_c)).result, depth_c)).result
    rb = b
    red_ivs: list[Any] = [None] * len(nest.reduction)
    for k in rorder or range(len(nest.reduction)):
        f = nest.reduction[k]
        bounds = (0, kc, 1) if kb is not None and k == 0 else f.bounds
        g = rb.insert(loop.ForOp(*bounds, "serial"))
        g.iv.name_hint = f.iv.name_hint
        red_ivs[k] = g.iv
        rb = Builder(InsertPoint.at_end(g.body.block))
    depth = red_ivs[0]
    extra_a = [depth] if packed_a else []
    if whole_a:  # row block i // rows of the whole k-block: sliver rows (i // rows) * depth + depth
        extra_a = [rb.insert(arith.AddiOp(base_a, depth)).result]
    if kb is not None:
        red_ivs[0] = rb.insert(arith.AddiOp(kb.iv, red_ivs[0])).result
    for r, p, ivs in points:
        if packed is None:
            _clone_redirected(nest.update, rb, ivs + red_ivs + extra_a, nest.out, acc, r, n - 1, packed_a=packed_a)
        else:
            _clone_redirected(nest.update, rb, ivs + red_ivs + [panels[p], vec.iv, depth] + extra_a, nest.out, acc,
                              r, n - 1, packed=packed, packed_a=packed_a)
    for r, _, ivs in points:
        wb = b.insert(loop.BlockOp(f"{tag}_store", "S" * n, ivs))
        bb = Builder(InsertPoint.at_end(wb.body.block))
        row = bb.insert(arith.ConstantOp(IntegerAttr(r, IndexType()))).result
        v = bb.insert(loop.LoadOp(acc, [row, wb.vars[-1]])).result
        bb.insert(loop.StoreOp(v, nest.out, list(wb.vars)))
    last.detach()
    last.erase()
    if sorder is not None and sorder != sorted(sorder):
        interchange(nest.spatial[:-1], sorder)
    if jouter and jo is not None:
        top = nest.spatial[0]
        outer = Builder(InsertPoint.before(top)).insert(loop.ForOp(0, ub // width, nvec))
        outer.iv.name_hint = jo.iv.name_hint
        top.detach()
        outer.body.block.add_op(top)
        Rewriter.inline_block(jo.body.block, InsertPoint.before(jo), [outer.iv])
        jo.detach()
        jo.erase()
        if mc and mc < top.bounds[1]:
            _strip_rows(top, outer, mc)


def _strip_rows(top: Any, outer: Any, mc: int) -> None:
    """`outer { top: i = 0 to M step rows }` -> `io = 0 to M step mc { outer { ii = 0 to mc step rows } }`,
    with `io + ii` in place of `i` (the row loop cut into blocks of `mc` outside the panel loop `outer`)."""
    io = Builder(InsertPoint.before(outer)).insert(loop.ForOp(0, top.bounds[1], mc))
    io.iv.name_hint = top.iv.name_hint + "o"
    outer.detach()
    io.body.block.add_op(outer)
    top.properties["ub"] = IntegerAttr(mc, builtin.i64)
    first = top.body.block.first_op
    at = arith.AddiOp(io.iv, top.iv)
    top.body.block.insert_op_before(at, first)
    top.iv.replace_uses_with_if(at.result, lambda u: u.operation is not at)


def interchange(loops: list[Any], order: list[int]) -> None:
    """Permutes a perfectly nested chain of constant-bound loops (outermost first): position `p` then
    iterates what `loops[order[p]]` iterated. Each loop keeps its place and takes over another's
    bounds, step and variable uses; the body is unchanged, so this is legal wherever the iterations
    are independent (the spatial loops of an output tile). Not the `reorder` primitive
    (transforms/loop/primitives/reorder.py): that one takes plain step-1 loops and rebuilds them, while here
    the loops are already tiled and `nest.spatial` must keep naming the outermost loop first."""
    for outer, inner in zip(loops, loops[1:]):
        if list(outer.body.block.ops) != [inner]:
            raise ScheduleError(f"template sorder: loop '{outer.iv.name_hint}' is not perfectly nested around "
                                f"'{inner.iv.name_hint}'; leave sorder out for this nest")
    props = [(f.properties["lb"], f.properties["ub"], f.properties["step"], f.iv.name_hint) for f in loops]
    new_iv = {loops[q].iv: loops[p].iv for p, q in enumerate(order)}
    users = {id(u.operation): u.operation for f in loops for u in f.iv.uses}
    for p, q in enumerate(order):
        f = loops[p]
        f.properties["lb"], f.properties["ub"], f.properties["step"], f.iv.name_hint = props[q]
    for op in users.values():
        op.operands = [new_iv.get(v, v) for v in op.operands]


def _pack_a_whole(nest: Any, read: Any, rows: int, depth: int, kb: Any) -> Any:
    """Before the spatial nest (inside the k-block loop): `a[ib * depth + q, r] = A[ib * rows + r, kb + q]`
    for every row block `ib`: the whole k-block of A as contiguous slivers (for the panel loop outside)."""
    m = nest.spatial[0].bounds[1]
    elt = read.buffer.type.element_type
    b = Builder(InsertPoint.before(nest.spatial[0]))
    sliver = b.insert(loop.AllocOp(MemRefType(elt, [m // rows * depth, rows]), "local")).result
    ib = b.insert(loop.ForOp(0, m // rows))
    q = Builder(InsertPoint.at_end(ib.body.block)).insert(loop.ForOp(0, depth))
    r = Builder(InsertPoint.at_end(q.body.block)).insert(loop.ForOp(0, rows))
    binds = [ib.iv, r.iv, q.iv] + ([kb.iv] if kb is not None else [])
    blk = Builder(InsertPoint.at_end(r.body.block)).insert(
        loop.BlockOp(f"{nest.update.block_name.data}_pack_a", "S" * len(binds), binds))
    i, rr, qq = blk.vars[:3]
    bb = Builder(InsertPoint.at_end(blk.body.block))
    rows_c, depth_c = (bb.insert(arith.ConstantOp(IntegerAttr(c, IndexType()))).result for c in (rows, depth))
    row = bb.insert(arith.AddiOp(bb.insert(arith.MuliOp(i, rows_c)).result, rr)).result
    col = bb.insert(arith.AddiOp(blk.vars[3], qq)).result if kb is not None else qq
    at = bb.insert(arith.AddiOp(bb.insert(arith.MuliOp(i, depth_c)).result, qq)).result
    v = bb.insert(loop.LoadOp(read.buffer, [row, col])).result
    bb.insert(loop.StoreOp(v, sliver, [at, rr]))
    return sliver


def apply_template(module: builtin.ModuleOp, name: str, trace: dict[str, Any], vector_width: int = 16) -> None:
    """Schedules kernel `name` by a template trace, then runs the rest of the default LOOP stage."""
    from ziggurat.autotune.space import _kernel, default_loop_pipeline
    from ziggurat.compiler import parse_pipeline, run_passes

    knobs = trace.get("template")
    if not isinstance(knobs, list):
        raise ScheduleError(f"a template trace is {{'template': [knobs per nest]}}, got {trace!r:.80}")
    fn = prepare(_kernel(module, name).clone(), vector_width)
    nests = {name: (nest, kind) for name, nest, kind in reduce_nests(fn, vector_width)}
    for k in knobs:
        nest, kind = nests.pop(k.get("block"), (None, None))
        if nest is None or kind != k.get("kind"):
            raise ScheduleError(f"template decisions name block '{k.get('block')}', which is not a naive "
                                f"reduction nest of kernel '{name}'; re-tune the kernel")
        _check(nest, k, vector_width)
        if k["kind"] == "dot":
            if k["dot"]:
                schedule_dot(nest, [tuple(t) for t in k["dot"]])
        else:
            schedule_vector_nest(nest, k["tile"], k["nvec"], k["kc"], bool(k["pack"]), vector_width,
                                 k.get("rorder"), bool(k.get("jouter", 0)), bool(k.get("pack_a", 0)),
                                 k.get("sorder"), int(k.get("mc", 0)))
    tmp = builtin.ModuleOp([fn])
    run_passes(tmp, parse_pipeline(default_loop_pipeline(vector_width)), verify=False)
    old = _kernel(module, name)
    fn.detach()
    module.body.block.insert_op_before(fn, old)
    old.detach()
    old.erase()
