"""Ranking quality of the cost model on held-out measurements of a record database.

For each kernel of a model whose workload the database holds, the successful
records are taken in the order they were measured: the cost model
(`GBTCostModel`, as the tuner trains it) is fitted on the first `train` of
them and scores the rest, which it never saw. With `split="random"` a seeded random draw
of `train` records is trained on instead (the held-out records then come from
the whole run, not only its end, where the search has converged on
near-equal candidates). The report gives, per kernel,
Spearman's rank correlation between the predicted score and the measured
throughput (1 / cost) of the held-out records, and the top-k recall (of the
k truly fastest held-out candidates, how many are among the k best scored).

    python -m ziggurat.autotune.report MODEL.onnx --db records.jsonl [--train 200] [--target 'llvm -num-cores=1']
    python -m ziggurat.autotune.report --cross OTHER.jsonl --db records.jsonl [--target ...]   # across models

```python
rows = ranking_report(tasks, db, target="llvm -num-cores=1", train=200)
print(format_report(rows))
```
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from ziggurat.autotune.cost_model import GBTCostModel, spearman, top_k_recall
from ziggurat.database import VALIDATION, JSONDatabase, WorkloadKey
from ziggurat.transforms.costs.features import extract_features
from ziggurat.autotune.space import SearchSpace, apply_trace
from ziggurat.errors import ScheduleError


def featurize(space: SearchSpace, trace: Any) -> np.ndarray | None:
    """Features of kernel `space.name` scheduled by `trace` (None when the trace no longer replays)."""
    module = space.module.clone()
    try:
        apply_trace(module, space.name, trace, space.vector_width)
    except ScheduleError:
        return None
    return extract_features(module, space.name)


def ranking_report(tasks: Sequence[tuple[str, str]], db: JSONDatabase, target: str, train: int = 200,
                   k: int = 10, seed: int = 0, vector_width: int = 16, split: str = "order") -> list[dict[str, Any]]:
    """One row per kernel `(name, kernel module text)` with records in `db` for `target`."""
    from ziggurat.transforms.schedule.apply_tuning import record_target

    tkey = record_target(target)
    rows = []
    for name, text in tasks:
        key = WorkloadKey.from_text(text, name)
        recs = [r for r in db.records(key)  # validation rounds re-measure known traces: left out
                if r.target == tkey and r.ok and not r.message.startswith(VALIDATION)]
        if len(recs) < 4:
            continue
        space = SearchSpace(text, name, vector_width)
        feats, costs = [], []
        for r in recs:
            f = featurize(space, r.trace)
            if f is not None:
                feats.append(f)
                costs.append(r.cost)
        n_train = min(train, len(feats) - max(2, len(feats) // 5))  # at least a fifth held out
        if len(feats) - n_train < 2:
            continue
        x, c = np.stack(feats), np.asarray(costs)
        if split == "random":  # a seeded shuffle: held-out records drawn from the whole run
            perm = np.random.default_rng(seed).permutation(len(c))
            x, c = x[perm], c[perm]
        elif split != "order":
            raise ValueError(f"split must be 'order' or 'random', got {split!r}")
        model = GBTCostModel(n_estimators=60, seed=seed)
        model.update(x[:n_train], list(c[:n_train]), key.hash)
        rows.append(_row(name, split, len(feats), n_train, np.asarray(model.predict(x[n_train:])), c[n_train:], k)
                    | {"best_ms": float(c.min() * 1e3)})
    return rows


def cross_model_report(train_db: JSONDatabase, test_db: JSONDatabase, target: str, k: int = 10,
                       seed: int = 0) -> list[dict[str, Any]]:
    """Transfer across models: the cost model trained as a tuning run's transfer trains it
    (`tuner.pretrain_from_db`, on every record of `train_db`: another model's run) scores each kernel's
    records in `test_db`, none of which it saw, from the feature vectors they carry; one row per kernel
    of `test_db` with 4 or more such records."""
    from ziggurat.autotune.tuner import pretrain_from_db, stored_features
    from ziggurat.transforms.schedule.apply_tuning import record_target

    tkey = record_target(target)
    model = GBTCostModel(n_estimators=60, seed=seed)
    trained = pretrain_from_db(model, train_db, tkey, set())
    kernels: dict[str, tuple[str, list[np.ndarray], list[float]]] = {}
    for r in test_db.records():
        f = stored_features(r)
        if r.target == tkey and r.ok and f is not None and not r.message.startswith(VALIDATION):
            _, feats, costs = kernels.setdefault(r.workload.hash, (r.workload.name, [], []))
            feats.append(f)
            costs.append(r.cost)
    return [_row(name, "other model", len(c), trained, np.asarray(model.predict(np.stack(x))), np.asarray(c), k)
            for name, x, c in kernels.values() if len(c) >= 4]


def _row(kernel: str, split: str, records: int, train: int, scores: np.ndarray, held: np.ndarray,
         k: int) -> dict[str, Any]:
    """A report row: the held-out records' Spearman and top-k recall under `scores`."""
    return {"kernel": kernel, "split": split, "records": records, "train": train, "held_out": len(held),
            "spearman": spearman(scores, 1.0 / held), "top_k": min(k, len(held)),
            "top_k_recall": top_k_recall(scores, held, min(k, len(held))), "best_ms": float(held.min() * 1e3)}


def format_report(rows: list[dict[str, Any]]) -> str:
    lines = ["| kernel | split | records | trained on | held out | Spearman | top-k recall | best (ms) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['kernel']} | {r['split']} | {r['records']} | {r['train']} | {r['held_out']} | {r['spearman']:.3f} | "
                     f"{r['top_k_recall']:.2f} (k={r['top_k']}) | {r['best_ms']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from ziggurat.autotune.tuner import extract_tasks
    from ziggurat.target import Target

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", nargs="?", help="the ONNX model the database was tuned for (not with --cross)")
    p.add_argument("--db", required=True)
    p.add_argument("--cross", metavar="TRAIN_DB", help="train on this other model's records instead and score "
                   "every record of --db (transfer across models; the records' stored features)")
    p.add_argument("--train", type=int, default=200, help="records (in measuring order) to train on (default 200)")
    p.add_argument("--target", default="llvm")
    p.add_argument("--split", default="both", choices=["order", "random", "both"],
                   help="held-out records: the last ones measured (order), a seeded random draw, or both")
    p.add_argument("--opt-level", "-O", type=int, default=3)
    args = p.parse_args(argv)
    if args.cross:
        with JSONDatabase(args.cross, fsync=False) as train_db, JSONDatabase(args.db, fsync=False) as test_db:
            rows = cross_model_report(train_db, test_db, args.target)
        if not rows:
            print(f"no kernel in {args.db} has 4 or more records with features for '{args.target}'", file=sys.stderr)
            return 1
        print(format_report(rows))
        rho = [r["spearman"] for r in rows]
        weights = np.asarray([r["records"] for r in rows], dtype=float)
        print(f"\n{len(rows)} kernels: Spearman median {np.median(rho):.3f}, "
              f"mean weighted by records {float(np.dot(rho, weights) / weights.sum()):.3f}")
        return 0
    if args.model is None:
        p.error("give the model (or --cross TRAIN_DB)")
    tasks = [(n, t) for n, t, _ in extract_tasks(args.model, args.opt_level, args.target)]
    with JSONDatabase(args.db, fsync=False) as db:
        rows = [row for split in (["order", "random"] if args.split == "both" else [args.split])
                for row in ranking_report(tasks, db, args.target, args.train, split=split,
                                          vector_width=Target.parse(args.target).vector_width)]
    if not rows:
        print(f"no kernel of {args.model} has enough successful records for '{args.target}' in {args.db}",
              file=sys.stderr)
        return 1
    print(format_report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
