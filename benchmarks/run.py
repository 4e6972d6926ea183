"""Side-by-side benchmark: ziggurat against onnxruntime, in one process.

    python -m benchmarks.run [--threads 1,2] [--models DIR] [--json out.json]

For every model under `--models` (default ../shared/models; skipped with a
message when absent) it reports ziggurat's compile time, onnxruntime's session
creation time, the median latency of each with its interquartile spread (runs
interleaved round by round, onnxruntime with the same intra-op thread count),
the ratio ziggurat / onnxruntime and the max error against expected.npz.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import ziggurat
from ziggurat.errors import ZigguratError

DEFAULT_MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"


def _median_iqr(samples: list[float]) -> tuple[float, float]:
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return float(med), float(q3 - q1)


def bench_model(folder: Path, threads: int, rounds: int) -> dict:
    import onnxruntime as ort

    row: dict = {"model": folder.name, "threads": threads}
    inputs = dict(np.load(folder / "inputs.npz"))
    expected = dict(np.load(folder / "expected.npz"))
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = ziggurat.compile(str(folder / "model.onnx"), target=f"llvm -num-cores={threads}")
    except ZigguratError as err:
        row["skipped"] = str(err).split(". ")[0]
        return row
    row["compile_s"] = time.perf_counter() - start
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    start = time.perf_counter()
    sess = ort.InferenceSession(str(folder / "model.onnx"), opts, providers=["CPUExecutionProvider"])
    row["ort_session_s"] = time.perf_counter() - start

    outs = model(**inputs)
    row["max_error"] = max(float(np.max(np.abs(o - expected[n]))) for n, o in zip(model.output_names, outs))
    feeds = {k: np.ascontiguousarray(v) for k, v in inputs.items()}
    ins = [feeds[n] for n in model.input_names]
    results = [np.empty(s.shape, s.dtype) for s in model.outputs]
    zig, onnxrt, full = [], [], []
    for _ in range(5):  # warm-up
        model.run_native(ins, results)
        sess.run(None, feeds)
    for _ in range(rounds):
        t = time.perf_counter()
        model.run_native(ins, results)
        zig.append(time.perf_counter() - t)
        t = time.perf_counter()
        model(**feeds)
        full.append(time.perf_counter() - t)
        t = time.perf_counter()
        sess.run(None, feeds)
        onnxrt.append(time.perf_counter() - t)
    row["ziggurat_ms"], row["ziggurat_iqr_ms"] = (x * 1e3 for x in _median_iqr(zig))
    row["ziggurat_call_ms"] = _median_iqr(full)[0] * 1e3
    row["ort_ms"], row["ort_iqr_ms"] = (x * 1e3 for x in _median_iqr(onnxrt))
    row["ratio"] = row["ziggurat_ms"] / row["ort_ms"]
    row["kernels"] = model.info["stats"].kernels
    return row


def format_table(rows: list[dict]) -> str:
    head = "| model | threads | kernels | compile (s) | ORT session (s) | ziggurat (ms) | ORT (ms) | ratio zig/ORT | max error |"
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['model']} | {r['threads']} | skipped: {r['skipped']} |||||||")
            continue
        lines.append(
            f"| {r['model']} | {r['threads']} | {r['kernels']} | {r['compile_s']:.2f} | {r['ort_session_s']:.3f} | "
            f"{r['ziggurat_ms']:.3f} ± {r['ziggurat_iqr_ms']:.3f} | {r['ort_ms']:.3f} ± {r['ort_iqr_ms']:.3f} | "
            f"{r['ratio']:.2f} | {r['max_error']:.1e} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    p.add_argument("--models", type=Path, default=DEFAULT_MODELS, help="folder of model folders")
    p.add_argument("--only", default=None, help="comma-separated model names")
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if not args.models.is_dir():
        print(f"skipping shared models: {args.models} does not exist", file=sys.stderr)
        return 0
    folders = sorted(d for d in args.models.iterdir() if (d / "model.onnx").exists())
    if args.only:
        folders = [d for d in folders if d.name in args.only.split(",")]
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        for folder in folders:
            rows.append(bench_model(folder, threads, args.rounds))
            print(format_table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(format_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
