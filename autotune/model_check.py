"""The model check: do the tuned kernels make the whole model faster?

Kernels are tuned and validated one at a time, each timed alone with its operands warm in cache.
In a model run they share the caches with the other layers, and a schedule that won alone can lose
there: on mobilenetv3_large (Zen 4, 1 thread, 8 minutes of tuning) 25 of its 66 kernels validated
as faster alone, and the model built from them ran 0.965x as fast as the default build. So after tuning,
`tune_model` compiles the model twice, with the default schedules and with the database, and times
both in this process in alternating blocks (`time_pair`): the median over blocks of the ratio of
neighbouring blocks' medians, which a burst of load on a shared host moves far less than the ratio
of two medians. If the tuned build is not at least `MIN_MODEL_GAIN` faster, the tuner re-measures
the default schedule of every kernel the database would change, as a validation round of its own
(`Tuner.validate(..., revert=True)`): the latest round decides (`JSONDatabase.best`), so compile
applies none of them. Nothing is lost: the records stay, and a later run can still win them back.

```python
check = check_model("model.onnx", "records.jsonl", "llvm -num-cores=1")
check.speedup   # default time / tuned time, paired
```
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

MIN_MODEL_GAIN = 1.01  # the tuned build must be at least 1% faster than the default one
BLOCKS, RUNS = 12, 5  # alternating blocks per build, timed runs per block


@dataclass
class ModelCheck:
    """Milliseconds per call of the default and the tuned build, their paired speedup (> 1: tuning
    helped) and how many kernels the database gives another schedule than the default."""

    default_ms: float
    tuned_ms: float
    speedup: float
    changed_kernels: int = 0

    @property
    def kept(self) -> bool:
        return self.speedup >= MIN_MODEL_GAIN

    def line(self) -> str:
        verdict = "kept" if self.kept else f"below {MIN_MODEL_GAIN:.2f}x: the default schedules are kept"
        return (f"model check: default {self.default_ms:.3f} ms, tuned {self.tuned_ms:.3f} ms "
                f"({self.speedup:.3f}x paired, {self.changed_kernels} kernels not on their default schedule): {verdict}")


def sample_inputs(model: Any, seed: int = 0) -> list[np.ndarray]:
    """Inputs for a compiled model: standard normal floats, zeros elsewhere (valid indices)."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in model.inputs:
        dtype = np.dtype(spec.dtype)
        out.append(rng.standard_normal(spec.shape).astype(dtype) if dtype.kind == "f" else np.zeros(spec.shape, dtype))
    return out


def time_pair(a: Any, b: Any, inputs: list[np.ndarray], blocks: int = BLOCKS, runs: int = RUNS) -> tuple[float, float, float]:
    """Seconds per call of `a` and `b` (medians) and the paired ratio time(a) / time(b): blocks of
    `runs` calls alternate (the order flipped every block), each block's median is paired with the
    other build's neighbouring block."""
    for m in (a, b):
        m(*inputs)  # warm-up
    times: dict[int, list[float]] = {0: [], 1: []}
    for k in range(blocks):
        for which in ((0, 1) if k % 2 == 0 else (1, 0)):
            m = (a, b)[which]
            samples = []
            for _ in range(runs):
                t0 = time.perf_counter()
                m(*inputs)
                samples.append(time.perf_counter() - t0)
            times[which].append(float(np.median(samples)))
    ratios = [x / y for x, y in zip(times[0], times[1])]
    return float(np.median(times[0])), float(np.median(times[1])), float(np.median(ratios))


def check_model(model: Any, db_path: str, target: str, opt_level: int = 3, changed_kernels: int = 0) -> ModelCheck:
    """Compiles `model` with the default schedules and with the tuning database `db_path`, and times
    them paired (see the module docstring)."""
    import ziggurat

    default = ziggurat.compile(model, target=target, opt_level=opt_level, cache=False)
    tuned = ziggurat.compile(model, target=target, opt_level=opt_level, cache=False, tuning_db=str(db_path))
    d, t, ratio = time_pair(default, tuned, sample_inputs(default))
    return ModelCheck(d * 1e3, t * 1e3, ratio, changed_kernels)
