"""Run-time bounds checks of data-dependent indices.

Gather, GatherElements, GatherND, ScatterElements (and Scatter) and ScatterND
read or write where a tensor of indices says. Their kernels clamp every index
into its axis (lowering/topi.py `_wrapped_index`), so a bad index never reads
or writes outside a buffer; but the result would be silently wrong, where
onnxruntime raises. So for each such node whose indices are known only at run
time, the importer adds the smallest and the largest value of each index
coordinate (two `graph.reduce` ops, fused by the graph passes like any other)
as one extra output of `main`. The executor compares them with the node's
bounds after every call (signature.py `IndexCheck`) and raises
`InputError` naming the node, the input and the offending index. Indices known
at import time are checked by the converters instead, at compile time.

Cost: one pass over the indices (token ids: a few hundred integers), a few
microseconds a call.

OneHot is not checked: ONNX defines its out-of-range indices (an all-`off`
row).

```mlir
// Gather, data tensor<1000x64xf32>, run-time indices %ids : tensor<1x128xi64>
%lo = graph.reduce %ids {kind = "min", axes = array<i64: 0, 1>, keepdims = true} : tensor<1x128xi64> -> tensor<1x1xi64>
%hi = graph.reduce %ids {kind = "max", axes = array<i64: 0, 1>, keepdims = true} : tensor<1x128xi64> -> tensor<1x1xi64>
%check = graph.concat %lo1, %hi1 {axis = 0} : ... -> tensor<2xi64>   // returned after the model's outputs
```
"""

from __future__ import annotations

import numpy as np
import onnx
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, attributes, element_type, like, shape_of
from ziggurat.signature import IndexCheck

CHECKED_OPS = ("Gather", "GatherElements", "GatherND", "Scatter", "ScatterElements", "ScatterND")
"""The op types (default domain) whose input 1 is a tensor of indices into input 0."""


def add_index_check(ctx: ConversionContext, node: onnx.NodeProto) -> tuple[SSAValue, IndexCheck] | None:
    """For a node of `CHECKED_OPS` whose indices are run-time values, the check's value (emitted at
    the builder's insertion point: min of each coordinate, then max) and its `IndexCheck`; else None."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in CHECKED_OPS or len(node.input) < 2:
        return None
    indices = ctx.lookup(node.input[1])
    if isinstance(indices, np.ndarray) or not isinstance(element_type(indices), IntegerType):
        return None
    data_shape, ishape = ctx.shape(node.input[0]), shape_of(indices)
    if 0 in ishape or 0 in data_shape:
        return None
    if node.op_type in ("GatherND", "ScatterND"):
        b = int(attributes(node).get("batch_dims", 0)) if node.op_type == "GatherND" else 0
        bounds = tuple(data_shape[b:b + ishape[-1]])
        axes = list(range(len(ishape) - 1))
    else:
        axis = int(attributes(node).get("axis", 0))
        bounds = (data_shape[axis % len(data_shape)],)
        axes = list(range(len(ishape)))
    k = len(bounds)
    ends = [_reduced(ctx, indices, kind, axes, k) for kind in ("min", "max")]
    check = ctx.emit(graph.ConcatOp(ends, 0, like(ends[0], (2 * k,))))
    return check, IndexCheck(ctx.node_label, node.op_type, node.input[1], bounds)


def _reduced(ctx: ConversionContext, x: SSAValue, kind: str, axes: list[int], k: int) -> SSAValue:
    """`kind` of `x` over `axes` (keeping the dims), as a 1-D tensor of `k` values."""
    if axes:
        x = ctx.emit(graph.ReduceOp(x, kind, axes, True, like(x, tuple(1 if d in axes else n
                                                                      for d, n in enumerate(shape_of(x))))))
    return ctx.reshape(x, (k,)) if shape_of(x) != (k,) else x
