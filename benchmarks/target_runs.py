"""What the per-target model benchmarks share (aarch64_models.py, wasm_models.py, c_target.py):
the shared model folders, their tolerances, the comparison with expected.npz, and one worker
process per model (a model's memory or crash does not touch the next)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any
from pathlib import Path

import numpy as np

# the shared model folders; ZIGGURAT_MODELS names another copy (a GPU machine gets them inside the checkout)
SHARED = Path(os.environ.get("ZIGGURAT_MODELS") or Path(__file__).resolve().parents[2] / "shared" / "models")
SMALL = ("lenet5", "lstm_seq16_h128", "mlp_784_512_256_10", "transformer_encoder_2l_d128", "vgg_small_bn")
REAL = ("distilbert_encoder", "efficientnet_b0", "llama_tiny_lm", "mobilenetv3_large", "regnet_y_small",
        "segformer_b0_seg", "whisper_tiny_encoder")


def default_folders() -> list[Path]:
    """The five small shared models and the static-shape real ones."""
    return [SHARED / n for n in SMALL] + [SHARED / "real" / n for n in REAL]


def selected(models: Sequence[Path] | None, only: str) -> list[Path]:
    """`models` (default: `default_folders()`), kept to the comma-separated names of `only`."""
    folders = list(models or default_folders())
    keep = set(only.split(",")) if only else None
    return [f for f in folders if keep is None or f.name in keep]


def tolerance(folder: Path) -> dict[str, float]:
    """meta.json's `suggested_tolerance` (rtol, atol), else 1e-3 / 1e-4."""
    meta = json.loads((folder / "meta.json").read_text())
    return meta.get("suggested_tolerance", {"rtol": 1e-3, "atol": 1e-4})


def compare(names: Sequence[str], outputs: Sequence[np.ndarray], expected: dict, tol: dict) -> tuple[float, bool]:
    """(max abs error, every element within atol + rtol * |expected|) of `outputs` against expected.npz."""
    errs, ok = [], True
    for name, got in zip(names, outputs):
        want = expected[name]
        errs.append(float(np.max(np.abs(np.asarray(got, np.float64) - want))) if want.size else 0.0)
        ok = ok and bool(np.allclose(got, want, rtol=tol["rtol"], atol=tol["atol"]))
    return max(errs), ok


def run_workers(module: str, folders: Sequence[Path], work_root: Path, extra: Callable[[Path, Path], list[str]],
                failed: dict, show: Callable[[dict], str]) -> list[dict]:
    """Runs `python -m <module> <extra(folder, work)>` per folder in a fresh process (disk cache off);
    each prints one `ROW <json>` line. A worker that prints none gives `failed` plus the error. `show`
    formats the row printed as each model finishes."""
    rows = []
    for folder in folders:
        work = work_root / folder.name
        work.mkdir(exist_ok=True)
        done = subprocess.run([sys.executable, "-m", module, *extra(folder, work)], capture_output=True, text=True,
                              env={**os.environ, "ZIGGURAT_CACHE": "0"})
        found = [ln for ln in done.stdout.splitlines() if ln.startswith("ROW ")]
        row = (json.loads(found[-1][4:]) if found else
               {"model": folder.name, **failed,
                "error": f"worker exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"})
        rows.append(row)
        print(show(row), flush=True)
    return rows


def start_row(folder: Path) -> tuple[dict, dict]:
    """A model's row (name, not yet compiled or run, its tolerance) and the tolerance."""
    tol = tolerance(folder)
    return {"model": folder.name, "compiled": False, "ran": False, "rtol": tol["rtol"], "atol": tol["atol"]}, tol


def compile_export(folder: Path, target: str, out: Path, row: dict) -> tuple[Any, Path] | None:
    """`folder`'s model compiled for `target` and exported to `out`, its seconds in `row`; None, with
    `row["error"]`, when either fails."""
    import ziggurat

    t0 = time.perf_counter()
    try:
        model = ziggurat.compile(str(folder / "model.onnx"), target=target)
        path = model.export(out)
    except Exception as err:  # noqa: BLE001 - the row reports it
        row["error"] = f"compile: {type(err).__name__}: {str(err).splitlines()[0][:200]}"
        return None
    row["compiled"], row["compile_s"] = True, round(time.perf_counter() - t0, 1)
    return model, path
