"""Models with dynamic axes: one `ziggurat.compile`, every shape of the folder, against static compiles.

    python -m benchmarks.dynamic_models [--models ../shared/models/real] [--threads 1] [--rounds 20]

For each model folder with `inputs_<tag>.npz` / `expected_<tag>.npz` cases (meta.json's
`cases`): one `ziggurat.compile` of the dynamic model (a `DynamicModel` whose generic model
serves every shape; its compile seconds), then per shape whether the call compiled anything
(it must not), the max error against the expected outputs (and whether it is within
meta.json's suggested tolerance), the median call time of the dynamic model, of a static
compile of the same shape (the model with its input dims fixed; its compile seconds), of a
`DynamicModel` with a bucket at that shape (`shapes=`, no generic model: its dispatch to the
bucket's variant) and of onnxruntime on the dynamic model, paired in one run (interleaved
rounds), and the arenas' bytes (the generic model's: its static part plus its buffers placed at
that binding; kernel-local scratch of symbolic size, allocated in the kernels, is not counted).
Results: docs/benchmarks.md, "Dynamic shapes".
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import ziggurat
from benchmarks.run import SETTLE_S, _median_iqr, _ort_session, call_times
from ziggurat.frontends.onnx.symbols import fix_shapes

DEFAULT_MODELS = Path(__file__).resolve().parents[2] / "shared" / "models" / "real"


def _timed(fn, rounds: int) -> float:
    return _median_iqr(call_times(fn, rounds))[0] * 1e3


def bench_folder(folder: Path, threads: int, rounds: int) -> list[dict]:
    meta = json.loads((folder / "meta.json").read_text())
    tol = meta.get("suggested_tolerance", {"rtol": 1e-3, "atol": 1e-4})
    target = f"llvm -num-cores={threads}"
    t0 = time.perf_counter()
    dyn = ziggurat.compile(str(folder / "model.onnx"), target=target, cache=False)  # the compile itself, timed
    first = time.perf_counter() - t0
    sess = _ort_session(str(folder / "model.onnx"), threads)
    rows = []
    for case in meta["cases"]:
        tag = case["tag"]
        with np.load(folder / f"inputs_{tag}.npz") as f:
            feeds = {k: f[k] for k in f.files}
        with np.load(folder / f"expected_{tag}.npz") as f:
            expected = {k: f[k] for k in f.files}
        args = [feeds[n] for n in dyn.input_names]
        before = dyn.compiles
        out = dyn(*args)
        compiled_at_call = dyn.compiles - before
        err = max(float(np.max(np.abs(o - expected[n]))) for n, o in zip(dyn.output_names, out))
        ok = all(np.allclose(o, expected[n], rtol=tol["rtol"], atol=tol["atol"]) for n, o in zip(dyn.output_names, out))
        binding = dyn.bind({n: a.shape for n, a in zip(dyn.input_names, args)})
        t0 = time.perf_counter()
        static = ziggurat.compile(fix_shapes(str(folder / "model.onnx"), binding), target=target, cache=False)
        static_s = time.perf_counter() - t0
        ins = [np.ascontiguousarray(a) for a in args]
        # a bucket at this shape (`shapes=`; no generic model): the DynamicModel's dispatch to its variant
        bucketed = ziggurat.compile(str(folder / "model.onnx"), target=target, shapes=binding, on_new_shape="error")
        times = {"dynamic": [], "static": [], "ort": [], "bucket": []}
        for _ in range(3):
            for key, fn in (("dynamic", lambda: dyn(*ins)), ("static", lambda: static(*ins)),
                            ("ort", lambda: sess.run(None, feeds)), ("bucket", lambda: bucketed(*ins))):
                time.sleep(SETTLE_S)
                times[key].append(_timed(fn, max(2, rounds // 3)))
        generic = dyn.generic
        row = {"model": folder.name, "shape": tag, "binding": binding, "generic": generic is not None,
               "compiled_at_call": compiled_at_call, "max_error": err, "within_tolerance": ok,
               "dynamic_ms": float(np.median(times["dynamic"])), "static_ms": float(np.median(times["static"])),
               "ort_ms": float(np.median(times["ort"])), "static_compile_s": static_s,
               "bucket_ms": float(np.median(times["bucket"])),
               "arena_dynamic": (generic.arena_bytes + generic.dynamic_bytes(binding) if generic is not None
                                 else dyn.variant(binding).arena_bytes),
               "arena_static": static.arena_bytes, "first_compile_s": first}
        row["dynamic_vs_static"] = row["dynamic_ms"] / row["static_ms"]
        row["bucket_vs_static"] = row["bucket_ms"] / row["static_ms"]
        rows.append(row)
        print(row, flush=True)
    return rows


def format_table(rows: list[dict]) -> str:
    lines = ["| model | shape | generic | compiled at the call | max error | within tol. | dynamic (ms) | static (ms) | "
             "dynamic / static | bucket (ms) | bucket / static | ORT (ms) | static compile (s) | "
             "arena generic / static (bytes) |",
             "|" + "---|" * 14]
    for r in rows:
        lines.append(f"| {r['model']} | {r['shape']} | {'yes' if r['generic'] else 'no'} | {r['compiled_at_call']} | "
                     f"{r['max_error']:.1e} | {'yes' if r['within_tolerance'] else 'NO'} | {r['dynamic_ms']:.3f} | "
                     f"{r['static_ms']:.3f} | {r['dynamic_vs_static']:.3f} | {r['bucket_ms']:.3f} | "
                     f"{r['bucket_vs_static']:.3f} | {r['ort_ms']:.3f} | "
                     f"{r['static_compile_s']:.2f} | {r['arena_dynamic']} / {r['arena_static']} |")
    for model in dict.fromkeys(r["model"] for r in rows):
        sel = [r for r in rows if r["model"] == model]
        ratios = [r["dynamic_vs_static"] for r in sel]
        buckets = [r["bucket_vs_static"] for r in sel]
        lines.append(f"\n{model}: one compile {sel[0]['first_compile_s']:.2f} s; median dynamic / static "
                     f"{float(np.median(ratios)):.3f}, bucket / static {float(np.median(buckets)):.3f} "
                     f"over {len(ratios)} shapes")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=str(DEFAULT_MODELS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args(argv)
    rows = []
    for meta in sorted(Path(args.models).glob("*/meta.json")):
        if any(meta.parent.glob("inputs_*.npz")):
            rows += bench_folder(meta.parent, args.threads, args.rounds)
    table = format_table(rows)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
