"""Python overhead of one inference: `model(x)` against the native entry call alone.

    python -m benchmarks.python_overhead [--model DIR] [--calls 2000] [--rounds 9]

Compiles the model (default ../shared/models/mlp_784_512_256_10) for one
thread, then times, in alternating rounds, `CompiledModel.__call__` and
`run_native` on prepared arrays (the ctypes call of the entry function and
nothing else). Prints the medians and their difference, the overhead.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import ziggurat

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "models" / "mlp_784_512_256_10"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=DEFAULT)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    model = ziggurat.compile(str(args.model / "model.onnx"), target="llvm -num-cores=1")
    with np.load(args.model / "inputs.npz") as f:
        inputs = [np.ascontiguousarray(f[n], dtype=np.float32) for n in model.input_names]
    outputs = [np.empty(s.shape, s.dtype) for s in model.outputs]

    def timed(fn) -> float:
        t = time.perf_counter()
        for _ in range(args.calls):
            fn()
        return (time.perf_counter() - t) / args.calls * 1e6

    native, full = [], []
    for _ in range(args.rounds):
        native.append(timed(lambda: model.run_native(inputs, outputs)))
        full.append(timed(lambda: model(*inputs)))
    n, c = float(np.median(native)), float(np.median(full))
    print(f"{args.model.name}: native entry {n:.1f} us, model(x) {c:.1f} us, Python overhead {c - n:.1f} us")


if __name__ == "__main__":
    main()
