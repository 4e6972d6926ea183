"""The learned cost model on synthetic workloads whose cost is a known roofline of the features."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ziggurat.autotune import CostModel, GBTCostModel, JSONDatabase, TuningRecord, WorkloadKey, spearman, top_k_recall
from ziggurat.autotune.cost_model import normalized_throughput
from ziggurat.errors import TuningError

DIM = 12


def roofline(X: np.ndarray, peak: float, bandwidth: float, rng: np.random.Generator, noise: float = 0.03) -> np.ndarray:
    """Seconds: max(flops / (peak * parallel speedup * vector speedup), bytes / bandwidth), with noise.

    Columns: 0 log2 flops, 1 log2 bytes, 2 log2 threads used (0..1), 3 log2 vector width (0..4);
    the other columns are irrelevant to the cost.
    """
    flops, nbytes = 2.0 ** X[:, 0], 2.0 ** X[:, 1]
    compute = flops / (peak * 2.0 ** X[:, 2] * 2.0 ** X[:, 3])
    memory = nbytes / bandwidth
    return np.maximum(compute, memory) * np.exp(rng.normal(0, noise, len(X)))


def candidates(n: int, rng: np.random.Generator) -> np.ndarray:
    X = rng.uniform(0, 1, (n, DIM))
    X[:, 0] = 20 + rng.uniform(0, 1, n)  # one workload: flops vary a little with padding
    X[:, 1] = rng.uniform(14, 24, n)  # bytes moved depend on the tiling
    X[:, 2] = rng.integers(0, 2, n)
    X[:, 3] = rng.integers(0, 5, n)
    return X


def test_spearman_and_top_k_against_definitions():
    rng = np.random.default_rng(1)
    x = rng.normal(size=50)
    assert spearman(x, 3 * x + 1) == pytest.approx(1.0)
    assert spearman(x, -np.exp(x)) == pytest.approx(-1.0)
    perm = rng.permutation(50)
    d = np.arange(50) - perm  # no ties: 1 - 6 sum d^2 / (n (n^2 - 1))
    assert spearman(np.arange(50), perm) == pytest.approx(1 - 6 * (d * d).sum() / (50 * (50 ** 2 - 1)))
    assert spearman([1, 1, 1], [1, 2, 3]) == 0.0
    costs = np.arange(20.0)
    assert top_k_recall(-costs, costs, 5) == 1.0  # perfect scores
    assert top_k_recall(costs, costs, 5) == 0.0  # exactly backwards
    assert top_k_recall(-costs, costs, 100) == 1.0
    with pytest.raises(ValueError):
        spearman([1, 2], [1, 2, 3])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=2, max_size=30), st.integers(0, 2**32 - 1))
def test_spearman_with_ties_matches_pearson_of_average_ranks(values, seed):
    a = np.asarray(values, dtype=float)
    b = np.random.default_rng(seed).permutation(a)

    def avg_ranks(v):
        return np.array([np.sum(v < x) + (np.sum(v == x) + 1) / 2 for x in v])

    ra, rb = avg_ranks(a), avg_ranks(b)
    expected = 0.0 if ra.std() == 0 or rb.std() == 0 else float(np.corrcoef(ra, rb)[0, 1])
    assert spearman(a, b) == pytest.approx(expected, abs=1e-12)


def test_normalized_throughput_per_workload():
    y = normalized_throughput(np.array([2.0, 1.0, np.inf, 10.0, 20.0]), np.array(["a", "a", "a", "b", "b"]))
    np.testing.assert_allclose(y, [0.5, 1.0, 0.0, 1.0, 0.5])


def test_online_training_ranks_held_out_candidates():
    rng = np.random.default_rng(0)
    X = candidates(300, rng)
    costs = roofline(X, peak=1e9, bandwidth=4e9, rng=rng)
    model = GBTCostModel()
    assert isinstance(model, CostModel)
    assert (model.predict(X[:3]) == 0).all()  # untrained
    for start in range(0, 200, 50):  # measurements arrive in batches
        model.update(X[start:start + 50], costs[start:start + 50], group="gemm")
    assert model.num_samples == 200
    quality = model.evaluate(X[200:], costs[200:], k=10)
    chance = 10 / 100
    assert quality["spearman"] >= 0.8, quality
    assert quality["top10_recall"] >= 3 * chance, quality


def test_error_records_train_as_slowest():
    rng = np.random.default_rng(2)
    X = candidates(120, rng)
    costs = roofline(X, 1e9, 4e9, rng)
    costs[X[:, 4] > 0.8] = np.inf  # a feature that marks candidates that crash
    model = GBTCostModel()
    model.update(X[:100], costs[:100], group="w")
    scores = model.predict(X[100:])
    bad = X[100:, 4] > 0.8
    assert bad.any() and (~bad).any()
    assert scores[bad].mean() < scores[~bad].mean()


def test_save_load_roundtrip_without_pickle(tmp_path):
    rng = np.random.default_rng(3)
    X = candidates(80, rng)
    costs = roofline(X, 1e9, 4e9, rng)
    model = GBTCostModel(n_estimators=60, seed=7)
    model.update(X, costs, group="w")
    path = tmp_path / "model.npz"
    model.save(path)
    with np.load(path, allow_pickle=False) as data:  # plain arrays only
        assert set(data.files) == {"meta", "X", "costs", "groups", "weights"}
    again = GBTCostModel.load(path)
    assert again.params == model.params
    test = candidates(20, rng)
    np.testing.assert_allclose(again.predict(test), model.predict(test))
    path.write_bytes(b"not a model")
    with pytest.raises(TuningError, match="cannot read cost model"):
        GBTCostModel.load(path)
    with pytest.raises(ValueError, match="columns"):
        model.update(np.zeros((1, DIM + 1)), [1.0])


def test_pretraining_from_a_database_transfers_to_a_new_workload(tmp_path):
    rng = np.random.default_rng(4)
    table = {}
    db = JSONDatabase(tmp_path / "db.jsonl")
    for w, (peak, bw) in enumerate([(1e9, 4e9), (2e9, 6e9), (5e8, 3e9)]):  # three other workloads
        key = WorkloadKey(f"{w:016x}", f"old_{w}")
        X = candidates(80, rng)
        X[:, 0] += w  # bigger problems
        for i, (x, c) in enumerate(zip(X, roofline(X, peak, bw, rng))):
            table[(w, i)] = x
            db.commit(TuningRecord(key, "llvm", {"w": w, "i": i}, [float(c)]))
    db.commit(TuningRecord(WorkloadKey("f" * 16, "old_crash"), "llvm", {"w": 9, "i": 0}, [], "crash", "SIGSEGV"))
    model = GBTCostModel()
    used = model.pretrain(JSONDatabase(db.path).records(), lambda r: table.get((r.trace["w"], r.trace["i"])))
    assert used == 240
    new = candidates(150, rng)
    new[:, 0] += 1.5
    new_costs = roofline(new, 1.5e9, 5e9, rng)
    cold = model.evaluate(new, new_costs)
    assert cold["spearman"] >= 0.6, cold  # no measurement of the new workload yet
    model.update(new[:50], new_costs[:50], group="new")
    warm = model.evaluate(new[50:], new_costs[50:])
    assert warm["spearman"] >= 0.6, warm
