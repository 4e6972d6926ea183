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
_BYTE = ctypes.c_char


def data_address(array: np.ndarray) -> int:
    """The address of a C-contiguous array's data. Through the buffer protocol where the array
    is writable and not empty (1.2 us a call on the Zen 1 host), else `array.ctypes.data`
    (3.5 us: it builds a helper object each time)."""
    try:
        return ctypes.addressof(_BYTE.from_buffer(array))
    except (TypeError, ValueError, BufferError):
        return array.ctypes.data


def aligned_empty(nbytes: int) -> np.ndarray:
    """A uint8 buffer of `nbytes` whose data starts on a 64-byte boundary."""
    raw = np.empty(max(nbytes, 1) + ALIGN, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGN
    return raw[offset : offset + max(nbytes, 1)]


def aligned_copy(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `array` whose data starts on a 64-byte boundary."""
    buf = aligned_empty(array.nbytes)
    out = buf[: array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def is_aligned(array: np.ndarray) -> bool:
    """Whether `array` is C-contiguous and its data starts on a 64-byte boundary."""
    return array.flags.c_contiguous and array.ctypes.data % ALIGN == 0


def aligned(array: np.ndarray) -> np.ndarray:
    """`array` itself when it is C-contiguous and 64-byte aligned, else `aligned_copy(array)`."""
    array = np.asarray(array)
    return array if is_aligned(array) else aligned_copy(array)


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
        # Constants start on 64-byte boundaries (no vector load of a kernel splits a cache line);
        # one already aligned and contiguous (the compiler's, a disk cache entry's) is used in place.
        self._constants = [aligned(c) for c in constants]
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
        # The array last bound to each input and output slot: a call with the same array objects
        # (a serving loop with preallocated buffers) writes no addresses. Holding the array keeps
        # its address valid (numpy refuses to resize an array something else refers to).
        self._bound: list[Any] = [None] * base

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

    def prepare(self, *args: Any, **kwargs: Any) -> list[np.ndarray]:
        """The inputs as `__call__` takes them (in input order, by name, or one mapping by name),
        checked and made the C-contiguous arrays of the model's dtypes that `run_native` takes."""
        return [self._check(s, v) for s, v in zip(self.inputs, self._gather(args, kwargs))]

    def __call__(self, *args: Any, **kwargs: Any) -> list[np.ndarray]:
        if not kwargs and len(args) == len(self._in_keys):
            for i, (a, key) in enumerate(zip(args, self._in_keys)):
                if type(a) is not np.ndarray or (a.shape, a.dtype) != key or not a.flags.c_contiguous:
                    break
                self._bind(i, a)
            else:
                results = [np.empty(shape, dtype) for shape, dtype in self._out_specs]
                for i, r in enumerate(results, self._out_base):
                    self._bind(i, r)
                self._entry(self._args_ptr)
                return results
        values = self.prepare(*args, **kwargs)
        results = [np.empty(s.shape, dtype=s.dtype) for s in self.outputs]
        for i, a in enumerate(values):
            self._bind(i, a)
        for i, r in enumerate(results, self._out_base):
            self._bind(i, r)
        self._entry(self._args_ptr)
        return results

    def _bind(self, slot: int, array: np.ndarray) -> None:
        if self._bound[slot] is not array:
            self._args[slot] = data_address(array)
            self._bound[slot] = array

    def run_native(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        """The native call alone, on prepared C-contiguous arrays of the right shapes and dtypes
        (unchecked): for timing, and for serving loops that reuse their buffers (the same array
        objects as the last call cost no address lookups)."""
        bound = self._bound
        for i, a in enumerate(inputs):
            if bound[i] is not a:
                self._bind(i, a)
        base = self._out_base
        for i, r in enumerate(outputs, base):
            if bound[i] is not r:
                self._bind(i, r)
        self._entry(self._args_ptr)
