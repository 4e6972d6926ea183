"""Worker processes that the autotuner owns: a crash or a hang costs one task, never the tuner.

A `Worker` is one child process (multiprocessing context `forkserver` by
default, or `spawn`; never `fork`, which hangs in libgomp once the parent
has run a parallel region) talking to the parent over a `Pipe`. `call` sends
one picklable task (a top-level function and its argument) and waits for the
answer at most `timeout` seconds. When the child dies (a segfault in a
candidate's code) or overruns the timeout (it is killed), the call returns a
`TaskResult` with status `crash` or `timeout` and the next call starts a
fresh child. `WorkerPool` drives several workers from threads of the parent.

```python
pool = WorkerPool(2)
results = pool.map(some_module.task_fn, [arg1, arg2, arg3], timeout=10.0)
pool.close()
```
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import signal
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ziggurat.errors import TuningError

START_METHODS = ("forkserver", "spawn")
DEFAULT_PRELOAD = ["numpy", "ziggurat.autotune.measure"]
STARTUP_TIMEOUT_S = 120.0


@dataclass
class TaskResult:
    """The outcome of one task: status `ok` (value set), `error` (an exception), `crash` or `timeout`."""

    status: str
    value: Any = None
    message: str = ""


def get_context(method: str = "forkserver", preload: Sequence[str] | None = None) -> mp.context.BaseContext:
    """A multiprocessing context that is safe next to libgomp (never `fork`)."""
    if method not in START_METHODS:
        raise ValueError(f"start method must be one of {START_METHODS}, got '{method}' (fork hangs in libgomp)")
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(list(DEFAULT_PRELOAD if preload is None else preload))
    return ctx


def _worker_main(conn) -> None:
    """Child loop: answer ('ok', value) or ('error', text) for each (fn, arg) until None arrives."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when a worker stops
    conn.send(("ready", None))
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        fn, arg = task
        try:
            conn.send(("ok", fn(arg)))
        except BaseException as err:  # noqa: BLE001 - every failure of a task is reported, not raised
            detail = "".join(traceback.format_exception_only(type(err), err)).strip()
            conn.send(("error", detail))


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "worker process died"
    if code < 0:
        try:
            return f"worker process killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"worker process killed by signal {-code}"
    return f"worker process exited with status {code}"


class Worker:
    """One owned child process; restarted on the next call after it dies or is killed.

    `restarts` counts the children replaced after a crash or a timeout.
    """

    def __init__(self, ctx: mp.context.BaseContext | None = None):
        self.ctx = ctx or get_context()
        self.proc = None
        self.conn = None
        self.restarts = 0

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def start(self) -> None:
        if self.alive:
            return
        if self.proc is not None:
            self.restarts += 1
        self._discard()
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker_main, args=(child,), daemon=True)
        proc.start()
        child.close()
        if not parent.poll(STARTUP_TIMEOUT_S):
            proc.kill()
            proc.join()
            raise TuningError(f"a tuning worker did not start within {STARTUP_TIMEOUT_S:.0f} s; "
                              "the machine may be overloaded")
        try:
            parent.recv()
        except (EOFError, OSError):
            proc.join()
            raise TuningError(f"a tuning worker failed to start: {_describe_exit(proc.exitcode)}") from None
        self.proc, self.conn = proc, parent

    def _discard(self) -> None:
        if self.conn is not None:
            self.conn.close()
        if self.proc is not None:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join()
        self.proc, self.conn = None, None

    def call(self, fn: Callable[[Any], Any], arg: Any, timeout: float) -> TaskResult:
        """Runs `fn(arg)` in the child, waiting at most `timeout` seconds for the answer."""
        self.start()
        assert self.conn is not None and self.proc is not None
        try:
            self.conn.send((fn, arg))
            ready = self.conn.poll(timeout)
        except (BrokenPipeError, OSError):
            ready = True  # died before reading: recv below reports it
        if not ready:
            self._discard()
            self.restarts += 1
            return TaskResult("timeout", message=f"no answer within {timeout:g} s; the worker was killed")
        try:
            status, value = self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(timeout=5)
            message = _describe_exit(self.proc.exitcode)
            self._discard()
            self.restarts += 1
            return TaskResult("crash", message=message)
        if status == "ok":
            return TaskResult("ok", value=value)
        return TaskResult("error", message=str(value))

    def close(self) -> None:
        if self.alive and self.conn is not None:
            try:
                self.conn.send(None)
                self.proc.join(timeout=2)  # type: ignore[union-attr]
            except OSError:
                pass
        self._discard()


class WorkerPool:
    """`n` owned workers; `map` runs tasks on them concurrently (one task per worker at a time)."""

    def __init__(self, n: int = 1, ctx: mp.context.BaseContext | None = None):
        if n < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {n}")
        self.ctx = ctx or get_context()
        self.workers = [Worker(self.ctx) for _ in range(n)]
        self._free: queue.Queue[Worker] = queue.Queue()
        for w in self.workers:
            self._free.put(w)

    def _one(self, fn: Callable[[Any], Any], arg: Any, timeout: float) -> TaskResult:
        worker = self._free.get()
        try:
            return worker.call(fn, arg, timeout)
        finally:
            self._free.put(worker)

    def map(self, fn: Callable[[Any], Any], args: Sequence[Any], timeout: float) -> list[TaskResult]:
        """One TaskResult per argument, in order."""
        if len(self.workers) == 1 or len(args) <= 1:
            return [self._one(fn, a, timeout) for a in args]
        with ThreadPoolExecutor(len(self.workers)) as ex:
            return list(ex.map(lambda a: self._one(fn, a, timeout), args))

    @property
    def restarts(self) -> int:
        return sum(w.restarts for w in self.workers)

    def close(self) -> None:
        for w in self.workers:
            w.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
