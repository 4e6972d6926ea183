"""int8 QDQ models: ziggurat against onnxruntime's int8 and fp32 builds, and their deviation.

    python -m benchmarks.int8_models [--models ../shared/models/real] [--only a,b] [--reduce-range] [--dynamic]
                                     [--threads 1,2] [--rounds 20] [--cache DIR] [--markdown FILE]
                                     [--int8 exact|saturate]

Each static model under `--models` is quantized as a user would with onnxruntime's tool
(`quantize_static`, `QuantFormat.QDQ`, `per_channel=True`, uint8 activations, int8 weights,
8 calibration inputs: the model's `inputs.npz`, float inputs with 5% noise added;
`--reduce-range`: 7-bit weights, which AVX2's int8 GEMM needs: run with
`ZIGGURAT_HOST_CPU=haswell` to measure the 8-lane path; `--dynamic`: onnxruntime's
`quantize_dynamic` instead, int8 weights and DynamicQuantizeLinear + MatMulInteger /
ConvInteger at run time, no calibration) into
`--cache` (default `~/.cache/ziggurat/int8`; reused while the source model is unchanged).
Then, paired in one run at each thread count: onnxruntime's fp32 model, onnxruntime's int8
model (all graph optimizations: its QDQ fusion) and ziggurat's compile of the int8 model, in
`BLOCKS` turns of `--rounds / BLOCKS` calls each; the times are the medians of all calls, the
ratios the medians of the blocks' ratios (a burst of load hits a few blocks, not one side).
`--int8 saturate` compiles with the target option `-int8=saturate` (AVX2: pairs of products may
saturate int16 as in onnxruntime's AVX2 kernels; `Target.int8_pairs`).
The deviation columns are the max abs difference from the literal QDQ semantics
(onnxruntime with graph optimizations off) relative to that output's range, for
onnxruntime's optimized int8 build and for ziggurat; issue 27 asks ziggurat's to be no
larger. Results: docs/quantization.md.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

import ziggurat
from benchmarks.run import SETTLE_S, _median_iqr, _ort_session, call_times

DEFAULT_MODELS = Path(__file__).resolve().parents[2] / "shared" / "models" / "real"


BLOCKS = 8  # turns of the three builds


def calibration(inputs: dict[str, np.ndarray], count: int = 8) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    out = []
    for k in range(count):
        feed = {}
        for name, x in inputs.items():
            if np.issubdtype(x.dtype, np.floating) and k:
                x = (x + 0.05 * (x.std() or 1.0) * rng.standard_normal(x.shape)).astype(x.dtype)
            feed[name] = x
        out.append(feed)
    return out


def quantized(model: Path, inputs: dict[str, np.ndarray], cache: Path, reduce_range: bool = False,
              dynamic: bool = False) -> Path:
    """The QDQ (or, `dynamic`, dynamically quantized) model of `model` (cached by its size and mtime)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static

    st = model.stat()
    kind = ("rr." if reduce_range else "") + ("dyn" if dynamic else "qdq")
    out = cache / f"{model.parent.name}.{st.st_size}.{st.st_mtime_ns}.{kind}.onnx"
    if out.exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp.onnx")
    if dynamic:
        quantize_dynamic(str(model), str(tmp), weight_type=QuantType.QInt8, reduce_range=reduce_range)
        os.replace(tmp, out)
        return out
    feeds = calibration(inputs)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(feeds)

        def get_next(self):
            return next(self.it, None)

    quantize_static(str(model), str(tmp), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, reduce_range=reduce_range)
    os.replace(tmp, out)
    return out


def _deviation(out: list[np.ndarray], ref: list[np.ndarray]) -> float:
    return max(float(np.max(np.abs(o.astype(np.float64) - r)) / max(float(np.ptp(r)), 1e-12)) for o, r in zip(out, ref))


def bench_model(folder: Path, threads: int, rounds: int, cache: Path, reduce_range: bool = False,
                dynamic: bool = False, int8: str = "exact") -> dict:
    import onnxruntime as ort

    with np.load(folder / "inputs.npz") as f:
        inputs = {k: f[k] for k in f.files}
    qpath = quantized(folder / "model.onnx", inputs, cache, reduce_range, dynamic)
    row: dict = {"model": folder.name, "threads": threads}
    start = time.perf_counter()
    compiled = ziggurat.compile(str(qpath), target=f"llvm -num-cores={threads}" + (f" -int8={int8}" if int8 != "exact" else ""))
    row["compile_s"] = time.perf_counter() - start
    literal_opts = ort.SessionOptions()
    literal_opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    literal_opts.intra_op_num_threads = threads
    literal = ort.InferenceSession(str(qpath), literal_opts, providers=["CPUExecutionProvider"]).run(None, inputs)
    fp32, int8 = _ort_session(str(folder / "model.onnx"), threads), _ort_session(str(qpath), threads)
    ins = [np.ascontiguousarray(inputs[n]) for n in compiled.input_names]
    outs = [np.empty(s.shape, s.dtype) for s in compiled.outputs]
    compiled.run_native(ins, outs)
    row["dev_ort"] = _deviation(int8.run(None, inputs), literal)
    row["dev_zig"] = _deviation(outs, literal)
    times: dict[str, list[float]] = {"fp32": [], "int8": [], "zig": []}
    blocks: dict[str, list[float]] = {"fp32": [], "int8": [], "zig": []}
    for _ in range(BLOCKS):  # blocks in turn, so drift on a shared host hits all three alike
        for key, fn in (("fp32", lambda: fp32.run(None, inputs)), ("int8", lambda: int8.run(None, inputs)),
                        ("zig", lambda: compiled.run_native(ins, outs))):
            time.sleep(SETTLE_S)
            block = call_times(fn, max(2, rounds // BLOCKS))
            times[key] += block
            blocks[key].append(float(np.median(block)))
    for key in times:
        row[f"{key}_ms"] = _median_iqr(times[key])[0] * 1e3
    # the ratios: the median of each block's ratio to its neighbours' (a burst of load on a shared host
    # lands in a few blocks; the medians of all calls let it move one side alone)
    z = np.array(blocks["zig"])
    row["zig_vs_int8"] = float(np.median(z / np.array(blocks["int8"])))
    row["zig_vs_fp32"] = float(np.median(z / np.array(blocks["fp32"])))
    return row


def format_table(rows: list[dict]) -> str:
    lines = ["| model | threads | compile (s) | ORT fp32 (ms) | ORT int8 (ms) | ziggurat int8 (ms) | zig / ORT int8 | "
             "zig / ORT fp32 | deviation ORT int8 | deviation ziggurat |", "|" + "---|" * 10]
    for r in rows:
        lines.append(f"| {r['model']} | {r['threads']} | {r['compile_s']:.2f} | {r['fp32_ms']:.3f} | {r['int8_ms']:.3f} "
                     f"| {r['zig_ms']:.3f} | {r['zig_vs_int8']:.2f} | {r['zig_vs_fp32']:.2f} | {r['dev_ort']:.2e} "
                     f"| {r['dev_zig']:.2e} |")
    for t in sorted({r["threads"] for r in rows}):
        sel = [r for r in rows if r["threads"] == t]
        g8 = float(np.exp(np.mean([np.log(r["zig_vs_int8"]) for r in sel])))
        g32 = float(np.exp(np.mean([np.log(r["zig_vs_fp32"]) for r in sel])))
        lines.append(f"\n{t} thread(s): geometric mean ziggurat / ORT int8 {g8:.2f}, ziggurat / ORT fp32 {g32:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=str(DEFAULT_MODELS))
    ap.add_argument("--only", default=None)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--cache", default=str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                                          / "ziggurat" / "int8"))
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--reduce-range", action="store_true", help="7-bit weights (onnxruntime's reduce_range)")
    ap.add_argument("--dynamic", action="store_true", help="onnxruntime's quantize_dynamic instead of quantize_static")
    ap.add_argument("--int8", choices=("exact", "saturate"), default="exact",
                    help="the target's -int8= (saturate: AVX2's int8 GEMMs may saturate pairs as onnxruntime's do)")
    args = ap.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    folders = [p.parent for p in sorted(Path(args.models).glob("*/model.onnx"))
               if (only is None or p.parent.name in only) and (p.parent / "inputs.npz").exists()]
    rows = []
    for folder in folders:
        for t in (int(x) for x in args.threads.split(",")):
            row = bench_model(folder, t, args.rounds, Path(args.cache), args.reduce_range, args.dynamic, args.int8)
            print(row, flush=True)
            rows.append(row)
    table = format_table(rows)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
