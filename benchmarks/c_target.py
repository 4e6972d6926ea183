"""The shared models through the portable C target, against the LLVM target, on this host.

    python -m ziggurat.benchmarks.c_target [--models DIR ...] [--only NAME,...] [--markdown FILE]
                                           [--rounds N] [--c-target 'c -num-cores=1']

For every model folder (model.onnx, inputs.npz, expected.npz, meta.json with
`suggested_tolerance`; default: the five small models of /work/shared/models
and the static-shape ones of /work/shared/models/real), in a fresh process
each: `ziggurat.compile` for `c -num-cores=1`, export the library and load it
back with `ziggurat.runtime.load` (what a user of the export runs); compile
the same model for `llvm -num-cores=1`. Both run on inputs.npz and are
compared with expected.npz (max abs error; within `atol + rtol * |expected|`).
Timing is paired: rounds of one C call then one LLVM call (inputs prepared
once, outputs preallocated, `run_native`), after a warm-up; the table gives
each median and the median of the per-round ratios C / LLVM. A benchmark,
never a test (needs /work/shared and a C compiler).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ziggurat.benchmarks.wasm_models import default_folders

C_TARGET = "c -num-cores=1"
LLVM_TARGET = "llvm -num-cores=1"


def _check(model, data: dict, expected: dict, tol: dict) -> tuple[list, float, bool]:
    inputs = [np.ascontiguousarray(data[s.name], dtype=s.dtype) for s in model.inputs]
    got = model(*inputs)
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    errs, ok = [], True
    for name, g in zip(model.output_names, got):
        want = expected[name]
        errs.append(float(np.max(np.abs(g.astype(np.float64) - want))) if want.size else 0.0)
        ok = ok and bool(np.allclose(g, want, rtol=tol["rtol"], atol=tol["atol"]))
    return inputs, max(errs), ok


def paired_times(fa, fb, rounds: int, budget_s: float = 6.0) -> tuple[float, float, float]:
    """Median seconds of `fa` and `fb` called alternately, and the median per-round ratio a / b."""
    fa(), fb()
    ta, tb = [], []
    start = time.perf_counter()
    while len(ta) < 5 or (len(ta) < rounds and time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fa()
        t1 = time.perf_counter()
        fb()
        t2 = time.perf_counter()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    return statistics.median(ta), statistics.median(tb), statistics.median(a / b for a, b in zip(ta, tb))


def worker(folder: Path, work: Path, c_target: str, rounds: int) -> dict:
    import ziggurat
    from ziggurat.runtime import load

    row: dict = {"model": folder.name}
    meta = json.loads((folder / "meta.json").read_text())
    tol = meta.get("suggested_tolerance", {"rtol": 1e-3, "atol": 1e-4})
    row["rtol"], row["atol"] = tol["rtol"], tol["atol"]
    data, expected = dict(np.load(folder / "inputs.npz")), dict(np.load(folder / "expected.npz"))
    try:
        t0 = time.perf_counter()
        cm = ziggurat.compile(str(folder / "model.onnx"), target=c_target)
        row["c_compile_s"] = round(time.perf_counter() - t0, 1)
        cm.export(work / "model.so")
        c = load(work / "model.so")
        inputs, row["c_error"], row["c_ok"] = _check(c, data, expected, tol)
    except Exception as err:  # noqa: BLE001 - the row reports it
        row["error"] = f"c: {type(err).__name__}: {str(err).splitlines()[0][:200]}"
        return row
    try:
        t0 = time.perf_counter()
        lm = ziggurat.compile(str(folder / "model.onnx"), target=LLVM_TARGET, cache=False)
        row["llvm_compile_s"] = round(time.perf_counter() - t0, 1)
        _, row["llvm_error"], row["llvm_ok"] = _check(lm, data, expected, tol)
    except Exception as err:  # noqa: BLE001
        row["error"] = f"llvm: {type(err).__name__}: {str(err).splitlines()[0][:200]}"
        return row
    pc, oc = c.prepare(*inputs), [np.empty(s.shape, s.dtype) for s in c.outputs]
    pl, ol = lm.prepare(*inputs), [np.empty(s.shape, s.dtype) for s in lm.outputs]
    tc, tl, ratio = paired_times(lambda: c.run_native(pc, oc), lambda: lm.run_native(pl, ol), rounds)
    row["c_ms"], row["llvm_ms"], row["ratio"] = round(1e3 * tc, 3), round(1e3 * tl, 3), round(ratio, 2)
    return row


def format_table(rows: list[dict], c_target: str) -> str:
    lines = [f"C: `{c_target}` (exported, loaded with `ziggurat.runtime.load`); LLVM: `{LLVM_TARGET}`; paired "
             "rounds on this host.", "",
             "| model | C max abs error | LLVM max abs error | tolerance (rtol, atol) | both within | C compile s | "
             "LLVM compile s | C ms | LLVM ms | C / LLVM |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def e(k: str) -> str:
            return f"{r[k]:.2e}" if k in r else "-"
        within = "yes" if r.get("c_ok") and r.get("llvm_ok") else ("**no**" if "c_ok" in r else "-")
        lines.append(f"| {r['model']} | {e('c_error')} | {e('llvm_error')} | {r.get('rtol', '-')}, {r.get('atol', '-')} "
                     f"| {within} | {r.get('c_compile_s', '-')} | {r.get('llvm_compile_s', '-')} | {r.get('c_ms', '-')} "
                     f"| {r.get('llvm_ms', '-')} | {str(r['ratio']) + 'x' if 'ratio' in r else '-'} |")
        if "error" in r:
            lines.append(f"|  | {r['error']} | | | | | | | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", type=Path, help="model folders (default: the shared models)")
    ap.add_argument("--only", default="", help="comma-separated model names to keep")
    ap.add_argument("--c-target", default=C_TARGET)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--worker", nargs=2, metavar=("FOLDER", "WORKDIR"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        folder, work = (Path(p) for p in args.worker)
        print("ROW " + json.dumps(worker(folder, work, args.c_target, args.rounds)), flush=True)
        return 0
    folders = args.models or default_folders()
    if args.only:
        keep = set(args.only.split(","))
        folders = [f for f in folders if f.name in keep]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for folder in folders:
            work = Path(tmp) / folder.name
            work.mkdir()
            cmd = [sys.executable, "-m", "ziggurat.benchmarks.c_target", "--c-target", args.c_target,
                   "--rounds", str(args.rounds), "--worker", str(folder), str(work)]
            done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "ZIGGURAT_CACHE": "0"})
            found = [ln for ln in done.stdout.splitlines() if ln.startswith("ROW ")]
            row = (json.loads(found[-1][4:]) if found else
                   {"model": folder.name, "error": f"worker exit {done.returncode}: "
                                                   f"{done.stderr.strip().splitlines()[-1:]}"})
            rows.append(row)
            print(format_table([row], args.c_target).splitlines()[-1 - ("error" in row)], flush=True)
    table = format_table(rows, args.c_target)
    print()
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 0 if all(r.get("c_ok") and r.get("llvm_ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
