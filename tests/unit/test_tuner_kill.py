"""`kill -9` of a tuning run, then a rerun on the same database: the database loads cleanly (a torn
last line is skipped), the rerun resumes without measuring any recorded candidate again, and the
record count grows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.unit.test_autotune_measure import lower
from tests.unit.test_autotune_search import te_matmul
from ziggurat.autotune import JSONDatabase, TuningRecord

TARGET = "llvm -num-cores=1"
TORN = b'{"v":1,"workload":{"hash":"0123'  # the first bytes of a record whose write was cut short
# Bounds on waiting for an event that must come, so that a bug that stops it from coming fails the
# test instead of hanging it; far above the time the event takes even on a loaded 2-core machine,
# and not a check of speed: nothing here asserts how long anything took.
HANG_GUARD_S = 300

# The tuner as a user runs it: its own process, the default fsync'ing database.
SCRIPT = """
import sys
from pathlib import Path
from ziggurat.autotune import JSONDatabase, tune_kernel
text, db_path, trials = Path(sys.argv[1]).read_text(), sys.argv[2], int(sys.argv[3])
with JSONDatabase(db_path) as db:
    r = tune_kernel(text, "mm_0", trials, db, target=%r, timeout=5, parallel_builds=1, batch_size=2,
                    runner_options={"min_repeat_ms": 1.0, "repeat": 2}, log=sys.stderr)
print("measured", r.trials, "records", len(db))
""" % TARGET


def complete_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def tuner(kernel: Path, db: Path, trials: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(kernel), str(db), str(trials)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def live_members(pgid: int) -> list[int]:
    """Processes of group `pgid` that are not zombies (from /proc)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


def per_candidate(db: JSONDatabase) -> Counter:
    return Counter((r.workload.hash, r.trace_hash) for r in db.records())


def test_kill_9_then_rerun_resumes_without_remeasuring(tmp_path):
    kernel, path = tmp_path / "mm.mlir", tmp_path / "records.jsonl"
    kernel.write_text(lower(te_matmul(32, 32, 32), "convert-te-to-loop"))
    proc = tuner(kernel, path, 200)  # far more trials than it gets time for
    try:
        assert proc.stderr is not None
        progress = 0
        while complete_lines(path) < 3:  # the tuner prints a progress line after each committed batch
            line = proc.stderr.readline()
            assert line, f"the tuner ended before the kill: {proc.communicate()}"
            progress += "trials" in line
        assert progress >= 1 and proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
        # its build/measure workers see the closed pipes and exit; the bound only keeps a worker that
        # never notices from hanging the test (a measurement in flight ends within the 5 s timeout)
        deadline = time.monotonic() + HANG_GUARD_S
        while live_members(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not live_members(proc.pid), "workers outlived the killed tuner"
    finally:
        try:  # the workers it left behind, if the test failed before they exited
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
    # a kill inside a write leaves a torn tail; make sure there is one
    with open(path, "ab") as f:
        f.write(TORN)

    with JSONDatabase(path, fsync=False) as db:
        assert db.skipped == 1
        killed = per_candidate(db)
        assert len(killed) >= 3 and set(killed.values()) == {1}
        assert all(r.target == TARGET for r in db.records())

    rerun = tuner(kernel, path, 4)
    try:
        out, err = rerun.communicate(timeout=HANG_GUARD_S)  # only against a hang: 4 trials take seconds
    finally:
        if rerun.poll() is None:
            os.killpg(rerun.pid, signal.SIGKILL)
            rerun.communicate()
    assert rerun.returncode == 0, err
    assert out.split()[:2] == ["measured", "4"], out

    with JSONDatabase(path, fsync=False) as db:
        assert db.skipped == 1  # the torn line stayed one bad line; every record after it reads back
        counts = per_candidate(db)
        assert set(counts.values()) == {1}, [k for k, n in counts.items() if n > 1]
        assert sum(counts.values()) == sum(killed.values()) + 4
        assert set(killed) < set(counts)
    # every good line is a whole record: the appended ones start on a fresh line
    lines = [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]
    assert len(lines) == sum(counts.values()) + 1
    assert lines.count(TORN) == 1
    assert all(TuningRecord.from_json(json.loads(ln)).workload for ln in lines if ln != TORN)
