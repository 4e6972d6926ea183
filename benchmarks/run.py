"""The benchmark suite: ziggurat against onnxruntime (and numpy for matmul).

    python -m benchmarks.run [--threads 1,2] [--only NAME,...] [--rounds 30] [--json out.json]
    python -m benchmarks.run --compare-feedback --only bert_layer,transformer_encoder_2l_d128,vgg_small_bn

`--tuning-db FILE` adds a "(tuned)" row after each workload's row: the same
model compiled with the tuning records (`ziggurat tune ... --db FILE`), left
out of the geometric means. `--compare-feedback` times O3 against the same pipeline with rule-based
fusion instead (the feedback channel on and off, docs/feedback.md) and
prints the speedup per workload and its geometric mean.

Workloads (benchmarks/workloads.py): matmul 512^3 and 1024^3, a batch-64 MLP
(784-512-512-10), conv3x3 on 1x64x56x56 -> 64, a small ResNet-style CNN, one
BERT-style encoder layer (seq 128, hidden 256, 4 heads), a chain of 6
elementwise ops over 1M floats, and every model under `--models` (default
../shared/models; skipped with a message when absent). A workload ziggurat
cannot compile yet is skipped with the error's first sentence.

Per workload and thread count it reports: ziggurat's compile time, the median
latency of ziggurat and of onnxruntime (same intra-op thread count) with the
interquartile spread, the ratio ziggurat/onnxruntime, ziggurat's GFLOP/s, and
the max error against onnxruntime (synthetic workloads) or expected.npz
(shared models). For matmul, numpy's throughput (OpenBLAS limited to the same
threads through OPENBLAS_NUM_THREADS in a child process) and the ratio of our
throughput to it are added. Timing alternates blocks of runs of the two
engines (not single runs) with a 0.2 s pause between blocks, so one runtime's
spinning workers (libgomp's, onnxruntime's) do not steal the cores from the
other's next call: interleaving single runs made our 2-thread numbers 10x
worse on this 2-core machine. The last lines give the geometric mean of
the ratio per thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import ziggurat
from ziggurat.errors import ZigguratError

DEFAULT_MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"
BLOCKS = 5
SETTLE_S = 0.2

_NUMPY_CHILD = """
import json, sys, time
import numpy as np
n, rounds = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
a = rng.standard_normal((n, n)).astype(np.float32); b = rng.standard_normal((n, n)).astype(np.float32)
c = np.empty((n, n), np.float32)
for _ in range(3): np.matmul(a, b, out=c)
ts = []
for _ in range(rounds):
    t = time.perf_counter(); np.matmul(a, b, out=c); ts.append(time.perf_counter() - t)
print(json.dumps(ts))
"""


def _median_iqr(samples: list[float]) -> tuple[float, float]:
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return float(med), float(q3 - q1)


def call_times(fn, rounds: int) -> list[float]:
    """Seconds of `rounds` calls of `fn`, after one untimed call."""
    fn()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def numpy_matmul_ms(n: int, threads: int, rounds: int) -> float:
    """Median ms of numpy's n^3 sgemm with OpenBLAS limited to `threads`."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", _NUMPY_CHILD, str(n), str(rounds)], env=env,
                         capture_output=True, text=True, check=True)
    return _median_iqr(json.loads(out.stdout))[0] * 1e3


def _ort_session(model, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def bench(name: str, model, inputs: dict, threads: int, rounds: int, flops: float | None = None,
          expected: dict | None = None, tuning_db: str | None = None) -> dict:
    """Times one workload; `model` is an onnx path, bytes or ModelProto."""
    row: dict = {"workload": name + (" (tuned)" if tuning_db else ""), "threads": threads, "tuned": bool(tuning_db)}
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = ziggurat.compile(model, target=f"llvm -num-cores={threads}", tuning_db=tuning_db)
    except ZigguratError as err:
        row["skipped"] = str(err).split(". ")[0]
        return row
    row["compile_s"] = time.perf_counter() - start
    sess = _ort_session(model, threads)
    feeds = {k: np.ascontiguousarray(v) for k, v in inputs.items()}
    ins = [feeds[n] for n in compiled.input_names]
    results = [np.empty(s.shape, s.dtype) for s in compiled.outputs]
    # A fresh onnxruntime pool spins until its first run, which starves our
    # threads (48 ms instead of 0.03 ms for a 2-thread MLP): run it first.
    ort_out = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    time.sleep(SETTLE_S)
    compiled.run_native(ins, results)
    ref = expected or ort_out
    row["max_error"] = max(float(np.max(np.abs(o - ref[n]))) for n, o in zip(compiled.output_names, results))
    zig: list[float] = []
    onnxrt: list[float] = []
    per_block = max(2, rounds // BLOCKS)
    for _ in range(BLOCKS):
        time.sleep(SETTLE_S)  # let the other runtime's workers stop spinning
        compiled.run_native(ins, results)  # first run of a block: wakes the pool, not timed
        for _ in range(per_block):
            t = time.perf_counter()
            compiled.run_native(ins, results)
            zig.append(time.perf_counter() - t)
        time.sleep(SETTLE_S)
        sess.run(None, feeds)
        for _ in range(per_block):
            t = time.perf_counter()
            sess.run(None, feeds)
            onnxrt.append(time.perf_counter() - t)
    row["ziggurat_ms"], row["ziggurat_iqr_ms"] = (x * 1e3 for x in _median_iqr(zig))
    row["ort_ms"], row["ort_iqr_ms"] = (x * 1e3 for x in _median_iqr(onnxrt))
    row["ratio"] = row["ziggurat_ms"] / row["ort_ms"]
    if flops:
        row["gflops"] = flops / row["ziggurat_ms"] / 1e6
    return row


def bench_feedback(name: str, model, inputs: dict, threads: int, rounds: int, measure: bool = False) -> dict:
    """O3 with the feedback channel (cost-guided fuse-ops) against the same pipeline with
    rule-based fuse-ops: median ms of each over `rounds` alternating runs, the speedup of
    the medians, and the median of the per-round ratios (`paired_speedup`)."""
    from ziggurat.benchmarks.kernel_profile import graph_pipelines

    row: dict = {"workload": name, "threads": threads}
    target = f"llvm -num-cores={threads}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            guided, rules = (ziggurat.compile(model, target=target, pipeline=g) for g in graph_pipelines(measure=measure))
    except ZigguratError as err:
        row["skipped"] = str(err).split(". ")[0]
        return row
    feeds = {k: np.ascontiguousarray(v) for k, v in inputs.items()}
    ins = [feeds[n] for n in guided.input_names]
    outs = [[np.empty(s.shape, s.dtype) for s in c.outputs] for c in (guided, rules)]
    guided.run_native(ins, outs[0])
    rules.run_native(ins, outs[1])
    row["max_diff"] = max(float(np.max(np.abs(a - b))) for a, b in zip(*outs))
    # Both run on the same runtime (no foreign spinning pool), so single runs alternate
    # (in flipped order every round): a burst of load on the shared host hits both alike.
    times: list[list[float]] = [[], []]
    pairs = list(zip((guided, rules), outs, times))
    for _ in range(5):
        for c, out, _ in pairs:
            c.run_native(ins, out)
    for k in range(rounds):
        for c, out, ts in (pairs if k % 2 == 0 else pairs[::-1]):
            t = time.perf_counter()
            c.run_native(ins, out)
            ts.append(time.perf_counter() - t)
    ratios = [b / a for a, b in zip(*times)]
    row["paired_speedup"] = float(np.median(ratios))
    row["kernels"] = (guided.info["stats"].kernels, rules.info["stats"].kernels)
    row["guided_ms"], row["rules_ms"] = (_median_iqr(ts)[0] * 1e3 for ts in times)
    row["speedup"] = row["rules_ms"] / row["guided_ms"]
    return row


def format_feedback(rows: list[dict]) -> str:
    lines = ["| workload | threads | kernels (rules -> cost-guided) | O3 without feedback (ms) | O3 (ms) | speedup |"
             " paired speedup | max diff |", "|" + "---|" * 8]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['workload']} | {r['threads']} | skipped: {r['skipped']} ||||||")
            continue
        lines.append(f"| {r['workload']} | {r['threads']} | {r['kernels'][1]} -> {r['kernels'][0]} | "
                     f"{r['rules_ms']:.3f} | {r['guided_ms']:.3f} | {r['speedup']:.3f} | {r['paired_speedup']:.3f} | "
                     f"{r['max_diff']:.1e} |")
    for t in sorted({r["threads"] for r in rows}):
        sp = [r["speedup"] for r in rows if r["threads"] == t and "speedup" in r]
        if sp:
            g = float(np.exp(np.mean(np.log(sp))))
            lines.append(f"geometric mean speedup of the feedback channel at {t} thread(s): {g:.3f} "
                         f"over {len(sp)} workloads (min {min(sp):.3f})")
    return "\n".join(lines)


def format_table(rows: list[dict]) -> str:
    head = ("| workload | threads | compile (s) | ziggurat (ms) | ORT (ms) | ratio zig/ORT | GFLOP/s | "
            "numpy (ms) | zig/numpy throughput | max error |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['workload']} | {r['threads']} | skipped: {r['skipped']} |||||||")
            continue
        gf = f"{r['gflops']:.1f}" if "gflops" in r else "-"
        npm = f"{r['numpy_ms']:.3f}" if "numpy_ms" in r else "-"
        npr = f"{r['numpy_ms'] / r['ziggurat_ms']:.2f}" if "numpy_ms" in r else "-"
        lines.append(
            f"| {r['workload']} | {r['threads']} | {r['compile_s']:.2f} | "
            f"{r['ziggurat_ms']:.3f} ± {r['ziggurat_iqr_ms']:.3f} | {r['ort_ms']:.3f} ± {r['ort_iqr_ms']:.3f} | "
            f"{r['ratio']:.2f} | {gf} | {npm} | {npr} | {r['max_error']:.1e} |"
        )
    return "\n".join(lines)


def geomean_lines(rows: list[dict]) -> list[str]:
    out = []
    for t in sorted({r["threads"] for r in rows}):
        ratios = [r["ratio"] for r in rows if r["threads"] == t and "ratio" in r and not r.get("tuned")]
        if ratios:
            g = float(np.exp(np.mean(np.log(ratios))))
            out.append(f"geometric mean of ratio zig/ORT at {t} thread(s): {g:.2f} over {len(ratios)} workloads")
    return out


def _shared_models(folder: Path, only: set[str] | None):
    if not folder.is_dir():
        print(f"skipping shared models: {folder} does not exist", file=sys.stderr)
        return []
    usable = []
    for d in sorted(d for d in folder.iterdir() if (d / "model.onnx").exists() and (only is None or d.name in only)):
        if (d / "inputs.npz").exists() and (d / "expected.npz").exists():
            usable.append(d)
        else:  # the dynamic-axes models ship inputs per shape
            print(f"skipping {d.name}: no inputs.npz and expected.npz (a model with dynamic axes: "
                  "python -m benchmarks.dynamic_models times those)", file=sys.stderr)
    return usable


def main(argv: list[str] | None = None) -> int:
    from ziggurat.benchmarks.workloads import BUILDERS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    p.add_argument("--models", type=Path, default=DEFAULT_MODELS, help="folder of model folders")
    p.add_argument("--only", default=None, help="comma-separated workload or model names")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--tuning-db", default=None,
                   help="also time each workload compiled with this tuning database (a '(tuned)' row after "
                        "its default row; records of 'llvm -num-cores=N' apply at N threads)")
    p.add_argument("--compare-feedback", action="store_true",
                   help="time O3 with the feedback channel against O3 with rule-based fusion (no onnxruntime)")
    p.add_argument("--measure", action="store_true",
                   help="with --compare-feedback: cost-guided fuse-ops with measure=true (kernels timed once, recorded)")
    args = p.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    synthetic = [k for k in BUILDERS if only is None or k in only]
    models = _shared_models(args.models, only)
    rows = []
    if args.compare_feedback:
        for threads in (int(t) for t in args.threads.split(",")):
            for key in synthetic:
                name, model, inputs, _ = BUILDERS[key]()
                rows.append(bench_feedback(name, model, inputs, threads, args.rounds, args.measure))
                print(format_feedback(rows[-1:]).splitlines()[2], flush=True)
            for folder in models:
                rows.append(bench_feedback(folder.name, str(folder / "model.onnx"),
                                           dict(np.load(folder / "inputs.npz")), threads, args.rounds, args.measure))
                print(format_feedback(rows[-1:]).splitlines()[2], flush=True)
        print()
        print(format_feedback(rows))
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))
        return 0
    for threads in (int(t) for t in args.threads.split(",")):
        for key in synthetic:
            name, model, inputs, flops = BUILDERS[key]()
            for db in [None, args.tuning_db] if args.tuning_db else [None]:
                row = bench(name, model, inputs, threads, args.rounds, flops, tuning_db=db)
                if key.startswith("matmul") and "skipped" not in row:
                    row["numpy_ms"] = numpy_matmul_ms(inputs["a"].shape[0], threads, args.rounds)
                rows.append(row)
                print(format_table(rows[-1:]).splitlines()[-1], flush=True)
        for folder in models:
            inputs = dict(np.load(folder / "inputs.npz"))
            expected = dict(np.load(folder / "expected.npz"))
            for db in [None, args.tuning_db] if args.tuning_db else [None]:
                rows.append(bench(folder.name, str(folder / "model.onnx"), inputs, threads, args.rounds,
                                  expected=expected, tuning_db=db))
                print(format_table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(format_table(rows))
    for line in geomean_lines(rows):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
