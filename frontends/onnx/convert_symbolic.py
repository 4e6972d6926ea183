"""Generator ops over symbolic extents (a model compiled for every shape, issue 22).

In a static import `Range` and `ConstantOfShape` fold to constants
(frontends/onnx/fold.py); with a symbolic limit or shape (fold_symbolic.py)
they are run-time tensors: `Range(start, limit, delta)` with constant
`start` and `delta` is `graph.iota` of `(limit - start) / delta` entries
(exact division, else the compile falls back per shape), and
`ConstantOfShape` broadcasts its one value to the symbolic shape. These
converters are reached only where the fold declined, i.e. for symbolic
inputs.

```mlir
// Range(0, sequence, 1)
%r = graph.iota {start = 0 : i64, step = 1 : i64} : tensor<?xi64, #sym.dims<"sequence">>
```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx

from ziggurat import dtypes
from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, tensor_type
from ziggurat.symbolic import Sym, SymbolicError


def _scalar(ctx: ConversionContext, name: str):
    a = ctx.shape_parameter(name)
    if a is None or a.size != 1:
        raise SymbolicError(f"{ctx.node.op_type} node '{ctx.node_label}': input '{name}' must be one compile-time "  # type: ignore[union-attr]
                            "value or symbolic extent")
    v = a.reshape(-1)[0]
    return v if isinstance(v, Sym) else v.item() if hasattr(v, "item") else v


def convert_range(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    start, limit, delta = (_scalar(ctx, n) for n in node.input[:3])
    if isinstance(start, Sym) or isinstance(delta, Sym) or not float(delta).is_integer() or not float(start).is_integer():
        raise SymbolicError(f"Range node '{ctx.node_label}': a symbolic Range needs integer constant start and delta")
    start, delta = int(start), int(delta)
    span = limit - start
    n = span // delta if delta != 1 else span
    ctx.require(1, "<=", n)
    elt = dtypes.from_numpy(np.asarray(ctx.constant(node.input[0])).dtype)
    return [ctx.emit(graph.IotaOp(start, delta, tensor_type([n], elt)))]


def convert_constant_of_shape(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    shape = [v if isinstance(v, Sym) else int(v) for v in ctx.shape_parameter(node.input[0]).reshape(-1)]  # type: ignore[union-attr]
    value = attributes(node).get("value")
    fill = onnx.numpy_helper.to_array(value).reshape(()) if value is not None else np.zeros((), np.float32)
    scalar = ctx.add_constant(np.ascontiguousarray(fill.reshape([1] * len(shape))), f"{ctx.node_label}.value")
    return [ctx.emit(graph.BroadcastToOp(scalar, tensor_type(shape, dtypes.from_numpy(fill.dtype))))]


SYMBOLIC_CONVERTERS = {"Range": convert_range, "ConstantOfShape": convert_constant_of_shape}
"""Reached only where fold.py declined: the generator's shape input is symbolic."""
