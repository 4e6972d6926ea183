"""The shared models on a CUDA GPU: correctness against expected.npz, latency against onnxruntime.

Two steps, so that a GPU machine without xDSL or llvmlite 0.50 (a lent one) runs them:

```
python -m ziggurat.benchmarks.gpu_models pack .gpu/run1 --only lenet5,whisper_tiny_encoder [--batch16]
python -m ziggurat.benchmarks.gpu_models run .gpu/run1        # on the GPU machine: numpy, ctypes, onnx
```

`pack` compiles every model folder for `cuda -arch=sm_90` (timing the compile) and writes
`<dir>/<name>/`: `program.json` (the GpuProgram, the signature and, per weight, the ONNX
initializer it equals or its key in `extra.npz`: weights the graph passes made), `extra.npz`,
`inputs.npz` and `expected.npz`, and `<dir>/<model>.onnx` once per model (hard link).
`--dynamic` adds resnet10t_dynamic and distilbert_dynamic at every shape they have expected
outputs for, `--batch16` at batch 16 (no expected.npz: onnxruntime's output on the GPU
machine is the reference).

`run` rebuilds each `CudaModel` (weights from the ONNX file: no code from it runs), checks its
outputs (`atol + rtol * |expected|`, meta.json's tolerance; where there is no expected.npz,
onnxruntime's output there is the reference and a result within `RANGE_TOL` of the output's range
passes too, the row giving that relative error and onnxruntime's own optimized-vs-literal spread), and times: the GPU alone (one CUDA
graph launch, median of CUDA-event times), a whole call (inputs in, outputs out; median of
wall-clock times) and onnxruntime's CPU provider with every core (median). Rows go to stdout
and, as JSON lines, to `$OUT/gpu_models.jsonl` where OUT is set.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from ziggurat.benchmarks.target_runs import SHARED, compare, selected, tolerance

BATCH16 = {"resnet10t_dynamic": {"batch": 16, "height": 224, "width": 224},
           "distilbert_dynamic": {"batch": 16, "sequence": 128}}
DYNAMIC = tuple(BATCH16)
ARCH = "sm_90"


def _jobs(only: str, batch16: bool, dynamic: bool) -> list[tuple[str, Path, dict | None, str]]:
    """(name, folder, binding of the symbols or None, suffix of its inputs/expected files)."""
    keep = set(only.split(",")) if only else None
    jobs: list[tuple[str, Path, dict | None, str]] = [(f.name, f, None, "") for f in selected(None, only)
                                                      if (f / "model.onnx").exists()]
    for n in DYNAMIC:
        folder = SHARED / "real" / n
        if (keep is not None and n not in keep) or not (folder / "model.onnx").exists():
            continue
        if dynamic:  # every shape the folder has expected outputs for
            meta = json.loads((folder / "meta.json").read_text())
            for f in sorted(folder.glob("inputs_*.npz")):
                data = dict(np.load(f))
                binding = {}
                for spec in meta["inputs"]:
                    for sym, dim in zip(spec["shape"], data[spec["name"]].shape):
                        if isinstance(sym, str):
                            binding[sym] = int(dim)
                suffix = f.stem[len("inputs"):]
                jobs.append((f"{n}{suffix}", folder, binding, suffix))
        if batch16:
            jobs.append((f"{n}_b16", folder, BATCH16[n], "-"))
    return jobs


def pack(out: Path, only: str, batch16: bool, arch: str, dynamic: bool = False,
         pass_options: dict | None = None, workers: int = 1) -> bool:
    """Compile every job into `out`; with `workers` > 1, that many processes side by side (a GPU
    machine's many cores). Returns whether every job packed; a failed job is reported by name."""
    jobs = _jobs(only, batch16, dynamic)
    for _, folder, _, _ in jobs:  # one copy of each model file, whatever its variants
        shared_onnx = out / f"{folder.name}.onnx"
        if not shared_onnx.exists():
            out.mkdir(parents=True, exist_ok=True)
            try:
                os.link(folder / "model.onnx", shared_onnx)
            except OSError:
                shutil.copyfile(folder / "model.onnx", shared_onnx)
    args = [(job, out, arch, pass_options) for job in jobs]
    if workers <= 1:
        results = [_pack_guarded(a) for a in args]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            results = list(pool.map(_pack_guarded, args))
    for line in results:
        print(line, flush=True)
    return all(line.startswith("packed") for line in results)


def _pack_guarded(args: tuple) -> str:
    job = args[0]
    try:
        return _pack_one(*args)
    except Exception as e:  # noqa: BLE001 - one model's failure is a line, the others still pack
        return f"FAILED {job[0]}: {type(e).__name__}: {str(e)[:400]}"


def _pack_one(job: tuple[str, Path, dict | None, str], out: Path, arch: str, pass_options: dict | None) -> str:
    from ziggurat.cross import cuda_compile
    from ziggurat.frontends.onnx.symbols import fix_shapes

    name, folder, binding, suffix = job
    dest = out / name
    dest.mkdir(parents=True, exist_ok=True)
    source = folder / "model.onnx"
    t0 = time.perf_counter()
    model = cuda_compile(source if binding is None else fix_shapes(source, binding), f"cuda -arch={arch}",
                         pass_options=pass_options)
    seconds = time.perf_counter() - t0
    inits = _initializers(source)
    refs, extra = [], {}
    for cname, c in zip(model.program.const_names, model.constants):
        same = inits.get(cname)
        if same is not None and same.dtype == c.dtype and same.shape == c.shape and np.array_equal(same, c):
            refs.append({"onnx": cname})
        else:
            refs.append({"npz": f"c{len(extra)}"})
            extra[f"c{len(extra)}"] = c
    doc = {"model": name, "program": model.program.to_json(), "inputs": [s.to_json() for s in model.inputs],
           "outputs": [s.to_json() for s in [*model.outputs, *model.checks]], "constants": refs,
           "tolerance": tolerance(folder), "compile_seconds": seconds, "binding": binding,
           "onnx": f"../{folder.name}.onnx"}
    (dest / "program.json").write_text(json.dumps(doc))
    np.savez(dest / "extra.npz", **extra)
    if suffix != "-":  # batch 16 has no expected outputs: onnxruntime's are the reference
        for f in ("inputs", "expected"):
            target = dest / f"{f}.npz"
            if target.exists():
                target.unlink()
            if (folder / f"{f}{suffix}.npz").exists():  # gpu_synthetic.py's folders have no expected.npz
                shutil.copyfile(folder / f"{f}{suffix}.npz", target)
    return (f"packed {name}: {len(model.program.launches)} launches, {len(extra)} extra weights, "
            f"compile {seconds:.1f} s")


@functools.cache
def _initializers(source: Path) -> dict[str, np.ndarray]:
    """A model's initializers, read once per process whatever its shape variants."""
    import onnx
    from onnx import numpy_helper

    return {i.name: numpy_helper.to_array(i) for i in onnx.load(str(source)).graph.initializer}


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def run_one(dest: Path, repeat: int, profile: bool = False) -> dict:
    import onnx
    from onnx import numpy_helper

    from ziggurat.runtime.cuda import CudaModel
    from ziggurat.runtime.cuda_program import GpuProgram
    from ziggurat.signature import TensorSpec

    doc = json.loads((dest / "program.json").read_text())
    row: dict = {"model": doc["model"], "compile_s": round(doc["compile_seconds"], 2)}
    onnx_path = dest / doc.get("onnx", "model.onnx")
    inits = {i.name: i for i in onnx.load(str(onnx_path)).graph.initializer}
    with np.load(dest / "extra.npz", allow_pickle=False) as extra:
        consts = [numpy_helper.to_array(inits[r["onnx"]]) if "onnx" in r else extra[r["npz"]] for r in doc["constants"]]
    inputs = [TensorSpec.from_json(s) for s in doc["inputs"]]
    model = CudaModel(GpuProgram.from_json(doc["program"]), inputs, [TensorSpec.from_json(s) for s in doc["outputs"]],
                      consts)
    if (dest / "inputs.npz").exists():
        data = dict(np.load(dest / "inputs.npz"))
    else:  # batch 16: seeded inputs of the model's shapes (token ids below the vocabulary: 100)
        rng = np.random.default_rng(0)
        data = {s.name: (rng.integers(0, 100, s.shape) if np.dtype(s.dtype).kind == "i" else
                         rng.standard_normal(s.shape)).astype(s.dtype) for s in inputs}
    feed = [data[s.name] for s in inputs]
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = os.cpu_count() or 1
    sess = ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])
    ort_feed = {s.name: a for s, a in zip(inputs, feed)}
    on_machine = not (dest / "expected.npz").exists()
    if on_machine:
        expected = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, ort_feed)))
    else:
        expected = dict(np.load(dest / "expected.npz"))
    try:
        outs = model(*feed)
        err, ok = compare(model.output_names, outs, expected, doc["tolerance"])
        row.update(ok=ok, max_abs_err=float(f"{err:.3g}"), launches=len(model.program.launches))
        if on_machine:  # redrawn weights or batch 16: onnxruntime's output here is the reference
            row.update(_range_check(str(onnx_path), ort_feed, [expected[n] for n in model.output_names], err))
            row["ok"] = ok or row["within_range"]
        gpu = statistics.median(model.time_device(repeat))
        call = _median_ms(lambda: model(*feed), repeat)
        cpu = _median_ms(lambda: sess.run(None, ort_feed), max(5, repeat // 5))
        row.update(gpu_ms=round(gpu, 4), call_ms=round(call, 4), ort_cpu_ms=round(cpu, 3),
                   ort_over_gpu=round(cpu / gpu, 2), cuda_graph=model.info.get("cuda_graph"))
        if profile:  # the kernels that take the time, each run alone: name, grid x block, ms summed over calls
            per: dict[str, list] = {}
            for st, ms in zip(model.program.steps, model.time_steps(5)):
                key = getattr(st, "kernel", "copy")
                e = per.setdefault(key, [0.0, 0, getattr(st, "grid", (0,))[0], getattr(st, "block", (0,))[0]])
                e[0] += ms
                e[1] += 1
            top = sorted(per.items(), key=lambda kv: -kv[1][0])[:8]
            row["steps_ms"] = round(sum(e[0] for e in per.values()), 3)
            row["top"] = [[k, round(e[0], 4), e[1], e[2], e[3]] for k, e in top]
    finally:
        model.close()
    return row


RANGE_TOL = 1e-3  # of the output's range: how far a GPU result may stray from onnxruntime's where no
# expected.npz is (gpu_synthetic.py's redrawn weights make activations of 1e4 and more, where f32 sums in
# another order differ by more than a model's tolerance; onnxruntime's own optimized and literal builds do too)


def _range_check(onnx_path: str, feed: dict, refs: list[np.ndarray], err: float) -> dict:
    """The error relative to the outputs' range, whether it is within RANGE_TOL, and onnxruntime's own
    spread (its optimized build against its literal one, graph optimizations off) for scale."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    literal = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"]).run(None, feed)
    spread = max((float(np.max(np.abs(np.asarray(a, np.float64) - b))) if b.size else 0.0)
                 for a, b in zip(refs, literal))
    span = max((float(np.ptp(r)) if r.size and r.dtype.kind == "f" else 0.0) for r in refs) or 1.0
    return {"rel_range_err": float(f"{err / span:.3g}"), "within_range": err <= RANGE_TOL * span,
            "ort_spread": float(f"{spread:.3g}")}


def run(root: Path, repeat: int, profile: bool = False) -> list[dict]:
    rows = []
    sink = Path(os.environ["OUT"]) / "gpu_models.jsonl" if os.environ.get("OUT") else None
    for dest in sorted(p for p in root.iterdir() if (p / "program.json").exists()):
        try:
            row = run_one(dest, repeat, profile)
        except Exception as e:  # noqa: BLE001 - one model's failure is a row, the others still run
            row = {"model": dest.name, "ok": False, "error": f"{type(e).__name__}: {str(e)[:400]}"}
        row["set"] = root.name  # which pack (the defaults, or other pass options)
        rows.append(row)
        print("ROW", json.dumps(row), flush=True)
        if sink is not None:
            with sink.open("a") as f:
                f.write(json.dumps(row) + "\n")
    print(f"{'model':28} {'ok':>5} {'max err':>9} {'GPU ms':>8} {'call ms':>8} {'ORT CPU ms':>10} {'ORT/GPU':>8}")
    for r in rows:
        print(f"{r['model']:28} {str(r.get('ok')):>5} {r.get('max_abs_err', '-'):>9} {r.get('gpu_ms', '-'):>8} "
              f"{r.get('call_ms', '-'):>8} {r.get('ort_cpu_ms', '-'):>10} {r.get('ort_over_gpu', '-'):>8}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ziggurat.benchmarks.gpu_models", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="compile the models for the GPU and write them to a folder (needs ziggurat's compiler)")
    p.add_argument("out", type=Path)
    p.add_argument("--only", default="", help="comma-separated model names (default: all of target_runs.py)")
    p.add_argument("--batch16", action="store_true", help="also the two dynamic models at batch 16")
    p.add_argument("--dynamic", action="store_true", help="also the two dynamic models at every shape they have "
                   "expected outputs for")
    p.add_argument("--arch", default=ARCH)
    p.add_argument("--workers", type=int, default=1, help="compile in that many processes side by side")
    p.add_argument("--pass-options", default="", help='GPU pass options as JSON, e.g. '
                   '\'{"gpu-gemm": {"convolutions": false, "deep-k": false}}\' (the paths before the defaults)')
    r = sub.add_parser("run", help="run packed models on the GPU (numpy, ctypes, onnx and onnxruntime only)")
    r.add_argument("root", type=Path)
    r.add_argument("--repeat", type=int, default=50)
    r.add_argument("--profile", action="store_true", help="also time every kernel alone; the 8 slowest go in the row")
    args = ap.parse_args(argv)
    if args.cmd == "pack":
        ok = pack(args.out, args.only, args.batch16, args.arch, args.dynamic,
                  json.loads(args.pass_options) if args.pass_options else None, args.workers)
        return 0 if ok else 1
    rows = run(args.root, args.repeat, args.profile)
    return 0 if rows and all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
