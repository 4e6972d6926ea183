"""Scan (opsets 9+) unrolled at import time.

Shapes are static, so the number of iterations is known when the model is
imported: the body graph is converted once per iteration with its state
inputs bound to the previous iteration's state outputs and its scan inputs
bound to one slice of each scan input (`graph.slice` + `graph.reshape`,
walking backwards for scan_input_directions = 1). The scan outputs of all
iterations are stacked with `graph.concat` along scan_output_axes (in
reverse for scan_output_directions = 1). No loop op is needed in the graph
dialect; the unrolled body fuses like any other graph code.

```mlir
// Scan with state %s and scan input tensor<3x2xf32>, body: s' = s + x_t
%x0 = graph.slice %x {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<3x2xf32> -> tensor<1x2xf32>
%s1 = graph.add %s, %x0r : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
...
```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.errors import ModelLoadError
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of
from ziggurat.frontends.onnx.convert_index import norm_axis
from ziggurat.frontends.onnx.convert_window import like, reshape

MAX_UNROLLED_NODES = 20000
"""Body nodes times iterations above this are refused (the graph would be huge)."""


def _step(ctx: ConversionContext, x: Value, axis: int, t: int) -> Value:
    """Slice t of `x` along `axis`, with that axis removed."""
    shape = list(x.shape) if isinstance(x, np.ndarray) else list(shape_of(x))
    out = shape[:axis] + shape[axis + 1:]
    if isinstance(x, np.ndarray):
        return np.take(x, t, axis=axis)
    starts = [t if d == axis else 0 for d in range(len(shape))]
    window = ctx.emit(graph.SliceOp(x, starts, [1] * len(shape), like(x, [1 if d == axis else n
                                                                         for d, n in enumerate(shape)])))
    return reshape(ctx, window, out)


def _stack(ctx: ConversionContext, parts: list[Value], axis: int) -> Value:
    """The parts stacked along a new `axis`."""
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.stack(parts, axis=axis)  # type: ignore[arg-type]
    values = [_as_ssa(ctx, p, f"scan_part{i}") for i, p in enumerate(parts)]
    shape = list(shape_of(values[0]))
    grown = [reshape(ctx, v, shape[:axis] + [1] + shape[axis:]) for v in values]
    if len(grown) == 1:
        return grown[0]
    return ctx.emit(graph.ConcatOp(grown, axis, like(values[0], shape[:axis] + [len(grown)] + shape[axis:])))


def _as_ssa(ctx: ConversionContext, value: Value, label: str) -> SSAValue:
    if isinstance(value, np.ndarray):
        return ctx.add_constant(np.ascontiguousarray(value), f"{ctx.node_label}.{label}")
    return value


def convert_scan(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Scan (opsets 9+): N state variables and M scan inputs; axes and
    directions per scan input and output. Opset 8 (batch axis and
    sequence_lens) is refused."""
    from ziggurat.frontends.onnx.importer import _bind_outputs, _convert

    if ctx.opset < 9:
        raise ctx.unsupported("opset-8 Scan (batched, with sequence_lens) is not supported; use opset 9+")
    attrs = attributes(node)
    body: onnx.GraphProto = attrs["body"]
    m = int(attrs["num_scan_inputs"])
    inputs = list(node.input)
    n_state = len(inputs) - m
    if n_state < 0 or len(body.input) != len(inputs):
        raise ctx.shape_error(f"the body takes {len(body.input)} inputs for {len(inputs)} node inputs")
    k = len(body.output) - n_state
    scan_values = [ctx.lookup(name) for name in inputs[n_state:]]
    ranks = [len(v.shape) if isinstance(v, np.ndarray) else len(shape_of(v)) for v in scan_values]
    in_axes = [norm_axis(ctx, a, r) for a, r in zip(attrs.get("scan_input_axes", [0] * m), ranks)]
    in_dirs = list(attrs.get("scan_input_directions", [0] * m))
    out_dirs = list(attrs.get("scan_output_directions", [0] * k))
    lengths = {(v.shape if isinstance(v, np.ndarray) else shape_of(v))[a] for v, a in zip(scan_values, in_axes)}
    if len(lengths) != 1:
        raise ctx.shape_error(f"the scan inputs have different lengths {sorted(lengths)} along their scan axes")
    steps = lengths.pop() if m else 0
    if steps == 0:
        raise ctx.unsupported("a scan of 0 iterations (zero-size outputs) is not supported")
    if steps * max(len(body.node), 1) > MAX_UNROLLED_NODES:
        raise ctx.unsupported(f"unrolling {steps} iterations of a {len(body.node)}-node body exceeds "
                              f"{MAX_UNROLLED_NODES} nodes")
    outer = (ctx.node, ctx.node_label)
    from onnx import numpy_helper

    initializers = {t.name: numpy_helper.to_array(t) for t in body.initializer}
    body_names = {i.name for i in body.input} | {o for n in body.node for o in n.output if o} | set(initializers)
    saved = {name: ctx.lookup(name) for name in body_names if _bound(ctx, name)}
    states: list[Value] = [ctx.lookup(name) for name in inputs[:n_state]]
    collected: list[list[Value]] = [[] for _ in range(k)]
    try:
        for name, array in initializers.items():
            ctx.bind(name, array)
        for t in range(steps):
            ctx.forget_materialized(body_names)  # each iteration binds its names to new values
            for info, value in zip(body.input[:n_state], states):
                ctx.bind(info.name, value)
            for info, x, axis, direction in zip(body.input[n_state:], scan_values, in_axes, in_dirs):
                ctx.bind(info.name, _step(ctx, x, axis, steps - 1 - t if direction else t))
            for index, inner in enumerate(body.node):
                ctx.begin_node(inner, f"{outer[1]}/iter{t}/{inner.op_type}#{index}")
                _bind_outputs(ctx, inner, _convert(ctx, inner), {})
            ctx.begin_node(*outer)
            results = [ctx.lookup(o.name) for o in body.output]
            states = results[:n_state]
            for j in range(k):
                collected[j].append(results[n_state + j])
    finally:
        ctx.begin_node(*outer)
        ctx.forget_materialized(body_names)
        for name, value in saved.items():
            ctx.bind(name, value)
    outputs: list[Value] = list(states)
    out_axes = attrs.get("scan_output_axes", [0] * k)
    for j in range(k):
        parts = collected[j][::-1] if out_dirs[j] else collected[j]
        rank = (len(parts[0].shape) if isinstance(parts[0], np.ndarray) else len(shape_of(parts[0]))) + 1
        outputs.append(_stack(ctx, parts, norm_axis(ctx, out_axes[j], rank)))
    return outputs


def _bound(ctx: ConversionContext, name: str) -> bool:
    try:
        ctx.lookup(name)
    except ModelLoadError:  # not bound (yet)
        return False
    return True


SCAN_CONVERTERS = {"Scan": convert_scan}
"""ONNX op type -> converter, merged into the importer's table."""
