"""Loop-level passes: one pass per schedule primitive (`loop-split`, `loop-tile`,
...; the primitives themselves are in `primitives/`), plus the whole-module loop
passes (`dedupe-kernels`, `plan-memory`, `loop-simplify-index`). Registered by
name in `transforms/__init__.py`."""
