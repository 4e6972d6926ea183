"""A model compiled for a CUDA GPU, as data: the PTX module and the steps that run it.

The CUDA backend (backends/cuda) translates the entry function `@main` of a
loop-level module into this list instead of host code: every `func.call` of a
kernel becomes a `Launch` (its grid and block from the kernel's `blockIdx.x` /
`threadIdx.x` loops) and every `loop.copy` a `Copy`. The buffers a step names
are `BufRef`s: a model input or output (by position), a weight (by its slot in
`const_names`) or a byte offset into the device arena. runtime/cuda.py loads
the PTX through the CUDA driver and replays the steps; this module needs only
the standard library, so an exported GPU model (`to_json`) loads without xDSL
or llvmlite.

```python
GpuProgram(ptx=".version 7.8 ...", arch="sm_90", arena_bytes=4096, const_names=["W"],
           steps=[Launch("relu_0", (4, 1, 1), (256, 1, 1), (BufRef("input", 0), BufRef("output", 0)))])
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BUFFER_KINDS = ("input", "output", "const", "arena")


@dataclass(frozen=True)
class BufRef:
    """One device buffer a step reads or writes: `kind` is one of BUFFER_KINDS; `index` is the
    input's, output's or constant's position, or the byte offset into the arena."""

    kind: str
    index: int

    def __post_init__(self) -> None:
        if self.kind not in BUFFER_KINDS:
            raise ValueError(f"buffer kind must be one of {BUFFER_KINDS}, got '{self.kind}'")


@dataclass(frozen=True)
class Launch:
    """A kernel launch: the PTX entry `kernel` on `grid` x `block` threads, one pointer argument
    per buffer of `args`, with `shared_bytes` of dynamic shared memory."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[BufRef, ...]
    shared_bytes: int = 0


@dataclass(frozen=True)
class Copy:
    """`nbytes` bytes from `src` to `dst`, device to device."""

    dst: BufRef
    src: BufRef
    nbytes: int


@dataclass
class GpuProgram:
    """The PTX text, the compute capability it targets (`sm_90`), the steps in order, the arena's
    size in bytes and the weights' names in slot order."""

    ptx: str
    arch: str
    steps: list[Launch | Copy] = field(default_factory=list)
    arena_bytes: int = 0
    const_names: list[str] = field(default_factory=list)

    @property
    def launches(self) -> list[Launch]:
        return [s for s in self.steps if isinstance(s, Launch)]

    def to_json(self) -> dict[str, Any]:
        def ref(r: BufRef) -> list[Any]:
            return [r.kind, r.index]

        steps: list[dict[str, Any]] = []
        for s in self.steps:
            if isinstance(s, Launch):
                steps.append({"launch": s.kernel, "grid": list(s.grid), "block": list(s.block),
                              "args": [ref(a) for a in s.args], "shared_bytes": s.shared_bytes})
            else:
                steps.append({"copy": s.nbytes, "dst": ref(s.dst), "src": ref(s.src)})
        return {"ptx": self.ptx, "arch": self.arch, "arena_bytes": self.arena_bytes,
                "const_names": list(self.const_names), "steps": steps}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GpuProgram:
        def ref(r: list[Any]) -> BufRef:
            return BufRef(str(r[0]), int(r[1]))

        steps: list[Launch | Copy] = []
        for s in data["steps"]:
            if "launch" in s:
                steps.append(Launch(s["launch"], tuple(s["grid"]), tuple(s["block"]),  # type: ignore[arg-type]
                                    tuple(ref(a) for a in s["args"]), int(s.get("shared_bytes", 0))))
            else:
                steps.append(Copy(ref(s["dst"]), ref(s["src"]), int(s["copy"])))
        return cls(data["ptx"], data["arch"], steps, int(data["arena_bytes"]), list(data["const_names"]))
