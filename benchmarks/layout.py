"""convert-layout on and off: O3 with NCHW[x]c layout regions against O3 without, and onnxruntime.

    python -m benchmarks.layout [--threads 1,2] [--only conv3x3,resnet_small,vgg_small_bn] [--rounds 30]

Both ziggurat variants and onnxruntime (same intra-op thread count) run in one
process: the two ziggurat builds in alternating blocks with a pause between
blocks (as in `benchmarks/run.py`), then onnxruntime, whose session is only
created after them (its thread pool disturbs 2-thread OpenMP code). Per workload and thread count it prints the median
latency of each, the ratio of each ziggurat variant to onnxruntime, the
speedup of the layout variant over the NCHW one, and the max difference
between the two variants' outputs. The geometric mean of the speedup closes
each thread count.
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

DEFAULT_ONLY = "conv3x3,resnet_small,vgg_small_bn"
BLOCKS = 5
SETTLE_S = 0.2


def graph_pipelines(vector_width: int = 16) -> tuple[str, str]:
    """(O3's graph pipeline with convert-layout, the same without it)."""
    from ziggurat.lowering import pipelines
    from ziggurat.target import Target

    tgt = Target.for_width(vector_width)
    return pipelines.graph_stage(3, tgt), pipelines.graph_stage(3, tgt, skip=("convert-layout",))


def _ort(model, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    data = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def bench_layout(name: str, model, inputs: dict, threads: int, rounds: int) -> dict:
    row: dict = {"workload": name, "threads": threads}
    target = f"llvm -num-cores={threads}"
    width = ziggurat.Target.parse(target).vector_width
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            blocked, plain = (ziggurat.compile(model, target=target, pipeline=g) for g in graph_pipelines(width))
    except ZigguratError as err:
        row["skipped"] = str(err).split(". ")[0]
        return row
    feeds = {k: np.ascontiguousarray(v) for k, v in inputs.items()}
    ins = [feeds[n] for n in blocked.input_names]
    outs = [[np.empty(s.shape, s.dtype) for s in c.outputs] for c in (blocked, plain)]
    blocked.run_native(ins, outs[0])
    plain.run_native(ins, outs[1])
    row["max_diff"] = max(float(np.max(np.abs(a - b))) for a, b in zip(*outs))
    per_block = max(2, rounds // BLOCKS)

    def timed(runners, times):
        for _ in range(BLOCKS):
            for run, ts in zip(runners, times):
                time.sleep(SETTLE_S)
                run()
                for _ in range(per_block):
                    t = time.perf_counter()
                    run()
                    ts.append(time.perf_counter() - t)

    # The two ziggurat builds alternate; onnxruntime is created and timed only
    # afterwards: its spinning pool made our 2-thread calls 10-5000x slower on
    # this loaded 2-core machine even with pauses between blocks.
    times: list[list[float]] = [[], [], []]
    timed([lambda: blocked.run_native(ins, outs[0]), lambda: plain.run_native(ins, outs[1])], times[:2])
    sess = _ort(model, threads)
    sess.run(None, feeds)
    timed([lambda: sess.run(None, feeds)], times[2:])
    row["layout_ms"], row["nchw_ms"], row["ort_ms"] = (float(np.median(ts)) * 1e3 for ts in times)
    row["speedup"] = row["nchw_ms"] / row["layout_ms"]
    return row


def format_rows(rows: list[dict]) -> str:
    lines = ["| workload | threads | ORT (ms) | O3 without convert-layout (ms) | O3 with (ms) | ratio without/ORT | "
             "ratio with/ORT | speedup | max diff |", "|" + "---|" * 9]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['workload']} | {r['threads']} | skipped: {r['skipped']} |||||||")
            continue
        lines.append(f"| {r['workload']} | {r['threads']} | {r['ort_ms']:.3f} | {r['nchw_ms']:.3f} | "
                     f"{r['layout_ms']:.3f} | {r['nchw_ms'] / r['ort_ms']:.2f} | {r['layout_ms'] / r['ort_ms']:.2f} | "
                     f"{r['speedup']:.2f} | {r['max_diff']:.1e} |")
    for t in sorted({r["threads"] for r in rows}):
        sp = [r["speedup"] for r in rows if r["threads"] == t and "speedup" in r]
        if sp:
            g = float(np.exp(np.mean(np.log(sp))))
            lines.append(f"geometric mean speedup of convert-layout at {t} thread(s): {g:.2f} over {len(sp)} workloads")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from ziggurat.benchmarks.run import DEFAULT_MODELS
    from ziggurat.benchmarks.workloads import BUILDERS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", default="1,2")
    p.add_argument("--only", default=DEFAULT_ONLY, help="comma-separated workload or shared-model names")
    p.add_argument("--models", type=Path, default=DEFAULT_MODELS)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        for key in args.only.split(","):
            if key in BUILDERS:
                name, model, inputs, _ = BUILDERS[key]()
            elif (args.models / key / "model.onnx").exists():
                name, model, inputs = key, str(args.models / key / "model.onnx"), dict(np.load(args.models / key / "inputs.npz"))
            else:
                print(f"skipping {key}: not a workload of benchmarks/workloads.py nor a model in {args.models}",
                      file=sys.stderr)
                continue
            rows.append(bench_layout(name, model, inputs, threads, args.rounds))
            print(format_rows(rows[-1:]).splitlines()[2], flush=True)
    print()
    print(format_rows(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
