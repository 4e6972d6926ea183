"""What the run-time index checks cost: each model with checks against the same model without.

    python -m benchmarks.index_checks [--models DIR ...] [--threads 1] [--rounds 200]

Compiles every model of the folders (default ../shared/models and ../shared/models/real; the
dynamic ones are left out) twice: as `ziggurat.compile` does by default, with the bounds checks
of data-dependent indices (frontends/onnx/index_checks.py), and with `check_indices=False`.
Models without a run-time index get no check and are listed as such. The two builds are timed
in alternating blocks through `CompiledModel.__call__` (which verifies the checks' outputs),
on the model's bundled inputs. Prints a markdown table: the medians, their ratio (checked /
unchecked) and the number of checked nodes.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

import ziggurat

SHARED = Path(__file__).resolve().parents[2] / "shared" / "models"
BLOCKS = 10


def _inputs(folder: Path, model) -> list[np.ndarray]:
    with np.load(folder / "inputs.npz") as f:
        return [np.ascontiguousarray(f[n], dtype=s.dtype) for n, s in zip(model.input_names, model.inputs)]


def measure(folder: Path, threads: int, rounds: int) -> dict:
    target = f"llvm -num-cores={threads}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        checked = ziggurat.compile(str(folder / "model.onnx"), target=target, cache=False)
        row = {"model": folder.name, "checks": len(checked.checks)}
        if not checked.checks:
            return row
        unchecked = ziggurat.compile(str(folder / "model.onnx"), target=target, cache=False, check_indices=False)
    ins = _inputs(folder, checked)
    times: dict[str, list[float]] = {"checked": [], "unchecked": []}
    per_block = max(2, rounds // BLOCKS)
    for _ in range(BLOCKS):
        for name, model in (("checked", checked), ("unchecked", unchecked)):
            model(*ins)
            for _ in range(per_block):
                t = time.perf_counter()
                model(*ins)
                times[name].append(time.perf_counter() - t)
    row.update({f"{k}_ms": float(np.median(v)) * 1e3 for k, v in times.items()})
    row["ratio"] = row["checked_ms"] / row["unchecked_ms"]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, nargs="*", default=[SHARED, SHARED / "real"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args(argv)
    folders = sorted(d for root in args.models if root.is_dir() for d in root.iterdir()
                     if (d / "model.onnx").exists() and "dynamic" not in d.name)
    print(f"| model | checked nodes | checked (ms) | unchecked (ms) | checked / unchecked |  {args.threads} thread(s)")
    print("|---|---|---|---|---|")
    for folder in folders:
        row = measure(folder, args.threads, args.rounds)
        if not row["checks"]:
            print(f"| {row['model']} | 0 | | | (no run-time index) |", flush=True)
            continue
        print(f"| {row['model']} | {row['checks']} | {row['checked_ms']:.3f} | {row['unchecked_ms']:.3f} | "
              f"{row['ratio']:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
