"""The tuner end to end: a small tune that records, resumes without re-measuring and whose best
record compiles back to a correct kernel; model tuning and compile(tuning_db=...)."""

from __future__ import annotations

import ctypes
import random

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.parser import Parser

import ziggurat
from tests.unit.test_autotune_measure import lower
from tests.unit.test_autotune_search import te_matmul
from ziggurat.autotune import (
    DEFAULT_TRACE,
    JSONDatabase,
    SearchSpace,
    TuningRecord,
    apply_trace,
    extract_tasks,
    tune_kernel,
    tune_model,
)
from ziggurat.backends.llvm import LLVMOptions, jit_compile, translate_module
from ziggurat.cli.main import main as ziggurat_main
from ziggurat.compiler import parse_pipeline, run_passes
from ziggurat.dialects import make_context

TARGET = "llvm -num-cores=1"
FAST = {"min_repeat_ms": 2.0, "repeat": 2}
KERNEL = lower(te_matmul(64, 64, 64), "convert-te-to-loop")


def run_scheduled(text: str, trace, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    module = Parser(make_context(), text).parse_module()
    apply_trace(module, "mm_0", trace)
    run_passes(module, parse_pipeline("convert-loop-to-hw"))
    opts = LLVMOptions(num_threads=1, export_all=True)
    llvm_module, info = translate_module(module, opts)
    jm = jit_compile(llvm_module, opts, info)
    out = np.full((a.shape[0], b.shape[1]), np.nan, np.float32)
    fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 3)(jm.address("mm_0"))
    fn(a.ctypes.data, b.ctypes.data, out.ctypes.data)
    return out


def assert_result_is_the_records(res, db: JSONDatabase) -> None:
    """A tuning result says what its database holds: the best cost is the lowest 'ok' record's (and
    the database's `best` is that record), the default cost is the default trace's record."""
    ok = [r for r in db.records(res.key) if r.ok and r.target == TARGET]
    assert ok and np.isfinite(res.best_cost)
    lowest = min(ok, key=lambda r: r.cost)
    assert res.best_cost == lowest.cost and res.best_trace == lowest.trace
    assert db.best(res.key, TARGET).cost == lowest.cost
    (default,) = [r for r in ok if r.trace == DEFAULT_TRACE]
    assert res.default_cost == default.cost


def test_tune_kernel_records_resumes_and_best_is_correct(tmp_path):
    path = tmp_path / "records.jsonl"
    with JSONDatabase(path, fsync=False) as db:
        first = tune_kernel(KERNEL, "mm_0", 8, db, target=TARGET, timeout=5, batch_size=4, runner_options=FAST)
        assert first.trials == 8 and len(db) == 8
        traces = [r.trace for r in db.records()]
        assert DEFAULT_TRACE in traces and len({str(t) for t in traces}) == 8
        assert sum(r.ok for r in db.records()) >= 6
        assert_result_is_the_records(first, db)
    with JSONDatabase(path, fsync=False) as db:  # resume: nothing recorded is measured again
        second = tune_kernel(KERNEL, "mm_0", 4, db, target=TARGET, timeout=5, batch_size=4, runner_options=FAST)
        assert second.trials == 4 and len(db) == 12
        assert len({str(r.trace) for r in db.records()}) == 12
        assert_result_is_the_records(second, db)  # over all 12 records: the resumed ones count too
        assert second.default_cost == first.default_cost  # the default was not measured again
        best = db.best(second.key, TARGET)
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (64, 64)).astype(np.float32) for _ in range(2))
    want = a.astype(np.float64) @ b
    for trace in (first.best_trace, best.trace, DEFAULT_TRACE):
        np.testing.assert_allclose(run_scheduled(KERNEL, trace, a, b), want, rtol=1e-4, atol=1e-4)


def mlp_weights() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((32, 48)).astype(np.float32), rng.standard_normal((48, 16)).astype(np.float32)


def mlp_reference(x: np.ndarray) -> np.ndarray:
    w1, w2 = (w.astype(np.float64) for w in mlp_weights())
    return np.maximum(x.astype(np.float64) @ w1, 0) @ w2


def mlp() -> onnx.ModelProto:
    w1, w2 = mlp_weights()
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"), helper.make_node("Relu", ["h"], ["r"], name="act"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_tune_model_then_compile_with_tuning_db(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(), path)
    tasks = extract_tasks(str(path), target=TARGET)
    assert len(tasks) >= 2 and all(calls >= 1 for _, _, calls in tasks)
    db_path = tmp_path / "records.jsonl"
    with JSONDatabase(db_path, fsync=False) as db:
        results = tune_model(str(path), 2 * len(tasks) + 2, db, target=TARGET, timeout=5, batch_size=2,
                             runner_options=FAST)
        assert {r.name for r in results} == {n for n, _, _ in tasks}
        assert all(r.trials >= 2 for r in results)
        for r in results:
            assert_result_is_the_records(r, db)
    err = capsys.readouterr().err
    assert "trials" in err and all(n in err for n, _, _ in tasks)
    x = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)
    want = mlp_reference(x)
    plain = ziggurat.compile(str(path), target=TARGET)
    tuned = ziggurat.compile(str(path), target=TARGET, tuning_db=str(db_path))
    assert sorted(tuned.info["stats"].tuned_kernels) == sorted(n for n, _, _ in tasks)
    for m in (plain, tuned):
        np.testing.assert_allclose(m(x)[0], want, rtol=1e-4, atol=1e-4)
    # a sketch candidate recorded as the fastest of each kernel is what compile replays
    with JSONDatabase(db_path, fsync=False) as db:
        for (name, text, _), r in zip(tasks, results):
            cand = SearchSpace(text, name).sample(random.Random(5), 1)[0]
            db.commit(TuningRecord(r.key, TARGET, cand.trace, [1e-12]))
            assert db.best(r.key, TARGET).trace == cand.trace != DEFAULT_TRACE
    sketched = ziggurat.compile(str(path), target=TARGET, tuning_db=str(db_path))
    assert len(sketched.info["stats"].tuned_kernels) == len(tasks)
    np.testing.assert_allclose(sketched(x)[0], want, rtol=1e-4, atol=1e-4)
    # the CLI: ziggurat tune resumes the same db, compile --tuning-db applies it
    assert ziggurat_main(["tune", str(path), "--trials", "2", "--db", str(db_path), "--timeout", "5",
                          "--target", TARGET, "--seed", "1", "--parallel-builds", "1", "--report"]) == 0
    out = capsys.readouterr().out
    flushed = tmp_path / "flushed.jsonl"  # --cache-flush: operands rotated out of L2 while timed
    assert ziggurat_main(["tune", str(path), "--trials", "2", "--db", str(flushed), "--timeout", "5",
                          "--target", TARGET, "--parallel-builds", "1", "--cache-flush"]) == 0
    with JSONDatabase(flushed, fsync=False) as db:
        assert any(r.ok for r in db.records())
    assert "records in" in out and "trials" in out and "tuning wall time" in out
    assert "| kernel | split | records | trained on | held out | Spearman |" in out  # the records of the tune above
    assert ziggurat_main(["compile", str(path), "--target", TARGET, "--tuning-db", str(db_path)]) == 0


def test_missing_tuning_db_is_a_clear_error(tmp_path):
    with pytest.raises(ziggurat.errors.CompileError, match="tuning database"):
        ziggurat.compile(mlp(), target=TARGET, tuning_db=str(tmp_path / "nope.jsonl"))


def test_validation_round_decides_the_best(tmp_path):
    from ziggurat.database import VALIDATION

    with JSONDatabase(tmp_path / "v.jsonl", fsync=False) as db:
        res = tune_kernel(KERNEL, "mm_0", 4, db, target=TARGET, timeout=5, batch_size=4, runner_options=FAST,
                          validate=2)
        val = [r for r in db.records() if r.message.startswith(VALIDATION)]
        searched = [r for r in db.records() if not r.message.startswith(VALIDATION) and r.ok]
        default = min(r.cost for r in searched if r.trace == DEFAULT_TRACE)
        faster = {r.trace_hash for r in searched if r.trace != DEFAULT_TRACE and r.cost < default}
        finalists = min(2, len(faster))  # only candidates measured faster than the default compete
        assert len(val) == (5 * (1 + finalists) if finalists else 0)  # default + finalists, five passes
        if finalists:
            assert len({r.message for r in val}) == 1 and sum(r.trace == DEFAULT_TRACE for r in val) == 5
            assert db.best(res.key, TARGET).message == val[0].message
        # a later round replaces the earlier one
        db.commit(TuningRecord(res.key, TARGET, DEFAULT_TRACE, [1e-9], message=VALIDATION + "9" * 17))
        assert db.best(res.key, TARGET).trace == DEFAULT_TRACE


def test_validation_keeps_the_default_unless_a_finalist_is_clearly_faster(tmp_path):
    """Within one validation round, a finalist whose cost, paired pass by pass with the default's, is
    less than MIN_GAIN (2%) below it does not replace the default (a gain inside the host's timing
    noise); one 5% faster does, even when the host's speed drifts between passes."""
    from ziggurat.database import MIN_GAIN, VALIDATION, WorkloadKey

    key = WorkloadKey.from_text(KERNEL, "mm_0")
    other = [{"prim": "parallel", "block": "mm", "loop": 0}]
    for gain, expect in ((MIN_GAIN / 2, DEFAULT_TRACE), (0.05, other)):
        with JSONDatabase(tmp_path / f"g{gain}.jsonl", fsync=False) as db:
            for p in range(3):
                rnd = VALIDATION + "1" * 17
                drift = 1 + 0.2 * p  # the host slows down between passes
                db.commit(TuningRecord(key, TARGET, DEFAULT_TRACE, [1e-3 * drift], message=rnd))
                db.commit(TuningRecord(key, TARGET, other, [1e-3 * (1 - gain) * drift], message=rnd))
            assert db.best(key, TARGET).trace == expect


def test_records_from_another_cpu_replay_with_a_warning(tmp_path):
    """Records carry the CPU they were measured on (versions['cpu']); replaying one from another CPU
    still compiles a correct model, and says so once; this host's own records replay silently."""
    import warnings

    from ziggurat.database import WorkloadKey
    from ziggurat.target import host_cpu as host_target

    def host_cpu() -> str:
        return host_target()[0]

    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(), path)
    tasks = extract_tasks(str(path), target=TARGET)
    x = np.random.default_rng(2).standard_normal((4, 32)).astype(np.float32)
    want = mlp_reference(x)
    np.testing.assert_allclose(ziggurat.compile(str(path), target=TARGET)(x)[0], want, rtol=1e-4, atol=1e-4)
    for cpu, warned in ((host_cpu(), False), ("some-other-cpu", True)):
        db_path = tmp_path / f"{cpu}.jsonl"
        with JSONDatabase(db_path, fsync=False) as db:
            for name, text, _ in tasks:
                cand = SearchSpace(text, name).sample(random.Random(3), 1)[0]
                rec = TuningRecord(WorkloadKey.from_text(text, name), TARGET, cand.trace, [1e-6])
                assert rec.versions["cpu"] == host_cpu()
                rec.versions["cpu"] = cpu
                db.commit(rec)
        with JSONDatabase(db_path, fsync=False) as db:  # the CPU survives the JSON round trip
            assert {r.versions["cpu"] for r in db.records()} == {cpu}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tuned = ziggurat.compile(str(path), target=TARGET, tuning_db=str(db_path))
        msgs = [str(w.message) for w in caught if "measured on CPU" in str(w.message)]
        assert len(msgs) == (1 if warned else 0), msgs
        if warned:
            assert "some-other-cpu" in msgs[0] and host_cpu() in msgs[0]
        assert len(tuned.info["stats"].tuned_kernels) == len(tasks)
        np.testing.assert_allclose(tuned(x)[0], want, rtol=1e-4, atol=1e-4)
