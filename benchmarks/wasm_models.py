"""The shared models compiled to WebAssembly and run through wasmtime, against native x86 code.

    python -m ziggurat.benchmarks.wasm_models [--models DIR ...] [--target 'llvm -mtriple=wasm32-wasi ...']
                                              [--only NAME,...] [--markdown FILE] [--no-native]

For every model folder (model.onnx, inputs.npz, expected.npz, meta.json with
`suggested_tolerance`; default: the five small models of /work/shared/models
and the static-shape ones of /work/shared/models/real), in a fresh process
each (`--worker`, so that one model's memory or crash does not touch the
next): `ziggurat.compile` for the target (default
`llvm -mtriple=wasm32-wasi -mattr=+simd128`), export `model.wasm`, load it
with `ziggurat.runtime.wasm.load` (wasmtime), run it on inputs.npz and compare
each output with expected.npz: max abs error, and whether every element is
within `atol + rtol * |expected|` (meta.json's tolerance). The run time is the
median of repeated calls after one warm-up (IO copies included); the native
time is the same model compiled for this machine with one thread
(`llvm -num-cores=1`: wasm runs on one thread), timed the same way. Prints a
markdown table (docs/targets.md holds the last one). Needs /work/shared and
wasm-ld + wasi-libc + wasmtime (never a test).
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

from ziggurat.benchmarks.target_runs import compare, compile_export, run_workers, selected, start_row

TARGET = "llvm -mtriple=wasm32-wasi -mattr=+simd128"
NATIVE = "llvm -num-cores=1"


def time_calls(fn, budget_s: float = 2.0, max_calls: int = 20) -> float:
    """Median seconds of `fn()` after one warm-up call: at least 3 calls, more while under `budget_s`."""
    fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (len(times) < max_calls and time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def worker(folder: Path, target: str, work: Path, native: bool) -> dict:
    """Compile, export, load, run and compare one model (and time its native build); the row."""
    import ziggurat
    from ziggurat.runtime import wasm

    row, tol = start_row(folder)
    built = compile_export(folder, target, work / "model.wasm", row)
    if built is None:
        return row
    model, path = built
    row["wasm_kib"] = round(path.stat().st_size / 1024)
    data = dict(np.load(folder / "inputs.npz"))
    try:
        m = wasm.load(path)
        inputs = [np.ascontiguousarray(data[s.name], dtype=s.dtype) for s in m.inputs]
        got = m(*inputs)
        row["wasm_ms"] = round(1e3 * time_calls(lambda: m.run_wasm(inputs)), 2)
    except Exception as err:  # noqa: BLE001
        row["error"] = f"run: {type(err).__name__}: {str(err).splitlines()[0][:200]}"
        return row
    row["ran"] = True
    row["max_error"], row["within_tolerance"] = compare(m.output_names, got, dict(np.load(folder / "expected.npz")), tol)
    if native:
        try:
            nm = ziggurat.compile(str(folder / "model.onnx"), target=NATIVE)
            prepared, outs = nm.prepare(*inputs), [np.empty(s.shape, s.dtype) for s in nm.outputs]
            row["native_ms"] = round(1e3 * time_calls(lambda: nm.run_native(prepared, outs)), 2)
        except Exception as err:  # noqa: BLE001
            row["native_error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
    return row


def format_table(rows: list[dict], target: str) -> str:
    lines = [f"Target `{target}`, run by wasmtime (Cranelift) through `ziggurat.runtime.wasm.load`; native: "
             f"`{NATIVE}` on this x86 host.", "",
             "| model | compiled | ran | max abs error | tolerance (rtol, atol) | within | compile s | .wasm KiB | "
             "wasm ms | native ms | wasm / native |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        err = f"{r['max_error']:.2e}" if "max_error" in r else "-"
        within = {True: "yes", False: "**no**"}.get(r.get("within_tolerance"), "-")
        ratio = f"{r['wasm_ms'] / r['native_ms']:.1f}x" if r.get("wasm_ms") and r.get("native_ms") else "-"
        lines.append(f"| {r['model']} | {'yes' if r['compiled'] else '**no**'} | {'yes' if r['ran'] else '**no**'} | "
                     f"{err} | {r.get('rtol', '-')}, {r.get('atol', '-')} | {within} | {r.get('compile_s', '-')} | "
                     f"{r.get('wasm_kib', '-')} | {r.get('wasm_ms', '-')} | {r.get('native_ms', '-')} | {ratio} |")
        if "error" in r:
            lines.append(f"|  | {r['error']} | | | | | | | | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", type=Path, help="model folders (default: the shared models)")
    ap.add_argument("--only", default="", help="comma-separated model names to keep")
    ap.add_argument("--target", default=TARGET)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--no-native", action="store_true", help="skip the native x86 timing")
    ap.add_argument("--worker", nargs=2, metavar=("FOLDER", "WORKDIR"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        folder, work = (Path(p) for p in args.worker)
        print("ROW " + json.dumps(worker(folder, args.target, work, not args.no_native)), flush=True)
        return 0
    try:
        from ziggurat.backends.llvm.wasm_link import wasi_libdir, wasm_linker

        wasm_linker(), wasi_libdir()
        import wasmtime  # noqa: F401
    except Exception as err:  # noqa: BLE001
        print(f"cannot run: {err}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_workers("ziggurat.benchmarks.wasm_models", selected(args.models, args.only), Path(tmp),
                           lambda f, w: ["--target", args.target, "--worker", str(f), str(w)]
                           + (["--no-native"] if args.no_native else []),
                           {"compiled": False, "ran": False},
                           lambda r: format_table([r], args.target).splitlines()[-1 - ("error" in r)])
    table = format_table(rows, args.target)
    print()
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 0 if all(r.get("within_tolerance") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
