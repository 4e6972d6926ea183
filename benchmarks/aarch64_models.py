"""The shared models cross-compiled for AArch64 and run under qemu-aarch64 by the C runner.

    python -m ziggurat.benchmarks.aarch64_models [--models DIR ...] [--target 'llvm -mtriple=...']
                                                 [--only NAME,...] [--markdown FILE] [--keep DIR]

For every model folder (model.onnx, inputs.npz, expected.npz, meta.json with
`suggested_tolerance`; default: the five small models of /work/shared/models
and the static-shape ones of /work/shared/models/real), in a fresh process
each (`--worker`, so that one model's memory or crash does not touch the
next): `ziggurat.compile` for the target (default
`llvm -mtriple=aarch64-linux-gnu -mattr=+neon -num-cores=2`), export, run the
library under `qemu-aarch64 -L /usr/aarch64-linux-gnu` with
runtime/runner/runner.c (built here with aarch64-linux-gnu-gcc), and compare
each output with expected.npz: max abs error, and whether every element is
within `atol + rtol * |expected|` (meta.json's tolerance). Prints a markdown
table (docs/targets.md holds the last one). Needs /work/shared (never a test).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ziggurat.benchmarks.target_runs import compare, compile_export, run_workers, selected, start_row

TARGET = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon -num-cores=2"
RUNNER_C = Path(__file__).resolve().parents[1] / "runtime" / "runner" / "runner.c"
SYSROOT = "/usr/aarch64-linux-gnu"


def build_runner(out: Path, cc: str = "aarch64-linux-gnu-gcc") -> Path:
    subprocess.run([cc, "-O2", "-std=c99", str(RUNNER_C), "-ldl", "-o", str(out)], check=True)
    return out


def worker(folder: Path, target: str, runner: Path, work: Path) -> dict:
    """Compile, export, run under qemu and compare one model; the row."""
    row, tol = start_row(folder)
    built = compile_export(folder, target, work / "model.so", row)
    if built is None:
        return row
    model, lib = built
    inputs = dict(np.load(folder / "inputs.npz"))
    paths = []
    for i, name in enumerate(model.input_names):
        paths.append(work / f"in{i}.npy")
        np.save(paths[-1], np.ascontiguousarray(inputs[name], dtype=model.inputs[i].dtype))
    out = work / "out"
    out.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    done = subprocess.run(["qemu-aarch64", "-L", SYSROOT, str(runner), str(lib), str(out), *map(str, paths)],
                          capture_output=True, text=True, timeout=1800)
    row["run_s"] = round(time.perf_counter() - t0, 1)
    if done.returncode != 0:
        row["error"] = f"run: exit {done.returncode}: {done.stderr.strip()[:200]}"
        return row
    row["ran"] = True
    outs = [np.load(out / f"out{i}.npy") for i in range(len(model.output_names))]
    row["max_error"], row["within_tolerance"] = compare(model.output_names, outs, dict(np.load(folder / "expected.npz")), tol)
    return row


def format_table(rows: list[dict], target: str) -> str:
    lines = [f"Target `{target}`, run under qemu-aarch64 with runtime/runner/runner.c.", "",
             "| model | compiled | ran | max abs error | tolerance (rtol, atol) | within | compile s | qemu run s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        err = f"{r['max_error']:.2e}" if "max_error" in r else "-"
        within = {True: "yes", False: "**no**"}.get(r.get("within_tolerance"), "-")
        lines.append(f"| {r['model']} | {'yes' if r['compiled'] else '**no**'} | {'yes' if r['ran'] else '**no**'} | "
                     f"{err} | {r.get('rtol', '-')}, {r.get('atol', '-')} | {within} | {r.get('compile_s', '-')} | "
                     f"{r.get('run_s', '-')} |")
        if "error" in r:
            lines.append(f"|  | {r['error']} | | | | | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", type=Path, help="model folders (default: the shared models)")
    ap.add_argument("--only", default="", help="comma-separated model names to keep")
    ap.add_argument("--target", default=TARGET)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--worker", nargs=3, metavar=("FOLDER", "RUNNER", "WORKDIR"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        folder, runner, work = (Path(p) for p in args.worker)
        print("ROW " + json.dumps(worker(folder, args.target, runner, work)), flush=True)
        return 0
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64"):
        if shutil.which(tool) is None:
            print(f"{tool} is missing: apt-get install gcc-aarch64-linux-gnu libgomp1-arm64-cross qemu-user",
                  file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory() as tmp:
        runner = build_runner(Path(tmp) / "runner")
        rows = run_workers("ziggurat.benchmarks.aarch64_models", selected(args.models, args.only), Path(tmp),
                           lambda f, w: ["--target", args.target, "--worker", str(f), str(runner), str(w)],
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
