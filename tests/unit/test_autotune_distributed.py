"""Tuning through Dask distributed: a LocalCluster whose one worker holds the `measure` resource builds
and times a small matmul; records are written as with the local pools and the best one is correct.
`distributed` is a dev dependency (pyproject.toml): the test runs wherever the dev extra is installed."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.test_autotune_measure import CRASH, REFERENCE, SHAPES, lower
from tests.unit.test_autotune_search import te_matmul
from tests.unit.test_autotune_tuner import assert_result_is_the_records, run_scheduled
from ziggurat.autotune import DEFAULT_TRACE, JSONDatabase, MeasureInput, tune_kernel
from ziggurat.autotune.distributed import DaskBuilder, DaskRunner, local_cluster

TARGET = "llvm -num-cores=1"
FAST = {"min_repeat_ms": 2.0, "repeat": 2}
KERNEL = lower(te_matmul(64, 64, 64), "convert-te-to-loop")


@pytest.fixture(scope="module")
def client():
    with local_cluster(n_workers=1) as c:
        yield c


def test_tune_through_a_local_dask_cluster(client, tmp_path):
    builder, runner = DaskBuilder(client, timeout=120), DaskRunner(client, timeout=20, **FAST)
    with JSONDatabase(tmp_path / "r.jsonl", fsync=False) as db:
        res = tune_kernel(KERNEL, "mm_0", 4, db, target=TARGET, batch_size=2, builder=builder, runner=runner)
        assert res.trials == 4 and len(db) == 4
        assert sum(r.ok for r in db.records()) >= 3
        assert_result_is_the_records(res, db)
        best = db.best(res.key, TARGET)
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (64, 64)).astype(np.float32) for _ in range(2))
    for trace in (best.trace, DEFAULT_TRACE):
        np.testing.assert_allclose(run_scheduled(KERNEL, trace, a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_a_crashing_candidate_is_a_record_and_the_dask_worker_survives(client):
    builder, runner = DaskBuilder(client), DaskRunner(client, timeout=20, **FAST)
    inputs = [MeasureInput(CRASH, "mm_0", SHAPES, reference=REFERENCE),
              MeasureInput(REFERENCE, "mm_0", SHAPES, reference=REFERENCE)]
    results = runner.run(inputs, builder.build(inputs))
    assert [r.error for r in results] == ["crash", "ok"]
    builder.close()


def test_whole_model_tuning_through_a_local_dask_cluster(client, tmp_path):
    """`tune_model` (what `ziggurat tune MODEL --dask-scheduler ADDR` runs) with the Dask builder and
    runner: every kernel of the model gets records, and the model compiled with them matches numpy."""
    import onnx

    import ziggurat
    from tests.unit.test_autotune_tuner import mlp, mlp_reference
    from ziggurat.autotune import extract_tasks, tune_model

    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(), path)
    names = {n for n, _, _ in extract_tasks(str(path), target=TARGET)}
    builder, runner = DaskBuilder(client, timeout=120), DaskRunner(client, timeout=20, **FAST)
    with JSONDatabase(tmp_path / "r.jsonl", fsync=False) as db:
        results = tune_model(str(path), 2 * len(names), db, target=TARGET, batch_size=2, builder=builder,
                             runner=runner, progress=False)
        assert {r.name for r in results} == names and all(r.trials >= 1 for r in results)
        assert {r.workload.name for r in db.records() if r.ok} == names
    x = np.random.default_rng(2).standard_normal((4, 32)).astype(np.float32)
    tuned = ziggurat.compile(str(path), target=TARGET, tuning_db=str(tmp_path / "r.jsonl"))
    assert sorted(tuned.info["stats"].tuned_kernels) == sorted(names)
    np.testing.assert_allclose(tuned(x)[0], mlp_reference(x), rtol=1e-4, atol=1e-4)
