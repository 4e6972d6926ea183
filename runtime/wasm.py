"""Running an exported WebAssembly model (`model.wasm`, runtime/export.py) through wasmtime.

```python
from ziggurat.runtime import wasm
m = wasm.load("out/model.wasm")      # model.wasm + .json + .weights.npz
(y,) = m(x)                          # numpy in, numpy out: CompiledModel's conventions
```

The ABI (docs/targets.md, "WebAssembly"): the module exports its linear memory `memory` and
`void ziggurat_entry(void **args)`, where a pointer is an i32 offset into that memory and
`args = inputs, outputs, index-check outputs, constants, arena` (the native order). The host:

* at load, takes every buffer, 64-byte aligned, from the module's exported `aligned_alloc`
  (wasi-libc's, which grows the memory with `memory.grow` as it needs): the constants
  (written once), the arena, the inputs, the outputs, the index checks' outputs and the
  `args` array of 32-bit offsets (written once). Not from an allocator of the host's own:
  kernels take scratch above 16 KiB from the same `aligned_alloc`, and wasi-libc's malloc
  claims the memory up to its current end on its first call (backends/llvm/wasm_link.py);
* per call: writes the inputs into their slots, calls the entry, reads the outputs (copies)
  and verifies the index checks (`IndexCheck.verify`, an `InputError` when one fails); an
  output with a run-time extent is returned cut to it (signature.py `Extent`).

Inputs are checked as `CompiledModel` checks them: positional, by name or one mapping; strict
dtypes and shapes (`cast_inputs=True` converts within a kind). A trap in the module (out of
bounds, unreachable) raises `ZigguratError` naming the model. One `WasmModel` has one store
and one memory, so calls are not thread-safe: use one model per thread.

wasmtime is the optional extra `ziggurat[wasm]` (in `dev` too); `load` says how to install it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ziggurat.errors import ModelLoadError, ZigguratError
from ziggurat.runtime.executor import ALIGN, CompiledModel, ModelSignature
from ziggurat.signature import TensorSpec, cut_outputs, finish_outputs

HOST_ALLOC = "aligned_alloc"  # backends/llvm/wasm_link.py exports it
WASM_FORMAT = "ziggurat-wasm-module-1"  # runtime/export.py writes it


def _wasmtime():
    try:
        import wasmtime
    except ImportError:
        raise ModelLoadError("running a WebAssembly model needs the wasmtime package: pip install 'ziggurat[wasm]' "
                             "(or pip install wasmtime)") from None
    return wasmtime


class WasmModel(ModelSignature):
    """An exported WebAssembly model instantiated in wasmtime; call it with numpy arrays (see the module
    docstring). `run_wasm(inputs)` is the call alone on prepared arrays (for timing)."""

    _check = CompiledModel._check
    prepare = CompiledModel.prepare

    def __init__(self, path: Path, meta: dict[str, Any], constants: list[np.ndarray], cast_inputs: bool = False):
        inputs = [TensorSpec.from_json(s) for s in meta["inputs"]]
        outputs = [TensorSpec.from_json(s) for s in meta["outputs"]]
        info = {"target": meta.get("target", ""), "num_threads": 1, "exported": str(path)}
        super().__init__(inputs, outputs, info)
        self.cast_inputs = cast_inputs
        self.arena_bytes = int(meta["arena_bytes"])
        wt = _wasmtime()
        self._wt = wt
        self._engine = wt.Engine(wt.Config())
        self._store = wt.Store(self._engine)
        try:
            module = wt.Module.from_file(self._engine, str(path))
            linker = wt.Linker(self._engine)
            if any(i.module.startswith("wasi") for i in module.imports):  # wasi-libc's abort -> proc_exit
                linker.define_wasi()
                self._store.set_wasi(wt.WasiConfig())
            instance = linker.instantiate(self._store, module)
            exports = instance.exports(self._store)
            self._memory = exports["memory"]
            self._entry = exports[str(meta["entry"])]
        except (wt.WasmtimeError, wt.Trap, KeyError) as err:
            raise ModelLoadError(f"cannot load WebAssembly model '{path}': {err}") from None
        # Every buffer from the module's own allocator (module docstring).
        try:
            alloc = exports[HOST_ALLOC]
        except KeyError:
            raise ModelLoadError(f"cannot load WebAssembly model '{path}': it does not export '{HOST_ALLOC}'; "
                                 "export it again with this version of ziggurat")
        specs = [(s.shape, s.dtype) for s in self.inputs + self.outputs + self.checks]
        sizes = [c.nbytes for c in constants] + [max(self.arena_bytes, 0)]
        sizes += [int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize for shape, dt in specs]
        n_args = len(specs) + len(constants) + (1 if self.arena_bytes > 0 else 0)
        offsets = []
        for n in sizes + [4 * n_args]:
            try:
                off = alloc(self._store, ALIGN, -(-max(n, 1) // ALIGN) * ALIGN)
            except (wt.Trap, wt.WasmtimeError) as err:
                off, n = 0, f"{n} ({err})"
            if not off:
                raise ModelLoadError(f"cannot load WebAssembly model '{path}': allocating {n} bytes in its memory "
                                     "failed (weights, arena and IO must fit wasm32's 4 GiB)")
            offsets.append(int(off))
        n_const = len(constants)
        const_offs, arena_off = offsets[:n_const], offsets[n_const]
        io_offs, args_off = offsets[n_const + 1:-1], offsets[-1]
        self._args_off = args_off
        mem = self._view()
        for off, c in zip(const_offs, constants):
            mem[off:off + c.nbytes] = np.ascontiguousarray(c).reshape(-1).view(np.uint8)
        n_io = len(specs)
        ptrs = io_offs + const_offs + ([arena_off] if self.arena_bytes > 0 else [])
        mem[args_off:args_off + 4 * n_args] = np.asarray(ptrs, dtype="<u4").view(np.uint8)
        n_in, n_out = len(self.inputs), len(self.outputs)
        self._in = list(zip(io_offs[:n_in], (s.dtype for s in self.inputs), (s.shape for s in self.inputs)))
        self._out = list(zip(io_offs[n_in:n_in + n_out], (s.dtype for s in self.outputs),
                             (s.shape for s in self.outputs)))
        self._chk = list(zip(io_offs[n_in + n_out:n_io], (s.dtype for s in self.checks),
                             (s.shape for s in self.checks)))
        self.memory_bytes = self._memory.data_len(self._store)

    def _view(self) -> np.ndarray:
        """The linear memory as bytes (fetched anew: `memory.grow` from inside the module may move it)."""
        n = self._memory.data_len(self._store)
        return np.ctypeslib.as_array(self._memory.data_ptr(self._store), shape=(n,))

    def _read(self, mem: np.ndarray, off: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        return mem[off:off + n].view(dtype).reshape(shape).copy()

    def __call__(self, *args: Any, **kwargs: Any) -> list[np.ndarray]:
        return self.run_wasm(self.prepare(*args, **kwargs))

    def run_wasm(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Writes prepared inputs (C-contiguous, the model's dtypes and shapes), runs the entry, returns
        the outputs; `InputError` when an index check fails."""
        mem = self._view()
        for (off, _, _), x in zip(self._in, inputs):
            mem[off:off + x.nbytes] = x.reshape(-1).view(np.uint8)
        try:
            self._entry(self._store, self._args_off)
        except (self._wt.Trap, self._wt.WasmtimeError) as err:
            raise ZigguratError(f"the WebAssembly model '{self.info['exported']}' trapped: {err}") from None
        mem = self._view()
        extents = finish_outputs(self.checks, [self._read(mem, off, dt, shape) for off, dt, shape in self._chk])
        return cut_outputs(self.checks, [self._read(mem, off, dt, shape) for off, dt, shape in self._out], extents)

    def __repr__(self) -> str:
        return f"WasmModel('{self.info['exported']}', inputs={self.input_names}, outputs={self.output_names})"


def load(path: str | os.PathLike, cast_inputs: bool = False) -> WasmModel:
    """The `WasmModel` of `path` (a `.wasm` that `export` wrote, with its `.json` and `.weights.npz`)."""
    wasm = Path(path)
    meta_path, weights_path = Path(str(wasm) + ".json"), Path(str(wasm) + ".weights.npz")
    for p in (wasm, meta_path, weights_path):
        if not p.is_file():
            raise ModelLoadError(f"cannot load WebAssembly model '{wasm}': '{p}' is missing. Export writes the "
                                 "module, its .json and its .weights.npz; keep the three together.")
    try:
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != WASM_FORMAT:
            hint = (" (a native library: use ziggurat.runtime.load)" if "shared-library" in str(meta.get("format"))
                    else "")
            raise ValueError(f"format is {meta.get('format')!r}, expected {WASM_FORMAT!r}{hint}")
        for key in ("inputs", "outputs", "entry", "arena_bytes", "constants"):
            meta[key]  # noqa: B018 - KeyError names a missing field
        n_const = int(meta["constants"])
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ModelLoadError(f"cannot load WebAssembly model '{wasm}': '{meta_path}' is malformed ({err}); "
                             "export the model again") from None
    try:
        with np.load(weights_path, allow_pickle=False) as f:
            constants = [f[f"c{i}"] for i in range(n_const)]
    except (OSError, ValueError, KeyError) as err:
        raise ModelLoadError(f"cannot load WebAssembly model '{wasm}': '{weights_path}' is unreadable ({err}); "
                             "export the model again") from None
    return WasmModel(wasm, meta, constants, cast_inputs)
