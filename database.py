"""The tuning record database: append-only JSON lines that survive a kill.

One line per measurement. A record holds the workload key (a structural hash
plus a readable name), the target string, the candidate's trace (any JSON
value), the measured costs in seconds, an error code and message, timestamps
and the versions of ziggurat, llvmlite and xdsl that produced it.

Durability: the file is opened with `O_APPEND`; each record is one `write()`
of a whole line followed by `os.fsync`, so a kill at any moment loses at most
the record being written. On load, a truncated or corrupt line is skipped and
counted in `JSONDatabase.skipped` (a warning, never an error); the next append
starts on a fresh line so a torn tail cannot swallow a good record.

```python
from ziggurat.autotune import JSONDatabase, TuningRecord, WorkloadKey

db = JSONDatabase("records.jsonl")
key = WorkloadKey.from_text(kernel_mlir, name="dense_0")
if not db.has_measured(key, trace):
    db.commit(TuningRecord(key, "llvm", trace, costs=[1.2e-4, 1.1e-4]))
best = db.best(key, "llvm")           # lowest mean cost among "ok" records
```
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ziggurat.errors import TuningDatabaseError

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
        )


@runtime_checkable
class Database(Protocol):
    """Where tuning records go and are looked up."""

    def commit(self, record: TuningRecord) -> None: ...

    def has_measured(self, workload: WorkloadKey, trace: Any) -> bool: ...

    def best(self, workload: WorkloadKey, target: str, cpu: str | None = None) -> TuningRecord | None: ...

    def records(self, workload: WorkloadKey | None = None) -> list[TuningRecord]: ...

    def __len__(self) -> int: ...


class JSONDatabase:
    """Append-only JSON-lines file; the whole file is indexed in memory on open.

    `skipped` counts lines that could not be read back (a torn last line after
    a kill, or corruption); they are ignored, never fatal.
    """

    def __init__(self, path: str | os.PathLike, fsync: bool = True):
        self.path = Path(path)
        self.fsync = fsync
        self.skipped = 0
        self._records: list[TuningRecord] = []
        self._measured: set[tuple[str, str]] = set()
        self._needs_newline = False
        if self.path.exists():
            self._load()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _load(self) -> None:
        data = self.path.read_bytes()
        self._needs_newline = bool(data) and not data.endswith(b"\n")
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                rec = TuningRecord.from_json(json.loads(line))
            except (ValueError, KeyError, TypeError, AttributeError):
                self.skipped += 1
                continue
            self._index(rec)

    def _index(self, rec: TuningRecord) -> None:
        self._records.append(rec)
        self._measured.add((rec.workload.hash, rec.trace_hash))

    def commit(self, record: TuningRecord) -> None:
        """Appends one record with one write() and fsync; raises TuningDatabaseError on I/O failure."""
        line = (_canonical(record.to_json()) + "\n").encode()
        if self._needs_newline:  # a torn tail from a killed writer: end it so it stays one bad line
            line = b"\n" + line
        try:
            written = os.write(self._fd, line)
            if written != len(line):
                raise OSError(f"short write ({written} of {len(line)} bytes)")
            if self.fsync:
                os.fsync(self._fd)
        except OSError as err:
            raise TuningDatabaseError(f"cannot append to tuning database '{self.path}': {err}. "
                                      "Check the disk and the file's permissions.") from None
        self._needs_newline = False
        self._index(record)

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
