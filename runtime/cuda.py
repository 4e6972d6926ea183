"""Runs a model compiled for a CUDA GPU (a `GpuProgram`, runtime/cuda_program.py) with numpy in and out.

`CudaModel` loads the program's PTX through the CUDA driver (runtime/cuda_driver.py), allocates
one device buffer per input and output (the hidden ones too), uploads the weights once (they
stay on the GPU), allocates the arena, resolves every step's `BufRef`s to device pointers and
captures all the steps into one CUDA graph. A call is then: an asynchronous copy of each input
to the GPU, one graph launch, an asynchronous copy of each output back, one stream
synchronization. Where the graph cannot be captured, the steps are replayed one by one
(`info["cuda_graph"]` is False). Inputs are taken and checked as `CompiledModel` takes them.
Calls are serialized by a lock (one set of device buffers per model).

```python
model = CudaModel(program, inputs=[TensorSpec("x", (256,), np.dtype("float32"))],
                  outputs=[TensorSpec("y", (256,), np.dtype("float32"))], constants=[])
(y,) = model(x)                          # or model(x=x), model({"x": x})
ms = model.time_device(repeat=50)        # GPU time per graph launch, the inputs already there
model.save("m.cuda.json")                # + m.cuda.json.weights.npz
model = load_cuda("m.cuda.json")
model.close()
```
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from ziggurat.errors import CompileError, CudaError, InputError, ModelLoadError
from ziggurat.runtime.cuda_driver import Context, Graph
from ziggurat.runtime.cuda_program import BufRef, GpuProgram, Launch
from ziggurat.runtime.executor import ArrayCalls, ModelSignature
from ziggurat.signature import TensorSpec, dtype_from_name, dtype_name, finish_outputs

__all__ = ["CudaModel", "load_cuda"]

_FORMAT = "ziggurat-cuda"


def _nbytes(spec: TensorSpec) -> int:
    return math.prod(spec.shape) * np.dtype(spec.dtype).itemsize


def _validate(program: GpuProgram, sizes: dict[str, list[int]]) -> None:
    """CompileError where a step names a buffer the model lacks, or a copy leaves its buffers."""
    def room(ref: BufRef, where: str) -> int:
        if ref.kind == "arena":
            if not 0 <= ref.index < program.arena_bytes:
                raise CompileError(f"{where}: arena offset {ref.index} outside the arena's {program.arena_bytes} bytes")
            return program.arena_bytes - ref.index
        if not 0 <= ref.index < len(sizes[ref.kind]):
            raise CompileError(f"{where}: names {ref.kind} {ref.index}; the model has {len(sizes[ref.kind])}")
        return sizes[ref.kind][ref.index]

    if program.const_names and len(program.const_names) != len(sizes["const"]):
        raise CompileError(f"the GPU program names {len(program.const_names)} constants, "
                           f"{len(sizes['const'])} were given")
    for i, step in enumerate(program.steps):
        if isinstance(step, Launch):
            where = f"GPU program step {i} (kernel '{step.kernel}')"
            if len(step.grid) != 3 or len(step.block) != 3 or min(*step.grid, *step.block) < 1:
                raise CompileError(f"{where}: grid {step.grid} and block {step.block} need 3 positive dimensions")
            for ref in step.args:
                room(ref, where)
        else:
            where = f"GPU program step {i} (copy of {step.nbytes} bytes)"
            for ref in (step.dst, step.src):
                if room(ref, where) < step.nbytes:
                    raise CompileError(f"{where}: {ref.kind} {ref.index} has fewer bytes")


def _arch(arch: str) -> tuple[int, int] | None:
    """'sm_90' / 'sm_90a' -> (9, 0); None for another spelling."""
    match = re.fullmatch(r"sm_(\d+)[af]?", arch)
    return None if match is None else divmod(int(match.group(1)), 10)


class CudaModel(ArrayCalls, ModelSignature):
    """A `GpuProgram` on the first CUDA GPU; call it with numpy arrays, as `CompiledModel`.

    `outputs` is the full output list, hidden outputs (index checks, extents) last; the program's
    `BufRef("output", i)` indexes it. `constants` are the weights in the program's slot order.
    Raises `CudaError` where there is no driver or GPU, or the PTX does not load, and
    `CompileError` where the program names buffers the model lacks. The GPU is opened at the first
    run (or `open()`): a model compiles, and `save`s, where there is none. Release the GPU memory
    with `close()` (or a `with` block).
    """

    def __init__(self, program: GpuProgram, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
                 constants: Sequence[np.ndarray], info: dict[str, Any] | None = None, cast_inputs: bool = False):
        self._ctx: Context | None = None
        super().__init__(inputs, outputs, info)
        self.program = program
        self.cast_inputs = cast_inputs
        constants = [np.ascontiguousarray(c) for c in constants]
        self._const_specs = [(c.shape, c.dtype) for c in constants]
        self._in_bytes = [_nbytes(s) for s in self.inputs]
        self._out_bytes = [_nbytes(s) for s in [*self.outputs, *self.checks]]
        _validate(program, {"input": self._in_bytes, "output": self._out_bytes, "const": [c.nbytes for c in constants]})
        self._in_keys = [(s.shape, s.dtype) for s in self.inputs]
        self._out_specs = [(s.shape, s.dtype) for s in self.outputs]
        self._lock = threading.Lock()
        self._graph: Graph | None = None
        self._steps: list[Callable[[], None]] = []
        self._host_consts: list[np.ndarray] | None = constants  # until the GPU is opened (`open`)
        self._closed = False

    def open(self) -> CudaModel:
        """Opens the GPU now: loads the PTX, uploads the weights and captures the graph (the first run
        does it otherwise, so a model compiles and saves on a machine without a GPU)."""
        with self._lock:
            self._live()
        return self

    def _load(self, constants: list[np.ndarray]) -> None:
        ctx, program = self._live(), self.program
        cc = ctx.compute_capability
        target = _arch(program.arch)
        if target is not None and target > cc:
            raise CudaError(f"the GPU program is compiled for {program.arch}; the GPU '{ctx.name}' is "
                            f"sm_{cc[0]}{cc[1]}: compile for sm_{cc[0]}{cc[1]} or older")
        module = ctx.load_module(program.ptx)
        kernels = {name: module.function(name) for name in dict.fromkeys(s.kernel for s in program.launches)}
        self._d_inputs = [ctx.alloc(n) for n in self._in_bytes]
        self._d_outputs = [ctx.alloc(n) for n in self._out_bytes]
        self._d_consts = [ctx.alloc(c.nbytes) for c in constants]
        for ptr, c in zip(self._d_consts, constants):
            ctx.htod(ptr, c)
        arena = ctx.alloc(program.arena_bytes) if program.arena_bytes > 0 else 0
        bases = {"input": self._d_inputs, "output": self._d_outputs, "const": self._d_consts}

        def address(ref: BufRef) -> int:
            return arena + ref.index if ref.kind == "arena" else bases[ref.kind][ref.index]

        for step in program.steps:
            if isinstance(step, Launch):
                launch = ctx.prepare_launch(kernels[step.kernel], step.grid, step.block,
                                            [address(a) for a in step.args], step.shared_bytes, step.kernel)
                self._steps.append(partial(launch.launch, ctx.stream))
            else:
                self._steps.append(partial(ctx.dtod_async, address(step.dst), address(step.src), step.nbytes))
        if self._steps:
            try:
                self._graph = ctx.capture(self._replay_steps)
            except CudaError as e:
                self.info["cuda_graph_error"] = str(e)
        self.info.update(device=ctx.name, compute_capability=f"sm_{cc[0]}{cc[1]}",
                         multiprocessors=ctx.multiprocessors, cuda_graph=self._graph is not None)

    def _live(self) -> Context:
        if self._closed:
            raise CudaError("this CUDA model is closed")
        if self._ctx is None:
            self._ctx = Context()
            try:
                self._load(self._host_consts or [])
            except BaseException:
                self.close()
                raise
            self._host_consts = None  # the weights live on the GPU now (save() reads them back)
        return self._ctx

    def _replay_steps(self) -> None:
        for step in self._steps:
            step()

    def _replay(self) -> None:
        if self._graph is not None:
            self._graph.launch()
        else:
            self._replay_steps()

    def run_native(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> dict[int, int]:
        """One run on prepared C-contiguous arrays (`outputs`: the visible ones, written in place):
        inputs to the GPU, the graph, outputs back. Verifies the index checks (InputError) and returns
        the run-time extents (output index -> entries along its `Extent`'s axis), as `CompiledModel`."""
        hidden = [np.empty(s.shape, s.dtype) for s in self.checks]
        results = [*outputs, *hidden]
        for kind, arrays, sizes in (("input", inputs, self._in_bytes), ("output", results, self._out_bytes)):
            if len(arrays) != len(sizes) or any(a.nbytes != n for a, n in zip(arrays, sizes)):
                got = [a.nbytes for a in arrays]
                raise InputError(f"run_native: the {kind} arrays must have {sizes} bytes, got {got}")
        with self._lock:
            ctx = self._live()
            ctx.activate()
            for ptr, a in zip(self._d_inputs, inputs):
                ctx.htod_async(ptr, a)
            self._replay()
            for ptr, r in zip(self._d_outputs, results):
                ctx.dtoh_async(r, ptr)
            ctx.synchronize()
        return finish_outputs(self.checks, hidden) if hidden else {}

    def run_device(self, repeat: int = 1) -> None:
        """`repeat` graph launches on the inputs already on the GPU, then waits: the device part alone."""
        with self._lock:
            ctx = self._live()
            ctx.activate()
            for _ in range(repeat):
                self._replay()
            ctx.synchronize()

    def time_device(self, repeat: int = 50) -> list[float]:
        """Milliseconds of GPU time of each of `repeat` graph launches (after one warm-up), by CUDA events."""
        with self._lock:
            ctx = self._live()
            ctx.activate()
            return ctx.time_ms(self._replay, repeat)

    def time_steps(self, repeat: int = 10) -> list[float]:
        """Median milliseconds of GPU time of each step of the program (launch or copy), run alone on
        the inputs already on the GPU (after one run of the whole program): a per-kernel profile."""
        with self._lock:
            ctx = self._live()
            ctx.activate()
            self._replay()
            return [sorted(ctx.time_ms(step, repeat))[repeat // 2] for step in self._steps]

    @property
    def constants(self) -> list[np.ndarray]:
        """The weights in the program's slot order (read back from the GPU once it is open)."""
        with self._lock:
            if self._host_consts is not None:  # never opened: no GPU needed
                return list(self._host_consts)
            ctx = self._live()
            ctx.activate()
            weights = [np.empty(shape, dtype) for shape, dtype in self._const_specs]
            for ptr, w in zip(self._d_consts, weights):
                ctx.dtoh(w, ptr)
            return weights

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the model as JSON at `path` (program, signature) and its weights at `path + '.weights.npz'`
        (read back from the GPU); `load_cuda(path)` loads it."""
        path = os.fspath(path)
        weights = self.constants
        doc = {"format": _FORMAT, "version": 1, "program": self.program.to_json(),
               "inputs": [s.to_json() for s in self.inputs],
               "outputs": [s.to_json() for s in [*self.outputs, *self.checks]],
               "constants": [{"shape": list(w.shape), "dtype": dtype_name(w.dtype)} for w in weights],
               "cast_inputs": self.cast_inputs}
        with open(path + ".weights.npz", "wb") as f:
            np.savez(f, **{f"c{i}": w.reshape(-1).view(np.uint8) for i, w in enumerate(weights)})
        with open(path, "w") as f:
            json.dump(doc, f)

    def close(self) -> None:
        """Frees the model's GPU memory, module and graph; the model cannot run afterwards."""
        ctx, self._ctx = getattr(self, "_ctx", None), None
        self._closed, self._host_consts = True, None
        self._graph, self._steps = None, []
        if ctx is not None:
            ctx.close()

    def __enter__(self) -> CudaModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


def load_cuda(path: str | os.PathLike[str]) -> CudaModel:
    """The `CudaModel` that `CudaModel.save(path)` wrote. Reads JSON and an .npz without pickles: no
    code from the files runs. ModelLoadError where they are missing or malformed."""
    path = os.fspath(path)
    try:
        with open(path) as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
            raise ModelLoadError(f"'{path}' is not a CUDA model saved by ziggurat (CudaModel.save)")
        program = GpuProgram.from_json(doc["program"])
        inputs = [TensorSpec.from_json(d) for d in doc["inputs"]]
        outputs = [TensorSpec.from_json(d) for d in doc["outputs"]]
        with np.load(path + ".weights.npz", allow_pickle=False) as npz:
            constants = [npz[f"c{i}"].view(dtype_from_name(str(c["dtype"]))).reshape([int(d) for d in c["shape"]])
                         for i, c in enumerate(doc["constants"])]
    except OSError as e:
        raise ModelLoadError(f"cannot read the CUDA model '{path}': {e}") from None
    except (KeyError, ValueError, TypeError, AttributeError, ImportError) as e:
        raise ModelLoadError(f"'{path}' is not a well-formed CUDA model: {type(e).__name__}: {e}") from None
    return CudaModel(program, inputs, outputs, constants, cast_inputs=bool(doc.get("cast_inputs", False)))
