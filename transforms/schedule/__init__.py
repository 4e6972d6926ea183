"""Schedule primitives on the `loop` dialect, one per module, and the
`Schedule` API that records them as a replayable trace (`api.py`).

Every primitive takes `loop.for` ops found through a named `loop.block`
(`get_loops`), checks its legality and raises `ScheduleError` (naming the
block, the loop and the reason) instead of producing a wrong nest. They run
on the naive nests of convert-te-to-loop, before loop-default-schedule.

Primitives (module = primitive = pass `loop-<name>` in transforms/): split,
fuse, reorder, parallel, vectorize, unroll, decompose_reduction. Not yet: tile
(= split + reorder), compute_at, cache_read/write, rfactor, storage padding.
"""
