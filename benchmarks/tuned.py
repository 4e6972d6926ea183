"""Tuned against default schedules: one table row per workload and thread count.

    python -m benchmarks.tuned --tuning-db records.jsonl [--threads 1,2] [--only matmul_1024,conv3x3] [--rounds 30]

Each workload is compiled twice, with the default schedules and with
`tuning_db` (the best record of each kernel the database holds for the
thread count's target, `ziggurat tune ... --target 'llvm -num-cores=N'`),
and both are timed against onnxruntime (same intra-op threads) in one process,
in blocks of 10 runs per engine (`--rounds` runs in all), the engines' order
flipped every block. For matmul, numpy's
OpenBLAS at the same thread count (threadpoolctl) is timed too, in the same
alternating blocks (timed in a child process at another moment, its ratio
followed the load of this shared host rather than the kernels). Columns:
median ms of default, tuned and onnxruntime; tuned/ORT latency ratio (< 1:
tuned is faster), the ratio of the medians and, in parentheses, the paired
one (the median over blocks of the ratio of neighbouring blocks' medians,
far less sensitive to bursts of load on a shared host); default/tuned
speedup (> 1: tuning helped; paired in parentheses); for matmul numpy's ms and the tuned/numpy throughput ratio (> 1:
tuned is faster; paired in parentheses); how many kernels the
database tuned; max error of the tuned outputs against onnxruntime or
expected.npz.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from contextlib import nullcontext
from pathlib import Path

import numpy as np

import ziggurat
from ziggurat.benchmarks.run import BLOCKS, DEFAULT_MODELS, SETTLE_S, _median_iqr, _ort_session, call_times
from ziggurat.errors import ZigguratError

PAIRED_RUNS = 10  # timed runs per engine and block: short blocks, many pairs


def bench_tuned(name: str, model, inputs: dict, threads: int, rounds: int, tuning_db: str,
                expected: dict | None = None, numpy_matmul: bool = False) -> dict:
    """One row; with `numpy_matmul`, numpy's `a @ b` (OpenBLAS limited to `threads` by threadpoolctl)
    is timed too, in the same alternating blocks, so its ratio comes from the same moments."""
    row: dict = {"workload": name, "threads": threads}
    target = f"llvm -num-cores={threads}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            default = ziggurat.compile(model, target=target)
            tuned = ziggurat.compile(model, target=target, tuning_db=tuning_db)
    except ZigguratError as err:
        row["skipped"] = str(err).split(". ")[0]
        return row
    row["tuned_kernels"] = len(tuned.info["stats"].tuned_kernels)
    sess = _ort_session(model, threads)
    feeds = {k: np.ascontiguousarray(v) for k, v in inputs.items()}
    ort_out = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    ref = expected or ort_out
    engines = []
    for c in (default, tuned):
        outs = [np.empty(s.shape, s.dtype) for s in c.outputs]
        ins = [feeds[n] for n in c.input_names]
        c.run_native(ins, outs)
        engines.append((lambda c=c, ins=ins, outs=outs: c.run_native(ins, outs), c, outs))
    row["max_error"] = max(float(np.max(np.abs(o - ref[n]))) for n, o in zip(tuned.output_names, engines[1][2]))
    engines.append((lambda: sess.run(None, feeds), None, None))
    limits = [nullcontext] * 3
    if numpy_matmul:
        from threadpoolctl import threadpool_limits

        a, b = feeds["a"], feeds["b"]
        c = np.empty((a.shape[0], b.shape[1]), np.float32)
        engines.append((lambda: np.matmul(a, b, out=c), None, None))
        limits.append(lambda: threadpool_limits(limits=threads, user_api="blas"))
    times: list[list[float]] = [[] for _ in engines]
    blocks: list[list[float]] = [[] for _ in engines]  # each engine's median per block, for paired ratios
    per_block = max(2, min(PAIRED_RUNS, rounds // BLOCKS))
    order = list(range(len(engines)))
    for _ in range(max(BLOCKS, rounds // per_block)):
        for i in order:
            (call, _, _), limit = engines[i], limits[i]
            time.sleep(SETTLE_S)  # let the other runtime's workers stop spinning
            with limit():
                ts = call_times(call, per_block)
            times[i] += ts
            blocks[i].append(float(np.median(ts)))
        order.reverse()  # a burst of load on the shared host hits both ends of the order alike
    row["default_ms"], row["tuned_ms"], row["ort_ms"] = (_median_iqr(ts)[0] * 1e3 for ts in times[:3])
    row["paired_tuned_vs_ort"] = float(np.median(np.array(blocks[1]) / np.array(blocks[2])))
    if numpy_matmul:
        row["numpy_ms"] = _median_iqr(times[3])[0] * 1e3
        row["paired_numpy_vs_tuned"] = float(np.median(np.array(blocks[3]) / np.array(blocks[1])))
    row["tuned_vs_ort"] = row["tuned_ms"] / row["ort_ms"]
    row["speedup"] = row["default_ms"] / row["tuned_ms"]
    row["paired_default_vs_tuned"] = float(np.median(np.array(blocks[0]) / np.array(blocks[1])))
    return row


def format_tuned(rows: list[dict]) -> str:
    lines = ["| workload | threads | default (ms) | tuned (ms) | ORT (ms) | tuned/ORT (paired) | default/tuned (paired) | "
             "numpy (ms) | tuned/numpy throughput (paired) | tuned kernels | max error |", "|" + "---|" * 11]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['workload']} | {r['threads']} | skipped: {r['skipped']} |||||||||")
            continue
        npm = f"{r['numpy_ms']:.3f}" if "numpy_ms" in r else "-"
        npr = f"{r['numpy_ms'] / r['tuned_ms']:.2f} ({r['paired_numpy_vs_tuned']:.3f})" if "numpy_ms" in r else "-"
        lines.append(f"| {r['workload']} | {r['threads']} | {r['default_ms']:.3f} | {r['tuned_ms']:.3f} | "
                     f"{r['ort_ms']:.3f} | {r['tuned_vs_ort']:.2f} ({r['paired_tuned_vs_ort']:.3f}) | "
                     f"{r['speedup']:.2f} ({r['paired_default_vs_tuned']:.3f}) | {npm} | {npr} | "
                     f"{r['tuned_kernels']} | {r['max_error']:.1e} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from ziggurat.benchmarks.workloads import BUILDERS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tuning-db", required=True, help="tuning record database (ziggurat tune --db)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--models", type=Path, default=DEFAULT_MODELS, help="folder of model folders")
    p.add_argument("--only", default="matmul_1024,conv3x3,mlp_784_512_256_10",
                   help="comma-separated workload or shared-model names")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    only = args.only.split(",")
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        for key in only:
            if key in BUILDERS:
                name, model, inputs, _ = BUILDERS[key]()
                row = bench_tuned(name, model, inputs, threads, args.rounds, args.tuning_db,
                                  numpy_matmul=key.startswith("matmul"))
            elif (args.models / key / "model.onnx").exists():
                folder = args.models / key
                row = bench_tuned(key, str(folder / "model.onnx"), dict(np.load(folder / "inputs.npz")), threads,
                                  args.rounds, args.tuning_db, expected=dict(np.load(folder / "expected.npz")))
            else:
                print(f"skipping {key}: neither a synthetic workload nor a model under {args.models}", file=sys.stderr)
                continue
            rows.append(row)
            print(format_tuned(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(format_tuned(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
