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
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[2] / "shared" / "models"
SMALL = ("lenet5", "lstm_seq16_h128", "mlp_784_512_256_10", "transformer_encoder_2l_d128", "vgg_small_bn")
REAL = ("distilbert_encoder", "efficientnet_b0", "llama_tiny_lm", "mobilenetv3_large", "regnet_y_small",
        "segformer_b0_seg", "whisper_tiny_encoder")
TARGET = "llvm -mtriple=wasm32-wasi -mattr=+simd128"
NATIVE = "llvm -num-cores=1"


def default_folders() -> list[Path]:
    return [SHARED / n for n in SMALL] + [SHARED / "real" / n for n in REAL]


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

    row: dict = {"model": folder.name, "compiled": False, "ran": False}
    meta = json.loads((folder / "meta.json").read_text())
    tol = meta.get("suggested_tolerance", {"rtol": 1e-3, "atol": 1e-4})
    row["rtol"], row["atol"] = tol["rtol"], tol["atol"]
    t0 = time.perf_counter()
    try:
        model = ziggurat.compile(str(folder / "model.onnx"), target=target)
        path = model.export(work / "model.wasm")
    except Exception as err:  # noqa: BLE001 - the row reports it
        row["error"] = f"compile: {type(err).__name__}: {str(err).splitlines()[0][:200]}"
        return row
    row["compiled"], row["compile_s"] = True, round(time.perf_counter() - t0, 1)
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
    expected = dict(np.load(folder / "expected.npz"))
    errs, ok = [], True
    for name, g in zip(m.output_names, got):
        want = expected[name]
        errs.append(float(np.max(np.abs(g.astype(np.float64) - want))) if want.size else 0.0)
        ok = ok and bool(np.allclose(g, want, rtol=tol["rtol"], atol=tol["atol"]))
    row["max_error"], row["within_tolerance"] = max(errs), ok
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
    folders = args.models or default_folders()
    if args.only:
        keep = set(args.only.split(","))
        folders = [f for f in folders if f.name in keep]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for folder in folders:
            work = Path(tmp) / folder.name
            work.mkdir()
            env = {**os.environ, "ZIGGURAT_CACHE": "0"}
            cmd = [sys.executable, "-m", "ziggurat.benchmarks.wasm_models", "--target", args.target,
                   "--worker", str(folder), str(work)] + (["--no-native"] if args.no_native else [])
            done = subprocess.run(cmd, capture_output=True, text=True, env=env)
            found = [ln for ln in done.stdout.splitlines() if ln.startswith("ROW ")]
            row = (json.loads(found[-1][4:]) if found else
                   {"model": folder.name, "compiled": False, "ran": False,
                    "error": f"worker exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"})
            rows.append(row)
            print(format_table([row], args.target).splitlines()[-1 - ("error" in row)], flush=True)
    table = format_table(rows, args.target)
    print()
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 0 if all(r.get("within_tolerance") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
