"""Runs a compiled model: one native call per inference.

The generated entry function has the signature `void entry(void **args)`;
`args` holds, in order, the model inputs, the outputs, the constant buffers
(weights) and the arena for intermediates. The executor keeps the constant
and arena pointers in a preallocated array and only writes the input and
output slots per call. It needs numpy and ctypes alone, no xDSL or llvmlite.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ziggurat.errors import InputError

ALIGN = 64


def aligned_empty(nbytes: int) -> np.ndarray:
    """A uint8 buffer of `nbytes` whose data starts on a 64-byte boundary."""
    raw = np.empty(max(nbytes, 1) + ALIGN, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGN
    return raw[offset : offset + max(nbytes, 1)]


def aligned_copy(array: np.ndarray) -> np.ndarray:
    buf = aligned_empty(array.nbytes)
    out = buf[: array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


@dataclass(frozen=True)
class TensorSpec:
    """Name, static shape and dtype of a model input or output."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype


class CompiledModel:
    """A model compiled to native code; call it with numpy arrays.

    `m(x)`, `m(x1, x2)`, `m(**{"input.1": x})` and `m({"input.1": x})` all
    work. The result is a list of arrays in graph-output order; their names
    are `m.output_names`. Calls are not thread-safe: intermediates live in
    one arena per model.
    """

    def __init__(
        self,
        entry_address: int,
        inputs: Sequence[TensorSpec],
        outputs: Sequence[TensorSpec],
        constants: Sequence[np.ndarray],
        arena_bytes: int,
        keepalive: Any = None,
        info: Mapping[str, Any] | None = None,
    ):
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.info = dict(info or {})
        self._keepalive = keepalive
        self._entry = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(entry_address)
        self._constants = [aligned_copy(np.ascontiguousarray(c)) for c in constants]
        self.arena_bytes = arena_bytes
        self._arena = aligned_empty(arena_bytes) if arena_bytes > 0 else None
        n = len(self.inputs) + len(self.outputs) + len(self._constants) + (1 if self._arena is not None else 0)
        self._args = (ctypes.c_void_p * n)()
        base = len(self.inputs) + len(self.outputs)
        for i, c in enumerate(self._constants):
            self._args[base + i] = c.ctypes.data
        if self._arena is not None:
            self._args[n - 1] = self._arena.ctypes.data
        self._args_ptr = ctypes.cast(self._args, ctypes.c_void_p)
        # Fast path of __call__: positional float32 C-contiguous arrays of the right shapes.
        self._in_keys = [(s.shape, s.dtype) for s in self.inputs]
        self._out_specs = [(s.shape, s.dtype) for s in self.outputs]
        self._out_base = len(self.inputs)

    @property
    def constants(self) -> list[np.ndarray]:
        """The constant buffers (weights) the entry function reads, in argument order."""
        return list(self._constants)

    def export(self, path: Any) -> Any:
        """Writes this model as a shared library at `path` (plus `path.json` and
        `path.weights.npz`); `ziggurat.runtime.load(path)` loads it back without
        xDSL or llvmlite. See runtime/export.py."""
        from ziggurat.runtime.export import export_model

        return export_model(self, path)

    @property
    def input_names(self) -> list[str]:
        return [s.name for s in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [s.name for s in self.outputs]

    def _gather(self, args: tuple, kwargs: dict) -> list[Any]:
        if len(args) == 1 and isinstance(args[0], Mapping) and not kwargs:
            kwargs, args = dict(args[0]), ()
        if args and kwargs:
            raise InputError("pass inputs either positionally or by name, not both")
        if kwargs:
            unknown = sorted(set(kwargs) - set(self.input_names))
            if unknown:
                raise InputError(f"unknown input(s) {unknown}; the model's inputs are {self.input_names}")
            missing = [n for n in self.input_names if n not in kwargs]
            if missing:
                raise InputError(f"missing input(s) {missing}; the model's inputs are {self.input_names}")
            return [kwargs[n] for n in self.input_names]
        if len(args) != len(self.inputs):
            raise InputError(f"the model takes {len(self.inputs)} input(s) {self.input_names}, got {len(args)}")
        return list(args)

    def _check(self, spec: TensorSpec, value: Any) -> np.ndarray:
        array = np.asarray(value)
        if array.shape != spec.shape:
            raise InputError(f"input '{spec.name}' must have shape {spec.shape}, got {array.shape}")
        if array.dtype != spec.dtype:
            if not np.can_cast(array.dtype, spec.dtype, casting="same_kind"):
                raise InputError(f"input '{spec.name}' must be {spec.dtype}, got {array.dtype}")
            array = array.astype(spec.dtype)
        return np.ascontiguousarray(array)

    def __call__(self, *args: Any, **kwargs: Any) -> list[np.ndarray]:
        if not kwargs and len(args) == len(self._in_keys):
            slots = self._args
            for i, (a, key) in enumerate(zip(args, self._in_keys)):
                if type(a) is not np.ndarray or (a.shape, a.dtype) != key or not a.flags.c_contiguous:
                    break
                slots[i] = a.ctypes.data
            else:
                results = [np.empty(shape, dtype) for shape, dtype in self._out_specs]
                for i, r in enumerate(results, self._out_base):
                    slots[i] = r.ctypes.data
                self._entry(self._args_ptr)
                return results
        values = [self._check(s, v) for s, v in zip(self.inputs, self._gather(args, kwargs))]
        results = [np.empty(s.shape, dtype=s.dtype) for s in self.outputs]
        slots = self._args
        for i, a in enumerate(values):
            slots[i] = a.ctypes.data
        base = len(values)
        for i, r in enumerate(results):
            slots[base + i] = r.ctypes.data
        self._entry(self._args_ptr)
        return results

    def run_native(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        """The native call alone, on prepared contiguous arrays (for timing)."""
        slots = self._args
        for i, a in enumerate(inputs):
            slots[i] = a.ctypes.data
        for i, r in enumerate(outputs):
            slots[len(inputs) + i] = r.ctypes.data
        self._entry(self._args_ptr)
