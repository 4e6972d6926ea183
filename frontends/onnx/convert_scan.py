"""Scan (opsets 8+) unrolled at import time.

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


def _unroll(ctx: ConversionContext, body: onnx.GraphProto, states: list[Value], scan_values: list[Value],
            in_axes: list[int], in_dirs: list[int], label: str) -> tuple[list[Value], list[list[Value]]]:
    """Runs `body` once per step: (final states, the scan outputs of each step per output)."""
    from ziggurat.frontends.onnx.convert_control import run_subgraph

    n_state = len(states)
    k = len(body.output) - n_state
    lengths = {(v.shape if isinstance(v, np.ndarray) else shape_of(v))[a] for v, a in zip(scan_values, in_axes)}
    if len(lengths) != 1:
        raise ctx.shape_error(f"the scan inputs have different lengths {sorted(lengths)} along their scan axes")
    steps = lengths.pop()
    if steps == 0:
        raise ctx.unsupported("a scan of 0 iterations (zero-size outputs) is not supported")
    if steps * max(len(body.node), 1) > MAX_UNROLLED_NODES:
        raise ctx.unsupported(f"unrolling {steps} iterations of a {len(body.node)}-node body exceeds "
                              f"{MAX_UNROLLED_NODES} nodes")
    collected: list[list[Value]] = [[] for _ in range(k)]
    for t in range(steps):
        steps_in = [_step(ctx, x, axis, steps - 1 - t if direction else t)
                    for x, axis, direction in zip(scan_values, in_axes, in_dirs)]
        results = run_subgraph(ctx, body, [*states, *steps_in], f"{label}/iter{t}")
        states = results[:n_state]
        for j in range(k):
            collected[j].append(results[n_state + j])
    return states, collected


def _rank(value: Value) -> int:
    return len(value.shape) if isinstance(value, np.ndarray) else len(shape_of(value))


def convert_scan(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Scan (opsets 9+): N state variables and M scan inputs; axes and
    directions per scan input and output. Opset 8: a leading batch axis on
    every input and output, unrolled per batch entry; sequence_lens must be
    left out or known at import time and equal to the full length."""
    if ctx.opset < 9:
        return _convert_scan8(ctx, node)
    attrs = attributes(node)
    body: onnx.GraphProto = attrs["body"]
    m = int(attrs["num_scan_inputs"])
    inputs = list(node.input)
    n_state = len(inputs) - m
    if n_state < 0 or len(body.input) != len(inputs):
        raise ctx.shape_error(f"the body takes {len(body.input)} inputs for {len(inputs)} node inputs")
    k = len(body.output) - n_state
    scan_values = [ctx.lookup(name) for name in inputs[n_state:]]
    in_axes = [norm_axis(ctx, a, _rank(v)) for a, v in zip(attrs.get("scan_input_axes", [0] * m), scan_values)]
    in_dirs = list(attrs.get("scan_input_directions", [0] * m))
    out_dirs = list(attrs.get("scan_output_directions", [0] * k))
    if not m:
        raise ctx.unsupported("a scan without scan inputs (0 iterations) is not supported")
    states, collected = _unroll(ctx, body, [ctx.lookup(name) for name in inputs[:n_state]], scan_values,
                                in_axes, in_dirs, ctx.node_label)
    outputs: list[Value] = list(states)
    out_axes = attrs.get("scan_output_axes", [0] * k)
    for j in range(k):
        parts = collected[j][::-1] if out_dirs[j] else collected[j]
        outputs.append(_stack(ctx, parts, norm_axis(ctx, out_axes[j], _rank(parts[0]) + 1)))
    return outputs


def _convert_scan8(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Opset-8 Scan: inputs sequence_lens (optional), states [B, ...], scan
    inputs [B, T, ...]; each batch entry is scanned along axis 1 on its own."""
    attrs = attributes(node)
    body: onnx.GraphProto = attrs["body"]
    m = int(attrs["num_scan_inputs"])
    inputs = list(node.input[1:])
    n_state = len(inputs) - m
    if n_state < 0 or m < 1 or len(body.input) != len(inputs):
        raise ctx.shape_error(f"the body takes {len(body.input)} inputs for {len(inputs)} node inputs")
    values = [ctx.lookup(name) for name in inputs]
    shapes = [tuple(v.shape) if isinstance(v, np.ndarray) else shape_of(v) for v in values]
    if any(len(sh) < 1 for sh in shapes) or any(len(sh) < 2 for sh in shapes[n_state:]):
        raise ctx.shape_error(f"opset-8 Scan needs a batch axis on every input, got shapes {shapes}")
    batches = {sh[0] for sh in shapes}
    if len(batches) != 1:
        raise ctx.shape_error(f"the inputs have different batch sizes {sorted(batches)}")
    batch = batches.pop()
    lens_name = ctx.input(node, 0)
    if lens_name is not None:
        lens = ctx.shape_parameter(lens_name)
        full = shapes[n_state][1]
        if lens is None or lens.shape != (batch,) or np.any(lens != full):
            raise ctx.unsupported(f"sequence_lens ('{lens_name}') must be left out or known at import time and "
                                  f"equal to the full length {full} for every batch entry")
    in_dirs = list(attrs.get("directions", [0] * m))
    per_batch: list[list[Value]] = []
    for b in range(batch):
        entry = [_step(ctx, v, 0, b) for v in values]
        states, collected = _unroll(ctx, body, entry[:n_state], entry[n_state:], [0] * m, in_dirs,
                                    f"{ctx.node_label}/batch{b}")
        per_batch.append([*states, *(_stack(ctx, parts, 0) for parts in collected)])
    return [_stack(ctx, [entry[j] for entry in per_batch], 0) for j in range(len(per_batch[0]))]


SCAN_CONVERTERS = {"Scan": convert_scan}
"""ONNX op type -> converter, merged into the importer's table."""
