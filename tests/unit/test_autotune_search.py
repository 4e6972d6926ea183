"""Search space and evolutionary search: legal, distinct, replayable candidates; no candidate twice."""

from __future__ import annotations

import json
import random

import numpy as np
from xdsl.parser import Parser

from tests.unit.test_autotune_measure import lower
from ziggurat.autotune import (
    DEFAULT_TRACE,
    EvolutionarySearch,
    GBTCostModel,
    JSONDatabase,
    SearchSpace,
    TuningRecord,
    WorkloadKey,
    apply_trace,
)
from ziggurat.autotune.space import MAX_UNROLL
from ziggurat.dialects import loop, make_context


def te_matmul(m: int, n: int, k: int, name: str = "mm_0") -> str:
    return f"""
func.func @{name}(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %s = te.reduce "mm" add init 0.000000e+00 : f32 (%i, %j) reduce (%k : {k}) : tensor<{m}x{n}xf32> {{
    %x = te.read %a[%i, %k] : tensor<{m}x{k}xf32>
    %y = te.read %b[%k, %j] : tensor<{k}x{n}xf32>
    %p = arith.mulf %x, %y : f32
    te.yield %p : f32
  }}
  func.return %s : tensor<{m}x{n}xf32>
}}
"""


KERNEL = lower(te_matmul(32, 48, 64), "convert-te-to-loop")


def test_nests_and_sampled_candidates_are_legal_and_distinct():
    space = SearchSpace(KERNEL, "mm_0", vector_width=16, num_threads=2)
    (nest,) = space.nests
    assert (nest.block, nest.extents, nest.n_spatial) == ("mm", (32, 48, 64), 2)
    cands = space.sample(random.Random(0), 40)  # 90% templates: enough draws for every sketch loop kind
    assert len(cands) >= 20
    assert len({c.trace_hash for c in cands}) == len(cands)
    for c in cands:
        module = Parser(make_context(), c.mlir).parse_module()
        module.verify()
        assert json.loads(json.dumps(c.trace)) == c.trace
        assert c.features.shape == space.default().features.shape
        unrolled = [f for f in module.walk() if isinstance(f, loop.ForOp) and f.kind.data == "unrolled"]
        assert all(f.trip_count <= MAX_UNROLL for f in unrolled)
        # the trace replays on a fresh copy of the kernel to the same text
        fresh = Parser(make_context(), KERNEL).parse_module()
        apply_trace(fresh, "mm_0", c.trace)
        assert str(fresh) == c.mlir
    kinds = {f.kind.data for c in cands for f in Parser(make_context(), c.mlir).parse_module().walk()
             if isinstance(f, loop.ForOp)}
    assert {"parallel", "vectorized", "unrolled", "serial"} <= kinds


def test_illegal_decisions_are_skipped_not_errors():
    space = SearchSpace(KERNEL, "mm_0")
    knobs = space.random_knobs(random.Random(1))
    knobs[0]["unroll"] = 4
    knobs[0]["vectorize"] = "innermost"  # the innermost loop is then the unrolled one: illegal
    assert space.build(knobs) is None
    assert space.default().trace == DEFAULT_TRACE


def test_mutation_changes_one_decision():
    space = SearchSpace(KERNEL, "mm_0", num_threads=2)
    rng = random.Random(3)
    knobs = space.random_knobs(rng)
    for _ in range(20):
        new = space.mutate(rng, knobs)
        diff = [k for k in knobs[0] if knobs[0][k] != new[0][k]]
        assert len(diff) <= 1
        if diff == ["tiles"]:
            assert sum(a != b for a, b in zip(knobs[0]["tiles"], new[0]["tiles"])) == 1


def test_search_batches_skip_measured_candidates(tmp_path):
    space = SearchSpace(KERNEL, "mm_0")
    key = WorkloadKey.from_text(KERNEL, "mm_0")
    db = JSONDatabase(tmp_path / "r.jsonl", fsync=False)
    model = GBTCostModel(n_estimators=20)
    search = EvolutionarySearch(space, model, db, key, random.Random(0), population=24, generations=2)
    seen = set()
    for round_ in range(3):
        batch = search.next_batch(6)
        assert batch and len(batch) <= 6
        hashes = {c.trace_hash for c in batch}
        assert len(hashes) == len(batch) and not hashes & seen
        seen |= hashes
        # a synthetic cost that favours vectorized candidates: the model should learn it
        costs = [1e-5 if "vectorized" in c.mlir else 4e-5 for c in batch]
        for c, cost in zip(batch, costs):
            db.commit(TuningRecord(key, "llvm", c.trace, [cost]))
        model.update(np.stack([c.features for c in batch]), costs, key.hash)
        search.observe(batch, costs)
    # a new search on the reopened database (a resumed run) proposes none of them again
    db.close()
    again = EvolutionarySearch(space, model, JSONDatabase(tmp_path / "r.jsonl"), key, random.Random(0),
                               population=24, generations=2)
    assert not {c.trace_hash for c in again.next_batch(6)} & seen


def test_search_skips_candidates_whose_ir_was_measured(tmp_path):
    """The default schedule's own template knobs give the default's IR: once the default is measured,
    the seed with those knobs is not measured again under another trace."""
    space = SearchSpace(KERNEL, "mm_0")
    key = WorkloadKey.from_text(KERNEL, "mm_0")
    search = EvolutionarySearch(space, GBTCostModel(n_estimators=20), JSONDatabase(tmp_path / "r.jsonl", fsync=False),
                                key, random.Random(0), population=24, generations=2)
    default = space.default()
    search.observe([default], [1e-5])
    batch = search.next_batch(4)
    assert batch and default.mlir not in {c.mlir for c in batch}
    assert len({c.mlir for c in batch}) == len(batch)
