"""A learned cost model that ranks candidates: scikit-learn gradient-boosted trees.

`GBTCostModel` regresses *normalized throughput*: within each workload (a
`group`), a measured candidate scores `best_cost / cost` (1.0 for the best
one, 0.0 for an error record), so workloads of very different sizes share
one model and higher means faster. It is trained online: `update(features,
costs, group)` appends measurements and refits (a few hundred samples refit
in well under a second); `predict(features)` scores candidates.

Transfer: `pretrain(records, featurize)` adds the measured records of other
workloads (e.g. from a `JSONDatabase`), grouped by workload hash, with weight
`transfer_weight`; the workload being tuned then starts from a model that
already knows which loop structures are fast.

Saving runs no code on load: sklearn models are normally pickled, so instead
`save(path)` writes the training data and hyper-parameters to an `.npz` file
(plain arrays, `allow_pickle=False`) and `load(path)` refits from it, which is
deterministic (fixed `random_state`) and takes well under a second for the
dataset sizes of tuning.

Ranking quality on held-out measurements: `spearman(pred, truth)` (Spearman's
rank correlation, average ranks for ties, numpy only) and `top_k_recall(scores,
costs, k)` (how many of the k truly fastest are among the k best scored).

```python
from ziggurat.autotune import GBTCostModel, spearman
model = GBTCostModel()
model.update(X_train, costs_train, group=key.hash)
scores = model.predict(X_test)                  # higher = predicted faster
print(spearman(scores, -np.asarray(costs_test)), model.evaluate(X_test, costs_test))
model.save("model.npz"); same = GBTCostModel.load("model.npz")
```
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ziggurat.database import TuningRecord
from ziggurat.errors import TuningError

SAVE_FORMAT = 1


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank."""
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    ranks = np.empty(len(x))
    start = 0
    for end in range(1, len(x) + 1):
        if end == len(x) or sorted_x[end] != sorted_x[start]:
            ranks[order[start:end]] = (start + end + 1) / 2.0
            start = end
    return ranks


def spearman(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation of two equally long sequences (0.0 when either is constant)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"spearman needs two 1-D sequences of equal length, got {x.shape} and {y.shape}")
    rx, ry = _ranks(x) - (len(x) + 1) / 2, _ranks(y) - (len(y) + 1) / 2
    denom = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / denom) if denom > 0 else 0.0


def top_k_recall(scores: Sequence[float] | np.ndarray, costs: Sequence[float] | np.ndarray, k: int) -> float:
    """Fraction of the k lowest-cost candidates found among the k highest-scored ones."""
    s, c = np.asarray(scores, dtype=float), np.asarray(costs, dtype=float)
    k = min(k, len(s))
    if k <= 0:
        return 0.0
    best_true = set(np.argsort(c, kind="mergesort")[:k].tolist())
    best_pred = set(np.argsort(-s, kind="mergesort")[:k].tolist())
    return len(best_true & best_pred) / k


def normalized_throughput(costs: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """best cost of the group / cost; 0 for an error (infinite or non-positive cost)."""
    costs = np.asarray(costs, dtype=float)
    y = np.zeros(len(costs))
    valid = np.isfinite(costs) & (costs > 0)
    for g in np.unique(groups):
        m = (groups == g) & valid
        if m.any():
            y[m] = costs[m].min() / costs[m]
    return y


@runtime_checkable
class CostModel(Protocol):
    def update(self, features: np.ndarray, costs: Sequence[float], group: str = "default") -> None: ...

    def predict(self, features: np.ndarray) -> np.ndarray: ...

    def save(self, path: str | os.PathLike) -> None: ...


class GBTCostModel:
    """Gradient-boosted trees on normalized throughput; see the module docstring."""

    def __init__(self, n_estimators: int = 150, max_depth: int = 4, learning_rate: float = 0.08,
                 subsample: float = 0.8, transfer_weight: float = 0.5, seed: int = 0):
        self.params = {"n_estimators": n_estimators, "max_depth": max_depth, "learning_rate": learning_rate,
                       "subsample": subsample, "transfer_weight": transfer_weight, "seed": seed}
        self._X: list[np.ndarray] = []
        self._costs: list[float] = []
        self._groups: list[str] = []
        self._weights: list[float] = []
        self._model = None

    @property
    def num_samples(self) -> int:
        return len(self._costs)

    def _add(self, features: np.ndarray, costs: Sequence[float], group: str, weight: float) -> None:
        X = np.atleast_2d(np.asarray(features, dtype=float))
        c = np.asarray(costs, dtype=float).reshape(-1)
        if len(X) != len(c):
            raise ValueError(f"{len(X)} feature rows but {len(c)} costs")
        if self._X and X.shape[1] != self._X[0].shape[0]:
            raise ValueError(f"features have {X.shape[1]} columns, the model was trained on {self._X[0].shape[0]}")
        self._X.extend(X)
        self._costs.extend(float(x) for x in c)
        self._groups.extend([group] * len(c))
        self._weights.extend([weight] * len(c))

    def update(self, features: np.ndarray, costs: Sequence[float], group: str = "default", refit: bool = True) -> None:
        """Adds measurements (cost in seconds; inf or nan for an error) of one workload and refits
        (`refit=False`: later, by `fit`, e.g. once after loading many workloads' records)."""
        self._add(features, costs, group, 1.0)
        if refit:
            self.fit()

    def pretrain(self, records: Iterable[TuningRecord], featurize: Callable[[TuningRecord], np.ndarray | None]) -> int:
        """Adds records of other workloads (transfer) and refits; returns how many were used.

        `featurize(record)` gives a record's feature vector (typically by
        replaying its trace on its workload), or None to skip it.
        """
        used = 0
        for r in records:
            f = featurize(r)
            if f is None:
                continue
            self._add(f, [r.mean_cost], "pretrain:" + r.workload.hash, self.params["transfer_weight"])
            used += 1
        if used:
            self.fit()
        return used

    def fit(self) -> None:
        """Refits on everything seen so far (no-op with fewer than 2 samples)."""
        from sklearn.ensemble import GradientBoostingRegressor

        if self.num_samples < 2:
            self._model = None
            return
        X = np.stack(self._X)
        y = normalized_throughput(np.asarray(self._costs), np.asarray(self._groups))
        p = self.params
        self._model = GradientBoostingRegressor(
            n_estimators=p["n_estimators"], max_depth=p["max_depth"], learning_rate=p["learning_rate"],
            subsample=p["subsample"], random_state=p["seed"])
        self._model.fit(X, y, sample_weight=np.asarray(self._weights))

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Predicted normalized throughput (higher = faster); zeros before any training."""
        X = np.atleast_2d(np.asarray(features, dtype=float))
        if self._model is None:
            return np.zeros(len(X))
        return self._model.predict(X)

    def evaluate(self, features: np.ndarray, costs: Sequence[float], k: int = 10) -> dict[str, float]:
        """Ranking quality on held-out measurements of one workload: Spearman and top-k recall."""
        c = np.asarray(costs, dtype=float)
        scores = self.predict(features)
        ok = np.isfinite(c)
        return {"spearman": spearman(scores[ok], -c[ok]), f"top{k}_recall": top_k_recall(scores, c, k),
                "n": float(len(c))}

    def save(self, path: str | os.PathLike) -> None:
        """Training data and parameters as plain arrays (.npz); no pickle."""
        meta = json.dumps({"format": SAVE_FORMAT, "kind": "GBTCostModel", "params": self.params})
        n = self.num_samples
        dim = len(self._X[0]) if n else 0
        with open(path, "wb") as fh:
            np.savez(fh, meta=np.array(meta), X=np.stack(self._X) if n else np.zeros((0, dim)),
                     costs=np.asarray(self._costs, dtype=float), groups=np.asarray(self._groups, dtype=str),
                     weights=np.asarray(self._weights, dtype=float))

    @staticmethod
    def load(path: str | os.PathLike) -> GBTCostModel:
        """Reads a saved model (no code runs from the file) and refits it."""
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                X, costs, groups, weights = data["X"], data["costs"], data["groups"], data["weights"]
        except (OSError, ValueError, KeyError) as err:
            raise TuningError(f"cannot read cost model '{path}': {err}. Save it with GBTCostModel.save.") from None
        if meta.get("kind") != "GBTCostModel" or meta.get("format") != SAVE_FORMAT:
            raise TuningError(f"cost model '{path}' has kind/format {meta.get('kind')}/{meta.get('format')}; "
                              f"expected GBTCostModel/{SAVE_FORMAT}")
        model = GBTCostModel(**meta["params"])
        model._X = list(X)
        model._costs = [float(c) for c in costs]
        model._groups = [str(g) for g in groups]
        model._weights = [float(w) for w in weights]
        model.fit()
        return model
