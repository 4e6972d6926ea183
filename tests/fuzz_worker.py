"""The fuzzers' worker process and the differential comparison.

Every case runs in a worker process (multiprocessing, 'spawn'), so a
segfault or a hang in ziggurat (or in the native code it builds) is caught
and reported instead of taking the fuzzer down. The parent (`Worker`) sends
one request at a time and waits for the answer with a timeout; a worker that
dies or does not answer in time is replaced by a fresh one.

Requests (dicts): {"op": "zig", "model": bytes, "feeds": dict | None} compiles
the model with `ziggurat.compile` and runs it (on `feeds`, or on random inputs
made from the compiled model's input specs); {"op": "ort", "model", "feeds"}
runs onnxruntime (CPUExecutionProvider). The onnxruntime run is a separate
request, so a crash of the reference is never taken for one of ziggurat.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import traceback
import warnings
from typing import Any

import numpy as np

MEMORY_LIMIT = 6 << 30
"""Address-space limit of a worker: a model that asks for absurd memory gets a
MemoryError instead of taking the machine down."""

RECYCLE_AFTER = 300
"""Requests after which a worker is replaced (JIT engines accumulate)."""


def random_feeds(specs: list[tuple[str, tuple[int, ...], str]], seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs for (name, shape, dtype) specs: floats in [-2, 2], ints in [0, 3), random bools."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, shape, dtype in specs:
        dt = np.dtype(dtype)
        if dt.kind == "f":
            feeds[name] = rng.uniform(-2, 2, shape).astype(dt)
        elif dt.kind in "iu":
            feeds[name] = rng.integers(0, 3, shape).astype(dt)
        elif dt.kind == "b":
            feeds[name] = rng.integers(0, 2, shape).astype(bool)
        else:
            feeds[name] = np.zeros(shape, dt)
    return feeds


def _describe(exc: BaseException) -> dict[str, Any]:
    return {"type": f"{type(exc).__module__}.{type(exc).__qualname__}", "msg": str(exc)[:2000],
            "tb": "".join(traceback.format_exception(exc))[-6000:]}


def _run_zig(req: dict) -> dict:
    import ziggurat
    from ziggurat.errors import ZigguratError

    phase = "compile"
    try:
        m = ziggurat.compile(req["model"])
        phase = "run"
        feeds = req.get("feeds")
        if feeds is None:
            inputs = m.input_specs(dict.fromkeys(m.symbols, 1)) if hasattr(m, "symbols") else m.inputs  # dynamic: 1
            specs = [(s.name, tuple(int(d) for d in s.shape), np.dtype(s.dtype).str) for s in inputs]
            if sum(int(np.prod(s[1])) for s in specs) > 1 << 24:
                return {"status": "skipped", "why": "inputs too large"}
            feeds = random_feeds(specs, req.get("seed", 0))
        outs = m(dict(feeds))
        return {"status": "ok", "outputs": [np.array(o) for o in outs], "names": list(m.output_names),
                "feeds": feeds}
    except ZigguratError as exc:
        return {"status": "error", "phase": phase, **_describe(exc)}
    except Exception as exc:  # noqa: BLE001 - the finding we look for
        return {"status": "unclean", "phase": phase, **_describe(exc)}


def _run_ort(req: dict) -> dict:
    import onnxruntime as ort

    try:
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        opts.intra_op_num_threads = 1
        if not req.get("optimize", True):  # the graph as written: onnxruntime's fusions left out
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(req["model"], opts, providers=["CPUExecutionProvider"])
        outs = sess.run(None, req["feeds"])
        return {"status": "ok", "outputs": [np.array(o) for o in outs],
                "names": [o.name for o in sess.get_outputs()]}
    except Exception as exc:  # noqa: BLE001 - the reference rejects the model
        return {"status": "error", **_describe(exc)}


def ort_fusion_deviates(worker, data: bytes, feeds, got: list, rtol: float, atol: float) -> bool:
    """Whether ziggurat's outputs `got`, which differ from optimized onnxruntime's, match onnxruntime
    run on the graph as written (graph optimizations off): then onnxruntime's own rewrites changed
    the result (its Add + LayerNormalization fusion ignores an `axis` other than -1: seed 2030)."""
    plain = worker.call({"op": "ort", "model": data, "feeds": feeds, "optimize": False})
    return plain["status"] == "ok" and compare(got, plain["outputs"], rtol, atol) is None


def _serve(conn) -> None:
    os.environ.setdefault("ZIGGURAT_CACHE", "0")
    warnings.simplefilter("ignore")  # ShapeMismatchWarning and the like: the comparison judges the results
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    except (ImportError, ValueError, OSError):
        pass
    import onnxruntime  # noqa: F401 - imported before any request, not inside its timeout

    import ziggurat

    ziggurat.compile  # noqa: B018 - loads the compiler (xDSL, llvmlite) now
    conn.send({"status": "ready"})
    while True:
        try:
            req = conn.recv()
        except EOFError:
            return
        if req is None:
            return
        try:
            res = _run_zig(req) if req["op"] == "zig" else _run_ort(req)
        except BaseException as exc:  # noqa: BLE001 - e.g. a MemoryError while describing a result
            res = {"status": "unclean", "phase": "worker", **_describe(exc)}
        try:
            conn.send(res)
        except Exception as exc:  # noqa: BLE001 - an unpicklable result
            conn.send({"status": "unclean", "phase": "worker", **_describe(exc)})


class Worker:
    """A worker process that answers requests, replaced when it dies or hangs."""

    def __init__(self, timeout: float = 60.0):
        self.timeout = timeout
        self.proc = None
        self.conn = None
        self.served = 0

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(180):
            self.close()
            raise RuntimeError("fuzz worker did not start")
        self.conn.recv()
        self.served = 0

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.conn.send(None)
            except (OSError, ValueError, BrokenPipeError):
                pass
            self.proc.join(2)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join()
            self.conn.close()
        self.proc = self.conn = None

    def call(self, req: dict, timeout: float | None = None) -> dict:
        """The worker's answer, or {"status": "hang"} / {"status": "crash"}."""
        if self.proc is None or not self.proc.is_alive() or self.served >= RECYCLE_AFTER:
            self.close()
            self._start()
        self.served += 1
        self.conn.send(req)
        try:
            ready = self.conn.poll(timeout or self.timeout)
        except (OSError, EOFError):
            ready = True
        if not ready:
            self.proc.kill()
            self.proc.join()
            self.close()
            return {"status": "hang", "type": "timeout", "msg": f"no answer in {timeout or self.timeout:.0f} s"}
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(5)
            code = self.proc.exitcode
            self.close()
            return {"status": "crash", "type": f"exit {code}", "msg": f"worker died (exit code {code})"}


def compare(got: list[np.ndarray], want: list[np.ndarray], rtol: float, atol: float) -> str | None:
    """Why `got` differs from `want` (onnxruntime's outputs), or None.

    Integers and bools compare exactly; floats with the tolerances, NaN and
    infinities by position."""
    if len(got) != len(want):
        return f"{len(got)} outputs, onnxruntime has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype != w.dtype:
            return f"output {i}: dtype {g.dtype}, onnxruntime {w.dtype}"
        if g.shape != w.shape:
            return f"output {i}: shape {g.shape}, onnxruntime {w.shape}"
        if w.dtype.kind != "f":
            bad = g != w
            if bad.any():
                idx = tuple(int(j) for j in np.argwhere(bad)[0])
                return f"output {i}: {int(bad.sum())} of {w.size} differ, first at {idx}: {g[idx]} vs {w[idx]}"
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        tol = rtol if w.dtype != np.float16 else max(rtol, 2e-3)
        finite = np.isfinite(w64)
        bad = ~finite & ~((np.isnan(w64) & np.isnan(g64)) | (g64 == w64))
        bad |= finite & ~(np.abs(g64 - w64) <= atol + tol * np.abs(w64))
        if bad.any():
            idx = tuple(int(j) for j in np.argwhere(bad)[0])
            err = np.abs(g64 - w64)[finite]
            worst = float(err.max()) if err.size else float("nan")
            return (f"output {i}: {int(bad.sum())} of {w.size} differ, first at {idx}: {g[idx]!r} vs {w[idx]!r}"
                    f" (max abs err {worst:.3g}, rtol {tol}, atol {atol:.3g})")
    return None
