"""Codegen workers: processes that optimize and compile parts of a module to object code.

LLVM holds a lock around every llvmlite call and compiles one module on one core, so code
generation in parallel needs processes. `jit_compile(..., jobs=N)` splits a large module
(split.py) into N parts; `compile_parts` sends parts 1..N-1 to workers and compiles part 0 in
this process meanwhile, then returns the N objects (jit.py links them with `load_objects`).

A worker is `python -m ziggurat.backends.llvm.codegen_worker` (its protocol: codegen_worker.py);
it exits when its stdin closes (this process exiting, killed or not). Workers start on first use and
are reused by later compiles of the process. A worker that died or answers garbage is dropped and
its part compiled here; an LLVM error in a part is a CompileError, as it would be here.

`compile_jobs()`: how many parts a model's module is cut into: `ZIGGURAT_COMPILE_JOBS` (1 turns
this off), else 2 where this process may run on two cores or more. Two, not more: the hosts this is
measured on have two cores, and the main process compiles a part too. Modules under
`MIN_SPLIT_CHARS` of IR text (about 0.1 s of LLVM) compile whole.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from ziggurat.errors import CompileError

JOBS_ENV = "ZIGGURAT_COMPILE_JOBS"
MIN_SPLIT_CHARS = 60_000

_idle: list[_Worker] = []
_lock = threading.Lock()


def compile_jobs() -> int:
    """Parts per module: ZIGGURAT_COMPILE_JOBS, else min(2, the cores this process may use)."""
    raw = os.environ.get(JOBS_ENV, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise CompileError(f"{JOBS_ENV}={raw!r} is not a number of jobs; use a whole number >= 1 (1: no codegen workers)")
        return int(raw)
    return min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


class _Worker:
    """One worker process and its pipes."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "ziggurat.backends.llvm.codegen_worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def compile(self, text: str, options: Any) -> tuple[bool, bytes]:
        """Sends one part, waits for the reply: (ok, object code or LLVM's message). OSError or
        ValueError when the worker is gone or answers garbage."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        data = text.encode()
        head = {"cpu": options.cpu, "features": options.features, "opt_level": options.opt_level, "nbytes": len(data)}
        self.proc.stdin.write(json.dumps(head).encode() + b"\n" + data)
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline() or b"null")
        if not isinstance(reply, dict) or not isinstance(reply.get("nbytes"), int):
            raise ValueError("the codegen worker answered no reply")
        body = self.proc.stdout.read(reply["nbytes"])
        if len(body) != reply["nbytes"]:
            raise ValueError("the codegen worker's reply was cut short")
        return bool(reply.get("ok")), body

    def close(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


def _take(n: int) -> list[_Worker]:
    """`n` workers, idle ones first; fewer when no more can be started (their parts compile here)."""
    with _lock:
        alive = [w for w in _idle if w.proc.poll() is None]
        _idle[:] = alive[n:]
        taken = alive[:n]
    try:
        while len(taken) < n:
            taken.append(_Worker())
    except OSError:
        pass
    return taken


def _give_back(workers: list[_Worker]) -> None:
    with _lock:
        _idle.extend(workers)


@atexit.register
def shutdown() -> None:
    """Closes the idle workers (each exits when its stdin closes)."""
    with _lock:
        workers, _idle[:] = list(_idle), []
    for w in workers:
        w.close()


def compile_parts(parts: list[str], options: Any, emit_jit_object: Callable[[str, str, str, int], bytes]
                  ) -> list[bytes]:
    """Object code for each of `parts` (LLVM IR texts), in order: parts 1.. in workers, part 0 here
    with `emit_jit_object` (jit.py's), at the same time; a part whose worker failed is compiled here
    afterwards."""
    workers = _take(len(parts) - 1)
    results: dict[int, tuple[bool, bytes] | BaseException] = {}

    def run(k: int, w: _Worker) -> None:
        try:
            results[k] = w.compile(parts[k], options)
        except (OSError, ValueError) as err:
            results[k] = err

    threads = [threading.Thread(target=run, args=(k + 1, w), daemon=True) for k, w in enumerate(workers)]
    for t in threads:
        t.start()
    try:
        here = emit_jit_object(parts[0], options.cpu, options.features, options.opt_level)
    finally:
        for t in threads:
            t.join()
        healthy = [w for k, w in enumerate(workers) if isinstance(results.get(k + 1), tuple)]
        for w in workers:
            if w not in healthy:
                w.proc.kill()
        _give_back(healthy)
    objects = [here]
    for k in range(1, len(parts)):
        got = results.get(k)
        if not isinstance(got, tuple):  # no worker, or it died: compile the part here
            objects.append(emit_jit_object(parts[k], options.cpu, options.features, options.opt_level))
        elif got[0]:
            objects.append(got[1])
        else:  # LLVM refused the part: the error compiling it here would give
            raise CompileError(f"llvm backend: {got[1].decode(errors='replace')}")
    return objects
