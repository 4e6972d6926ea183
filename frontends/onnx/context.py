"""What the ONNX converters share while one graph is imported.

An ONNX value name is bound either to an SSA value of the `graph` dialect or,
while it is still known at import time (initializers, `Constant` nodes and data
movement on them), to a numpy array. Arrays become `graph.constant` ops only
when an op needs them as tensors, once per shape, at their first use; an array
read only at import time (a Reshape target shape) never appears in the IR.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from xdsl.builder import Builder
from xdsl.dialects.builtin import LocationAttr, TensorType, UnknownLoc, f32
from xdsl.ir import Attribute, Operation, SSAValue

import ziggurat.dtypes as dtypes
from ziggurat.dialects import graph
from ziggurat.dialects.sym import shape_of as type_shape
from ziggurat.dialects.sym import tensor_of
from ziggurat.errors import ModelLoadError, ShapeError, UnsupportedOpError
from ziggurat.lowering.locations import name_loc
from ziggurat.weights import WeightStore

Value = SSAValue | np.ndarray
"""What an ONNX value name is bound to: an SSA value or an import-time constant."""

Shape = tuple[int, ...]
"""A shape; in a symbolic import (a model with dynamic axes compiled once for every shape) a dim
may be a `ziggurat.symbolic.Sym`."""


def tensor_type(shape: Sequence[int], elt: Attribute = f32) -> TensorType:
    """The tensor type of a shape (float32 unless `elt` says otherwise); a symbolic dim is a `?`
    with its expression in the `#sym.dims` encoding."""
    return tensor_of(elt, shape)


def element_type(value: SSAValue) -> Attribute:
    """The element type of a tensor SSA value."""
    assert isinstance(value.type, TensorType)
    return value.type.element_type


def like(value: SSAValue, shape: Sequence[int]) -> TensorType:
    """The tensor type of `shape` with `value`'s element type."""
    return tensor_of(element_type(value), shape)


def shape_of(value: SSAValue) -> Shape:
    """The shape of a tensor SSA value (a `Sym` for each symbolic dim)."""
    assert isinstance(value.type, TensorType)
    return type_shape(value.type)  # type: ignore[return-value]


def name_hint(onnx_name: str) -> str | None:
    """A readable SSA name for an ONNX name: `[A-Za-z0-9_]`, not starting with a digit.

    PyTorch's `/layer/Op_output_0` loses its `_output_0` suffix.
    """
    name = re.sub(r"_output_0$", "", onnx_name)
    name = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_")
    if not name:
        return None
    return f"v{name}" if name[0].isdigit() else name


def attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """The attributes of `node` as Python values (strings decoded)."""
    values = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in values.items()}


def float32_literal(value: float) -> float:
    """`value` rounded to float32 and spelled shortest (1e-05, not 9.99999974e-06)."""
    return float(str(np.float32(value)))


class ConversionContext:
    """Bindings of ONNX names, the IR builder and the weight store of one import."""

    def __init__(self, builder: Builder, weights: WeightStore, opset: int):
        self.builder = builder
        self.weights = weights
        self.opset = opset
        self.node: onnx.NodeProto | None = None
        self.node_label = ""
        self.location: LocationAttr = UnknownLoc()  # loc("<node_label>") of the current node
        self._values: dict[str, Value] = {}
        self.value_types: dict[str, Attribute] = {}  # element types from ONNX type inference, by name
        self._materialized: dict[tuple[str, Shape], SSAValue] = {}
        self.runtime_reads: list[str] = []  # names asked for as constants but known only at run time
        self.reads: dict[str, tuple[str, ...]] = {}  # value name -> the names its node read (bodies, branches too)
        self.producers: dict[str, onnx.NodeProto] = {}  # value name -> the node of the graph that makes it
        self.int8_dot = "none"  # the target's int8 dot product (vnni, avx2): QDQ MatMuls become int8 GEMMs
        self.int8_pairs = "exact"  # 'saturate': AVX2's int8 GEMMs may saturate pairs (Target.int8_pairs)
        self.extents: dict[str, Any] = {}  # value name -> RuntimeExtent (convert_data_dependent.py)
        self.constraints: list[Any] = []  # symbolic.Constraint: what a symbolic import needs of the symbols

    def positive(self, extents: Sequence[Any], message: str) -> None:
        """Output extents must be at least 1: a ShapeError for an int that is not, a constraint
        (`require`) for a symbolic one."""
        from ziggurat.symbolic import Sym

        for n in extents:
            if isinstance(n, Sym):
                self.require(1, "<=", n)
            elif n <= 0:
                raise self.shape_error(message)

    def require(self, lhs: Any, op: str, rhs: Any) -> None:
        """Records that the current node needs `lhs <op> rhs` of the symbols (a symbolic import):
        nothing where every binding satisfies it, a ShapeError where none does, else a
        `Constraint` that each call checks (runtime/symbolic_model.py)."""
        from ziggurat.symbolic import Constraint

        c = Constraint(lhs, op, rhs, f"{self.node.op_type} node '{self.node_label}'" if self.node else "the graph")
        decided = c.decided()
        if decided is False:
            raise self.shape_error(f"it needs {c}, which no shape satisfies")
        if decided is None and all(str(c) != str(o) for o in self.constraints):
            self.constraints.append(c)

    # -- bindings ------------------------------------------------------------

    def begin_node(self, node: onnx.NodeProto | None, label: str = "") -> None:
        """Makes `node` the one whose errors the helpers below report and whose name
        the ops emitted for it carry as their location."""
        self.node, self.node_label = node, label
        self.location = name_loc(label) if node is not None else UnknownLoc()

    def bind(self, name: str, value: Value) -> None:
        self._values[name] = value

    def lookup(self, name: str) -> Value:
        """What `name` is bound to, constant or not."""
        if name not in self._values:
            where = f"node '{self.node_label}' uses" if self.node is not None else "the graph returns"
            raise ModelLoadError(
                f"{where} '{name}', which no input, initializer or earlier node defines. "
                "The graph must be topologically sorted; check it with onnx.checker.check_model."
            )
        return self._values[name]

    def constant(self, name: str) -> np.ndarray | None:
        """The import-time value of `name`, or None when it is only known at run time."""
        value = self.lookup(name)
        return value if isinstance(value, np.ndarray) else None

    def shape_parameter(self, name: str) -> np.ndarray | None:
        """`constant(name)` for an input that decides shapes (axes, pads, sizes):
        a run-time one is noted, so that the error the converter raises can
        name the graph inputs to bind (frontends/onnx/specialize.py)."""
        value = self.constant(name)
        if value is None:
            self.runtime_reads.append(name)
        return value

    def scalar_parameter(self, name: str, what: str, why: str) -> np.generic:
        """A `shape_parameter` that must be one compile-time value (a position, a
        trip count, a depth): `what` names it in the errors, `why` says why a
        run-time value is refused."""
        value = self.shape_parameter(name)
        if value is None:
            raise self.unsupported(f"its {what} ('{name}') is known only at run time; {why}")
        if value.size != 1:
            raise self.shape_error(f"the {what} must hold one value, got shape {list(value.shape)}")
        return value.reshape(-1)[0]

    def shape(self, name: str) -> Shape:
        value = self.lookup(name)
        return tuple(value.shape) if isinstance(value, np.ndarray) else shape_of(value)

    def forget_materialized(self, names: set[str]) -> None:
        """Drops the graph.constant ops cached for `names`: a subgraph converted
        once per iteration binds its names to new arrays each time."""
        for key in [key for key in self._materialized if key[0] in names]:
            del self._materialized[key]

    def value(self, name: str) -> SSAValue:
        """`name` as an SSA value, materializing a constant at its first use."""
        value = self.lookup(name)
        if isinstance(value, np.ndarray):
            return self.reshaped(name, value.shape)
        return value

    @staticmethod
    def input(node: onnx.NodeProto, index: int) -> str | None:
        """The name of optional input `index`, or None when it is left out."""
        return node.input[index] if index < len(node.input) and node.input[index] else None

    # -- building ------------------------------------------------------------

    def emit(self, op: Operation) -> SSAValue:
        """Appends `op`, located at the current node (`loc("<node name>")`), and returns its
        single result."""
        op.location = self.location
        self.builder.insert(op)
        return op.results[0]

    def add_constant(self, array: np.ndarray, ref: str) -> SSAValue:
        """Stores `array` under (a unique variant of) `ref` and emits its graph.constant; an array
        of symbolic extents (a symbolic import's shape values) is a `graph.dims` instead."""
        if array.dtype == object:
            from ziggurat.dialects.graph_symbolic import DimsOp
            from xdsl.dialects.builtin import i64

            values = list(array.reshape(-1))
            result = self.emit(DimsOp(values, tensor_type(array.shape, i64)))
            result.name_hint = name_hint(ref)
            return result
        elt = dtypes.from_numpy(array.dtype)
        if elt is None:
            message = (f"constant '{ref}' has dtype {array.dtype}; run-time tensors can be float16/32/64, "
                       "(u)int8-64 or bool")
            raise self.unsupported(message) if self.node is not None else ShapeError(message)
        stored = self.weights.add(ref, array)
        result = self.emit(graph.ConstantOp(stored, tensor_type(array.shape, elt)))
        result.name_hint = name_hint(stored)
        return result

    def reshape(self, value: SSAValue, shape: Sequence[int]) -> SSAValue:
        """`value` under a new shape; no op when the shape does not change."""
        if shape_of(value) == tuple(shape):
            return value
        return self.emit(graph.ReshapeOp(value, like(value, shape)))

    def reshaped(self, name: str, shape: Sequence[int]) -> SSAValue:
        """`name` under `shape`: a reshaped weight for a constant, else a graph.reshape."""
        array = self.constant(name)
        if array is None:
            return self.reshape(self.value(name), shape)
        key = (name, tuple(shape))
        if key not in self._materialized:
            self._materialized[key] = self.add_constant(array.reshape(shape), name)
        return self._materialized[key]

    # -- errors --------------------------------------------------------------

    def unsupported(self, reason: str) -> UnsupportedOpError:
        """An error for a variant of the current node's op that has no conversion."""
        assert self.node is not None
        return UnsupportedOpError(self.node.op_type, self.node_label, self.opset, reason)

    def shape_error(self, message: str) -> ShapeError:
        """An error for inconsistent shapes at the current node."""
        assert self.node is not None
        return ShapeError(
            f"{self.node.op_type} node '{self.node_label}': {message}. "
            "Check the model with onnx.checker.check_model(model, full_check=True)."
        )
