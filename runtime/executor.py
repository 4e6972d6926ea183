"""Runs a compiled model: one native call per inference.

The generated entry function has the signature `void entry(void **args)`;
`args` holds, in order, the model inputs, the outputs, the constant buffers
(weights) and the arena for intermediates. The executor keeps the constant
and arena pointers in a preallocated array and only writes the input and
output slots per call. It needs numpy and ctypes alone, no xDSL or llvmlite.

Thread safety: one `CompiledModel` may be called from several threads at once.
Each call in flight takes its own argument array and arena from a pool (a new
one when all are busy; an idle one is reused), so concurrent calls never share
intermediates; ctypes releases the GIL for the native call, so they also run
in parallel. Memory: one arena per call in flight.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ziggurat.errors import InputError
from ziggurat.signature import Extent, IndexCheck, TensorSpec, cut_outputs, finish_outputs

__all__ = ["ArrayCalls", "CompiledModel", "Extent", "check_input", "IndexCheck", "ModelSignature", "TensorSpec", "aligned", "aligned_copy", "aligned_empty", "data_address", "gather_inputs", "weight_key",
           "is_aligned"]

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


def weight_key(array: np.ndarray) -> tuple:
    """What makes two constant buffers interchangeable: shape, dtype and bytes (digested)."""
    import hashlib

    return (array.shape, array.dtype.str, hashlib.blake2b(np.ascontiguousarray(array).data, digest_size=16).digest())


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


class _Call:
    """What one native call writes besides its inputs and outputs: the argument array (constant
    slots filled once), the arena for intermediates and the outputs of the index checks. Each call
    in flight holds its own (`CompiledModel` keeps the idle ones in a pool), so calls from several
    threads never share an arena."""

    __slots__ = ("args", "ptr", "arena", "checks", "bound")

    def __init__(self, n_args: int, constants: Sequence[np.ndarray], base: int, arena_bytes: int,
                 checks: Sequence[TensorSpec], check_base: int, extra: int = 0):
        self.args = (ctypes.c_void_p * (n_args + extra))()  # `extra` slots after the arena's, the caller's
        for i, c in enumerate(constants):
            self.args[base + i] = c.ctypes.data
        self.arena = aligned_empty(arena_bytes) if arena_bytes > 0 else None
        if self.arena is not None:
            self.args[n_args - 1] = self.arena.ctypes.data
        self.checks = [np.empty(s.shape, s.dtype) for s in checks]
        for i, c in enumerate(self.checks, check_base):
            self.args[i] = c.ctypes.data
        self.ptr = ctypes.cast(self.args, ctypes.c_void_p)
        # The array last bound to each input and output slot: a call with the same array objects
        # (a serving loop with preallocated buffers) writes no addresses. Holding the array keeps
        # its address valid (numpy refuses to resize an array something else refers to).
        self.bound: list[Any] = [None] * check_base

    def bind(self, slot: int, array: np.ndarray) -> None:
        if self.bound[slot] is not array:
            self.args[slot] = data_address(array)
            self.bound[slot] = array


def gather_inputs(names: Sequence[str], args: tuple, kwargs: Mapping[str, Any]) -> list[Any]:
    """A call's inputs in `names` order: given positionally, by keyword, or as one mapping by name
    (`CompiledModel` and `runtime.dynamic.DynamicModel` calls); anything else is an InputError."""
    by_name = bool(kwargs)
    if len(args) == 1 and isinstance(args[0], Mapping) and not kwargs:
        kwargs, args, by_name = dict(args[0]), (), True
    if args and kwargs:
        raise InputError("pass inputs either positionally or by name, not both")
    names = list(names)
    if by_name:
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise InputError(f"unknown input(s) {unknown}; the model's inputs are {names}")
        missing = [n for n in names if n not in kwargs]
        if missing:
            raise InputError(f"missing input(s) {missing}; the model's inputs are {names}")
        return [kwargs[n] for n in names]
    if len(args) != len(names):
        raise InputError(f"the model takes {len(names)} input(s) {names}, got {len(args)}")
    return list(args)


def check_input(spec: TensorSpec, value: Any, cast_inputs: bool) -> np.ndarray:
    """`value` as the C-contiguous array `spec` asks for: its shape exactly; its dtype, or (with
    `cast_inputs`, or for a list or scalar) one numpy converts to it within its kind; else InputError."""
    array = np.asarray(value)
    if array.shape != spec.shape:
        raise InputError(f"input '{spec.name}' must have shape {spec.shape}, got {array.shape}")
    if array.dtype != spec.dtype:
        converts = cast_inputs or not isinstance(value, np.ndarray | np.generic)
        if not converts:
            raise InputError(f"input '{spec.name}' must be {spec.dtype}, got {array.dtype}; convert it "
                             f"(x.astype(np.{spec.dtype})), or compile with cast_inputs=True to convert silently")
        if not np.can_cast(array.dtype, spec.dtype, casting="same_kind"):
            raise InputError(f"input '{spec.name}' must be {spec.dtype}, got {array.dtype} (not convertible "
                             "without changing its kind)")
        array = array.astype(spec.dtype)
    return np.ascontiguousarray(array)


class ModelSignature:
    """What every compiled model has, native (`CompiledModel`) or cross-compiled
    (cross.py `CrossCompiledModel`): its inputs, its outputs (the hidden ones apart, in
    `checks`: the index checks' and the run-time extents', signature.py), `info`, and `export`."""

    def __init__(self, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], info: Mapping[str, Any] | None):
        self.inputs = list(inputs)
        self.outputs = [s for s in outputs if not s.hidden]
        self.checks = [s for s in outputs if s.hidden]
        if any(not s.hidden for s in outputs[len(self.outputs):]):
            raise ValueError("the hidden outputs (index checks, extents) must follow the model's outputs")
        self.info = dict(info or {})

    @property
    def input_names(self) -> list[str]:
        return [s.name for s in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [s.name for s in self.outputs]

    def export(self, path: Any) -> Any:
        """Writes this model as a shared library at `path` (plus `path.json`,
        `path.weights.npz` and `path.abi`); `ziggurat.runtime.load(path)` loads a
        native one back without xDSL or llvmlite. See runtime/export.py."""
        from ziggurat.runtime.export import export_model

        return export_model(self, path)


class ArrayCalls:
    """`__call__` and `prepare` of a model run on numpy arrays (`CompiledModel`, runtime/cuda.py's
    `CudaModel`): the inputs taken by position, name or mapping, checked (`check_input`), then
    `run_native` on C-contiguous arrays of the model's dtypes, outputs with run-time extents cut.
    The model has `inputs`, `input_names`, `checks`, `cast_inputs`, `_in_keys` ((shape, dtype) per
    input), `_out_specs` ((shape, dtype) per visible output) and `run_native`."""

    def _check(self, spec: TensorSpec, value: Any) -> np.ndarray:
        return check_input(spec, value, self.cast_inputs)

    def prepare(self, *args: Any, **kwargs: Any) -> list[np.ndarray]:
        """The inputs as `__call__` takes them (in input order, by name, or one mapping by name),
        checked and made the C-contiguous arrays of the model's dtypes that `run_native` takes."""
        return [self._check(s, v) for s, v in zip(self.inputs, gather_inputs(self.input_names, args, kwargs))]

    def __call__(self, *args: Any, **kwargs: Any) -> list[np.ndarray]:  # type: ignore[misc]
        values: Sequence[Any] = args
        if kwargs or len(args) != len(self._in_keys):
            values = self.prepare(*args, **kwargs)
        else:
            for a, key in zip(args, self._in_keys):
                if type(a) is not np.ndarray or (a.shape, a.dtype) != key or not a.flags.c_contiguous:
                    values = self.prepare(*args)
                    break
        results = [np.empty(shape, dtype) for shape, dtype in self._out_specs]
        extents = self.run_native(values, results)
        return cut_outputs(self.checks, results, extents) if extents else results


class CompiledModel(ArrayCalls, ModelSignature):
    """A model compiled to native code; call it with numpy arrays.

    `m(x)`, `m(x1, x2)`, `m(**{"input.1": x})` and `m({"input.1": x})` all
    work. The result is a list of arrays in graph-output order; their names
    are `m.output_names`. Inputs are strict: an array of another dtype, rank or
    shape, or an unknown or missing name, is refused with `InputError`
    (`cast_inputs=True` converts arrays of another dtype instead, where numpy's
    'same_kind' casting allows it; Python lists and scalars are always
    converted that way). Calls are thread-safe (see the module docstring).
    Outputs whose spec carries an `IndexCheck` are the run-time bounds checks
    of the model's data-dependent indices: they are not returned; an index out
    of bounds raises `InputError` after the call. Outputs whose spec carries an
    `Extent` are not returned either: they size an output known only at run time
    (NonZero's), which is returned cut to it.
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
        cast_inputs: bool = False,
        symbol_slots: Sequence[str] = (),
        extra_slots: int = 0,
    ):
        super().__init__(inputs, outputs, info)
        self.symbol_slots = list(symbol_slots)  # their values follow the outputs' slots (runtime/symbolic_model.py)
        self.cast_inputs = cast_inputs
        self._keepalive = keepalive
        self._entry = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(entry_address)
        # Constants start on 64-byte boundaries (no vector load of a kernel splits a cache line);
        # one already aligned and contiguous (the compiler's, a disk cache entry's) is used in place.
        self._constants = [aligned(c) for c in constants]
        self.arena_bytes = arena_bytes
        self._out_base = len(self.inputs)
        self._check_base = self._out_base + len(self.outputs)
        self._sym_base = self._check_base + len(self.checks)
        base = self._sym_base + len(self.symbol_slots)
        n = base + len(self._constants) + (1 if arena_bytes > 0 else 0)
        self._extra_base = n  # `extra_slots` after it: a SymbolicModel's arena of symbolic buffers
        self._new_call = lambda: _Call(n, self._constants, base, arena_bytes, self.checks, self._check_base,
                                       extra_slots)
        self._idle: list[_Call] = [self._new_call()]  # list.pop/append are atomic: a lock-free pool
        # Fast path of __call__: positional C-contiguous arrays of the right shapes and dtypes.
        self._in_keys = [(s.shape, s.dtype) for s in self.inputs]
        self._out_specs = [(s.shape, s.dtype) for s in self.outputs]

    @property
    def constants(self) -> list[np.ndarray]:
        """The constant buffers (weights) the entry function reads, in argument order."""
        return list(self._constants)

    def share_constants(self, pool: dict[tuple, np.ndarray]) -> None:
        """Takes from `pool` the constant buffers equal to its own (`weight_key`) and adds the
        others to it: the variants of one dynamic model (runtime/dynamic.py) keep one copy of
        the weights they hold alike. Call it before the model runs."""
        for i, c in enumerate(self._constants):
            self._constants[i] = pool.setdefault(weight_key(c), c)
        self._idle = [self._new_call()]

    def run_native(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> dict[int, int]:
        """The native call alone, on prepared C-contiguous arrays of the right shapes and dtypes
        (unchecked): for timing, and for serving loops that reuse their buffers (the same array
        objects as the last call cost no address lookups). Raises `InputError` when an index
        check fails. Returns the run-time extents (output index -> its entries along the
        `Extent`'s axis; the buffers have the upper bound): empty for a model without them."""
        call = self._take_call(inputs, outputs)
        try:
            self._entry(call.ptr)
            return finish_outputs(self.checks, call.checks) if call.checks else {}
        finally:
            self._idle.append(call)

    def _take_call(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> _Call:
        """An idle call (a new one when all are busy) with `inputs` and `outputs` bound; the caller
        puts it back in `_idle` after the native call."""
        try:
            call = self._idle.pop()
        except IndexError:
            call = self._new_call()
        bound = call.bound
        for i, a in enumerate(inputs):
            if bound[i] is not a:
                call.bind(i, a)
        for i, r in enumerate(outputs, self._out_base):
            if bound[i] is not r:
                call.bind(i, r)
        return call
