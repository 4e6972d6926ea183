"""The fuzzers (tests/fuzz.py), bounded for CI: a fixed seed, derandomized
hypothesis, about 40 generated graphs and 150 mutated models, in one worker
process (crashes and hangs are caught there). Any finding fails the test; the
reproducers are saved under the test's tmp_path and named in the message.
Longer runs: `python -m tests.fuzz --minutes N`."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("onnxruntime")

from tests.fuzz import Stats, run_graphs, run_mutations  # noqa: E402
from tests.fuzz_worker import Worker  # noqa: E402

GRAPH_CASES = 300
MUTATION_CASES = 600
SEED = 20240611


@pytest.fixture(scope="module")
def worker(monkeypatch_module):
    w = Worker(timeout=120)
    yield w
    w.close()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    mp.setenv("ZIGGURAT_CACHE", "0")  # the worker inherits it: no persistent cache entries
    yield mp
    mp.undo()


def _report(stats: Stats) -> str:
    return f"{stats.line()}; reproducers: {stats.saved}"


def test_generated_graphs_match_onnxruntime(worker, tmp_path):
    stats = Stats()
    run_graphs(worker, stats, tmp_path, SEED, deadline=time.time() + 600, max_examples=GRAPH_CASES,
               derandomize=True, shrink=False)
    assert stats.cases["graphs"] >= GRAPH_CASES // 2, _report(stats)
    assert stats.total() == 0 and stats.repeats == 0, _report(stats)


def test_mutated_models_compile_or_fail_cleanly(worker, tmp_path):
    stats = Stats()
    run_mutations(worker, stats, tmp_path, SEED, deadline=time.time() + 600, max_cases=MUTATION_CASES,
                  minimize=False)
    assert stats.cases["mutations"] == MUTATION_CASES, _report(stats)
    assert stats.total() == 0 and stats.repeats == 0, _report(stats)
