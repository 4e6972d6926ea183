"""Template knobs of reduction nests: the default schedule's decisions in template form, random and
seeded template candidates compute what numpy computes (matmul with packing, conv with a 2-D tile and
reordered reduction loops), and illegal decisions are one clear ScheduleError."""

from __future__ import annotations

import ctypes
import random

import numpy as np
import pytest
from xdsl.parser import Parser

from tests.unit.test_autotune_measure import lower
from tests.unit.test_autotune_search import te_matmul
from ziggurat.autotune import SearchSpace, apply_trace
from ziggurat.autotune.template import default_knobs
from ziggurat.backends.llvm import LLVMOptions, jit_compile, translate_module
from ziggurat.compiler import parse_pipeline, run_passes
from ziggurat.dialects import make_context
from ziggurat.errors import ScheduleError

MM = lower(te_matmul(32, 64, 128), "convert-te-to-loop")


def run(text: str, name: str, trace, args: list[np.ndarray], out_shape, width: int = 16) -> np.ndarray:
    module = Parser(make_context(), text).parse_module()
    apply_trace(module, name, trace, width)
    run_passes(module, parse_pipeline("convert-loop-to-hw"))
    opts = LLVMOptions(num_threads=1, export_all=True)
    llvm_module, info = translate_module(module, opts)
    jm = jit_compile(llvm_module, opts, info)
    out = np.full(out_shape, np.nan, np.float32)
    fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (len(args) + 1))(jm.address(name))
    fn(*[a.ctypes.data for a in args], out.ctypes.data)
    return out


# conv2d NCHW 3x3 pad 1 as convert-te-to-loop emits it (independent of the graph-level layout choice)
CONV = """
builtin.module {{
  func.func @conv2d_0(%in0: memref<1x{C}x{H}x{W}xf32>, %in1: memref<{K}x{C}x3x3xf32>, %out0: memref<1x{K}x{H}x{W}xf32>) {{
    loop.for %i0 = 0 to 1 serial {{
      loop.for %i1 = 0 to {K} serial {{
        loop.for %i2 = 0 to {H} serial {{
          loop.for %i3 = 0 to {W} serial {{
            loop.block "conv2d_init" [S %0 = %i0, S %1 = %i1, S %2 = %i2, S %3 = %i3] {{
              %4 = arith.constant 0.000000e+00 : f32
              loop.store %4, %out0[%0, %1, %2, %3] : memref<1x{K}x{H}x{W}xf32>
            }}
            loop.for %r0 = 0 to {C} serial {{
              loop.for %r1 = 0 to 3 serial {{
                loop.for %r2 = 0 to 3 serial {{
                  loop.block "conv2d" [S %5 = %i0, S %6 = %i1, S %7 = %i2, S %8 = %i3, R %9 = %r0, R %10 = %r1, R %11 = %r2] {{
                    %12 = arith.addi %7, %10 : index
                    %13 = arith.constant -1 : index
                    %14 = arith.addi %12, %13 : index
                    %15 = arith.addi %8, %11 : index
                    %16 = arith.constant -1 : index
                    %17 = arith.addi %15, %16 : index
                    %18 = arith.constant 0 : index
                    %19 = arith.cmpi sge, %14, %18 : index
                    %20 = arith.constant {H} : index
                    %21 = arith.cmpi slt, %14, %20 : index
                    %22 = arith.andi %19, %21 : i1
                    %23 = arith.select %22, %14, %18 : index
                    %24 = arith.cmpi sge, %17, %18 : index
                    %25 = arith.constant {W} : index
                    %26 = arith.cmpi slt, %17, %25 : index
                    %27 = arith.andi %24, %26 : i1
                    %28 = arith.andi %22, %27 : i1
                    %29 = arith.select %27, %17, %18 : index
                    %30 = loop.load %in0[%5, %9, %23, %29] : memref<1x{C}x{H}x{W}xf32>
                    %31 = arith.constant 0.000000e+00 : f32
                    %32 = arith.select %28, %30, %31 : f32
                    %33 = loop.load %in1[%6, %9, %10, %11] : memref<{K}x{C}x3x3xf32>
                    %34 = arith.mulf %32, %33 : f32
                    %35 = loop.load %out0[%5, %6, %7, %8] : memref<1x{K}x{H}x{W}xf32>
                    %36 = arith.addf %35, %34 : f32
                    loop.store %36, %out0[%5, %6, %7, %8] : memref<1x{K}x{H}x{W}xf32>
                  }}
                }}
              }}
            }}
          }}
        }}
      }}
    }}
    func.return
  }}
}}
"""


def conv_kernel() -> tuple[str, str, np.ndarray]:
    w = np.random.default_rng(1).uniform(-1, 1, (16, 8, 3, 3)).astype(np.float32)
    return "conv2d_0", CONV.format(C=8, H=12, W=20, K=16), w


def conv_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, wd = x.shape[2:]
    out = np.zeros((1, w.shape[0], h, wd))
    for kh in range(3):
        for kw in range(3):
            out += np.einsum("oc,nchw->nohw", w[:, :, kh, kw], xp[:, :, kh:kh + h, kw:kw + wd])
    return out


@pytest.mark.parametrize("mc", [4, 8, 16])
def test_template_mc_cuts_the_rows_outside_the_panel_loop(mc):
    """jouter with mc: the row loop becomes blocks of mc outside the panel loop and rows of 4 inside it,
    with the same result as numpy; the seeds of an 8-lane default block include mc neighbours."""
    rng = np.random.default_rng(mc)
    a, b = rng.uniform(-1, 1, (32, 128)).astype(np.float32), rng.uniform(-1, 1, (128, 64)).astype(np.float32)
    trace = {"template": [{"block": "mm", "kind": "vector", "tile": [[0, 4]], "nvec": 2, "kc": 128, "pack": 1,
                           "rorder": [0], "jouter": 1, "mc": mc}]}
    module = Parser(make_context(), MM).parse_module()
    apply_trace(module, "mm_0", trace, 8)
    ir = str(module)
    if mc < 32:
        assert f"loop.for %i0o = 0 to 32 step {mc}" in ir and f"0 to {mc} step 4" in ir
    np.testing.assert_allclose(run(MM, "mm_0", trace, [a, b], (32, 64), 8), a.astype(np.float64) @ b,
                               rtol=1e-4, atol=1e-4)
    space = SearchSpace(lower(te_matmul(256, 64, 256), "convert-te-to-loop"), "mm_0", vector_width=8)
    assert {s["template"][0].get("mc") for s in space.seeds()} >= {None, 32, 64, 128}


def test_default_knobs_and_seeds_of_a_matmul():
    space = SearchSpace(MM, "mm_0")
    fn = next(iter(space.module.ops))
    (k,) = default_knobs(fn)
    # 16 lanes, 64 columns: the 2-D block of 8 rows x 2 vectors (plan.MAX_ACC_WIDE)
    assert k["kind"] == "vector" and k["block"] == "mm" and k["nvec"] == 2 and k["tile"] == [[0, 8]]
    seeds = space.seeds()
    assert seeds[0] == {"template": [k]}
    assert {s["template"][0]["nvec"] for s in seeds} >= {2, 4}


def test_template_matmul_candidates_match_numpy():
    space = SearchSpace(MM, "mm_0")
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (32, 128)).astype(np.float32), rng.uniform(-1, 1, (128, 64)).astype(np.float32)
    want = a.astype(np.float64) @ b
    packed = {"template": [{"block": "mm", "kind": "vector", "tile": [[0, 4]], "nvec": 2, "kc": 64, "pack": 1,
                            "rorder": [0]}]}
    jouter = {"template": [{**packed["template"][0], "jouter": 1}]}
    unpacked = {"template": [{**packed["template"][0], "kc": 0, "pack": 0, "jouter": 1}]}
    r = random.Random(2)
    traces = [packed, jouter, unpacked] + [space.random_template(r) for _ in range(3)]
    for trace in traces:
        cand = space.build(trace["template"] and trace)
        assert cand is not None and cand.trace == trace
        np.testing.assert_allclose(run(MM, "mm_0", trace, [a, b], (32, 64)), want, rtol=1e-4, atol=1e-4)


def test_template_conv_with_2d_tile_and_reordered_reduction_matches_numpy():
    name, text, w = conv_kernel()
    x = np.random.default_rng(2).uniform(-1, 1, (1, 8, 12, 20)).astype(np.float32)
    space = SearchSpace(text, name)
    assert [kind for _, _, kind in space.templates] == ["vector"]
    block = space.templates[0][0]
    trace = {"template": [{"block": block, "kind": "vector", "tile": [[1, 4], [2, 2]], "nvec": 1, "kc": 0,
                           "pack": 0, "rorder": [1, 2, 0]}]}
    np.testing.assert_allclose(run(text, name, trace, [x, w], (1, 16, 12, 20)), conv_ref(x, w), rtol=1e-4, atol=1e-4)
    assert any(s["template"][0].get("rorder") == [1, 2, 0] for s in space.seeds())


@pytest.mark.parametrize("bad, what", [
    ({"tile": [[0, 5]]}, "must divide"),
    ({"tile": [[1, 2]]}, "vectorized last loop"),
    ({"kc": 100}, "must divide the reduction"),
    ({"rorder": [0, 0]}, "not a permutation"),
    ({"sorder": [0, 0]}, "sorder=.* not a permutation"),
    ({"block": "nope"}, "not a naive reduction nest"),
    ({"tile": [], "pack_a": 1}, "pack_a=1"),
    ({"nvec": 2, "tile": [[0, 4]], "mc": 8}, "mc=8 .*needs jouter=1"),
    ({"nvec": 2, "tile": [[0, 4]], "jouter": 1, "mc": 6}, "legal: \\[4, 8, 16\\]"),
])
def test_illegal_template_decisions_are_schedule_errors(bad, what):
    k = {"block": "mm", "kind": "vector", "tile": [[0, 8]], "nvec": 1, "kc": 0, "pack": 0, "rorder": [0], **bad}
    module = Parser(make_context(), MM).parse_module()
    with pytest.raises(ScheduleError, match=what):
        apply_trace(module, "mm_0", {"template": [k]})
    assert SearchSpace(MM, "mm_0").build({"template": [k]}) is None


@pytest.mark.parametrize("text, name", [
    (lower(te_matmul(64, 256, 1024), "convert-te-to-loop"), "mm_0"),
    (CONV.format(C=16, H=12, W=24, K=32), "conv2d_0"),
])
def test_default_knobs_reproduce_the_8_lane_default_schedule(text, name):
    """On an AVX2 target (vector-width 8) the template's default point is the shipped default
    (transforms/schedule/plan.py: rows x 2 vectors, padded conv input), IR for IR, and the seeds hold
    its neighbours (rows x 1..4 vectors, kc choices, packing) within the 16 ymm registers."""
    from ziggurat.autotune.space import DEFAULT_TRACE
    from ziggurat.autotune.template import fits

    space = SearchSpace(text, name, vector_width=8)
    fn = next(iter(space.module.ops))
    (k,) = default_knobs(fn, 8)
    points = k["nvec"] * int(np.prod([u for _, u in k["tile"]]))
    assert points == 8 and fits(points, k["nvec"], 8)
    a = Parser(make_context(), text).parse_module()
    apply_trace(a, name, DEFAULT_TRACE, 8)
    b = Parser(make_context(), text).parse_module()
    apply_trace(b, name, {"template": [k]}, 8)
    assert str(a) == str(b)
    assert str(fn) == str(next(iter(space.module.ops)))  # default_knobs left the kernel alone
    seeds = [s["template"][0] for s in space.seeds()]
    assert seeds[0] == k and len(seeds) == len({str(s) for s in seeds}) > 5
    for s in seeds:
        assert fits(s["nvec"] * int(np.prod([u for _, u in s["tile"]])), s["nvec"], 8)
    if name == "mm_0":
        # k = 1024 (<= plan.ONE_BLOCK) is packed as one block: no k-block loop, no output reload
        assert k == {"block": "mm", "kind": "vector", "tile": [[0, 4]], "nvec": 2, "kc": 1024, "pack": 1,
                     "rorder": [0]}
        assert {s["nvec"] for s in seeds} == {1, 2, 4} and {s["kc"] for s in seeds} >= {0, 64, 128, 256, 512}
        assert {s["pack"] for s in seeds if s["kc"]} == {0, 1}


def test_8_lane_template_conv_candidates_match_numpy():
    name, text, w = conv_kernel()
    x = np.random.default_rng(3).uniform(-1, 1, (1, 8, 12, 20)).astype(np.float32)
    space = SearchSpace(text, name, vector_width=8)
    want = conv_ref(x, w)
    for trace in space.seeds()[:3] + [space.random_template(random.Random(4))]:
        assert space.build(trace) is not None
        np.testing.assert_allclose(run(text, name, trace, [x, w], (1, 16, 12, 20), 8), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("sorder, tile, width", [
    ([2, 0, 1], [[1, 4]], 8),          # output rows outermost: the parallel loop
    ([1, 2, 0], [[1, 2], [2, 4]], 8),  # the batch loop (one trip) innermost
    ([2, 1, 0], [[2, 3]], 16),
    ([0, 1, 2], [[1, 4]], 8),          # as they are
])
def test_template_spatial_order_matches_numpy_and_moves_the_parallel_loop(sorder, tile, width):
    """`sorder` permutes the spatial loops outside the vectorized one (with their tile steps); the
    outermost loop with more than one trip becomes the parallel one, and the result is numpy's."""
    name, text, w = conv_kernel()
    x = np.random.default_rng(7).uniform(-1, 1, (1, 8, 12, 20)).astype(np.float32)
    trace = {"template": [{"block": "conv2d", "kind": "vector", "tile": tile, "nvec": 1, "kc": 0, "pack": 0,
                           "rorder": [0, 1, 2], "sorder": sorder}]}
    module = Parser(make_context(), text).parse_module()
    apply_trace(module, name, trace, width)
    extents = {0: 1, 1: 16, 2: 12}
    steps = dict(tile)
    first = next(d for d in sorder if extents[d] > 1)
    parallel = next(line for line in str(module).splitlines() if " parallel" in line and "%i" in line)
    assert f"to {extents[first]} step {steps[first]} parallel" in parallel if steps.get(first, 1) > 1 \
        else f"to {extents[first]} parallel" in parallel
    got = run(text, name, trace, [x, w], (1, 16, 12, 20), width)
    np.testing.assert_allclose(got, conv_ref(x, w), rtol=1e-4, atol=1e-4)


def test_spatial_order_seeds_and_draws():
    """8-lane seeds hold the default block with each multi-trip spatial loop moved outermost; random
    conv candidates draw an order, a plain matmul (one spatial loop outside the vector) never does."""
    name, text, _ = conv_kernel()
    space = SearchSpace(text, name, vector_width=8)
    orders = {tuple(s["template"][0].get("sorder", ())) for s in space.seeds()}
    assert (2, 0, 1) in orders
    r = random.Random(3)
    assert all(sorted(space.random_template(r)["template"][0]["sorder"]) == [0, 1, 2] for _ in range(10))
    mm = SearchSpace(lower(te_matmul(24, 32, 64), "convert-te-to-loop"), "mm_0", vector_width=8)
    drawn = [mm.random_template(r) for _ in range(10)] + mm.seeds()
    drawn += [mm.mutate(r, d) for d in drawn for _ in range(3)]
    assert not any("sorder" in d["template"][0] for d in drawn if isinstance(d, dict) and "template" in d)


@pytest.mark.parametrize("m, n, k, tile, nvec, kc, pack, width, jouter", [
    (30, 40, 96, [[0, 3]], 1, 48, 1, 8, 0),   # 40 columns: 5 panels, one vector per tile point
    (30, 40, 96, [[0, 6]], 1, 0, 0, 8, 0),    # no k-block: the sliver spans the whole reduction
    (12, 37, 20, [[0, 4]], 1, 10, 0, 8, 0),   # 37 columns: a masked tail vector
    (24, 32, 64, [[0, 2]], 2, 32, 1, 16, 0),  # 16 lanes
    (30, 40, 96, [[0, 3]], 1, 48, 1, 8, 1),   # panel loop outside: the whole k-block of A, sliver by sliver
    (12, 32, 20, [[0, 4]], 2, 0, 0, 8, 1),
    (24, 32, 64, [[0, 4]], 2, 64, 1, 8, 8),   # jouter with the rows cut in blocks of 8 (mc)
])
def test_template_pack_a_matches_numpy(m, n, k, tile, nvec, kc, pack, width, jouter):
    """pack_a copies each row block's k-block of A into a [depth, rows] sliver before the column loop
    (with jouter: every row block's sliver, stacked, before the panel loop); with the B panels or without,
    k-blocked or not, column counts no vector block divides."""
    text = lower(te_matmul(m, n, k), "convert-te-to-loop")
    rng = np.random.default_rng(m + n + k)
    a, b = rng.uniform(-1, 1, (m, k)).astype(np.float32), rng.uniform(-1, 1, (k, n)).astype(np.float32)
    trace = {"template": [{"block": "mm", "kind": "vector", "tile": tile, "nvec": nvec, "kc": kc, "pack": pack,
                           "rorder": [0], "pack_a": 1, "jouter": int(jouter > 0)} | ({"mc": jouter} if jouter > 1 else {})]}
    module = Parser(make_context(), text).parse_module()
    apply_trace(module, "mm_0", trace, width)
    ir = str(module)
    depth = (kc or k) * (m // tile[0][1] if jouter else 1)
    assert '"mm_pack_a"' in ir and f"memref<{depth}x{tile[0][1]}xf32>" in ir
    got = run(text, "mm_0", trace, [a, b], (m, n), width)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_pack_a_knob_is_drawn_only_where_legal():
    """Random and seeded 8-lane candidates draw pack_a on a matmul (legal, numerics checked) and never on
    a conv, whose tile is not a matmul's row block."""
    text = lower(te_matmul(24, 32, 64), "convert-te-to-loop")
    space = SearchSpace(text, "mm_0", vector_width=8)
    r = random.Random(5)
    drawn = [space.random_template(r) for _ in range(30)] + space.seeds()
    packed_a = [t for t in drawn if t["template"][0].get("pack_a")]
    assert packed_a and any(not t["template"][0].get("pack_a") for t in drawn)
    mutated = [space.mutate(r, t) for t in drawn for _ in range(3)]
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (24, 64)).astype(np.float32), rng.uniform(-1, 1, (64, 32)).astype(np.float32)
    for t in packed_a[:3] + [m for m in mutated if m["template"][0].get("pack_a")][:2]:
        assert space.build(t) is not None
        np.testing.assert_allclose(run(text, "mm_0", t, [a, b], (24, 32), 8), a.astype(np.float64) @ b,
                                   rtol=1e-4, atol=1e-4)
    name, conv, _ = conv_kernel()
    cspace = SearchSpace(conv, name, vector_width=8)
    r = random.Random(6)
    assert not any(t["template"][0].get("pack_a") for t in [cspace.random_template(r) for _ in range(20)]
                   + cspace.seeds())


def test_a_kc_covering_the_whole_reduction_is_one_packed_block():
    """k = 256 with >= 32 rows: the 8-lane default packs B as one block (kc = 256 = k). That point and its
    neighbours at kc = k are legal template decisions (they were rejected as 'must divide' once), build
    the default's IR, and compute numpy's product; kc above k is still a ScheduleError."""
    from ziggurat.autotune.space import DEFAULT_TRACE

    text = lower(te_matmul(64, 32, 256), "convert-te-to-loop")
    space = SearchSpace(text, "mm_0", vector_width=8)
    (k,) = default_knobs(next(iter(space.module.ops)), 8)
    assert k["kc"] == 256 and k["pack"] == 1
    a = Parser(make_context(), text).parse_module()
    apply_trace(a, "mm_0", DEFAULT_TRACE, 8)
    b = Parser(make_context(), text).parse_module()
    apply_trace(b, "mm_0", {"template": [k]}, 8)
    assert str(a) == str(b) and '"mm_load"' not in str(b) and '"mm_pack"' in str(b)
    seeds = [s for s in space.seeds() if s["template"][0]["kc"] == 256]
    assert len(seeds) > 3 and all(space.build(s) is not None for s in seeds)
    rng = np.random.default_rng(9)
    x, w = rng.uniform(-1, 1, (64, 256)).astype(np.float32), rng.uniform(-1, 1, (256, 32)).astype(np.float32)
    for s in seeds[:3]:
        np.testing.assert_allclose(run(text, "mm_0", s, [x, w], (64, 32), 8), x.astype(np.float64) @ w,
                                   rtol=1e-4, atol=1e-4)
    with pytest.raises(ScheduleError, match="must divide"):
        apply_trace(Parser(make_context(), text).parse_module(), "mm_0", {"template": [{**k, "kc": 512}]}, 8)


# a one-row matrix-vector product with the weight stored [n, k] (PyTorch's Linear): a dot-product nest
GEMV = lower("""
func.func @mv_0(%a: tensor<1x64xf32>, %w: tensor<48x64xf32>) -> tensor<1x48xf32> {
  %s = te.reduce "mv" add init 0.000000e+00 : f32 (%i, %j) reduce (%k : 64) : tensor<1x48xf32> {
    %x = te.read %a[%i, %k] : tensor<1x64xf32>
    %y = te.read %w[%j, %k] : tensor<48x64xf32>
    %p = arith.mulf %x, %y : f32
    te.yield %p : f32
  }
  func.return %s : tensor<1x48xf32>
}
""", "convert-te-to-loop")


@pytest.mark.parametrize("width", [8, 16])
def test_dot_tiles_beyond_the_default_are_seeded_drawn_and_match_numpy(width):
    """The default dot tile stops at 4 rows (DOT_BLOCKING); the tuner's seeds and draws reach every factor
    whose accumulators fit the registers (8 and 12 of 48 rows on both widths, 16 and 24 on neither at 8 lanes)."""
    space = SearchSpace(GEMV, "mv_0", vector_width=width)
    (k,) = default_knobs(next(iter(space.module.ops)), width)
    assert k == {"block": "mv", "kind": "dot", "dot": [[1, 4]]}
    seeded = {(s["template"][0]["dot"] or [[1, 1]])[0][1] for s in space.seeds()[1:]}
    assert {1, 2, 3, 6, 8, 12} <= seeded and 4 not in seeded
    if width == 8:
        assert not seeded & {16, 24}
    r = random.Random(4)
    drawn = {t[1] for _ in range(200) for t in space.random_template(r)["template"][0]["dot"]}
    assert 8 in drawn and max(drawn) <= (12 if width == 8 else 16)
    rng = np.random.default_rng(1)
    a, w = rng.uniform(-1, 1, (1, 64)).astype(np.float32), rng.uniform(-1, 1, (48, 64)).astype(np.float32)
    for rows in (8, 12):
        trace = {"template": [{**k, "dot": [[1, rows]]}]}
        assert space.build(trace) is not None
        np.testing.assert_allclose(run(GEMV, "mv_0", trace, [a, w], (1, 48), width), a.astype(np.float64) @ w.T,
                                   rtol=1e-4, atol=1e-4)
