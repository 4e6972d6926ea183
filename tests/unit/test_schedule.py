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
from ziggurat.dialects import graph
from ziggurat.errors import ScheduleError, ZigguratError
from ziggurat.lowering import pipelines
from ziggurat.transforms.schedule.api import Schedule

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


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


CASES = {"matmul": matmul_case, "conv": conv_case, "reduce": reduce_case}


def lowered(model):
    mod = model.module.clone()
    run_passes(mod, parse_pipeline(pipelines.TO_LOOP))
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
    run_passes(mod, parse_pipeline(pipelines.LOOP[3].replace("loop-default-schedule,", "")))
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


steps = st.lists(st.tuples(st.sampled_from(["split", "fuse", "reorder", "parallel", "vectorize", "unroll",
                                            "decompose_reduction"]),
                           st.integers(0, 6), st.integers(0, 6), st.sampled_from([2, 3, 4, 5, 8])), max_size=5)


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
    for prim, a, b, factor in seq:
        n = len(sch.get_loops(block))
        step = {"prim": prim, "block": block, "loop": a % n}
        if prim == "split":
            step["factor"] = factor
        elif prim == "fuse":
            step["inner"] = a % n + 1
        elif prim == "reorder":
            step["loops"] = sorted({a % n, b % n}, reverse=True)
        before = str(mod)
        try:
            sch.apply(step)
            applied += 1
        except ScheduleError:
            assert str(mod) == before  # a refused primitive leaves the IR untouched
    assert len(sch.trace) == applied
    got = run_kernel(mod, inputs, want.shape, threads)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
