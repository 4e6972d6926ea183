"""Models with dynamic axes: one compile for every shape, plus static variants where asked.

`ziggurat.compile` of a model whose inputs have dynamic axes (`dim_param`
`batch`, `sequence`, or unknown dims) returns a `DynamicModel`. Each dynamic
axis is a symbol (frontends/onnx/symbols.py); a call binds the symbols from
its arrays' shapes, checks them (a static axis of another extent, or one
symbol with two values, is an `InputError` naming the input, the axis and the
symbol) and runs:

* the variant compiled for that binding, where there is one:
  `shapes={"batch": [1, 8], "sequence": [64, 128, 512]}` compiles the
  variants of every combination up front (a bucket list per symbol; every
  symbol must be given): static kernels specialized to those shapes;
* otherwise, by `on_new_shape`:
  - `"generic"` (the default): the *generic model*, compiled once when the
    `DynamicModel` is made, whose kernels take the symbols' values at run time
    (runtime/symbolic_model.py; it checks the constraints the model's nodes put
    on the shapes, `sequence <= 512`). A model some part of which needs a
    symbol's value at compile time has no generic form: `generic_error` says
    which node and why, and new shapes then compile as with `"compile"`;
  - `"compile"`: a static variant compiled at the first call with that binding
    (kept up to `CACHE_SIZE`, least recently used out, the up-front ones always);
  - `"error"`: refused, naming the shapes compiled.

Every variant is a static compile of the model at that shape (the same
kernels, arena and speed as compiling the fixed-shape model, and the disk
cache holds each), so what a variant costs is its compile time. Weights
that several variants hold alike (the same bytes after the graph passes) are
kept once.

    m = ziggurat.compile("distilbert_dynamic/model.onnx", shapes={"batch": [1], "sequence": [128]})
    m(input_ids=ids, attention_mask=mask)        # (1, 128): the variant compiled above
    m(input_ids=ids2, attention_mask=mask2)      # (4, 37): the generic model, no compile
    m.variants                                   # {(1, 128): CompiledModel}
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ziggurat.errors import CompileError, InputError, ZigguratError
from ziggurat.frontends.onnx.symbols import SymbolicInput, bind_symbols, static_model, symbolic_inputs, symbols_of
from ziggurat.runtime.executor import gather_inputs

CACHE_SIZE = 16
ON_NEW_SHAPE = ("generic", "compile", "error")


class DynamicModel:
    """A model with dynamic axes, run through one static compile per binding of its symbols.

    `compile_static(model_bytes)` compiles one static model (`ziggurat.compile` with the
    caller's options). Calls take the inputs as a `CompiledModel` does (positionally, by name,
    or one mapping) and return its list of outputs."""

    def __init__(self, model: onnx.ModelProto, compile_static: Callable[[bytes], Any],
                 shapes: Mapping[str, int | Sequence[int]] | None = None, on_new_shape: str = "generic",
                 compile_generic: Callable[[onnx.ModelProto], Any] | None = None):
        if on_new_shape not in ON_NEW_SHAPE:
            raise InputError(f"on_new_shape must be one of {', '.join(ON_NEW_SHAPE)}, got '{on_new_shape}'")
        self.model = model
        self.inputs: list[SymbolicInput] = symbolic_inputs(model)
        self.symbols = symbols_of(self.inputs)
        self.output_names = [o.name for o in model.graph.output]
        self.on_new_shape = on_new_shape
        self._compile_static = compile_static
        self._variants: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self._pinned: set[tuple[int, ...]] = set()
        self._dispatch: dict[tuple, Any] = {}  # input shapes -> the generic model or an up-front variant
        self._weights: dict[tuple, np.ndarray] = {}  # (shape, dtype, digest) -> the one array kept
        self._lock = threading.Lock()
        self.compiles = 0
        self.generic: Any = None  # the SymbolicModel (runtime/symbolic_model.py)
        self.generic_error: str | None = None  # why there is none, where on_new_shape="generic"
        if on_new_shape == "generic":
            if compile_generic is None:
                self.generic_error = "no generic compile was given"
            else:
                try:
                    self.generic = compile_generic(model)
                except ZigguratError as err:
                    self.generic_error = str(err).splitlines()[0] if str(err) else type(err).__name__
                except Exception as err:  # noqa: BLE001 - a gap in the symbolic path: the variants still work
                    where = getattr(err, "ziggurat_pass", None)
                    self.generic_error = (f"internal error in the generic compile{f' (pass {where})' if where else ''}: "
                                          f"{type(err).__name__}: {err}")
        for binding in buckets(self.symbols, shapes):
            self._pinned.add(self._key(binding))
            self.variant(binding)

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.inputs]

    @property
    def variants(self) -> dict[tuple[int, ...], Any]:
        """The compiled variants by the values of `symbols`, in that order."""
        return dict(self._variants)

    @property
    def info(self) -> dict[str, Any]:
        return {"symbols": list(self.symbols), "inputs": {i.name: list(i.dims) for i in self.inputs},
                "variants": [dict(zip(self.symbols, k)) for k in self._variants], "compiles": self.compiles,
                "generic": self.generic is not None, "generic_error": self.generic_error}

    def _key(self, binding: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(int(binding[s]) for s in self.symbols)

    def _shown(self, key: Sequence[int]) -> str:
        return ", ".join(f"{s}={v}" for s, v in zip(self.symbols, key))

    def input_specs(self, binding: Mapping[str, int]) -> list[Any]:
        """The inputs as `CompiledModel.inputs` gives them (`TensorSpec`: name, shape, dtype), at
        this binding of the symbols (for a caller that makes inputs, as the fuzzer does)."""
        from ziggurat.signature import TensorSpec

        return [TensorSpec(i.name, tuple(d if isinstance(d, int) else int(binding[d]) for d in i.dims),
                           np.dtype(onnx.helper.tensor_dtype_to_np_dtype(i.elem_type))) for i in self.inputs]

    def bind(self, shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
        """The symbols' values for inputs of these shapes (by input name), checked."""
        return bind_symbols(self.inputs, shapes)

    def variant(self, binding: Mapping[str, int]) -> Any:
        """The `CompiledModel` for this binding of every symbol, compiled now if it is new
        (and `on_new_shape` allows it)."""
        missing = [s for s in self.symbols if s not in binding]
        if missing:
            raise InputError(f"no value for symbol(s) {', '.join(map(repr, missing))}; "
                             f"the model's symbols are {', '.join(map(repr, self.symbols))}")
        key = self._key(binding)
        with self._lock:
            found = self._variants.get(key)
            if found is not None:
                self._variants.move_to_end(key)
                return found
            if (self.on_new_shape == "error" or (self.on_new_shape == "generic" and self.generic is not None)) \
                    and key not in self._pinned:
                compiled = "; ".join(self._shown(k) for k in self._variants) or "none"
                raise InputError(f"no variant compiled for {self._shown(key)} (compiled: {compiled}); add it to "
                                 "shapes= or compile with on_new_shape='compile'")
            compiled = self._compile(key)
            self._variants[key] = compiled
            while len(self._variants) > len(self._pinned) + CACHE_SIZE:
                old = next(k for k in self._variants if k not in self._pinned)
                del self._variants[old]
            return compiled

    def _compile(self, key: tuple[int, ...]) -> Any:
        binding = dict(zip(self.symbols, key))
        try:
            compiled = self._compile_static(static_model(self.model, self.inputs, binding))
        except ZigguratError as err:  # the shape the error belongs to, on its first line
            err.args = (f"at {self._shown(key)}: {err.args[0] if err.args else err}", *err.args[1:])
            raise
        self.compiles += 1
        compiled.share_constants(self._weights)
        return compiled

    def __call__(self, *args: Any, **kwargs: Any) -> list[np.ndarray]:
        values = gather_inputs(self.input_names, args, kwargs)
        shapes = tuple(np.shape(v) for v in values)
        target = self._dispatch.get(shapes)  # shapes seen before: bound and checked then, the same model
        if target is not None:
            return target(*values)
        binding = self.bind({i.name: s for i, s in zip(self.inputs, shapes)})
        key = self._key(binding)
        if self.generic is not None:
            found = self._variants.get(key)
            target = found if found is not None else self.generic
        else:
            target = self.variant(binding)
        if (target is self.generic or key in self._pinned) and len(self._dispatch) < DISPATCH_SIZE:
            self._dispatch[shapes] = target  # what stays (variants compiled at a call may be dropped)
        return target(*values)

    def export(self, path: Any) -> Any:
        raise CompileError("a model with dynamic axes exports one shape at a time: "
                           "m.variant({'batch': 1, ...}).export(path)")


DISPATCH_SIZE = 1024  # distinct input shapes whose model a call looks up directly


def buckets(symbols: Sequence[str], shapes: Mapping[str, int | Sequence[int]] | None) -> list[dict[str, int]]:
    """Every binding of `shapes` (symbol -> a value or a list of values): their product."""
    if not shapes:
        return []
    unknown = sorted(set(shapes) - set(symbols))
    if unknown:
        raise InputError(f"shapes= names {', '.join(map(repr, unknown))}, not a symbol of the model; "
                         f"its symbols are {', '.join(map(repr, symbols)) or 'none (its shapes are static)'}")
    missing = [s for s in symbols if s not in shapes]
    if missing:
        raise InputError(f"shapes= gives no value for {', '.join(map(repr, missing))}; give a value or a list "
                         f"for every symbol ({', '.join(map(repr, symbols))})")
    lists = []
    for s in symbols:
        v = shapes[s]
        values = [v] if isinstance(v, int | np.integer) else list(v)
        if not values or any(not isinstance(n, int | np.integer) or n < 1 for n in values):
            raise InputError(f"shapes= '{s}' must be a positive int or a list of them, got {v!r}")
        lists.append([int(n) for n in values])
    return [dict(zip(symbols, combo)) for combo in itertools.product(*lists)]

