"""Builder and runner: candidates that crash, hang or compute wrong results become error records."""

from __future__ import annotations

import ctypes
import math
import os
import time

import numpy as np
import pytest
from xdsl.parser import Parser

from ziggurat.autotune import (
    Builder,
    JSONDatabase,
    LocalBuilder,
    LocalRunner,
    MeasureInput,
    Runner,
    Worker,
    measure,
    to_record,
)
from ziggurat.autotune.workers import get_context
from ziggurat.compiler import parse_pipeline, run_passes
from ziggurat.dialects import make_context

M, N, K = 24, 40, 16
SHAPES = ((M, K), (K, N), (M, N))

TE_MATMUL = f"""
func.func @mm_0(%a: tensor<{M}x{K}xf32>, %b: tensor<{K}x{N}xf32>) -> tensor<{M}x{N}xf32> {{
  %s = te.reduce "mm" add init 0.000000e+00 : f32 (%i, %j) reduce (%k : {K}) : tensor<{M}x{N}xf32> {{
    %x = te.read %a[%i, %k] : tensor<{M}x{K}xf32>
    %y = te.read %b[%k, %j] : tensor<{K}x{N}xf32>
    %p = arith.mulf %x, %y : f32
    te.yield %p : f32
  }}
  func.return %s : tensor<{M}x{N}xf32>
}}
"""


def lower(text: str, pipeline: str) -> str:
    module = Parser(make_context(), text).parse_module()
    run_passes(module, parse_pipeline(pipeline))
    return str(module)


REFERENCE = lower(TE_MATMUL, "convert-te-to-loop")
FAST = REFERENCE.replace(f"0 to {M} serial", f"0 to {M} parallel")
# the init store goes 2**40 elements past the output buffer
CRASH = REFERENCE.replace("loop.store %2, %out0[%0, %1]",
                          "%far = arith.constant 1099511627776 : index\n loop.store %2, %out0[%far, %1]")
# a 10**12-trip loop around the reduction; the float recurrence cannot be folded away
HANG = REFERENCE.replace(f"loop.for %r0 = 0 to {K} serial {{",
                         f"loop.for %h = 0 to 1000000000000 serial {{ loop.for %r0 = 0 to {K} serial {{")
HANG = HANG.replace("    func.return", "    }\n    func.return", 1)


def wrong_kernel() -> str:
    """The reference with the product added twice in the update."""
    lines = REFERENCE.splitlines()
    i = next(n for n, x in enumerate(lines) if "arith.addf" in x)
    lhs, rhs = lines[i].split(" = arith.addf ")
    a, b = rhs.split(" : ")[0].split(", ")
    lines[i] = f"%half = arith.addf {a}, {b} : f32\n{lhs} = arith.addf %half, {b} : f32"
    return "\n".join(lines)


def cand(text: str, trace) -> MeasureInput:
    return MeasureInput(text, "mm_0", SHAPES, reference=REFERENCE, trace=trace)


@pytest.fixture(scope="module")
def tools():
    with LocalBuilder(n_parallel=2) as builder, LocalRunner(timeout=3.0, repeat=3, min_repeat_ms=5) as runner:
        yield builder, runner


def test_protocols_and_picklable_inputs():
    import pickle

    with LocalBuilder(1) as b, LocalRunner() as r:
        assert isinstance(b, Builder) and isinstance(r, Runner)
    inp = cand(FAST, {"parallel": True})
    assert pickle.loads(pickle.dumps(inp)) == inp
    assert inp.key == cand(REFERENCE, None).key  # the workload is the untuned kernel
    with pytest.raises(ValueError, match="num_outputs"):
        MeasureInput(FAST, "mm_0", SHAPES, num_outputs=4)


def test_good_candidates_are_timed_and_recorded(tools, tmp_path):
    builder, runner = tools
    inputs = [cand(FAST, {"outer": "parallel"}), cand(REFERENCE, {"outer": "serial"})]
    results = measure(builder, runner, inputs)
    for res in results:
        assert res.error == "ok", res.message
        assert len(res.costs) == 3 and all(0 < c < math.inf for c in res.costs)
        assert res.run_seconds >= sum(res.costs)
    db = JSONDatabase(tmp_path / "db.jsonl")
    for inp, res in zip(inputs, results):
        db.commit(to_record(inp, res, "llvm"))
    assert db.has_measured(inputs[0].key, {"outer": "parallel"})
    assert db.best(inputs[0].key, "llvm").costs in (results[0].costs, results[1].costs)


def test_min_repeat_ms_raises_the_number_of_calls(tools, monkeypatch):
    """The worker's timing loop (`_run_task`) on a clock that advances exactly 1 us per kernel call:
    `number` grows until one repeat lasts `min_repeat_ms`, every repeat makes `number` calls, and a
    cost is seconds per call. With min_repeat_ms = 0 one call per repeat is enough."""
    from importlib import import_module
    from types import SimpleNamespace

    from ziggurat.autotune.measure import runner_config

    m = import_module("ziggurat.autotune.measure")
    builder, _ = tools
    inp = cand(FAST, 0)
    (build,) = builder.build([inp])
    with LocalRunner(timeout=10.0, repeat=2, min_repeat_ms=30) as runner:  # end to end, in the worker
        (res,) = runner.run([inp], [build])
    assert res.error == "ok" and len(res.costs) == 2, res.message

    tick, clock, calls = 1e-6, [0.0], [0]
    kernel = m._kernel

    def counted(path, func, n):
        f = kernel(path, func, n)

        def call(*args):
            calls[0] += 1
            clock[0] += tick
            return f(*args)
        return call

    monkeypatch.setattr(m, "_kernel", counted)
    monkeypatch.setattr(m, "time", SimpleNamespace(perf_counter=lambda: clock[0], time=time.time))

    def run(min_repeat_ms: float) -> tuple[dict, int]:
        calls[0] = 0
        task = {**runner_config(1, 2, min_repeat_ms, 1, 0, False, 1e-4, 1e-4, 0), "path": build.path,
                "reference_path": None, "func": inp.func, "shapes": inp.arg_shapes, "num_outputs": inp.num_outputs}
        return m._run_task(task), calls[0]

    out, n_calls = run(30.0)
    number = out["number"]
    assert out["error"] == "ok" and len(out["costs"]) == 2
    assert number * tick >= 0.030 and number < 2 * 1.1 * 0.030 / tick  # raised to 30 ms, not far past it
    assert out["costs"] == pytest.approx([tick, tick])  # seconds per call, not per repeat
    # warm-up, calibration rounds of 1 call then `number` calls, then 2 repeats of `number` calls
    assert n_calls == 1 + 1 + number + 2 * number
    out, n_calls = run(0.0)
    assert out["number"] == 1 and out["costs"] == pytest.approx([tick, tick]) and n_calls == 1 + 1 + 2


def test_rotation_copies_stay_alive_aligned_and_equal():
    from importlib import import_module

    m = import_module("ziggurat.autotune.measure")
    args = [np.arange(12, dtype=np.float32).reshape(3, 4), np.full((2, 3), np.nan, np.float32)]
    assert m._rotation(args, 0) == [args]
    copies = m._rotation(args, 10 * sum(a.nbytes for a in args))
    assert len(copies) == 10 and copies[0] is args
    for c in copies[1:]:
        for a, b in zip(args, c):
            assert b.ctypes.data % 64 == 0 and b.shape == a.shape and b.ctypes.data != a.ctypes.data
            np.testing.assert_array_equal(a, b)
    assert len(m._rotation(args, 1 << 30)) == m.MAX_SETS


def test_rotating_runner_times_and_checks(tools):
    """With `rotate_bytes` the timed calls take turns over argument copies (a kernel writing into a
    freed copy would corrupt the heap: an 'ok' record after hundreds of rotations says they live);
    a wrong candidate is still caught."""
    builder, _ = tools
    inputs = [cand(FAST, "fast"), cand(wrong_kernel(), "wrong")]
    builds = builder.build(inputs)
    with LocalRunner(timeout=10.0, repeat=3, min_repeat_ms=5, rotate_bytes=2 << 20) as runner:
        fast, wrong = runner.run(inputs, builds)
    assert fast.error == "ok" and len(fast.costs) == 3 and all(0 < c < math.inf for c in fast.costs), fast.message
    assert wrong.error == "wrong_result"
    with pytest.raises(ValueError, match="rotate_bytes"):
        LocalRunner(rotate_bytes=-1)


def test_wrong_result_is_an_error_record(tools):
    builder, runner = tools
    inputs = [cand(wrong_kernel(), "wrong"), cand(FAST, "fine")]
    wrong, fine = measure(builder, runner, inputs)
    assert wrong.error == "wrong_result" and "differs from the reference" in wrong.message and not wrong.costs
    assert fine.error == "ok"
    assert to_record(inputs[0], wrong, "llvm").error == "wrong_result"


def test_segfault_is_a_crash_record_and_measuring_goes_on(tools):
    builder, runner = tools
    crash, fine = measure(builder, runner, [cand(CRASH, "crash"), cand(FAST, "after-crash")])
    assert crash.error == "crash" and "SIGSEGV" in crash.message
    assert fine.error == "ok" and fine.costs


def test_hang_is_a_timeout_record_and_measuring_goes_on(tools):
    builder, runner = tools
    hang, fine = measure(builder, runner, [cand(HANG, "hang"), cand(FAST, "after-hang")])
    assert hang.error == "timeout" and "3 s" in hang.message and not hang.costs
    assert fine.error == "ok" and len(fine.costs) == 3


def test_build_errors(tools):
    builder, runner = tools
    bad_op = cand(REFERENCE.replace("arith.mulf", "arith.mulzz"), "bad-op")
    no_func = MeasureInput(FAST, "mm_9", SHAPES, trace="no-func")
    bad_ref = MeasureInput(FAST, "mm_0", SHAPES, reference="garbage", trace="bad-ref")
    results = measure(builder, runner, [bad_op, no_func, bad_ref])
    assert [r.error for r in results] == ["build_error"] * 3
    assert "does not parse or verify" in results[0].message
    assert "no kernel 'mm_9'" in results[1].message
    assert "reference kernel failed to build" in results[2].message


def test_pipeline_runs_before_the_backend(tools):
    builder, runner = tools
    vec = REFERENCE.replace(f"0 to {N} serial", f"0 to {N} vectorized")
    inp = MeasureInput(vec, "mm_0", SHAPES, pipeline="convert-loop-to-hw{vector-width=8}", reference=REFERENCE)
    (res,) = measure(builder, runner, [inp])
    assert res.error == "ok", res.message


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_worker_survives_crash_timeout_and_errors(method):
    worker = Worker(get_context(method))
    try:
        assert worker.call(math.sqrt, 16.0, timeout=30).value == 4.0
        res = worker.call(ctypes.string_at, 0, timeout=30)  # reads address 0
        assert res.status == "crash" and "SIGSEGV" in res.message
        res = worker.call(os._exit, 3, timeout=30)
        assert res.status == "crash" and "status 3" in res.message
        res = worker.call(time.sleep, 30, timeout=0.5)
        assert res.status == "timeout"
        res = worker.call(int, "seven", timeout=30)
        assert res.status == "error" and "ValueError" in res.message
        assert worker.call(math.sqrt, 9.0, timeout=30).value == 3.0
        assert worker.restarts == 3
    finally:
        worker.close()
    assert not worker.alive


def test_fork_is_refused():
    with pytest.raises(ValueError, match="fork hangs in libgomp"):
        get_context("fork")


def test_measured_records_feed_features_and_the_cost_model(tools, tmp_path):
    """Variants of loop kinds: measure, record, then featurize the records and pretrain a model on them."""
    from ziggurat.autotune import GBTCostModel, extract_features

    builder, runner = tools
    variants = {}
    for outer in ("serial", "parallel"):
        for inner in ("serial", "vectorized", "unrolled"):
            text = REFERENCE.replace(f"0 to {M} serial", f"0 to {M} {outer}")
            variants[f"{outer}/{inner}"] = text.replace(f"0 to {N} serial", f"0 to {N} {inner}")
    pipeline = "convert-loop-to-hw{vector-width=8}"
    inputs = [MeasureInput(t, "mm_0", SHAPES, pipeline=pipeline, reference=REFERENCE, trace=name)
              for name, t in variants.items()]
    db = JSONDatabase(tmp_path / "db.jsonl")
    for inp, res in zip(inputs, measure(builder, runner, inputs)):
        assert res.error == "ok", (inp.trace, res.message)
        db.commit(to_record(inp, res, "llvm"))

    def featurize(record):
        module = Parser(make_context(), variants[record.trace]).parse_module()
        run_passes(module, parse_pipeline(pipeline))
        return extract_features(module, "mm_0")

    model = GBTCostModel(n_estimators=20)
    assert model.pretrain(JSONDatabase(db.path).records(inputs[0].key), featurize) == len(variants)
    scores = model.predict(np.stack([featurize(r) for r in db.records()]))
    assert scores.shape == (len(variants),) and np.isfinite(scores).all() and scores.std() > 0
