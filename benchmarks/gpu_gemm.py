"""GEMM on a CUDA GPU: the GPU GEMM template (backends/cuda/gemm.py) in TFLOP/s, against cuBLAS.

```
python -m ziggurat.benchmarks.gpu_gemm pack .gpu/gemm        # here: compile the MatMul models
python -m ziggurat.benchmarks.gpu_gemm run .gpu/gemm         # on the GPU machine
```

Each case is an ONNX MatMul of two inputs (no weights), f32 or f16. `run` draws fresh normal
inputs, checks ||C - ref|| / ||ref|| on 64 random rows against float64 numpy (f32 arithmetic lands
far under 1e-5; f16 results are rounded to f16: about 3e-4), and reports the median of 20
CUDA-event timed launches of the whole model as TFLOP/s and, where the model has more kernels
than the product (f16: the cast of the f32 result back to f16), of the product's kernel alone;
where PyTorch is installed, torch.matmul on the same shapes and dtype with TF32 off (cuBLAS) is
the reference.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

ARCH = "sm_90"
# (batch, m, n, k): the acceptance size, then the shapes of transformer layers (projections, attention)
# (batch, m, n, k, B transposed, float16): the acceptance sizes, then transformer shapes (projections,
# Q K^T, odd sizes); float16 cases run on tensor cores where the shape fits backends/cuda/mma.py
CASES = [(1, 4096, 4096, 4096, 0, 0), (1, 2048, 2048, 2048, 0, 0), (1, 1024, 1024, 1024, 0, 0),
         (1, 2048, 3072, 768, 0, 0), (1, 128, 1024, 256, 0, 0), (16, 512, 512, 64, 1, 0), (1, 1000, 999, 300, 1, 0),
         (1, 4096, 4096, 4096, 0, 1), (1, 8192, 8192, 8192, 0, 1), (1, 2048, 3072, 768, 0, 1), (8, 512, 512, 64, 0, 1),
         (1, 1000, 999, 300, 0, 1)]


def _model(batch: int, m: int, n: int, k: int, bt: int, half: int) -> bytes:
    """C = A B, or C = A Transpose(B) with B given as n x k (`bt`), in float32 or float16 (`half`)."""
    from onnx import TensorProto, helper

    dt = TensorProto.FLOAT16 if half else TensorProto.FLOAT
    lead = [batch] if batch > 1 else []
    nodes = [helper.make_node("MatMul", ["a", "bt" if bt else "b"], ["c"])]
    if bt:
        nodes.insert(0, helper.make_node("Transpose", ["b"], ["bt"], perm=[*range(len(lead)), len(lead) + 1, len(lead)]))
    g = helper.make_graph(nodes, "gemm",
                          [helper.make_tensor_value_info("a", dt, lead + [m, k]),
                           helper.make_tensor_value_info("b", dt, lead + ([n, k] if bt else [k, n]))],
                          [helper.make_tensor_value_info("c", dt, lead + [m, n])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def pack(out: Path, arch: str) -> None:
    import ziggurat

    out.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        model = ziggurat.compile(_model(*case), target=f"cuda -arch={arch}")
        doc = {"case": case, "program": model.program.to_json(), "inputs": [s.to_json() for s in model.inputs],
               "outputs": [s.to_json() for s in model.outputs]}
        (out / ("gemm_" + "x".join(map(str, case[:4])) + ("_bt" if case[4] else "") + ("_f16" if case[5] else "")
                + ".json")).write_text(json.dumps(doc))
        print("packed", case, [(s.kernel, s.grid) for s in model.program.launches], flush=True)


def run(root: Path) -> list[dict]:
    from ziggurat.runtime.cuda import CudaModel
    from ziggurat.runtime.cuda_program import GpuProgram
    from ziggurat.signature import TensorSpec

    rows = []
    rng = np.random.default_rng()
    for path in sorted(root.glob("gemm_*.json")):
        doc = json.loads(path.read_text())
        batch, m, n, k, bt, half = doc["case"]
        row: dict = {"case": f"{batch}x{m}x{n}x{k}" + ("xBt" if bt else "") + (" f16" if half else " f32")}
        model = CudaModel(GpuProgram.from_json(doc["program"]), [TensorSpec.from_json(s) for s in doc["inputs"]],
                          [TensorSpec.from_json(s) for s in doc["outputs"]], [])
        try:
            dt = np.float16 if half else np.float32
            a = rng.standard_normal([s for s in model.inputs[0].shape]).astype(dt)
            b = rng.standard_normal([s for s in model.inputs[1].shape]).astype(dt)
            (c,) = model(a, b)
            a3, b3, c3 = (x.reshape(-1, *x.shape[-2:]).astype(np.float32) for x in (a, b, c))
            rows_ = rng.choice(m, size=min(64, m), replace=False)
            b64 = b3.astype(np.float64)
            ref = np.matmul(a3[:, rows_].astype(np.float64), b64.transpose(0, 2, 1) if bt else b64)
            row["rel_err"] = float(f"{np.linalg.norm(c3[:, rows_] - ref) / np.linalg.norm(ref):.3g}")
            ms = statistics.median(model.time_device(20))
            flop = 2 * batch * m * n * k
            row.update(ms=round(ms, 4), tflops=round(flop / ms / 1e9, 2), launches=len(model.program.launches))
            if len(model.program.launches) > 1:  # the product's kernel alone (without the casts around it)
                row["kernel_tflops"] = round(flop / _kernel_ms(doc, model) / 1e9, 2)
        except Exception as e:  # noqa: BLE001 - one case's failure is a row
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        finally:
            model.close()
        row.update(_cublas(batch, m, n, k, half))
        rows.append(row)
        print("ROW", json.dumps(row), flush=True)
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "gpu_gemm.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{'case':26} {'rel err':>9} {'ms':>9} {'TFLOP/s':>8} {'kernel':>8} {'cuBLAS TFLOP/s':>15}")
    for r in rows:
        print(f"{r['case']:26} {r.get('rel_err', '-'):>9} {r.get('ms', '-'):>9} {r.get('tflops', '-'):>8} "
              f"{r.get('kernel_tflops', '-'):>8} {r.get('cublas_tflops', '-'):>15}")
    return rows


def _kernel_ms(doc: dict, model) -> float:
    """Median CUDA-event milliseconds of the program's GEMM-template launch alone."""
    from ziggurat.runtime.cuda import CudaModel
    from ziggurat.runtime.cuda_program import GpuProgram

    program = model.program
    step = next(s for s in program.launches if "matmul" in s.kernel)
    alone = GpuProgram(program.ptx, program.arch, [step], program.arena_bytes, program.const_names)
    with CudaModel(alone, model.inputs, [*model.outputs, *model.checks], []) as m:
        return statistics.median(m.time_device(20))


def _cublas(batch: int, m: int, n: int, k: int, half: int = 0) -> dict:
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(batch, m, k, device="cuda", dtype=torch.float16 if half else torch.float32)
    b = torch.randn(batch, k, n, device="cuda", dtype=a.dtype)
    for _ in range(3):
        torch.matmul(a, b)
    times = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.matmul(a, b)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    ms = statistics.median(times)
    return {"cublas_ms": round(ms, 4), "cublas_tflops": round(2 * batch * m * n * k / ms / 1e9, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ziggurat.benchmarks.gpu_gemm", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="compile the GEMM cases for the GPU (needs ziggurat's compiler)")
    p.add_argument("out", type=Path)
    p.add_argument("--arch", default=ARCH)
    r = sub.add_parser("run", help="time the packed cases on the GPU")
    r.add_argument("root", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "pack":
        pack(args.out, args.arch)
        return 0
    rows = run(args.root)
    return 0 if rows and all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
