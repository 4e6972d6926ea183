"""The Schedule API and primitives: trace replay, errors, and random
primitive sequences compiled and run against numpy."""

from __future__ import annotations

import ctypes
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import graph_model, tensor
from tests.unit.test_lowering_properties import np_conv, rand
from ziggurat.backends.llvm import LLVMOptions, jit_compile, translate_module
from ziggurat.compiler import parse_pipeline, run_passes
from ziggurat.dialects import graph, loop
from ziggurat.errors import ScheduleError, ZigguratError
from ziggurat.lowering import pipelines
from ziggurat.transforms.loop.primitives.api import Schedule
from ziggurat.transforms.loop.primitives.regions import has, reads, writes

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def matmul_case():
    a_shape, b_shape = (12, 24), (24, 20)
    model = graph_model([a_shape, b_shape], lambda b, x: b.insert(graph.MatmulOp(x[0], x[1], tensor((12, 20)))).result)
    rng = np.random.default_rng(0)
    a, w = rand(rng, a_shape), rand(rng, b_shape)
    return model, "matmul", [a, w], a.astype(np.float64) @ w


def conv_case():
    x_shape, w_shape = (1, 3, 6, 12), (4, 3, 3, 3)
    rng = np.random.default_rng(1)
    x, w = rand(rng, x_shape), rand(rng, w_shape)
    want = np_conv(x, w, (1, 1), [1, 1, 1, 1], (1, 1), 1)
    model = graph_model([x_shape, w_shape], lambda b, v: b.insert(
        graph.Conv2dOp(v[0], v[1], tensor(want.shape), (1, 1), [1, 1, 1, 1], (1, 1), 1)).result)
    return model, "conv2d", [x, w], want


def reduce_case():
    x = rand(np.random.default_rng(2), (6, 8, 20))
    model = graph_model([x.shape], lambda b, v: b.insert(graph.ReduceOp(v[0], "sum", [2], False, tensor((6, 8)))).result)
    return model, None, [x], x.astype(np.float64).sum(axis=2)


def matmul_relu_case():
    """matmul + relu fused into one kernel: the matmul result is a kernel-local buffer."""
    model, block, inputs, want = matmul_case()
    model = graph_model([(12, 24), (24, 20)], lambda b, x: b.insert(graph.ReluOp(
        b.insert(graph.MatmulOp(x[0], x[1], tensor((12, 20)))).result)).result)
    return model, block, inputs, np.maximum(want, 0)


CASES = {"matmul": matmul_case, "conv": conv_case, "reduce": reduce_case, "matmul_relu": matmul_relu_case}


def lowered(model):
    mod = model.module.clone()
    run_passes(mod, parse_pipeline(pipelines.join("fuse-ops", *pipelines.TO_LOOP)))
    return mod


def kernel_name(mod) -> str:
    (name,) = [f.sym_name.data for f in mod.ops if f.sym_name.data != "main"]
    return name


def update_block(mod) -> str:
    """The name of the update block of the kernel's (only) reduction."""
    from ziggurat.dialects import loop

    return next(b.block_name.data for b in mod.walk() if isinstance(b, loop.BlockOp) and "R" in b.iter_kinds.data)


def run_kernel(mod, inputs, out_shape, threads: int) -> np.ndarray:
    """Lowers the scheduled loop-level module to hw, JIT-compiles it and calls the kernel."""
    run_passes(mod, parse_pipeline(pipelines.loop_stage(3, "llvm", skip=("loop-default-schedule",))))
    opts = LLVMOptions(num_threads=threads, export_all=True)
    llvm_module, info = translate_module(mod, opts)
    jm = jit_compile(llvm_module, opts, info)
    out = np.zeros(out_shape, np.float32)
    args = [np.ascontiguousarray(a) for a in inputs] + [out]
    fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(args))(jm.address(kernel_name(mod)))
    fn(*[a.ctypes.data for a in args])
    return out


def test_trace_replays_to_the_same_ir():
    model, _, _, _ = matmul_case()
    mod = lowered(model)
    sch = Schedule(mod, kernel_name(mod))
    i, j, k = sch.get_loops(sch.get_block("matmul"))
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, 4)
    sch.reorder(io, jo, ii)
    sch.parallel(sch.get_loops("matmul")[0])
    sch.unroll(sch.get_loops("matmul")[-1])
    text = sch.trace_json()
    assert [s["prim"] for s in json.loads(text)] == ["split", "split", "reorder", "parallel", "unroll"]
    fresh = lowered(model)
    Schedule(fresh, kernel_name(fresh)).replay(json.loads(text))
    assert str(fresh) == str(mod)


def test_schedule_errors_name_block_and_loop():
    model, _, _, _ = matmul_case()
    mod = lowered(model)
    sch = Schedule(mod, kernel_name(mod))
    with pytest.raises(ScheduleError, match=r"no block 'nope' .* its blocks are \['matmul', 'matmul_init'\]"):
        sch.get_block("nope")
    i, j, k = sch.get_loops("matmul")
    with pytest.raises(ScheduleError, match=r"split: factor 5 does not divide the trip count 12 of loop %i0"):
        sch.split(i, 5)
    with pytest.raises(ScheduleError, match=r"parallel: loop %r0 .* carries a reduction"):
        sch.parallel(k)
    with pytest.raises(ScheduleError, match=r"reorder: loop %i1 .* is not perfectly nested .*\(block 'matmul_init'\)"):
        sch.reorder(k, j)
    with pytest.raises(ScheduleError, match="unknown schedule primitive .blockize."):
        sch.apply({"prim": "blockize", "block": "matmul", "loop": 0})
    assert issubclass(ScheduleError, ZigguratError)
    assert sch.trace == []


def test_decompose_reduction_then_reorder_moves_the_reduction_outward():
    model, _, inputs, want = matmul_case()
    mod = lowered(model)
    sch = Schedule(mod, kernel_name(mod))
    blk = sch.get_block("matmul")
    i, j, k = sch.get_loops(blk)
    with pytest.raises(ScheduleError, match=r"decompose_reduction: block 'matmul_init' is not a reduction"):
        sch.decompose_reduction("matmul_init", i)
    init = sch.decompose_reduction(blk, j)
    assert init.name == "matmul_init" and len(sch.get_loops(init)) == 2
    i, j, k = sch.get_loops(blk)
    sch.reorder(k, j)  # refused before decomposition (see test_schedule_errors_name_block_and_loop)
    sch.parallel(sch.get_loops(blk)[0])
    with pytest.raises(ScheduleError, match=r"decompose_reduction: init block 'matmul_init' is not beside"):
        sch.decompose_reduction(blk, sch.get_loops(blk)[0])
    assert [s["prim"] for s in sch.trace] == ["decompose_reduction", "reorder", "parallel"]
    fresh = lowered(model)
    Schedule(fresh, kernel_name(fresh)).replay(json.loads(sch.trace_json()))
    assert str(fresh) == str(mod)
    np.testing.assert_allclose(run_kernel(mod, inputs, want.shape, 2), want, rtol=1e-4, atol=1e-4)


def packed_b(sch):  # packing: copy the column panel of B that one iteration of j needs
    i, j, k = sch.get_loops("matmul")
    sch.compute_at(sch.cache_read("matmul", 1), j)


def write_back_tile(sch):  # accumulate in a local tile, write it back per row
    sch.reverse_compute_at(sch.cache_write("matmul"), sch.get_loops("matmul")[0])


def aligned_inlined_copy(sch):
    copy = sch.cache_read("matmul", 0)
    sch.storage_align(copy, 0, axis=0, factor=16, offset=1)
    sch.compute_inline(copy)


def rfactor_vectorized(sch):
    ko, ki = sch.split(sch.get_loops("matmul")[2], 4)
    rf = sch.rfactor(ki)
    sch.vectorize(sch.get_loops(rf)[-1])
    sch.parallel(sch.get_loops(rf)[0])


def tiled(sch):
    i, j, k = sch.get_loops("matmul")
    io, jo, ii, ji = sch.tile([i, j], [4, 5])
    sch.parallel(io)


@pytest.mark.parametrize("recipe", [packed_b, write_back_tile, aligned_inlined_copy, rfactor_vectorized, tiled])
def test_block_primitives_replay_and_match_numpy(recipe):
    model, _, inputs, want = matmul_case()
    mod = lowered(model)
    sch = Schedule(mod, kernel_name(mod))
    recipe(sch)
    fresh = lowered(model)
    Schedule(fresh, kernel_name(fresh)).replay(json.loads(sch.trace_json()))
    assert str(fresh) == str(mod)
    np.testing.assert_allclose(run_kernel(mod, inputs, want.shape, 2), want, rtol=1e-4, atol=1e-4)


def test_block_primitive_errors_leave_ir_and_trace_untouched():
    model, _, _, _ = matmul_relu_case()
    mod = lowered(model)
    sch = Schedule(mod, kernel_name(mod))
    before = str(mod)
    i, j, k = sch.get_loops("matmul")
    with pytest.raises(ScheduleError, match=r"reorder: .* is not perfectly nested .*\(block 'matmul_init'\)"):
        sch.tile([j, k], [4, 2])  # the splits succeed, the reorder does not: nothing may change
    with pytest.raises(ScheduleError, match=r"reverse_compute_at: loop %r0 .* carries the reduction of block 'matmul'"):
        sch.reverse_compute_at("relu", k)
    with pytest.raises(ScheduleError, match=r"compute_at: block 'matmul' is a reduction"):
        sch.compute_at("matmul", sch.get_loops("relu")[0])
    with pytest.raises(ScheduleError, match=r"rfactor: loop %i1 .* is not purely a reduction loop of block 'matmul'"):
        sch.rfactor(j)
    with pytest.raises(ScheduleError, match=r"cache_read: block 'relu' reads 1 buffer\(s\) .* there is no buffer 2"):
        sch.cache_read("relu", 2)
    with pytest.raises(ScheduleError, match=r"storage_align: block 'relu' writes %out0, which is not a loop.alloc"):
        sch.storage_align("relu", 0, 0, 16, 0)
    with pytest.raises(ScheduleError, match=r"compute_at: trace step .* lacks \['at'\]"):
        sch.apply({"prim": "compute_at", "block": "matmul", "loop": 0})
    assert str(mod) == before and sch.trace == []
    sch.reverse_compute_at("relu", j)  # legal: relu consumes each finished element
    assert [s["prim"] for s in sch.trace] == ["reverse_compute_at"]
    assert [r.op for r in sch.get_loops("relu")[:2]] == [i.op, j.op]


def test_epilogue_after_decomposed_init_matches_numpy():
    """reverse_compute_at accepts an init block that finished its row in a loop of its own before the target loop."""
    model, _, inputs, want = matmul_relu_case()
    mod = lowered(model)
    sch = Schedule(mod, kernel_name(mod))
    sch.decompose_reduction("matmul", sch.get_loops("matmul")[1])
    sch.reverse_compute_at("relu", sch.get_loops("matmul")[1])
    assert len(sch.get_loops("relu")) == 4
    np.testing.assert_allclose(run_kernel(mod, inputs, want.shape, 2), want, rtol=1e-4, atol=1e-4)


PRIMS = ["split", "fuse", "reorder", "parallel", "vectorize", "unroll", "decompose_reduction", "tile",
         "compute_at", "reverse_compute_at", "compute_inline", "cache_read", "cache_write", "rfactor", "storage_align"]
steps = st.lists(st.tuples(st.sampled_from(PRIMS), st.integers(0, 6), st.integers(0, 6), st.integers(0, 6),
                           st.sampled_from([2, 3, 4, 5, 8])), max_size=6)


def random_step(sch: Schedule, main: str, prim: str, a: int, b: int, c: int, factor: int) -> dict:
    """A trace step for `prim`, its block and loops picked by a, b, c; the blocks are biased towards those the
    primitive can apply to, but many steps stay illegal on purpose."""
    blks = {blk.block_name.data: blk for blk in sch.func.walk() if isinstance(blk, loop.BlockOp)}
    blocks = sorted(blks)
    local = [n for n in blocks if any(isinstance(v.owner, loop.AllocOp) for v in writes(blks[n]))]
    block = main if c < 3 or prim in ("split", "fuse", "reorder", "tile") else blocks[c % len(blocks)]
    n = len(sch.get_loops(block))
    step = {"prim": prim, "block": block, "loop": a % n}
    if prim == "split":
        step["factor"] = factor
    elif prim == "fuse":
        step["inner"] = a % n + 1
    elif prim == "reorder":
        step["loops"] = sorted({a % n, b % n}, reverse=True)
    elif prim == "tile":
        picked = sorted({a % n, b % n})
        step = {"prim": prim, "block": block, "loops": picked, "factors": [factor, 2][:len(picked)]}
    elif prim in ("compute_at", "reverse_compute_at"):
        pool = local + blocks if prim == "compute_at" else blocks
        name = pool[a % len(pool)]
        mine = writes(blks[name]) if prim == "compute_at" else reads(blks[name])
        related = [m for m in blocks if m != name and any(has(mine, v) for v in
                                                          (reads if prim == "compute_at" else writes)(blks[m]))]
        at = (related + blocks)[b % (len(related) + 1 if related else len(blocks))]
        step = {"prim": prim, "block": name, "at": at, "loop": c % len(sch.get_loops(at))}
    elif prim == "compute_inline":
        pool = local + blocks
        step = {"prim": prim, "block": pool[a % len(pool)]}
    elif prim in ("cache_read", "cache_write"):
        step = {"prim": prim, "block": blocks[a % len(blocks)], "buffer": b % 3}
    elif prim == "storage_align":
        pool = local + blocks
        step = {"prim": prim, "block": pool[a % len(pool)], "buffer": 0, "axis": b % 2, "factor": factor,
                "offset": c % factor}
    return step


@SETTINGS
@given(case=st.sampled_from(sorted(CASES)), seq=steps, threads=st.sampled_from([1, 2]), first=st.integers(-2, 3))
def test_random_primitive_sequences_keep_results(case, seq, threads, first):
    model, block, inputs, want = CASES[case]()
    mod = lowered(model)
    block = block or update_block(mod)
    sch = Schedule(mod, kernel_name(mod))
    applied = 0
    if first >= 0:  # often start with decompose_reduction so that later reorders can move reduction loops
        n = len(sch.get_loops(block))
        try:
            sch.apply({"prim": "decompose_reduction", "block": block, "loop": first % n})
            applied += 1
        except ScheduleError:
            pass
    for prim, a, b, c, factor in seq:
        step = random_step(sch, block, prim, a, b, c, factor)
        before = str(mod)
        try:
            sch.apply(step)
            applied += 1
        except ScheduleError:
            assert str(mod) == before  # a refused primitive leaves the IR untouched
    assert len(sch.trace) == applied
    fresh = lowered(model)
    Schedule(fresh, kernel_name(fresh)).replay(json.loads(sch.trace_json()))
    assert str(fresh) == str(mod)
    got = run_kernel(mod, inputs, want.shape, threads)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


MOVES = ["read_at", "read_inline", "read_align", "write_back", "rfactor", "tile", "epilogue", "split", "parallel",
         "vectorize", "decompose"]
moves = st.lists(st.tuples(st.sampled_from(MOVES), st.integers(0, 5), st.integers(0, 5), st.sampled_from([2, 3, 4])),
                 min_size=1, max_size=4)


def expand(sch: Schedule, main: str, move: str, a: int, b: int, k: int) -> list[dict]:
    """One or two trace steps that use the block-level primitives the way a schedule would (packing, write-back,
    rfactor, epilogue fusion), with loops picked by a and b; some are illegal."""
    def loops(block: str) -> int:
        return len(sch.get_loops(block))

    blocks = sorted({blk.block_name.data for blk in sch.func.walk() if isinstance(blk, loop.BlockOp)})
    if move in ("read_at", "read_inline", "read_align"):
        step = {"prim": "cache_read", "block": main, "buffer": a % 2}
        copy = f"{main}_read{a % 2}"
        if copy in blocks:
            return [step]
        second = {"read_at": {"prim": "compute_at", "block": copy, "at": main, "loop": b % loops(main)},
                  "read_inline": {"prim": "compute_inline", "block": copy},
                  "read_align": {"prim": "storage_align", "block": copy, "buffer": 0, "axis": 0, "factor": 4 * k,
                                 "offset": b % 4}}[move]
        return [step, second]
    if move == "write_back":
        return [{"prim": "cache_write", "block": main, "buffer": 0},
                {"prim": "reverse_compute_at", "block": f"{main}_write0", "at": main, "loop": a % loops(main)}]
    if move == "rfactor":
        return [{"prim": "rfactor", "block": main, "loop": a % loops(main)}]
    if move == "tile":
        n = loops(main)
        picked = sorted({a % n, (a + 1 + b) % n})
        return [{"prim": "tile", "block": main, "loops": picked, "factors": [k, 2][:len(picked)]}]
    if move == "epilogue":
        others = [x for x in blocks if x.startswith("relu") or x.endswith("_write0")]
        if not others:
            return []
        return [{"prim": "reverse_compute_at", "block": others[a % len(others)], "at": main, "loop": b % loops(main)}]
    if move == "split":
        return [{"prim": "split", "block": main, "loop": a % loops(main), "factor": k}]
    if move == "decompose":
        return [{"prim": "decompose_reduction", "block": main, "loop": a % loops(main)}]
    target = blocks[b % len(blocks)]
    return [{"prim": move, "block": target, "loop": a % loops(target)}]


@SETTINGS
@given(case=st.sampled_from(sorted(CASES)), seq=moves, threads=st.sampled_from([1, 2]))
def test_random_block_primitive_schedules_keep_results(case, seq, threads):
    """cache_read/write, compute_at, reverse_compute_at, compute_inline, rfactor, tile and storage_align composed
    with the loop primitives: legal steps keep numpy's result, illegal ones raise ScheduleError and change nothing."""
    model, block, inputs, want = CASES[case]()
    mod = lowered(model)
    block = block or update_block(mod)
    sch = Schedule(mod, kernel_name(mod))
    for move, a, b, k in seq:
        for step in expand(sch, block, move, a, b, k):
            before = str(mod)
            try:
                sch.apply(step)
            except ScheduleError:
                assert str(mod) == before
                break
    fresh = lowered(model)
    Schedule(fresh, kernel_name(fresh)).replay(json.loads(sch.trace_json()))
    assert str(fresh) == str(mod)
    got = run_kernel(mod, inputs, want.shape, threads)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
