"""A model compiled once for every shape of its dynamic axes (issue 22).

`ziggurat.compile` of a model with dynamic axes first tries the symbolic
compile (compiler.py `compile_symbolic`): each dynamic axis is a symbol, the
kernels take the symbols' values as arguments and loop to run-time bounds
(dialects/sym.py, transforms/schedule/loop_dynamic_schedule.py). The result is
a `SymbolicModel`: a call binds the symbols from its inputs' shapes (checking
the static axes and that one symbol has one value), sizes the outputs from
their expressions, and makes one native call with the symbols' values in the
entry's argument slots. No shape ever compiles again.

    m = ziggurat.compile("distilbert_dynamic/model.onnx")   # a DynamicModel over one SymbolicModel
    m(input_ids=ids_1x128, attention_mask=mask_1x128)
    m(input_ids=ids_4x37, attention_mask=mask_4x37)         # the same native code
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ziggurat.arena import Slot, assign_offsets
from ziggurat.errors import CompileError, InputError
from ziggurat.runtime.executor import CompiledModel, aligned_empty, check_input, gather_inputs
from ziggurat.signature import TensorSpec
from ziggurat.symbolic import Constraint, Sym, derived_values, evaluate


BOUND_CACHE = 64  # distinct input shapes whose binding a SymbolicModel keeps


class _Shaped:
    """Stands for an array of `shape` where `bind` reads shapes only."""

    def __init__(self, shape: tuple):
        self.shape, self.ndim = shape, len(shape)


def bind(specs: Sequence[TensorSpec], arrays: Sequence[np.ndarray]) -> dict[str, int]:
    """The symbols' values from the arrays' shapes: each input dim is an int (checked) or a
    symbol; one symbol must have one value wherever it appears (else an InputError naming the
    input, the axis and the symbol)."""
    binding: dict[str, int] = {}
    where: dict[str, str] = {}
    for spec, a in zip(specs, arrays):
        shown = "[" + ", ".join(str(d) for d in spec.shape) + "]"
        if a.ndim != len(spec.shape):
            raise InputError(f"input '{spec.name}' must have rank {len(spec.shape)} (shape {shown}), got shape {a.shape}")
        for axis, (dim, n) in enumerate(zip(spec.shape, a.shape)):
            if not isinstance(dim, Sym):
                if n != dim:
                    raise InputError(f"input '{spec.name}' axis {axis} must be {dim} (shape {shown}), got {n} in "
                                     f"shape {a.shape}")
                continue
            (name,) = dim.symbols
            if name not in binding:
                if n < 1:
                    raise InputError(f"input '{spec.name}' axis {axis} ('{name}') is {n}; a dynamic axis must be "
                                     "at least 1")
                binding[name], where[name] = n, f"input '{spec.name}' axis {axis}"
            elif binding[name] != n:
                raise InputError(f"input '{spec.name}' axis {axis} is '{name}' = {n}, but {where[name]} made "
                                 f"'{name}' = {binding[name]}: the model needs them equal (shape {shown})")
    return binding


class SymbolicModel(CompiledModel):
    """A `CompiledModel` whose input and output specs hold `Sym` dims, run at any binding of its
    symbols (`symbols`: their order in the entry's argument slots)."""

    def __init__(self, *args: Any, constraints: Sequence[Constraint] = (), dynamic_buffers: Sequence[str] = (),
                 **kwargs: Any):
        super().__init__(*args, extra_slots=1 if dynamic_buffers else 0, **kwargs)
        self.constraints = list(constraints)
        self._by_shapes: dict[tuple, tuple] = {}
        # The entry's buffers of symbolic size share one arena the call passes in a last slot: placed
        # here per binding by their live ranges (arena.py, as plan-memory places the static ones), their
        # offsets in a table at its start, kept per call in flight.
        self.dynamic_buffers = [(Sym.lift(Sym.parse(e)), int(a), int(b)) for e, a, b in dynamic_buffers]
        self._dyn_arenas: dict[int, np.ndarray] = {}  # id(call) -> its arena

    def dynamic_plan(self, binding: Mapping[str, int]) -> tuple[int, np.ndarray]:
        """(bytes, the offsets table) of the arena of the entry's buffers of symbolic size at
        `binding`: the table first, then the buffers placed by their live ranges."""
        slots = [Slot(-(-e.evaluate(binding) // 64) * 64, a, b) for e, a, b in self.dynamic_buffers]
        total = assign_offsets(slots)
        table = -(-8 * len(slots) // 64) * 64
        return table + total, np.array([table + s.offset for s in slots], np.int64)

    def dynamic_bytes(self, binding: Mapping[str, int]) -> int:
        """Bytes of the entry's buffers of symbolic size at `binding`, placed by live ranges (without
        the offsets table before them: 8 bytes a buffer, rounded up to 64)."""
        nbytes, offsets = self.dynamic_plan(binding)
        return nbytes - (-(-8 * len(offsets) // 64) * 64)
        for spec in self.inputs:
            for d in spec.shape:
                if isinstance(d, Sym) and (len(d.symbols) != 1 or d != Sym.of(next(iter(d.symbols)))):
                    raise CompileError(f"input '{spec.name}' has the dim '{d}'; an input's dynamic dim must be "
                                       "one symbol")
        if any(s.extent is not None for s in self.checks):
            raise CompileError("a symbolic model with outputs sized at run time (NonZero, Unique, ...) is not "
                               "supported yet")

    def check(self, binding: Mapping[str, int]) -> None:
        """Raises InputError naming the inputs and axes of the symbols when `binding` breaks one of
        the model's constraints (what its nodes need of the shapes: `sequence <= 512`)."""
        for c in self.constraints:
            wrong = c.check(binding)
            if wrong is not None:
                names = sorted(Sym.lift(c.lhs).base_symbols | Sym.lift(c.rhs).base_symbols)
                axes = "; ".join(f"'{n}' = {binding[n]} ({self._axis_of(n)})" for n in names)
                raise InputError(f"the input shapes break the model's constraint {wrong}: {axes}")

    def _axis_of(self, name: str) -> str:
        for spec in self.inputs:
            for axis, d in enumerate(spec.shape):
                if isinstance(d, Sym) and name in d.symbols:
                    return f"input '{spec.name}' axis {axis}"
        return "no input"

    def shapes(self, binding: Mapping[str, int]) -> list[tuple[int, ...]]:
        """The outputs' shapes at this binding of the symbols."""
        return [tuple(evaluate(d, binding) for d in s.shape) for s in self.outputs]

    def _bound(self, shapes: tuple) -> tuple[dict[str, int], list[tuple[int, ...]], list[int]]:
        """(binding, output shapes, the entry's symbol slot values) for inputs of these shapes,
        checked once per distinct shapes (kept for the last `BOUND_CACHE` of them)."""
        hit = self._by_shapes.get(shapes)
        if hit is None:
            binding = bind(self.inputs, [_Shaped(s) for s in shapes])  # type: ignore[misc]
            self.check(binding)
            values = derived_values(self.symbol_slots, binding)  # derived ones ({1 + height}//2) from the inputs'
            hit = (binding, self.shapes(binding), [values[n] for n in self.symbol_slots], self.dynamic_plan(binding))
            if len(self._by_shapes) >= BOUND_CACHE:
                self._by_shapes.pop(next(iter(self._by_shapes)))
            self._by_shapes[shapes] = hit
        return hit

    def __call__(self, *args: Any, **kwargs: Any) -> list[np.ndarray]:  # type: ignore[override]
        values = args if not kwargs and len(args) == len(self.inputs) else gather_inputs(self.input_names, args, kwargs)
        arrays = [v if type(v) is np.ndarray else np.asarray(v) for v in values]
        binding, out_shapes, slots, dyn = self._bound(tuple(a.shape for a in arrays))
        checked = [a if a.dtype == s.dtype and a.flags.c_contiguous else
                   check_input(TensorSpec(s.name, a.shape, s.dtype), v, self.cast_inputs)
                   for s, a, v in zip(self.inputs, arrays, values)]
        outputs = [np.empty(shape, s.dtype) for shape, s in zip(out_shapes, self.outputs)]
        self._run(checked, outputs, binding, slots, dyn)
        return outputs

    def run_bound(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], binding: Mapping[str, int]) -> None:
        """One native call on prepared arrays at `binding` (unchecked: `__call__` checks)."""
        values = derived_values(self.symbol_slots, binding)
        self._run(inputs, outputs, binding, [values[n] for n in self.symbol_slots], self.dynamic_plan(binding))

    def _run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], binding: Mapping[str, int],
             slots: Sequence[int], dyn: tuple[int, np.ndarray]) -> None:
        call = self._take_call(inputs, outputs)
        try:
            for k, value in enumerate(slots):
                call.args[self._sym_base + k] = value
            if self.dynamic_buffers:  # grow-only: the largest binding so far
                nbytes, offsets = dyn
                arena = self._dyn_arenas.get(id(call))
                if arena is None or arena.nbytes < nbytes:
                    arena = self._dyn_arenas[id(call)] = aligned_empty(max(nbytes, 64))
                    call.args[self._extra_base] = arena.ctypes.data
                arena[:8 * len(offsets)].view(np.int64)[:] = offsets
            self._entry(call.ptr)
            for spec, value in zip(self.checks, call.checks):  # run-time index checks (index_checks.py)
                spec.check.verify(value.reshape(-1), binding)  # type: ignore[union-attr]
        finally:
            self._idle.append(call)

    def export(self, path: Any) -> Any:
        raise CompileError("exporting a model compiled for every shape is not supported yet; export one shape: "
                           "ziggurat.compile(fix_shapes(model, {...})).export(path)")
