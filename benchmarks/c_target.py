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
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ziggurat.benchmarks.target_runs import compare, run_workers, selected, tolerance

C_TARGET = "c -num-cores=1"
LLVM_TARGET = "llvm -num-cores=1"


def _check(model, data: dict, expected: dict, tol: dict) -> tuple[list, float, bool]:
    inputs = [np.ascontiguousarray(data[s.name], dtype=s.dtype) for s in model.inputs]
    got = model(*inputs)
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    return (inputs, *compare(model.output_names, got, expected, tol))


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
    tol = tolerance(folder)
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
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_workers("ziggurat.benchmarks.c_target", selected(args.models, args.only), Path(tmp),
                           lambda f, w: ["--c-target", args.c_target, "--rounds", str(args.rounds), "--worker",
                                         str(f), str(w)],
                           {}, lambda r: format_table([r], args.c_target).splitlines()[-1 - ("error" in r)])
    table = format_table(rows, args.c_target)
    print()
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 0 if all(r.get("c_ok") and r.get("llvm_ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
