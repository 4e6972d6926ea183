"""int8 GEMM through the tensorized VNNI kernel against numpy's fp32 GEMM.

    python -m benchmarks.int8_gemm [--sizes 512,1024] [--threads 1,2] [--rounds 15] [--tile 8x2]

For each size and thread count, in one run: the median time of ziggurat's
u8 x s8 -> i32 GEMM (lowering/qgemm.py: B packed `[K/4][N*4]`, register
blocks of MR x 16*NV, every 16x4 step tensorized onto `vpdpbusd`), checked
exactly against numpy's int32 product, and of numpy's fp32 GEMM (OpenBLAS
limited to the same threads in a child process). The ratio is int8 ops per
second over numpy's fp32 flops per second; issue 8 asks for at least 3.
"""

from __future__ import annotations

import argparse
import ctypes
import time

import numpy as np

from benchmarks.run import _median_iqr, numpy_matmul_ms
from ziggurat.backends.llvm import LLVMOptions, compile_module
from ziggurat.lowering.qgemm import lower_and_schedule, pack_b, qgemm_module


def run_one(n: int, threads: int, rounds: int, mr: int, nv: int) -> dict:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (n, n)).astype(np.uint8)
    b = rng.integers(-128, 128, (n, n)).astype(np.int8)
    t0 = time.perf_counter()
    module = qgemm_module(n, n, n)
    lower_and_schedule(module, mr, nv, parallel=threads > 1)
    jm = compile_module(module, LLVMOptions(export_all=True, num_threads=threads))
    compile_s = time.perf_counter() - t0
    p = ctypes.c_void_p
    fn = jm.cfunc("qmm", None, p, p, p)
    bp = pack_b(b)
    c = np.zeros((n, n), np.int32)
    args = (a.ctypes.data, bp.ctypes.data, c.ctypes.data)
    fn(*args)
    exact = bool(np.array_equal(c, a.astype(np.int32) @ b.astype(np.int32)))
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn(*args)
        ts.append(time.perf_counter() - t)
    ms = _median_iqr(ts)[0] * 1e3
    np_ms = numpy_matmul_ms(n, threads, rounds)
    ops = 2.0 * n ** 3
    return {"n": n, "threads": threads, "compile_s": compile_s, "int8_ms": ms, "int8_gops": ops / ms / 1e6,
            "numpy_fp32_ms": np_ms, "numpy_gflops": ops / np_ms / 1e6, "ratio": np_ms / ms, "exact": exact}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="512,1024")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--tile", default="8x2", help="register block MRxNV: MR rows by NV vectors of 16 columns")
    args = ap.parse_args(argv)
    mr, nv = (int(x) for x in args.tile.split("x"))
    print("| n | threads | compile (s) | int8 VNNI (ms) | GOP/s | numpy fp32 (ms) | GFLOP/s | ratio | exact |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.sizes.split(",")):
        for th in (int(x) for x in args.threads.split(",")):
            r = run_one(n, th, args.rounds, mr, nv)
            print(f"| {n} | {th} | {r['compile_s']:.2f} | {r['int8_ms']:.2f} | {r['int8_gops']:.0f} | "
                  f"{r['numpy_fp32_ms']:.2f} | {r['numpy_gflops']:.0f} | {r['ratio']:.2f} | {r['exact']} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
