"""The tuning record database: queries, torn lines, and a real SIGKILL of a writer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from ziggurat.autotune import JSONDatabase, TuningRecord, WorkloadKey, structural_hash
from ziggurat.errors import TuningDatabaseError

A = WorkloadKey.from_text("func.func @dense_0(...) { body A }", "dense_0")
B = WorkloadKey.from_text("func.func @conv_0(...) { body B }", "conv_0")


def rec(key: WorkloadKey, trace, costs, error="ok", target="llvm") -> TuningRecord:
    return TuningRecord(key, target, trace, costs, error, "" if error == "ok" else f"{error} happened")


def test_workload_key_ignores_kernel_symbol_and_hashes_structure():
    text = "func.func @dense_3(%a: memref<4xf32>) { }"
    assert WorkloadKey.from_text(text, "dense_3").hash == WorkloadKey.from_text(text.replace("dense_3", "d_9"), "d_9").hash
    assert WorkloadKey.from_text(text, "dense_3").hash != WorkloadKey.from_text(text.replace("4x", "8x"), "dense_3").hash
    assert structural_hash({"b": 1, "a": [1, 2]}) == structural_hash({"a": [1, 2], "b": 1})


def test_commit_query_and_reload(tmp_path):
    path = tmp_path / "db.jsonl"
    traces = [{"tile": [t, 16], "order": "ijk"} for t in (4, 8, 16, 32)]
    costs = [[3e-3, 3.2e-3], [1e-3, 1.1e-3], [2e-3], [5e-4]]
    with JSONDatabase(path) as db:
        for t, c in zip(traces, costs):
            db.commit(rec(A, t, c))
        db.commit(rec(A, {"tile": [64, 64]}, [], error="timeout"))
        db.commit(rec(A, {"tile": [1, 1]}, [1e-6], target="llvm -num-cores=2"))
        db.commit(rec(B, {"tile": [4, 16], "order": "ijk"}, [9e-4]))
        assert len(db) == 7
    db = JSONDatabase(path)
    assert len(db) == 7 and db.skipped == 0
    best = db.best(A, "llvm")
    expected = min(zip(traces, costs), key=lambda tc: sum(tc[1]) / len(tc[1]))
    assert best is not None and best.trace == expected[0] and best.costs == expected[1]
    assert db.best(A, "llvm -num-cores=2").trace == {"tile": [1, 1]}
    assert db.best(WorkloadKey("0" * 16, "none"), "llvm") is None
    assert all(db.has_measured(A, t) for t in traces)
    assert db.has_measured(A, {"tile": [64, 64]})  # an error record counts as measured: never re-measured
    assert db.has_measured(B, traces[0]) and not db.has_measured(B, traces[1])
    assert [r.workload for r in db.records(B)] == [B]
    assert [w.name for w in db.workloads()] == ["dense_0", "conv_0"]
    first = db.records(A)[0]
    assert first.versions.keys() == {"ziggurat", "llvmlite", "xdsl", "cpu"} and first.started <= first.finished


def test_records_validate_error_codes():
    with pytest.raises(ValueError, match="unknown error code"):
        rec(A, 1, [], error="exploded")
    with pytest.raises(ValueError, match="needs at least one cost"):
        rec(A, 1, [])


def test_torn_and_corrupt_lines_are_skipped_and_appends_continue(tmp_path):
    path = tmp_path / "db.jsonl"
    with JSONDatabase(path) as db:
        db.commit(rec(A, 1, [1.0]))
        db.commit(rec(A, 2, [2.0]))
    full = path.read_bytes()
    last = full.rstrip(b"\n").rsplit(b"\n", 1)[1]
    path.write_bytes(full[: len(full) - len(last) // 2 - 1])  # the second line is torn in half
    db = JSONDatabase(path)
    assert len(db) == 1 and db.skipped == 1
    db.commit(rec(A, 3, [3.0]))  # starts on a fresh line: the torn tail stays one bad line
    db.close()
    with open(path, "ab") as fh:
        fh.write(b'{"v": 1, "workload": 7}\nnot json at all\n')
    db = JSONDatabase(path)
    assert [r.trace for r in db] == [1, 3] and db.skipped == 3


def test_unwritable_database_is_a_clear_error(tmp_path):
    db = JSONDatabase(tmp_path / "db.jsonl")
    os.close(db._fd)
    db._fd = os.open(os.devnull, os.O_RDONLY)
    with pytest.raises(TuningDatabaseError, match="cannot append to tuning database"):
        db.commit(rec(A, 1, [1.0]))
    db.close()


WRITER = textwrap.dedent("""
    import sys
    from ziggurat.autotune import JSONDatabase, TuningRecord, WorkloadKey
    db = JSONDatabase(sys.argv[1])
    key = WorkloadKey("abcdef0123456789", "dense_0")
    n = len(db)
    while True:
        db.commit(TuningRecord(key, "llvm", {"i": n, "pad": "x" * (n % 7) * 1000}, [1e-3 + n * 1e-6]))
        n += 1
        print(n, flush=True)
""")


def test_sigkill_mid_run_loses_at_most_the_record_being_written(tmp_path):
    path = tmp_path / "db.jsonl"
    for round_ in range(2):  # the second round resumes the file the first one was killed over
        before = len(JSONDatabase(path)) if path.exists() else 0
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        reported = before
        while reported < before + 25:  # each line is a record the writer committed
            line = proc.stdout.readline()
            assert line, "the writer died on its own"
            reported = int(line)
        proc.send_signal(signal.SIGKILL)
        rest = proc.stdout.read().split()
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        flushed = int(rest[-1]) if rest else reported
        db = JSONDatabase(path)
        assert flushed >= before + 25
        assert len(db) in (flushed, flushed + 1)  # +1: written and synced, killed before it said so
        assert db.skipped <= round_ + 1
        traces = [r.trace["i"] for r in db]
        assert traces == list(range(len(db)))


def test_best_prefers_records_of_the_given_cpu(tmp_path):
    """With `cpu`, records timed on that CPU (or with no CPU noted) are ranked alone; another CPU's
    records, faster on paper, are only the fallback where this CPU has none."""
    with JSONDatabase(tmp_path / "db.jsonl") as db:
        here, there = rec(A, {"tile": [4, 16]}, [2e-3]), rec(A, {"tile": [8, 16]}, [1e-3])
        old = rec(B, {"t": 1}, [5e-3])
        here.versions["cpu"], there.versions["cpu"] = "znver1", "znver3"
        del old.versions["cpu"]
        for r in (here, there, old):
            db.commit(r)
    db = JSONDatabase(tmp_path / "db.jsonl")
    assert db.best(A, "llvm").trace == {"tile": [8, 16]}  # no cpu given: every record ranks
    assert db.best(A, "llvm", cpu="znver1").trace == {"tile": [4, 16]}
    assert db.best(A, "llvm", cpu="skylake").trace == {"tile": [8, 16]}  # none of its own: the fallback
    assert db.best(B, "llvm", cpu="znver1").trace == {"t": 1}  # no CPU noted: counts as this one's
