"""The default schedule and trace replay. A reduction nest (`nest.py`) gets a `BlockPlan`
(`plan.py`: chosen from the shape and vector width, or from tuning knobs), which the one
builder (`block.py`) turns into loop IR; `replay.py` replays tuning traces; copy nests,
epilogues and padding have modules of their own; the passes that apply them
(`loop-default-schedule`, `apply-tuning`, `loop-parallelize-outer`,
`loop-vectorize-innermost`) are registered by name in `transforms/__init__.py`."""
