"""The tuning database under concurrency and faults: several writers (processes and threads) on one
file, readers that refresh while others write, a full disk (ENOSPC, short writes, a real file size
limit), kill -9 at random moments and inside a write, and two real `ziggurat tune` runs on one file.

The promise each test checks: nothing recorded is lost or corrupted; a torn line (a writer killed
inside `write()`) is skipped and the next record starts on a fresh line."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import onnx
import pytest

from ziggurat import database
from ziggurat.autotune import DEFAULT_TRACE, JSONDatabase, TuningRecord, WorkloadKey, tune_kernel
from ziggurat.errors import TuningDatabaseError

A = WorkloadKey.from_text("func.func @dense_0(...) { body A }", "dense_0")
TORN = b'{"v":1,"workload":{"hash":"0123'  # the first bytes of a record whose write was cut short
# Bounds on waiting for an event that must come (a child's first line, a child's exit), so that a
# bug that stops it from coming fails the test instead of hanging it; not a check of speed.
HANG_GUARD_S = 120


def rec(trace, cost=1e-3, key: WorkloadKey = A) -> TuningRecord:
    return TuningRecord(key, "llvm", trace, [cost])


def file_lines(path: Path) -> tuple[list[dict], list[bytes]]:
    """(the records of the file's complete valid lines, its other non-empty lines) read independently
    of JSONDatabase."""
    good, bad = [], []
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            TuningRecord.from_json(d)
            good.append(d)
        except (ValueError, KeyError, TypeError, AttributeError):
            bad.append(line)
    return good, bad


def python(code: str, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args], text=True, **kw)


# --- several writers ---------------------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys, time
    from ziggurat.autotune import JSONDatabase, TuningRecord, WorkloadKey
    path, who, n, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    key = WorkloadKey("abcdef0123456789", "dense_0")
    db = JSONDatabase(path)
    while time.time() < go:  # all writers start together
        time.sleep(0.001)
    for i in range(n):  # lines from 200 bytes to 300 kB: many span several pages, so writes take a while
        db.commit(TuningRecord(key, "llvm", {"who": who, "i": i, "pad": "x" * (i * 7919 % 300_000)}, [1e-3]))
    db.refresh()
    print(len(db), db.skipped, flush=True)
""")


def test_processes_appending_to_one_file_never_interleave_or_tear(tmp_path):
    path, n, writers = tmp_path / "db.jsonl", 60, 4
    go = time.time() + 1.5  # after every writer has imported ziggurat
    procs = [python(WRITER, str(path), f"w{k}", str(n), str(go), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for k in range(writers)]
    reader_seen, reader_skipped = [], []
    time.sleep(max(0.0, go - time.time()))
    with JSONDatabase(path, fsync=False) as reader:  # refreshes while they write: never a half record
        while any(p.poll() is None for p in procs):
            reader.refresh()
            reader_seen.append(len(reader))
            reader_skipped.append(reader.skipped)
            time.sleep(0.002)
        outs = [p.communicate(timeout=HANG_GUARD_S) for p in procs]
        assert all(p.returncode == 0 for p in procs), outs
        reader.refresh()
        assert len(reader) == writers * n and reader.skipped == 0
    assert set(reader_skipped) <= {0} and reader_seen == sorted(reader_seen)
    # each writer, refreshing after its last commit, saw every record of the others that had finished
    for out, _ in outs:
        seen, skipped = map(int, out.split())
        assert n <= seen <= writers * n and skipped == 0
    good, bad = file_lines(path)
    assert not bad and len(good) == writers * n
    assert not path.read_bytes().count(b"\n\n")  # no fresh-line newline where the tail was whole
    for k in range(writers):  # each writer's records, all there, in its order
        assert [d["trace"]["i"] for d in good if d["trace"]["who"] == f"w{k}"] == list(range(n))


def test_threads_sharing_an_instance_and_with_their_own(tmp_path):
    path, n = tmp_path / "db.jsonl", 40
    shared = JSONDatabase(path)
    errors: list[BaseException] = []

    def write(db: JSONDatabase, who: str) -> None:
        try:
            for i in range(n):
                db.commit(rec({"who": who, "i": i, "pad": "y" * (i * 4099 % 50_000)}))
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    own = [JSONDatabase(path) for _ in range(2)]
    threads = [threading.Thread(target=write, args=(shared, f"s{k}")) for k in range(3)]
    threads += [threading.Thread(target=write, args=(db, f"o{k}")) for k, db in enumerate(own)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD_S)
    assert not errors
    for db in [shared, *own]:
        db.refresh()
        assert len(db) == 5 * n and db.skipped == 0
        assert len({(r.trace["who"], r.trace["i"]) for r in db}) == 5 * n
        db.close()
    fresh = JSONDatabase(path)
    assert len(fresh) == 5 * n and fresh.skipped == 0
    assert [r.trace for r in fresh] == [r.trace for r in shared]  # an instance's order is the file's


def test_refresh_and_commit_read_in_what_others_appended(tmp_path):
    path = tmp_path / "db.jsonl"
    one, two = JSONDatabase(path), JSONDatabase(path)  # two open files: as two processes
    one.commit(rec(1))
    assert not two.has_measured(A, 1) and len(two) == 0
    assert two.refresh() == 1 and two.has_measured(A, 1)
    assert two.refresh() == 0
    two.commit(rec(2))
    one.commit(rec(3))  # reads in 2 before it writes: the instance keeps the file's order
    assert [r.trace for r in one] == [1, 2, 3] and one.has_measured(A, 2)
    two.refresh()
    assert [r.trace for r in two] == [1, 2, 3]
    # a torn tail appended by a writer killed mid-write: counted once, still once after it is ended
    with open(path, "ab") as f:
        f.write(TORN)
    assert two.refresh() == 0 and two.skipped == 1
    assert two.refresh() == 0 and two.skipped == 1
    one.commit(rec(4))  # the tail is torn although it was whole when `one` last read: a fresh line
    assert one.skipped == 1
    assert two.refresh() == 1 and two.skipped == 1 and [r.trace for r in two] == [1, 2, 3, 4]
    one.close()
    two.close()
    again = JSONDatabase(path)
    assert [r.trace for r in again] == [1, 2, 3, 4] and again.skipped == 1
    assert file_lines(path)[1] == [TORN]


def test_tail_torn_after_open_still_gets_a_fresh_line(tmp_path):
    """The fresh-line decision is taken under the lock at append time, not when the file was opened."""
    path = tmp_path / "db.jsonl"
    db = JSONDatabase(path)
    db.commit(rec(1))
    with open(path, "ab") as f:  # another process killed inside its write since
        f.write(TORN)
    db.commit(rec(2))
    db.close()
    again = JSONDatabase(path)
    assert [r.trace for r in again] == [1, 2] and again.skipped == 1


def test_a_stuck_lock_holder_is_a_clear_error_not_a_hang(tmp_path):
    import fcntl

    path = tmp_path / "db.jsonl"
    JSONDatabase(path).commit(rec(1))
    with open(path, "ab") as holder:  # another open file: flock excludes it as it would another process
        fcntl.flock(holder, fcntl.LOCK_EX)
        t0 = time.monotonic()
        with pytest.raises(TuningDatabaseError, match=r"db\.jsonl': another process has held its lock"):
            JSONDatabase(path, lock_timeout=0.3)
        assert time.monotonic() - t0 < 5
        fcntl.flock(holder, fcntl.LOCK_UN)
    assert len(JSONDatabase(path)) == 1


def test_without_fcntl_it_works_unlocked_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(database, "fcntl", None)
    with pytest.warns(RuntimeWarning, match="no file locking on this platform"):
        db = JSONDatabase(tmp_path / "db.jsonl")
    db.commit(rec(1))
    db.close()
    with pytest.warns(RuntimeWarning):
        assert len(JSONDatabase(tmp_path / "db.jsonl")) == 1


def test_unwritable_file_opens_read_only(tmp_path, monkeypatch):
    path = tmp_path / "db.jsonl"
    JSONDatabase(path).commit(rec(1))
    real_open = os.open

    def no_write(p, flags, *a):  # as for a file without write permission (root ignores the mode bits)
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(p, flags, *a)

    monkeypatch.setattr(os, "open", no_write)
    db = JSONDatabase(path)
    assert db.read_only and len(db) == 1 and db.has_measured(A, 1)
    with pytest.raises(TuningDatabaseError, match="opened read-only"):
        db.commit(rec(2))


# --- a full disk -------------------------------------------------------------------------------------

def test_enospc_is_a_clear_error_and_the_file_is_unchanged(tmp_path, monkeypatch):
    path = tmp_path / "db.jsonl"
    db = JSONDatabase(path)
    db.commit(rec(1))
    before = path.read_bytes()

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(TuningDatabaseError) as info:
        db.commit(rec(2))
    msg = str(info.value)
    assert str(path) in msg and "No space left on device" in msg
    assert f"free space on the disk holding '{path}'" in msg and "records already written are intact" in msg
    assert path.read_bytes() == before and len(db) == 1 and not db.has_measured(A, 2)
    monkeypatch.undo()
    db.commit(rec(3))  # space freed: appends go on
    db.close()
    again = JSONDatabase(path)
    assert [r.trace for r in again] == [1, 3] and again.skipped == 0


def half_then_full(real_write):
    """An os.write that writes the first half of the bytes, then fails with ENOSPC: a disk filling up."""
    state = {"calls": 0}

    def write(fd, data):
        state["calls"] += 1
        if state["calls"] == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return write


def test_short_write_then_enospc_is_cut_off_again(tmp_path, monkeypatch):
    path = tmp_path / "db.jsonl"
    db = JSONDatabase(path)
    db.commit(rec(1))
    before = path.read_bytes()
    monkeypatch.setattr(os, "write", half_then_full(os.write))
    with pytest.raises(TuningDatabaseError, match="free space on the disk"):
        db.commit(rec(2, cost=2e-3))
    monkeypatch.undo()
    assert path.read_bytes() == before  # the half line was truncated away
    db.commit(rec(3))
    db.close()
    again = JSONDatabase(path)
    assert [r.trace for r in again] == [1, 3] and again.skipped == 0


def test_short_write_that_cannot_be_cut_off_stays_one_skipped_line(tmp_path, monkeypatch):
    path = tmp_path / "db.jsonl"
    db = JSONDatabase(path)
    db.commit(rec(1))
    monkeypatch.setattr(os, "write", half_then_full(os.write))

    def no_truncate(fd, size):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(TuningDatabaseError, match="records already written are intact"):
        db.commit(rec(2))
    monkeypatch.undo()
    assert not path.read_bytes().endswith(b"\n")  # the torn half line is there
    db.commit(rec(3))  # starts on a fresh line: the half line cannot swallow it
    assert [r.trace for r in db] == [1, 3] and db.skipped == 1
    db.close()
    again = JSONDatabase(path)
    assert [r.trace for r in again] == [1, 3] and again.skipped == 1
    good, bad = file_lines(path)
    assert len(good) == 2 and len(bad) == 1


def test_other_write_and_fsync_errors(tmp_path, monkeypatch):
    path = tmp_path / "db.jsonl"
    db = JSONDatabase(path)
    db.commit(rec(1))
    before = path.read_bytes()

    def eio(*a):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", eio)  # written, then the sync fails: not recorded, cut off again
    with pytest.raises(TuningDatabaseError, match=r"Input/output error\. The records already written are intact; "
                                                  r"check the disk"):
        db.commit(rec(2))
    assert path.read_bytes() == before and len(db) == 1
    monkeypatch.undo()
    db.close()
    with pytest.raises(TuningDatabaseError, match="is closed"):
        db.commit(rec(3))


FSIZE_WRITER = textwrap.dedent("""
    import resource, signal, sys
    from ziggurat.autotune import JSONDatabase, TuningRecord, WorkloadKey
    from ziggurat.errors import TuningDatabaseError
    path, limit = sys.argv[1], int(sys.argv[2])
    key = WorkloadKey("abcdef0123456789", "dense_0")
    db = JSONDatabase(path)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    i = len(db)
    try:
        while True:
            db.commit(TuningRecord(key, "llvm", {"i": i, "pad": "z" * 3000}, [1e-3]))
            print(i, flush=True)
            i += 1
    except TuningDatabaseError as err:
        print("ERROR", err, flush=True)
""")


def test_a_real_file_size_limit_mid_record(tmp_path):
    """RLIMIT_FSIZE makes the kernel write the part of a record below the limit (a short write), then
    refuse (EFBIG): the disk-full case for real, without root."""
    path = tmp_path / "db.jsonl"
    with JSONDatabase(path) as db:
        db.commit(rec({"i": 0}))
    size = path.stat().st_size
    limit = size + int(3.5 * (size + 3000))  # room for 3 records (of about size + 3000 bytes) and half a 4th
    proc = python(FSIZE_WRITER, str(path), str(limit), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 0, err
    *ids, error = out.strip().split("\n")
    assert [int(i) for i in ids] == [1, 2, 3]
    assert error.startswith("ERROR cannot append to tuning database") and str(path) in error
    assert "File too large" in error and "free space on the disk" in error and "intact" in error
    assert path.stat().st_size < limit  # the part below the limit was cut off again
    db = JSONDatabase(path)
    assert [r.trace["i"] for r in db] == [0, 1, 2, 3] and db.skipped == 0
    db.commit(rec({"i": 4}))  # room again
    db.close()
    good, bad = file_lines(path)
    assert [d["trace"]["i"] for d in good] == [0, 1, 2, 3, 4] and not bad


# --- kill -9 -----------------------------------------------------------------------------------------

KILLED_WRITER = textwrap.dedent("""
    import os, random, sys, time
    from ziggurat.autotune import JSONDatabase, TuningRecord, WorkloadKey
    path, start, tear_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    key = WorkloadKey("abcdef0123456789", "dense_0")
    db = JSONDatabase(path)
    real_write = os.write

    def write(fd, data):  # record `tear_at`: half of it reaches the file, then the writer hangs, lock held
        if i == tear_at:
            real_write(fd, bytes(data[: len(data) // 2]))
            print("torn", flush=True)
            time.sleep(600)
        return real_write(fd, data)

    os.write = write
    rng = random.Random(start)
    i = start
    print("ready", flush=True)
    while True:  # a tight loop of commits, some of 1 MB (a kill can land inside their write)
        db.commit(TuningRecord(key, "llvm", {"i": i, "pad": "p" * rng.choice([10, 5000, 200_000, 1_000_000])},
                               [1e-3 + i * 1e-6]))
        print(i, flush=True)  # committed: commit returned
        i += 1
""")


def kill_writer(path: Path, start: int, delay: float | None, tear_at: int = -1) -> list[int]:
    """Runs KILLED_WRITER from id `start`, SIGKILLs it `delay` s after it is ready (or once it tore a
    record), returns the ids it reported committed."""
    proc = python(KILLED_WRITER, str(path), str(start), str(tear_at), stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n", proc.communicate()
        ids = []
        if delay is not None:
            time.sleep(delay)
        else:
            while (line := proc.stdout.readline()) != "torn\n":
                assert line, proc.communicate()
                ids.append(int(line))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGKILL, err
    return ids + [int(x) for x in out.split() if x not in ("torn",)]


def test_kill_9_at_random_moments_loses_nothing_committed(tmp_path):
    path = tmp_path / "db.jsonl"
    rng = random.Random(20240611)
    committed: list[int] = []
    skipped = 0
    plan = [rng.uniform(0.0, 0.5) for _ in range(5)]
    plan.insert(2, None)  # one kill lands inside a write for sure
    for delay in plan:
        start = max(committed, default=-1) + 1
        with JSONDatabase(path, fsync=False) as db:  # ids go on after the last record on file
            start = max([start] + [r.trace["i"] + 1 for r in db])
        before = path.read_bytes() if path.exists() else b""
        reported = kill_writer(path, start, delay, tear_at=start + 3 if delay is None else -1)
        committed += reported
        db = JSONDatabase(path, fsync=False)
        ids = [r.trace["i"] for r in db]
        assert set(committed) <= set(ids), "a record reported committed is missing"
        assert len(ids) == len(set(ids)) and ids == sorted(ids)  # no record twice, nothing reordered
        # at most one new bad line, and it is the file's (torn) last line
        assert db.skipped - skipped in (0, 1)
        data = path.read_bytes()
        if db.skipped > skipped:
            assert not data.endswith(b"\n")
        else:  # no new bad line: the file ends a line, or the kill came before this run wrote a byte
            assert data.endswith(b"\n") or not data or data == before
        if delay is None:
            assert db.skipped == skipped + 1 and ids[-1] == start + 2  # the torn 4th record of this run
        skipped = db.skipped
        db.close()
    # a later append after the last kill is intact, whatever the kill left
    with JSONDatabase(path) as db:
        db.commit(rec({"i": 10**6}))
    good, bad = file_lines(path)
    final = JSONDatabase(path)
    assert final.skipped == len(bad) == skipped and len(good) == len(final)
    assert [r.trace["i"] for r in final][-1] == 10**6 and set(committed) < {r.trace["i"] for r in final}
    assert all(line.startswith(b'{"costs":[') and line.count(b'"costs"') == 1 for line in bad)  # one cut record


# --- two tuners --------------------------------------------------------------------------------------

def test_tuner_skips_what_another_tuner_recorded_after_it_opened(tmp_path):
    """The tuner refreshes before choosing a batch: a record appended by another process after this
    database was opened is not measured again, and its cost counts."""
    from tests.unit.test_autotune_measure import lower
    from tests.unit.test_autotune_search import te_matmul

    kernel = lower(te_matmul(16, 16, 16), "convert-te-to-loop")
    key = WorkloadKey.from_text(kernel, "mm_0")
    path = tmp_path / "db.jsonl"
    mine, other = JSONDatabase(path, fsync=False), JSONDatabase(path, fsync=False)
    other.commit(TuningRecord(key, "llvm -num-cores=1", DEFAULT_TRACE, [1.0]))  # as another tuner would
    res = tune_kernel(kernel, "mm_0", 2, mine, target="llvm -num-cores=1", timeout=5, parallel_builds=1,
                      batch_size=2, runner_options={"min_repeat_ms": 1.0, "repeat": 2})
    assert res.default_cost == 1.0  # the other's default record, not measured again
    traces = [json.dumps(r.trace, sort_keys=True) for r in mine]
    assert len(mine) == 3 and len(set(traces)) == 3
    mine.close()
    other.close()


def test_two_ziggurat_tune_processes_share_one_database(tmp_path):
    from tests.unit.test_autotune_tuner import mlp

    model, path, trials = tmp_path / "mlp.onnx", tmp_path / "db.jsonl", 6
    onnx.save(mlp(), model)
    cli = "import sys; from ziggurat.cli.main import main; sys.exit(main(sys.argv[1:]))"
    procs = [python(cli, "tune", str(model), "--trials", str(trials), "--db", str(path), "--timeout", "5",
                    "--target", "llvm -num-cores=1", "--parallel-builds", "1", "--validate", "0", "--no-model-check",
                    "--seed", str(seed), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
             for seed in (0, 1)]
    try:
        outs = [p.communicate(timeout=HANG_GUARD_S) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "records in" in out
    db = JSONDatabase(path, fsync=False)
    assert db.skipped == 0
    assert len(db) == 2 * trials  # each run committed its `trials` measurements; none lost or merged
    good, bad = file_lines(path)
    assert not bad and len(good) == 2 * trials
    assert all(r.target == "llvm -num-cores=1" for r in db)
