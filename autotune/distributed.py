"""Builders and runners on Dask distributed (the optional `[distributed]` extra).

`DaskBuilder` and `DaskRunner` implement the `Builder` / `Runner` protocols of
`measure.py` on the workers of a `distributed.Client`; the default stays the
local process pool (`LocalBuilder` / `LocalRunner`).

* Building: each distinct candidate is one Dask task on any worker. The task
  compiles in a child process that the Dask worker owns (the same `Worker`
  of `workers.py`: a compiler crash costs one task, never the Dask worker)
  and returns the shared library's bytes, so builders and runners need no
  shared file system.
* Running: a measurement task asks for the worker resource `measure=1`.
  Start exactly one worker with that resource on each machine that measures
  (`dask worker SCHEDULER --resources measure=1 --nworkers 1`, or
  `LocalCluster(n_workers=1, resources={"measure": 1})`): the scheduler then
  never runs two measurements on one machine at once (one exclusive runner
  per measured machine), and builds go to the other workers or between
  measurements. On the worker, the library is written to a local directory
  and timed by `measure._run_task` in a child process, with the same
  warm-up / number / repeat / min_repeat_ms, reference check, crash and
  timeout records as `LocalRunner`.

Dask workers are daemonic processes by default, and a daemonic process may
not start children: start them with `distributed.worker.daemon: False` (as
`local_cluster` below does) or with threads (`processes=False`).

Why Dask and not Ray: Dask distributed is a pure-Python package set (about
5 MB, no compiled server), starts a local cluster in a couple of seconds in
a test, and schedules by per-worker resources, which is exactly the
"one exclusive runner per machine" rule; Ray brings a large binary wheel,
a raylet and object store per node, and starts far slower on a 2-core box.

```python
from ziggurat.autotune.distributed import DaskBuilder, DaskRunner, local_cluster
with local_cluster() as client:
    tune_kernel(text, "mm_0", 16, db, builder=DaskBuilder(client), runner=DaskRunner(client))
```
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ziggurat.autotune.measure import (
    BuildResult,
    MeasureInput,
    MeasureResult,
    _build_task,
    _digest,
    _run_task,
    runner_config,
)
from ziggurat.autotune.workers import TaskResult, WorkerPool, get_context
from ziggurat.errors import TuningError

RESOURCE = "measure"
_POOLS: dict[str, WorkerPool] = {}  # per Dask worker process: one child for builds, one for runs
_DIR: list[str] = []


def _require() -> Any:
    try:
        import distributed
    except ImportError:
        raise TuningError("Dask distributed is not installed; install the extra: pip install 'ziggurat[distributed]'"
                          ) from None
    return distributed


def _pool(kind: str) -> WorkerPool:
    if kind not in _POOLS:
        _POOLS[kind] = WorkerPool(1, get_context("forkserver"))
    return _POOLS[kind]


def _local_dir() -> str:
    if not _DIR:
        _DIR.append(tempfile.mkdtemp(prefix="ziggurat-dask-"))
    return _DIR[0]


def _remote_build(job: tuple[str, str, str, str, str], timeout: float) -> tuple[str, str, bytes, bytes, float]:
    """On a Dask worker: build in an owned child process; (status, message, library bytes, json bytes, s)."""
    text, func, pipeline, target, name = job
    path = os.path.join(_local_dir(), name)
    started = time.perf_counter()
    (res,) = _pool("build").map(_build_task, [(text, func, pipeline, target, path)], timeout)
    seconds = time.perf_counter() - started
    if res.status != "ok":
        return res.status, res.message or res.status, b"", b"", seconds
    with open(path, "rb") as f, open(path + ".json", "rb") as g:
        return "ok", "", f.read(), g.read(), seconds


def _remote_run(task: dict[str, Any], lib: bytes, lib_json: bytes, ref: bytes | None, ref_json: bytes | None,
                timeout: float) -> tuple[str, str, dict[str, Any] | None]:
    """On the measuring worker: write the libraries locally and time them in an owned child process."""
    d = _local_dir()
    for key, data, meta in (("path", lib, lib_json), ("reference_path", ref, ref_json)):
        if data is None:
            continue
        p = os.path.join(d, f"run-{_digest(data)}.so")
        if not os.path.exists(p):
            with open(p + ".json", "wb") as g:
                g.write(meta or b"{}")
            with open(p + ".tmp", "wb") as f:
                f.write(data)
            os.replace(p + ".tmp", p)
        task[key] = p
    (res,) = _pool("run").map(_run_task, [task], timeout)
    return res.status, res.message, res.value


class DaskBuilder:
    """Builds candidates as Dask tasks; the libraries come back as bytes into a local build directory."""

    def __init__(self, client: Any, timeout: float = 120.0, build_dir: str | None = None):
        _require()
        self.client, self.timeout = client, timeout
        self._own_dir = build_dir is None
        self.build_dir = build_dir or tempfile.mkdtemp(prefix="ziggurat-build-")

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        jobs: dict[str, tuple[str, str, str, str, str]] = {}
        plan = []
        for inp in inputs:
            name = f"{inp.func}-{_digest(inp.mlir, inp.func, inp.pipeline, inp.build_target)}.so"
            jobs.setdefault(name, (inp.mlir, inp.func, inp.pipeline, inp.build_target, name))
            ref = None
            if inp.reference is not None:
                ref = f"{inp.func}-{_digest(inp.reference, inp.func, inp.pipeline, inp.build_target)}.so"
                jobs.setdefault(ref, (inp.reference, inp.func, inp.pipeline, inp.build_target, ref))
            plan.append((name, ref))
        todo = [j for n, j in jobs.items() if not os.path.exists(os.path.join(self.build_dir, n))]
        started = time.perf_counter()
        futures = self.client.map(_remote_build, todo, timeout=self.timeout, pure=False)
        outcomes: dict[str, TaskResult] = {n: TaskResult("ok") for n in jobs}
        for job, fut in zip(todo, futures):
            try:
                status, message, lib, meta, _ = fut.result(timeout=self.timeout + 60)
            except Exception as err:  # noqa: BLE001 - a lost Dask worker is a crash of this build
                status, message, lib, meta = "crash", f"the Dask build task failed: {err}"[:500], b"", b""
            if status == "ok":
                path = os.path.join(self.build_dir, job[4])
                with open(path + ".json", "wb") as g:
                    g.write(meta)
                with open(path, "wb") as f:
                    f.write(lib)
            outcomes[job[4]] = TaskResult(status, message=message)
        per = (time.perf_counter() - started) / max(1, len(todo))
        results = []
        for name, ref in plan:
            res = outcomes[name]
            if ref is not None and outcomes[ref].status != "ok":
                results.append(BuildResult(None, None, "build_error",
                                           f"the reference kernel failed to build: {outcomes[ref].message}", per))
            elif res.status == "ok":
                results.append(BuildResult(os.path.join(self.build_dir, name),
                                           ref and os.path.join(self.build_dir, ref), seconds=per))
            else:
                code = "build_error" if res.status == "error" else res.status
                results.append(BuildResult(None, None, code, res.message or res.status, per))
        return results

    def close(self) -> None:
        if self._own_dir:
            import shutil

            shutil.rmtree(self.build_dir, ignore_errors=True)


class DaskRunner:
    """Times builds on the Dask worker(s) holding the `measure` resource, one at a time per worker."""

    def __init__(self, client: Any, timeout: float = 10.0, number: int = 1, repeat: int = 3,
                 min_repeat_ms: float = 50.0, warmup: int = 1, seed: int = 0, check: bool = True,
                 rtol: float = 1e-4, atol: float = 1e-4, rotate_bytes: int = 0):
        _require()
        self.config = runner_config(number, repeat, min_repeat_ms, warmup, seed, check, rtol, atol, rotate_bytes)
        self.client, self.timeout = client, timeout

    @staticmethod
    def _read(path: str | None) -> tuple[bytes | None, bytes | None]:
        if path is None:
            return None, None
        with open(path, "rb") as f, open(path + ".json", "rb") as g:
            return f.read(), g.read()

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        if len(inputs) != len(builds):
            raise ValueError(f"{len(inputs)} inputs but {len(builds)} builds")
        pending = []
        for inp, b in zip(inputs, builds):
            if b.error != "ok" or b.path is None:
                pending.append((b, time.time(), None))
                continue
            task = {**self.config, "path": None, "reference_path": None, "func": inp.func,
                    "shapes": inp.arg_shapes, "num_outputs": inp.num_outputs}
            lib, meta = self._read(b.path)
            ref, ref_meta = self._read(b.reference_path)
            fut = self.client.submit(_remote_run, task, lib, meta, ref, ref_meta, self.timeout,
                                     resources={RESOURCE: 1}, pure=False)
            pending.append((b, time.time(), fut))
        results = []
        for b, started, fut in pending:
            if fut is None:
                results.append(MeasureResult(error=b.error, message=b.message, build_seconds=b.seconds,
                                             started=started))
                continue
            t0 = time.perf_counter()
            try:
                status, message, value = fut.result(timeout=self.timeout * 3 + 60)
            except Exception as err:  # noqa: BLE001 - a lost Dask worker is a crash of this measurement
                status, message, value = "crash", f"the Dask measuring task failed: {err}"[:500], None
            elapsed = time.perf_counter() - t0
            if status == "ok" and value is not None:
                results.append(MeasureResult(value.get("costs", []), value["error"], value.get("message", ""),
                                             b.seconds, elapsed, started))
            else:
                code = "run_error" if status == "error" else status
                results.append(MeasureResult([], code, message or status, b.seconds, elapsed, started))
        return results

    def close(self) -> None:
        pass


@contextlib.contextmanager
def connect(address: str) -> Iterator[Any]:
    """A Client connected to the Dask scheduler at `address` (e.g. tcp://host:8786)."""
    distributed = _require()
    with distributed.Client(address) as client:
        yield client


@contextlib.contextmanager
def local_cluster(n_workers: int = 1, threads_per_worker: int = 1) -> Iterator[Any]:
    """A Dask LocalCluster whose workers hold `measure=1` (one exclusive runner on this machine when
    n_workers is 1) and may start child processes; yields a connected Client."""
    distributed = _require()
    import dask

    with dask.config.set({"distributed.worker.daemon": False}):
        with distributed.LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                                      resources={RESOURCE: 1}, dashboard_address=None,
                                      processes=True) as cluster, distributed.Client(cluster) as client:
            yield client
