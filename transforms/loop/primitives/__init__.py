"""Schedule primitives on the `loop` dialect, one per module, and the
`Schedule` API that records them as a replayable trace (`api.py`).

Every primitive takes `loop.for` ops found through a named `loop.block`
(`get_loops`), checks its legality and raises `ScheduleError` (naming the
block, the loop and the reason) instead of producing a wrong nest. They run
on the naive nests of convert-te-to-loop, before loop-default-schedule.

Primitives (module = primitive = pass `loop-<name>` in transforms/): split,
fuse, reorder, tile, parallel, vectorize, unroll, decompose_reduction,
compute_at, reverse_compute_at, compute_inline, cache_read, cache_write,
rfactor, storage_align. `regions.py` holds what the block-moving ones share
(accesses, affine regions, dependence checks).
"""
