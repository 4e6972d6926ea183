"""The tuning record database: append-only JSON lines, safe under concurrent writers, a full disk and kill -9.

One line per measurement. A record holds the workload key (a structural hash
plus a readable name), the target string, the candidate's trace (any JSON
value), the measured costs in seconds, an error code and message, timestamps
and the versions of ziggurat, llvmlite and xdsl that produced it.

Guarantees (POSIX; `tests/unit/test_autotune_database_concurrency.py` checks each):

* Several writers, processes or threads, on one file: each append (one `write()`
  of a whole line, then `os.fsync`) holds an exclusive `fcntl.flock` on the file
  and reads hold a shared one, so records never interleave or tear each other
  and a reader never sees a record half written. Two `ziggurat tune` runs may share
  a database. Each `JSONDatabase` instance has its own lock (its own open file),
  and a thread lock makes one instance safe to share between threads.
* Records other processes appended are read in by `refresh()` (and by every
  `commit`, before it writes), so `has_measured` sees them; the tuner refreshes
  before choosing each batch, so two tuners do not repeat what the other measured.
* kill -9 at any moment loses at most the record being written, and only if
  its `commit` had not returned: a record whose `commit` returned is synced.
  The lock dies with the process (no stale lock files).
* A failed write (full disk `ENOSPC`, a quota `EDQUOT`, a file size limit
  `EFBIG`, an I/O error) raises `TuningDatabaseError` naming the file; the
  partly written line is cut off again (`ftruncate`), the records already
  written are intact, and the record is not indexed.
* A torn or corrupt line (a writer killed inside `write()`, a short write that
  could not be cut off, damage by hand) is skipped on load and counted in
  `JSONDatabase.skipped`: a warning, never an error. Whether the file's tail
  is torn is decided under the lock when appending, so the next record always
  starts on a fresh line and a torn tail cannot swallow a good record.

Where `fcntl` is missing (Windows, untested), the database works unlocked and
says so (a `RuntimeWarning`): one writer at a time there. Network file systems whose
`flock` is not shared between machines give no cross-machine guarantee.

```python
from ziggurat.autotune import JSONDatabase, TuningRecord, WorkloadKey

db = JSONDatabase("records.jsonl")
key = WorkloadKey.from_text(kernel_mlir, name="dense_0")
db.refresh()                          # records other processes appended since we opened
if not db.has_measured(key, trace):
    db.commit(TuningRecord(key, "llvm", trace, costs=[1.2e-4, 1.1e-4]))
best = db.best(key, "llvm")           # lowest median cost among "ok" records
```
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ziggurat.errors import TuningDatabaseError

try:
    import fcntl
except ImportError:  # Windows: no flock; the database works unlocked (JSONDatabase warns)
    fcntl = None  # type: ignore[assignment]

VALIDATION = "validation "  # message prefix of the records of a final re-measurement round
DEFAULT_TRACE = "default"  # the trace of a kernel's default schedule (autotune/space.py)
# A finalist replaces the default schedule only when its validation cost is at least this much lower
# (median over passes of its cost over the default's): on this shared host the timings of one build
# move by several percent from moment to moment, and conv3x3 finalists picked 1-3% ahead of the
# default measured up to 4% behind it in the benchmark (docs/autotuning.md).
MIN_GAIN = 0.02
ERROR_CODES = ("ok", "build_error", "run_error", "timeout", "wrong_result", "crash")
FORMAT_VERSION = 1


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def structural_hash(value: Any) -> str:
    """A stable 16-hex-digit hash of a JSON value (or a string, hashed as text)."""
    text = value if isinstance(value, str) else _canonical(value)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def versions() -> dict[str, str]:
    """Versions of the packages whose behaviour a measurement depends on, and the CPU (`cpu`: LLVM's
    name of the CPU of the process that writes the record; with remote runners, the tuner's)."""
    from importlib.metadata import PackageNotFoundError, version

    from ziggurat.target import host_cpu

    out = {}
    for pkg in ("ziggurat", "llvmlite", "xdsl"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "unknown"
    out["cpu"] = host_cpu()[0]
    return out


@dataclass(frozen=True)
class WorkloadKey:
    """What is being tuned: a structural hash of the untuned kernel and a readable name."""

    hash: str
    name: str

    @staticmethod
    def from_text(text: str, name: str) -> WorkloadKey:
        """Key of a kernel given as MLIR text; the kernel's own symbol name is not hashed."""
        return WorkloadKey(structural_hash(text.replace(f"@{name}", "@kernel")), name)

    def to_json(self) -> dict[str, str]:
        return {"hash": self.hash, "name": self.name}


@dataclass
class TuningRecord:
    """One measurement of one candidate (`trace`) of a workload on a target."""

    workload: WorkloadKey
    target: str
    trace: Any
    costs: list[float] = field(default_factory=list)
    error: str = "ok"
    message: str = ""
    started: float = field(default_factory=time.time)
    finished: float = field(default_factory=time.time)
    versions: dict[str, str] = field(default_factory=versions)
    # the candidate's loop-nest features (autotune/features), so that a later tuning run of another
    # model can train its cost model on this record without the kernel's text (transfer)
    features: list[float] | None = None

    def __post_init__(self) -> None:
        if self.error not in ERROR_CODES:
            raise ValueError(f"unknown error code '{self.error}'; known: {ERROR_CODES}")
        if self.error == "ok" and not self.costs:
            raise ValueError("an 'ok' record needs at least one cost")

    @property
    def ok(self) -> bool:
        return self.error == "ok"

    @property
    def mean_cost(self) -> float:
        """Mean of the costs, or infinity for an error record."""
        return sum(self.costs) / len(self.costs) if self.ok else float("inf")

    @property
    def cost(self) -> float:
        """Median of the costs (robust to a repeat slowed by another process), or infinity for an error
        record: what `best` and the tuner rank by."""
        return float(np.median(self.costs)) if self.ok else float("inf")

    @property
    def trace_hash(self) -> str:
        return structural_hash(self.trace)

    def to_json(self) -> dict[str, Any]:
        return {
            "v": FORMAT_VERSION,
            "workload": self.workload.to_json(),
            "target": self.target,
            "trace": self.trace,
            "costs": [float(c) for c in self.costs],
            "error": self.error,
            "message": self.message,
            "started": self.started,
            "finished": self.finished,
            "versions": self.versions,
            **({"features": [float(x) for x in self.features]} if self.features is not None else {}),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> TuningRecord:
        return TuningRecord(
            workload=WorkloadKey(str(d["workload"]["hash"]), str(d["workload"]["name"])),
            target=str(d["target"]),
            trace=d["trace"],
            costs=[float(c) for c in d["costs"]],
            error=str(d["error"]),
            message=str(d.get("message", "")),
            started=float(d["started"]),
            finished=float(d["finished"]),
            versions={str(k): str(v) for k, v in d.get("versions", {}).items()},
            features=[float(x) for x in d["features"]] if isinstance(d.get("features"), list) else None,
        )


@runtime_checkable
class Database(Protocol):
    """Where tuning records go and are looked up."""

    def commit(self, record: TuningRecord) -> None: ...

    def has_measured(self, workload: WorkloadKey, trace: Any) -> bool: ...

    def best(self, workload: WorkloadKey, target: str, cpu: str | None = None) -> TuningRecord | None: ...

    def records(self, workload: WorkloadKey | None = None) -> list[TuningRecord]: ...

    def __len__(self) -> int: ...


def _pread(fd: int, n: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, n, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # Windows; appends ignore the position (O_APPEND)
    return os.read(fd, n)


NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # write errors that more room on the disk cures
LOCK_TIMEOUT_S = 120.0  # how long to wait for another process's lock before giving up with a clear error


class JSONDatabase:
    """Append-only JSON-lines file; the whole file is indexed in memory on open.

    `skipped` counts lines that could not be read back (a torn line after a
    kill, or corruption); they are ignored, never fatal. `refresh()` reads the
    records other processes appended since; `commit` does so too before it
    writes. See the module docstring for the locking and failure guarantees.
    A file that cannot be opened for writing is opened read-only: it loads, and
    `commit` raises `TuningDatabaseError`.
    """

    def __init__(self, path: str | os.PathLike, fsync: bool = True, lock_timeout: float = LOCK_TIMEOUT_S):
        self.path = Path(path)
        self.fsync = fsync
        self.lock_timeout = lock_timeout
        self.skipped = 0
        self.read_only = False
        self._records: list[TuningRecord] = []
        self._measured: set[tuple[str, str]] = set()
        self._offset = 0  # bytes of the file read and indexed (up to a torn tail, which is re-read)
        self._torn_tail = False  # the bytes from _offset on are an unterminated line, counted in skipped
        self._mutex = threading.RLock()  # threads sharing this instance; flock only excludes other files
        self._fd = -1
        if fcntl is None:
            warnings.warn(f"tuning database '{self.path}': no file locking on this platform (fcntl is missing); "
                          "let one process at a time write to it", RuntimeWarning, stacklevel=2)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as err:
            if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS) or not self.path.is_file():
                raise TuningDatabaseError(f"cannot open tuning database '{self.path}': {err.strerror or err}") from None
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except OSError as err2:
                raise TuningDatabaseError(f"cannot open tuning database '{self.path}': "
                                          f"{err2.strerror or err2}") from None
            self.read_only = True
        self.refresh()

    @contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        """Holds this instance's thread lock and a shared or exclusive flock on the file."""
        with self._mutex:
            if self._fd < 0:
                raise TuningDatabaseError(f"tuning database '{self.path}' is closed")
            if fcntl is None:
                yield
                return
            mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
            deadline, pause = time.monotonic() + self.lock_timeout, 0.001
            while True:
                try:
                    fcntl.flock(self._fd, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TuningDatabaseError(
                            f"tuning database '{self.path}': another process has held its lock for over "
                            f"{self.lock_timeout:.0f} s (a hung or stopped tuner?); end it and retry") from None
                    time.sleep(pause)
                    pause = min(2 * pause, 0.01)
                except OSError as err:
                    raise TuningDatabaseError(f"cannot lock tuning database '{self.path}': "
                                              f"{err.strerror or err}") from None
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _read_new(self) -> int:
        """Indexes the lines appended since the last read (the lock is held); returns the records added.

        A tail without its newline is torn (writers hold the exclusive lock while they write, so it is
        not one in progress): it counts in `skipped` and is read again next time, in case a writer that
        does not lock finished it."""
        size = os.fstat(self._fd).st_size
        if size < self._offset:  # truncated behind our back: start over
            self._records.clear()
            self._measured.clear()
            self._offset, self._torn_tail, self.skipped = 0, False, 0
        chunks, pos = [], self._offset
        while pos < size:
            chunk = _pread(self._fd, min(size - pos, 1 << 24), pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
        data = b"".join(chunks)
        if self._torn_tail:  # counted last time; counted again below if it is still a bad line
            self.skipped -= 1
            self._torn_tail = False
        end = data.rfind(b"\n") + 1
        added = 0
        for line in data[:end].split(b"\n"):
            if not line.strip():
                continue
            try:
                rec = TuningRecord.from_json(json.loads(line))
            except (ValueError, KeyError, TypeError, AttributeError):
                self.skipped += 1
                continue
            self._index(rec)
            added += 1
        if data[end:].strip():
            self.skipped += 1
            self._torn_tail = True
        self._offset += end if self._torn_tail else len(data)
        return added

    def refresh(self) -> int:
        """Reads in the records other processes (or other instances) appended since the last read;
        returns how many. Cheap when nothing is new (an fstat under a shared lock)."""
        try:
            with self._locked(exclusive=False):
                return self._read_new()
        except OSError as err:
            raise TuningDatabaseError(f"cannot read tuning database '{self.path}': {err.strerror or err}") from None

    def _index(self, rec: TuningRecord) -> None:
        self._records.append(rec)
        self._measured.add((rec.workload.hash, rec.trace_hash))

    def _failed(self, err: OSError) -> TuningDatabaseError:
        reason = err.strerror or str(err)
        if err.errno in NO_SPACE:
            advice = (f"free space on the disk holding '{self.path}' (or raise the file size or quota limit) "
                      "and run again")
        else:
            advice = "check the disk and the file's permissions"
        return TuningDatabaseError(f"cannot append to tuning database '{self.path}': {reason}. "
                                   f"The records already written are intact; {advice}.")

    def commit(self, record: TuningRecord) -> None:
        """Appends one record (one write() and fsync, under the exclusive lock) after reading in what
        other writers appended; raises TuningDatabaseError on I/O failure, leaving the file as it was."""
        line = (_canonical(record.to_json()) + "\n").encode()
        if self.read_only:
            raise TuningDatabaseError(f"cannot append to tuning database '{self.path}': it was opened read-only "
                                      "(no write permission, or a read-only file system)")
        with self._locked(exclusive=True):
            try:
                self._read_new()
                size = os.fstat(self._fd).st_size
            except OSError as err:
                raise self._failed(err) from None
            if size and self._last_byte(size) != b"\n":  # a torn tail: end it so it stays one bad line
                line = b"\n" + line
            try:
                view = memoryview(line)
                while view:  # a short write (disk filling up) is retried; the next write() says why it stops
                    n = os.write(self._fd, view)
                    if n <= 0:
                        raise OSError(errno.EIO, f"write() wrote nothing ({len(view)} bytes left)")
                    view = view[n:]
                if self.fsync:
                    os.fsync(self._fd)
            except OSError as err:
                try:  # cut the partial line off again; if that fails too, the next append starts a fresh line
                    os.ftruncate(self._fd, size)
                except OSError:
                    pass
                raise self._failed(err) from None
            if self._torn_tail:  # our leading newline ended the torn line; it stays counted in skipped
                self._torn_tail = False
            self._offset = size + len(line)
            self._index(record)

    def _last_byte(self, size: int) -> bytes:
        try:
            return _pread(self._fd, 1, size - 1)
        except OSError:
            return b""

    def has_measured(self, workload: WorkloadKey, trace: Any) -> bool:
        """Whether this candidate of this workload has a record (any outcome)."""
        return (workload.hash, structural_hash(trace)) in self._measured

    def records(self, workload: WorkloadKey | None = None) -> list[TuningRecord]:
        """All records, or those of one workload, in file order."""
        if workload is None:
            return list(self._records)
        return [r for r in self._records if r.workload.hash == workload.hash]

    def best(self, workload: WorkloadKey, target: str, cpu: str | None = None) -> TuningRecord | None:
        """The 'ok' record with the lowest (median) cost for this workload and target.

        When the tuner validated its finalists (records whose message is `validation <round>`: the
        default and the best few re-measured together, under the same conditions), the best of the
        latest round wins: each trace's records are paired with the default's of the same pass, and the
        trace with the lowest median cost ratio wins if that ratio is below 1 - `MIN_GAIN`; else the
        default keeps its place. (Without the default in the round: the lowest median cost.)

        With `cpu` (LLVM's CPU name, `versions.cpu`), records measured on that CPU (or with no CPU
        noted: older records) are ranked alone when there are any; records of other CPUs are the
        fallback, since their costs were timed on another machine and do not compare."""
        ok = [r for r in self._records if r.ok and r.target == target and r.workload.hash == workload.hash]
        if cpu is not None:
            ok = [r for r in ok if r.versions.get("cpu", cpu) == cpu] or ok
        rounds = sorted({r.message for r in ok if r.message.startswith(VALIDATION)})
        if rounds:
            by_trace: dict[str, list[TuningRecord]] = {}
            for r in ok:
                if r.message == rounds[-1]:
                    by_trace.setdefault(r.trace_hash, []).append(r)
            default = next((h for h, rs in by_trace.items() if rs[0].trace == DEFAULT_TRACE), None)
            if default is None:
                score = {h: float(np.median([x.cost for x in rs])) for h, rs in by_trace.items()}
                return by_trace[min(score, key=score.__getitem__)][0]
            # paired: the i-th record of a trace against the default's i-th (the same pass, moments apart)
            score = {h: float(np.median([a.cost / b.cost for a, b in zip(rs, by_trace[default])]))
                     for h, rs in by_trace.items()}
            best = min(score, key=score.__getitem__)
            return by_trace[best if score[best] < 1 - MIN_GAIN else default][0]
        return min(ok, key=lambda r: r.cost, default=None)

    def workloads(self) -> list[WorkloadKey]:
        """Distinct workloads, in order of first appearance."""
        seen: dict[str, WorkloadKey] = {}
        for r in self._records:
            seen.setdefault(r.workload.hash, r.workload)
        return list(seen.values())

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[TuningRecord]:
        return iter(list(self._records))

    def close(self) -> None:
        with self._mutex:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> JSONDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
