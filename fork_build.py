"""The tail of a model's lowering and its code generation in two processes (`lower_tail`).

After the module-level passes (dedupe-kernels, plan-memory) every kernel is lowered alone: the
schedule and hw passes of `FUNCTION_LOCAL` work on one `func.func` at a time, and the LLVM
translation of a kernel needs nothing but its body (weights and the arena belong to the entry
function, which passes them as memref arguments). So a forked child and this process share the
kernels: both take the next one from a queue (largest first, ops counted before scheduling)
whenever free, run the tail passes on it alone, and at the end translate and compile what they
took (the child its kernels, this process also the entry function). The two objects link into
one engine (`jit.load_objects`, as the parts of `codegen_pool` do); the model's LLVM IR text is
the two texts merged (`split.merge_modules`), so the exported library, the disk cache and
`optimized_ir` see one module. `map_floats` shares a batch of pure computations the same way
(fuse-ops' kernel prices, transforms/costs/prices.py).

Measured on two cores (AMD EPYC, AVX-512, docs/benchmarks.md "Compile time"): the tail (schedule,
hw lowering, translation, LLVM) was 55-70% of a CNN's compile; it takes about half the time now.

Nothing is lost when the child fails (an error in a pass, a crash, a kill, or no answer within
`WAIT_FACTOR` times this process's own share, at least `MIN_WAIT_S`: then it is killed): its
half is lowered here afterwards, from the kernels as they were before the fork, so an error in a pass reaches the
caller with its usual message and source node. The child runs no OpenMP region (after the parent
has run one, a forked child's first two-thread region would hang: runtime-notes, section 3), uses no
codegen worker and leaves with `os._exit` (no atexit handler of the parent runs twice).

```python
low = lower_tail(module, lambda m, v: run_passes(m, tail, verify=v), options, False, translate)
# None: lower in one process instead
objects, llvm_ir, info, child_private_bytes = low
```
"""

from __future__ import annotations

import os
import select
import signal
import struct
import time
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from xdsl.dialects import builtin, func

# Passes that transform each kernel on its own (none reads another function or the entry's body).
FUNCTION_LOCAL = frozenset({"loop-default-schedule", "loop-parallelize-outer", "loop-vectorize-innermost",
                            "convert-loop-to-hw"})
MIN_OPS = 100  # below this many kernel ops (before scheduling) the fork is not worth its few ms
_HEAD = struct.Struct("<BQQQ")  # ok, text bytes, object bytes, the child's private memory
_INDEX = struct.Struct("<I")
RunPasses = Callable[[builtin.ModuleOp, Any], object]  # (module, run_passes' verify=) -> ...
MIN_WAIT_S = 60.0  # a child is waited for at least this long after the fork ...
WAIT_FACTOR = 4.0  # ... or this many times what this process's own share took, then killed
_PIPE_BYTES = 60_000  # the queue is written whole before the fork: below a pipe's 64 KiB


def tail_start(names: list[str]) -> int:
    """Index of the first pass of the longest suffix of `names` that is all FUNCTION_LOCAL."""
    k = len(names)
    while k > 0 and names[k - 1] in FUNCTION_LOCAL:
        k -= 1
    return k


def usable() -> bool:
    """Whether this process may fork a lowering child: Linux-like fork, and more than one job allowed."""
    from ziggurat.backends.llvm.codegen_pool import compile_jobs

    return hasattr(os, "fork") and compile_jobs() > 1


def _pull(fd: int) -> int | None:
    """The next kernel's index from the shared queue (a pipe of 4-byte indices; Linux reads a pipe
    under its lock, so two readers never split a record), None once it is empty."""
    data = os.read(fd, _INDEX.size)
    return _INDEX.unpack(data)[0] if len(data) == _INDEX.size else None


def _lower_pulled(kernels: list[func.FuncOp], fd: int, run: RunPasses, verify: bool) -> builtin.ModuleOp:
    """Pulls kernels from the queue until it is empty, runs the tail passes on each alone; a module
    of the lowered kernels."""
    done = builtin.ModuleOp([])
    while (i := _pull(fd)) is not None:
        k = kernels[i]
        k.detach()
        one = builtin.ModuleOp([k])
        run(one, "stages" if verify else False)
        k.detach()
        done.body.block.add_op(k)
    return done


def _compile_part(module: builtin.ModuleOp, options: Any) -> tuple[str, bytes]:
    """Lowered kernels alone (no entry function): the translation with every kernel external, and
    LLVM's object code."""
    from ziggurat.backends.llvm.jit import emit_jit_object
    from ziggurat.backends.llvm.translate import translate_module

    ir_module, _ = translate_module(module, replace(options, export_all=True))
    text = str(ir_module)
    return text, emit_jit_object(text, options.cpu, options.features, options.opt_level)


def _child(kernels: list[func.FuncOp], queue: int, run: RunPasses, options: Any, verify: bool, fd: int) -> None:
    ok, text, obj = 0, b"", b""
    try:
        t, obj = _compile_part(_lower_pulled(kernels, queue, run, verify), options)
        ok, text = 1, t.encode()
    except BaseException:  # the parent lowers this half again and reports what went wrong
        pass
    _reply(fd, _HEAD.pack(ok, len(text), len(obj), private_bytes()) + text + obj)


def _fork(n: int) -> tuple[int, int, int, float]:
    """A queue of the indices 0..n-1 (read by both processes), a pipe for the child's answer, and the
    fork: (pid, 0 in the child; the queue's fd; the answer's end this process keeps: the read end here,
    the write end in the child; when it forked)."""
    queue, fill = os.pipe()
    os.write(fill, b"".join(_INDEX.pack(i) for i in range(n)))
    os.close(fill)  # the queue ends (EOF) once it is empty
    r, w = os.pipe()
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork with threads (see above)
        pid = os.fork()
    os.close(w if pid else r)
    return pid, queue, r if pid else w, started


def _reply(fd: int, data: bytes) -> None:
    """The child's answer, then its end (`os._exit`: no handler of the parent's runs here)."""
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
    finally:
        os._exit(0)


def private_bytes() -> int:
    """This process's private resident memory (Private_Clean + Private_Dirty of
    /proc/self/smaps_rollup): what a forked child holds beyond the pages it still shares with its
    parent; 0 where the file is missing."""
    try:
        with open("/proc/self/smaps_rollup") as f:
            return sum(int(line.split()[1]) * 1024 for line in f if line.startswith(("Private_Clean:", "Private_Dirty:")))
    except (OSError, ValueError, IndexError):
        return 0


def _answer(fd: int, pid: int, started: float) -> bytes | None:
    """Everything the child writes to `fd` (closed here), then the child reaped; None, the child
    killed, where it has not finished `WAIT_FACTOR` times the time this process took since the fork
    (at least `MIN_WAIT_S`): a child that hangs costs a wait, then its share is done here."""
    deadline = time.monotonic() + max(MIN_WAIT_S, WAIT_FACTOR * (time.monotonic() - started))
    chunks: list[bytes] = []
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                _stop(pid)
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    os.waitpid(pid, 0)
    return b"".join(chunks)


def _read_child(fd: int, pid: int, started: float) -> tuple[str, bytes, int] | None:
    data = _answer(fd, pid, started)
    if data is None or len(data) < _HEAD.size:
        return None
    ok, ntext, nobj, private = _HEAD.unpack_from(data)
    if not ok or len(data) != _HEAD.size + ntext + nobj:
        return None
    text = data[_HEAD.size:_HEAD.size + ntext].decode()
    return text, data[_HEAD.size + ntext:], private


def lower_tail(module: builtin.ModuleOp, run: RunPasses, options: Any, verify: bool,
               translate_entry: Any) -> tuple[list[bytes], str, Any, int] | None:
    """Runs the tail passes (all FUNCTION_LOCAL; `run(module, verify)` applies them, as
    `compiler.run_passes` would) on `module`, translates and compiles it in two processes:
    (objects, merged LLVM IR text, the entry's ModuleInfo, the child's private memory in bytes:
    `private_bytes`, 0 where it failed), or None where one process should do it
    (no fork, fewer than two kernels, too few ops). `translate_entry(module)` translates the entry
    function's module here (the caller's translation, with its weight bookkeeping).

    The kernels wait in a queue, largest first (ops before scheduling); each process takes the next
    one whenever it is free, so the halves come out even however unevenly the schedules grow them."""
    from ziggurat.backends.llvm.jit import emit_jit_object
    from ziggurat.backends.llvm.split import merge_modules

    entry = options.entry
    kernels = [f for f in module.ops if isinstance(f, func.FuncOp) and f.body.blocks and f.sym_name.data != entry]
    if len(kernels) < 2 or len(kernels) * _INDEX.size > _PIPE_BYTES or not any(
            isinstance(f, func.FuncOp) and f.sym_name.data == entry for f in module.ops):
        return None
    sizes = {k: sum(1 for _ in k.walk()) for k in kernels}
    if sum(sizes.values()) < MIN_OPS:
        return None
    kernels.sort(key=lambda k: -sizes[k])
    pid, queue, r, started = _fork(len(kernels))
    if pid == 0:
        _child(kernels, queue, run, options, verify, r)
    try:
        try:
            mine = _lower_pulled(kernels, queue, run, verify)
        finally:
            os.close(queue)
        theirs = [k for k in kernels if k.parent is module.body.block]  # the child's: here as they were
        for k in theirs:
            k.detach()
        run(module, False)  # the entry function, now alone in `module`
        for k in list(mine.ops):
            k.detach()
            module.body.block.add_op(k)
        for k in theirs:  # declared here, defined by the child's object
            module.body.block.add_op(func.FuncOp.external(k.sym_name.data, k.function_type.inputs.data,
                                                          k.function_type.outputs.data))
        if verify:
            module.verify()
        ir_module, info = translate_entry(module)
        text = str(ir_module)
        del ir_module
        here = emit_jit_object(text, options.cpu, options.features, options.opt_level)
    except BaseException:
        os.close(r)
        _stop(pid)
        raise
    got = _read_child(r, pid, started)
    if got is None:  # the child failed: its kernels here, from how they were before the fork
        left = builtin.ModuleOp([])
        for k in theirs:
            left.body.block.add_op(k)
        run(left, "stages" if verify else False)
        got = (*_compile_part(left, options), 0)
    info.uses_openmp = info.uses_openmp or "@\"GOMP_parallel\"" in got[0]
    return [here, got[1]], merge_modules([text, got[0]]), info, got[2]


_RESULT = struct.Struct("<Id")


def map_floats(fn: Callable[[int], float], n: int) -> list[float]:
    """`[fn(0), ..., fn(n - 1)]`, computed in two processes: a forked child and this one each take the
    next index whenever free (the kernel prices of fuse-ops, transforms/costs/fusion_costs.py).
    `fn` must be a pure function of the state at the call: what the child changes stays in the child.
    Here alone where fork is unusable or `n` < 2; an index whose answer the child did not send (an
    exception, a crash) is computed here afterwards, so an exception reaches the caller from here."""
    if n < 2 or not usable() or n * _INDEX.size > _PIPE_BYTES:
        return [fn(i) for i in range(n)]
    pid, queue, r, started = _fork(n)
    if pid == 0:
        done: list[bytes] = []
        try:
            while (i := _pull(queue)) is not None:
                done.append(_RESULT.pack(i, fn(i)))
        except BaseException:  # the parent computes what is missing, and raises there
            pass
        _reply(r, b"".join(done))
    results: list[float | None] = [None] * n
    try:
        try:
            while (i := _pull(queue)) is not None:
                results[i] = fn(i)
        finally:
            os.close(queue)
    except BaseException:
        os.close(r)
        _stop(pid)
        raise
    data = _answer(r, pid, started) or b""
    for k in range(len(data) // _RESULT.size):
        i, v = _RESULT.unpack_from(data, k * _RESULT.size)
        if i < n:
            results[i] = v
    return [fn(i) if v is None else v for i, v in enumerate(results)]


def _stop(pid: int) -> None:
    """Ends a child whose answer is no longer wanted (this process is raising) and reaps it."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
