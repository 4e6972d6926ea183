"""The default schedule: plans of register blocks (`plan.py`), copy nests,
epilogues and padding, and the passes that apply them (`loop-default-schedule`,
`loop-parallelize-outer`, `loop-vectorize-innermost`). Registered by name in
`transforms/__init__.py`."""
