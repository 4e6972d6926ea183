"""Whole-model tuning: the task scheduler (autotune/scheduler.py), the time budget, the shared
cost model with transfer from other models' records, and the progress line. The model-level
tests measure with a fake builder and runner (a cost computed from the trace), so no process starts
and the budget is checked on the loop, not on the machine's speed."""

from __future__ import annotations

import io
import math
import time
from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ziggurat.autotune import JSONDatabase, tune_model
from ziggurat.autotune.cost_model import GBTCostModel
from ziggurat.autotune.measure import BuildResult, MeasureResult
from ziggurat.autotune.scheduler import TaskScheduler, estimated_latency, parse_duration, speedup
from ziggurat.cli.main import main as ziggurat_main
from ziggurat.autotune.space import DEFAULT_TRACE
from ziggurat.database import VALIDATION, structural_hash
from ziggurat.errors import TuningError

TARGET = "llvm -num-cores=1"


@dataclass
class T:
    name: str
    calls: int
    best_cost: float = math.inf
    default_cost: float = math.inf
    trials: int = 0


def test_first_batches_go_to_every_task_then_to_the_largest_expected_gain() -> None:
    a, b, c = T("a", 1), T("b", 4), T("c", 1)
    s = TaskScheduler([a, b, c])
    assert [s.next().name for _ in range(3)] == ["a", "b", "c"]  # none measured: the given order
    for t, cost in ((a, 1e-3), (b, 1e-3), (c, 1e-3)):
        t.best_cost = t.default_cost = cost
        t.trials = 8
        s.observe(t)
    assert s.next() is b  # 4 calls: four times the forward gain
    b.trials = 16
    b.best_cost = 0.5e-3
    s.observe(b)
    # b fell by 0.5 ms over 8 trials: backward 6.25e-5 s/trial; forward 0.5e-3 / 16
    assert s.gain(b) == pytest.approx(4 * (0.2 * 0.5e-3 / 8 + 0.8 * 0.5e-3 / 16))
    assert s.gain(a) == pytest.approx(0.8 * 1e-3 / 8)
    assert s.next() is b


def test_the_budget_reserves_the_model_checks_revert_round() -> None:
    """The model check re-measures the default of every kernel the tuned build changes when that build
    is not faster; the budget reserves that round too (without it a 600 s run took 628 s)."""
    from types import SimpleNamespace

    from ziggurat.autotune.tuner import _validation_reserve

    tuner = SimpleNamespace(measured=10, timing={"build": 20.0, "run": 1.0})  # 2 s a build, 0.1 s a run
    tasks = [T("won", 1, 1e-3, 2e-3, 16), T("lost", 1, 2e-3, 2e-3, 16), T("won2", 1, 1e-3, 3e-3, 16)]
    per = 2.0 + 5 * 0.1
    assert _validation_reserve(tuner, tasks, 0) == 0.0
    assert _validation_reserve(tuner, tasks, 0, revert=True) == pytest.approx(2 * per)  # the two improved
    assert _validation_reserve(tuner, tasks, 4) == pytest.approx(2 * 5 * per)  # default + 4 finalists each
    assert _validation_reserve(tuner, tasks, 4, revert=True) == pytest.approx(2 * 6 * per)


def test_kernels_under_one_percent_get_only_their_first_batch() -> None:
    big, tiny = T("big", 1, 1e-3, 1e-3, 8), T("tiny", 1)
    s = TaskScheduler([big, tiny])
    assert s.next() is tiny  # its first batch, although it will be small
    tiny.best_cost = tiny.default_cost = 5e-6
    tiny.trials = 8
    s.observe(tiny)
    assert s.skipped(tiny) and not s.skipped(big)
    assert all(s.next() is big for _ in range(3))
    s.mark_dry(big)
    assert s.next() is None


def test_a_resumed_run_starts_with_the_untried_tasks_heaviest_first() -> None:
    done = T("done", 1, 1e-3, 1e-3, 8)
    light, heavy = T("light", 1, default_cost=1e-4), T("heavy", 2, default_cost=1e-3)
    s = TaskScheduler([done, light, heavy])
    assert [s.next().name for _ in range(3)] == ["heavy", "light", "done"]


def test_the_estimates_sum_calls_times_time() -> None:
    tasks = [T("a", 2, 1e-3, 2e-3, 8), T("b", 1, math.inf, 3e-3, 0), T("c", 1)]
    assert estimated_latency(tasks) == pytest.approx(2e-3 + 3e-3)
    assert speedup(tasks) == pytest.approx(4e-3 / 2e-3)
    assert speedup([T("x", 1)]) == 1.0


@pytest.mark.parametrize(("text", "seconds"), [("600", 600), ("90s", 90), ("10m", 600), ("1.5h", 5400), (30, 30)])
def test_durations(text, seconds) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "ten minutes", "0", "-5m", "nan"])
def test_bad_durations_are_named(text) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def mlp(seed: int, width: int) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((32, width), (width, 16)))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


class FakeBuilder:
    def build(self, inputs):
        return [BuildResult(path=f"/nonexistent/{i}.so") for i, _ in enumerate(inputs)]

    def close(self):
        pass


class FakeRunner:
    """Costs from the trace's hash (deterministic, 10-100 us), after `delay` seconds per candidate."""

    def __init__(self, delay: float = 0.0):
        self.delay, self.calls = delay, 0

    def run(self, inputs, builds):
        out = []
        for inp in inputs:
            time.sleep(self.delay)
            self.calls += 1
            h = int(structural_hash(inp.trace)[:8], 16)
            out.append(MeasureResult(costs=[1e-5 * (1 + h % 10)] * 3))
        return out

    def close(self):
        pass


def test_a_time_budget_stops_the_search_and_the_records_carry_features(tmp_path) -> None:
    path = tmp_path / "a.onnx"
    onnx.save(mlp(0, 64), path)
    runner = FakeRunner(delay=0.05)
    log = io.StringIO()
    with JSONDatabase(tmp_path / "db.jsonl", fsync=False) as db:
        start = time.time()
        results = tune_model(str(path), None, db, target=TARGET, batch_size=4, builder=FakeBuilder(),
                             runner=runner, log=log, time_budget=8.0)
        elapsed = time.time() - start
        records = db.records()
    assert elapsed <= 8.0 + 0.5  # stops before a batch would overrun
    assert runner.calls == len(records) >= 2 * len(results)  # every kernel's first batch, then more
    assert all(r.features is not None and len(r.features) > 10 for r in records)
    lines = log.getvalue().splitlines()
    assert lines and "model ~" in lines[-1] and "/8s" in lines[-1]
    assert all(np.isfinite(r.best_cost) and r.calls >= 1 for r in results)


def test_a_second_model_trains_on_the_first_ones_records(tmp_path, monkeypatch) -> None:
    first, second = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(mlp(0, 64), first)
    onnx.save(mlp(1, 48), second)  # other kernel shapes: other workloads
    used = []
    real = GBTCostModel.pretrain

    def spy(self, records, featurize):
        n = real(self, records, featurize)
        used.append(n)
        return n

    monkeypatch.setattr(GBTCostModel, "pretrain", spy)
    with JSONDatabase(tmp_path / "db.jsonl", fsync=False) as db:
        tune_model(str(first), 8, db, target=TARGET, batch_size=4, builder=FakeBuilder(), runner=FakeRunner(),
                   progress=False)
        n_first = len(db.records())
        tune_model(str(second), 8, db, target=TARGET, batch_size=4, builder=FakeBuilder(), runner=FakeRunner(),
                   progress=False)
        tune_model(str(second), 4, db, target=TARGET, batch_size=4, builder=FakeBuilder(), runner=FakeRunner(),
                   progress=False, transfer=False)
    assert used[0] == 0  # an empty database
    assert used[1] == n_first  # every record of the first model: other workloads, with features
    assert len(used) == 2  # transfer=False trains on nothing else


def test_tune_model_needs_a_limit(tmp_path) -> None:
    path = tmp_path / "a.onnx"
    onnx.save(mlp(0, 64), path)
    with JSONDatabase(tmp_path / "db.jsonl", fsync=False) as db, pytest.raises(TuningError, match="time budget"):
        tune_model(str(path), None, db, target=TARGET, builder=FakeBuilder(), runner=FakeRunner())


def test_cli_refuses_a_bad_time_budget(tmp_path, capsys) -> None:
    path = tmp_path / "a.onnx"
    onnx.save(mlp(0, 64), path)
    assert ziggurat_main(["tune", str(path), "--db", str(tmp_path / "db.jsonl"), "--time-budget", "soon"]) != 0
    err = capsys.readouterr().err
    assert "--time-budget" in err and "soon" in err and "Traceback" not in err


@pytest.mark.parametrize("speedup", [0.97, 1.05])
def test_the_model_check_keeps_only_a_faster_model(tmp_path, monkeypatch, speedup) -> None:
    """The fake runner makes some sketched schedules 'win'; the model check then compiles and runs
    both builds for real, its timing replaced by `speedup`. Below 1.01x every changed kernel gets a
    validation round of the default alone, and compile applies nothing."""
    from ziggurat.autotune import model_check

    path = tmp_path / "a.onnx"
    onnx.save(mlp(0, 64), path)
    timed = []

    def fake_time_pair(a, b, inputs, **kw):
        x = inputs[0]
        np.testing.assert_allclose(a(*inputs)[0], b(*inputs)[0], rtol=1e-4, atol=1e-4)  # both builds run
        timed.append(x.shape)
        return 1e-3 * speedup, 1e-3, speedup

    monkeypatch.setattr(model_check, "time_pair", fake_time_pair)
    monkeypatch.setenv("ZIGGURAT_CACHE", "0")
    db_path = tmp_path / "db.jsonl"
    with JSONDatabase(db_path, fsync=False) as db:
        results = tune_model(str(path), 24, db, target=TARGET, batch_size=4, builder=FakeBuilder(),
                             runner=FakeRunner(), progress=False, validate=2, model_check=True)
    check = results[0].model_check
    assert timed and check.speedup == speedup and check.changed_kernels > 0  # something was tuned
    assert check.kept == (speedup >= model_check.MIN_MODEL_GAIN)
    with JSONDatabase(db_path, fsync=False) as db:
        changed = [r for r in results if db.best(r.key, TARGET).trace != DEFAULT_TRACE]
        reverts = [r for r in db.records() if r.message.startswith(VALIDATION) and r.trace == DEFAULT_TRACE]
    assert len(changed) == (check.changed_kernels if check.kept else 0)
    assert all(r.best_trace == DEFAULT_TRACE for r in results) or check.kept
    assert reverts  # the validation rounds (kept) or the reverting rounds (not kept) measured the default
