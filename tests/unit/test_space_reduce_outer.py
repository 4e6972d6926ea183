"""The search space's `reduce_outer` sketch (decompose_reduction + reorder):
its candidates move the reduction loop outside the innermost spatial tile and
still compute the matmul."""

from __future__ import annotations

import random

import numpy as np

from tests.unit.test_autotune_tuner import KERNEL, run_scheduled
from ziggurat.autotune.space import SearchSpace
from ziggurat.transforms.loop.primitives.api import Schedule
from ziggurat.transforms.loop.primitives.loops import bound_kinds


def test_reduce_outer_candidates_are_register_tiles_and_correct():
    space = SearchSpace(KERNEL, "mm_0", 16, 1)
    rng = random.Random(0)
    a, b = (np.random.default_rng(0).uniform(-1, 1, (64, 64)).astype(np.float32) for _ in range(2))
    checked = 0
    for _ in range(40):
        knobs = space.random_knobs(rng)
        knobs[0]["reduce_outer"], knobs[0]["unroll"] = 1, 1
        cand = space.build(knobs)
        if cand is None or not any(s["prim"] == "decompose_reduction" for s in cand.trace):
            continue
        module = space.module.clone()
        sch = Schedule(module, "mm_0")
        sch.replay(cand.trace)
        loops = sch.get_loops("mm")
        red = [n for n, rv in enumerate(loops) if "R" in bound_kinds(rv.op)]
        assert red and red[-1] < len(loops) - 1, "a spatial loop now runs inside the reduction loop"
        assert len(sch.get_loops("mm_init")) >= 1
        np.testing.assert_allclose(run_scheduled(KERNEL, cand.trace, a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
        checked += 1
        if checked == 3:
            break
    assert checked == 3
