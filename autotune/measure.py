"""Measuring candidates: a Builder compiles them, a Runner times and checks them.

A candidate is plain, picklable data: a `MeasureInput` holds the MLIR text of
a loop-level kernel module, the kernel's name, its argument shapes (float32,
destination-passing: the last `num_outputs` arguments are outputs), the
passes still to run before the LLVM backend (e.g. `convert-loop-to-hw`), and
optionally the untuned kernel's text as the `reference` for a correctness
check.

* `LocalBuilder` compiles candidates in parallel worker processes: parse,
  run `pipeline`, translate with `export_all=True` and link a shared library
  (`emit_shared_library`) in a build directory it owns. A failure anywhere is
  a `build_error` result, a crash of the compiler a `crash` result.
* `LocalRunner` measures each build in one isolated worker process (one
  exclusive runner per measured machine): it loads the library, fills the
  inputs from a seeded generator, checks the outputs against the reference
  kernel's (`wrong_result` when they differ), then times it TVM-style:
  `warmup` calls, then `repeat` timings of `number` calls each, with `number`
  raised until one repeat lasts at least `min_repeat_ms`. A segfault is a
  `crash` result, an overrun of `timeout` a `timeout` result; either way the
  worker is replaced and measuring goes on. `timeout` bounds the whole
  measurement of one candidate (check, warm-up, calibration, repeats), so set
  it well above `(warmup + 2 + repeat * number)` times the slowest call you
  care about. With `slow_s` in the config (the tuner sets it to 3x the best cost so
  far), a candidate whose first warm-up call takes longer is timed by that one call only. Outputs are compared with `np.allclose(rtol, atol)`; output
  buffers start as NaN so an element a candidate forgets to write is caught.
  With `rotate_bytes`, the timed calls rotate over copies of the arguments
  (`LocalRunner`), so they read their operands from L3 rather than L2.

Scripts that create a builder or runner need the usual multiprocessing guard
(`if __name__ == "__main__":`), since worker processes re-import `__main__`.

Workers use the `forkserver` start method (`spawn` also works), never `fork`.

```python
from ziggurat.autotune import LocalBuilder, LocalRunner, MeasureInput, to_record

inp = MeasureInput(mlir=text, func="dense_0", arg_shapes=((1, 784), (784, 512), (1, 512)),
                   pipeline="convert-loop-to-hw{vector-width=16}", reference=untuned_text)
with LocalBuilder(n_parallel=2) as builder, LocalRunner(timeout=10) as runner:
    builds = builder.build([inp])
    results = runner.run([inp], builds)
record = to_record(inp, results[0], target="llvm")
```
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ziggurat.database import TuningRecord, WorkloadKey
from ziggurat.autotune.workers import TaskResult, WorkerPool, get_context
from ziggurat.runtime.executor import aligned_copy  # 64-byte aligned, as the kernels' vector loads assume


@dataclass(frozen=True)
class MeasureInput:
    """One candidate to measure (picklable plain data)."""

    mlir: str
    func: str
    arg_shapes: tuple[tuple[int, ...], ...]
    num_outputs: int = 1
    pipeline: str = ""
    reference: str | None = None
    trace: Any = None
    workload: WorkloadKey | None = None
    num_threads: int = 1
    target: str = ""  # the code-generation target (empty: the default target); -num-cores comes from num_threads

    @property
    def build_target(self) -> str:
        """The target string the candidate is compiled for, with its thread count."""
        from ziggurat.target import Target

        return str(Target.parse(self.target or "llvm").with_threads(self.num_threads))  # the tuner's threads

    def __post_init__(self) -> None:
        object.__setattr__(self, "arg_shapes", tuple(tuple(int(d) for d in s) for s in self.arg_shapes))
        if not 1 <= self.num_outputs <= len(self.arg_shapes):
            raise ValueError(f"num_outputs must be in 1..{len(self.arg_shapes)}, got {self.num_outputs}")

    @property
    def key(self) -> WorkloadKey:
        """The workload: given, or the hash of the reference (else the candidate) text."""
        return self.workload or WorkloadKey.from_text(self.reference or self.mlir, self.func)


@dataclass
class BuildResult:
    """A built candidate: a shared library path, or an error (`build_error` / `crash` / `timeout`)."""

    path: str | None
    reference_path: str | None = None
    error: str = "ok"
    message: str = ""
    seconds: float = 0.0


@dataclass
class MeasureResult:
    """Costs in seconds per call (one per repeat), or an error code and message."""

    costs: list[float] = field(default_factory=list)
    error: str = "ok"
    message: str = ""
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    started: float = field(default_factory=time.time)

    @property
    def mean(self) -> float:
        return sum(self.costs) / len(self.costs) if self.error == "ok" and self.costs else float("inf")

    @property
    def median(self) -> float:
        return float(np.median(self.costs)) if self.error == "ok" and self.costs else float("inf")


@runtime_checkable
class Builder(Protocol):
    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]: ...


@runtime_checkable
class Runner(Protocol):
    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]: ...


# ---------------------------------------------------------------- build (in workers)


def _build_task(arg: tuple[str, str, str, str, str]) -> str:
    """Worker side of the builder: MLIR text -> shared library at `path`; returns the path."""
    from xdsl.parser import Parser

    from ziggurat.backends.llvm import LLVMOptions, emit_shared_library, translate_module
    from ziggurat.compiler import parse_pipeline, run_passes
    from ziggurat.dialects import make_context
    from ziggurat.errors import CompileError

    text, func, pipeline, target, path = arg
    try:
        module = Parser(make_context(), text).parse_module()
        module.verify()
    except Exception as err:  # noqa: BLE001 - a parse or verify failure of a candidate is a build error
        raise CompileError(f"candidate kernel '{func}' does not parse or verify: {str(err).strip()[:2000]}") from None
    run_passes(module, parse_pipeline(pipeline))
    options = LLVMOptions.for_target(target, export_all=True)
    llvm_module, info = translate_module(module, options)
    if func not in info.exported:
        raise CompileError(f"candidate module has no kernel '{func}' (it defines {info.exported})")
    tmp = f"{path}.{os.getpid()}.tmp"  # a build killed mid-link never leaves a library at `path`
    emit_shared_library(llvm_module, tmp, options)
    os.replace(tmp + ".json", path + ".json")
    os.replace(tmp, path)
    return path


def _digest(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:20]


class LocalBuilder:
    """Compiles candidates on `n_parallel` owned worker processes into a build directory."""

    def __init__(self, n_parallel: int = 2, timeout: float = 120.0, build_dir: str | None = None,
                 start_method: str = "forkserver"):
        self.timeout = timeout
        self._own_dir = build_dir is None
        self.build_dir = build_dir or tempfile.mkdtemp(prefix="ziggurat-build-")
        self.pool = WorkerPool(n_parallel, get_context(start_method))

    def _path(self, text: str, func: str, pipeline: str, threads: int) -> str:
        return os.path.join(self.build_dir, f"{func}-{_digest(text, func, pipeline, threads)}.so")

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        jobs: dict[str, tuple[str, str, str, str, str]] = {}
        plan = []
        for inp in inputs:
            path = self._path(inp.mlir, inp.func, inp.pipeline, inp.build_target)
            ref = None
            if inp.reference is not None:
                ref = self._path(inp.reference, inp.func, inp.pipeline, inp.build_target)
                jobs.setdefault(ref, (inp.reference, inp.func, inp.pipeline, inp.build_target, ref))
            jobs.setdefault(path, (inp.mlir, inp.func, inp.pipeline, inp.build_target, path))
            plan.append((path, ref))
        todo = [j for p, j in jobs.items() if not os.path.exists(p)]
        started = time.perf_counter()
        outcomes: dict[str, TaskResult] = {j[4]: TaskResult("ok", j[4]) for j in jobs.values()}
        for job, res in zip(todo, self.pool.map(_build_task, todo, self.timeout)):
            outcomes[job[4]] = res
        per = (time.perf_counter() - started) / max(1, len(todo))  # wall time per build, amortized
        results = []
        for path, ref in plan:
            res = outcomes[path]
            if ref is not None and outcomes[ref].status != "ok":
                results.append(BuildResult(None, None, "build_error",
                                           f"the reference kernel failed to build: {_message(outcomes[ref])}", per))
            elif res.status == "ok":
                results.append(BuildResult(path, ref, seconds=per))
            else:
                code = "build_error" if res.status == "error" else res.status
                results.append(BuildResult(None, None, code, _message(res), per))
        return results

    def close(self) -> None:
        self.pool.close()
        if self._own_dir:
            shutil.rmtree(self.build_dir, ignore_errors=True)

    def __enter__(self) -> LocalBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _message(res: TaskResult) -> str:
    return res.message or res.status


# ---------------------------------------------------------------- run (in the runner's worker)

_LIBS: dict[str, Any] = {}
_EXPECTED: dict[tuple, list[np.ndarray]] = {}
MAX_SETS = 256  # argument copies a rotation takes at most (a tiny kernel's would be thousands)


def rotate_bytes_for_host() -> int:
    """What `ziggurat tune --cache-flush` rotates over: twice the L2 of all the host's cores (2 MiB on the
    2-core Zen 1 host with 512 KiB each, below its 8 MiB L3), from sysfs; 2 MiB where sysfs says nothing."""
    try:
        text = open("/sys/devices/system/cpu/cpu0/cache/index2/size").read().strip().upper()
        l2 = int(text.rstrip("KMB")) << {"K": 10, "M": 20}.get(text[-1], 0)
    except (OSError, ValueError, IndexError):
        return 2 << 20
    return 2 * l2 * (os.cpu_count() or 1)


def _kernel(path: str, func: str, nargs: int):
    lib = _LIBS.get(path)
    if lib is None:
        lib = _LIBS[path] = ctypes.CDLL(path)
    f = getattr(lib, func)
    f.restype = None
    f.argtypes = [ctypes.c_void_p] * nargs
    return f


def _arguments(shapes: Sequence[tuple[int, ...]], num_outputs: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    n_in = len(shapes) - num_outputs
    ins = [rng.uniform(-1.0, 1.0, s).astype(np.float32) for s in shapes[:n_in]]
    return ins + [np.full(s, np.nan, np.float32) for s in shapes[n_in:]]


def _call_outputs(f, args: list[np.ndarray], num_outputs: int) -> list[np.ndarray]:
    for a in args[len(args) - num_outputs:]:
        a.fill(np.nan)
    f(*[a.ctypes.data for a in args])
    return [a.copy() for a in args[len(args) - num_outputs:]]


def _run_task(arg: dict[str, Any]) -> dict[str, Any]:
    """Worker side of the runner: check against the reference, then time. Returns costs or an error."""
    shapes, n_out, func = arg["shapes"], arg["num_outputs"], arg["func"]
    args = _arguments(shapes, n_out, arg["seed"])
    f = _kernel(arg["path"], func, len(shapes))
    if arg["reference_path"] is not None and arg["check"]:
        key = (arg["reference_path"], func, tuple(shapes), n_out, arg["seed"])
        if key not in _EXPECTED:
            ref = _kernel(arg["reference_path"], func, len(shapes))
            _EXPECTED[key] = _call_outputs(ref, _arguments(shapes, n_out, arg["seed"]), n_out)
        t0 = time.perf_counter()
        got = _call_outputs(f, args, n_out)
        first = time.perf_counter() - t0
        for i, (g, e) in enumerate(zip(got, _EXPECTED[key])):
            if not np.allclose(g, e, rtol=arg["rtol"], atol=arg["atol"]):
                bad = ~np.isclose(g, e, rtol=arg["rtol"], atol=arg["atol"])
                where = tuple(int(x) for x in np.argwhere(bad)[0])
                return {"error": "wrong_result",
                        "message": f"output {i} differs from the reference at {int(bad.sum())} of {g.size} "
                                   f"elements; first at {where}: got {g[where]!r}, expected {e[where]!r}"}
        if arg.get("slow_s") and first > arg["slow_s"]:  # the checked call says enough (see below)
            return {"error": "ok", "costs": [first], "number": 1, "message": "slow: timed once"}
    copies = _rotation(args, arg.get("rotate_bytes", 0))
    sets = [[a.ctypes.data for a in c] for c in copies]  # `copies` keeps the arrays alive while they run
    ptrs = sets[0]
    for w in range(arg["warmup"]):
        t0 = time.perf_counter()
        f(*ptrs)
        dt = time.perf_counter() - t0
        if w == 0 and arg.get("slow_s") and dt > arg["slow_s"]:
            # far slower than the best so far: one timed call says enough, and the repeats would
            # spend seconds (or the timeout) on a candidate that cannot win
            return {"error": "ok", "costs": [dt], "number": 1, "message": "slow: timed once"}
    number = arg["number"]
    min_s = arg["min_repeat_ms"] / 1000.0
    n_sets = len(sets)
    for _ in range(8):  # calibrate `number` so that one repeat lasts at least min_repeat_ms
        t0 = time.perf_counter()
        for i in range(number):
            f(*sets[i % n_sets])
        dt = time.perf_counter() - t0
        if dt >= min_s:
            break
        number = max(number + 1, math.ceil(number * min_s / max(dt, 1e-7) * 1.1))
    costs = []
    for _ in range(arg["repeat"]):
        t0 = time.perf_counter()
        for i in range(number):
            f(*sets[i % n_sets])
        costs.append((time.perf_counter() - t0) / number)
    return {"error": "ok", "costs": costs, "number": number}


def _rotation(args: list[np.ndarray], rotate_bytes: int) -> list[list[np.ndarray]]:
    """The argument lists the timed calls take in turn: `args` alone, or with `rotate_bytes`
    enough copies (at most `MAX_SETS`) that together they hold that many bytes, so each call finds
    its operands evicted from L1 and L2 by the calls before it (see `LocalRunner`)."""
    size = sum(a.nbytes for a in args)
    n = min(MAX_SETS, max(1, math.ceil(rotate_bytes / max(size, 1))))
    return [args] + [[aligned_copy(a) for a in args] for _ in range(n - 1)]


def runner_config(number: int, repeat: int, min_repeat_ms: float, warmup: int, seed: int, check: bool,
                  rtol: float, atol: float, rotate_bytes: int) -> dict[str, Any]:
    """The timing settings `_run_task` reads, checked: what `LocalRunner` and `DaskRunner` send per task."""
    if repeat < 1 or number < 1 or warmup < 0 or rotate_bytes < 0:
        raise ValueError("repeat and number must be at least 1, warmup and rotate_bytes at least 0")
    return {"number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms, "warmup": warmup,
            "seed": seed, "check": check, "rtol": rtol, "atol": atol, "rotate_bytes": rotate_bytes}


class LocalRunner:
    """Times builds one at a time in one owned, isolated worker process.

    With `rotate_bytes` > 0 (`ziggurat tune --cache-flush`), the timed calls take turns over copies
    of the arguments that together hold at least that many bytes, so no call finds its weights in
    the private caches the call before left them in: the state of a layer's weights in a model run,
    where the other layers' weights pass through L2 in between. Unlike TVM's
    `enable_cpu_cache_flush` (clflush, so every read goes to DRAM), a rotation below the L3 size
    leaves the operands in L3, where a model's weights of a few MiB stay between inferences. Use
    one setting per database: the costs of the two modes do not compare."""

    def __init__(self, timeout: float = 10.0, number: int = 1, repeat: int = 3, min_repeat_ms: float = 50.0,
                 warmup: int = 1, seed: int = 0, check: bool = True, rtol: float = 1e-4, atol: float = 1e-4,
                 start_method: str = "forkserver", rotate_bytes: int = 0):
        self.config = runner_config(number, repeat, min_repeat_ms, warmup, seed, check, rtol, atol, rotate_bytes)
        self.timeout = timeout
        self.pool = WorkerPool(1, get_context(start_method))

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        if len(inputs) != len(builds):
            raise ValueError(f"{len(inputs)} inputs but {len(builds)} builds")
        results = []
        for inp, b in zip(inputs, builds):
            started = time.time()
            if b.error != "ok" or b.path is None:
                results.append(MeasureResult(error=b.error, message=b.message, build_seconds=b.seconds,
                                             started=started))
                continue
            task = {**self.config, "path": b.path, "reference_path": b.reference_path, "func": inp.func,
                    "shapes": inp.arg_shapes, "num_outputs": inp.num_outputs}
            t0 = time.perf_counter()
            (res,) = self.pool.map(_run_task, [task], self.timeout)
            elapsed = time.perf_counter() - t0
            if res.status == "ok":
                v = res.value
                results.append(MeasureResult(v.get("costs", []), v["error"], v.get("message", ""), b.seconds,
                                             elapsed, started))
            else:
                code = "run_error" if res.status == "error" else res.status
                results.append(MeasureResult([], code, _message(res), b.seconds, elapsed, started))
        return results

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def to_record(inp: MeasureInput, result: MeasureResult, target: str) -> TuningRecord:
    """The database record of one measurement."""
    return TuningRecord(inp.key, target, inp.trace, list(result.costs), result.error, result.message,
                        started=result.started, finished=time.time())


def measure(builder: Builder, runner: Runner, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
    """Builds then runs `inputs`; one result per input, errors included."""
    return runner.run(inputs, builder.build(inputs))
