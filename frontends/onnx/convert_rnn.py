"""The LSTM converter: the recurrence unrolled over the static sequence length
into matmuls and elementwise graph ops.

The input projection X @ W^T + Wb + Rb runs once for the whole sequence; each
time step then adds H_{t-1} @ R^T, splits the gates (ONNX order i, o, f, c)
with `graph.slice` and updates the cell. The sequence length is part of the
static input shape, so the unrolled steps are the graph, not a loop.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of, tensor_type
from ziggurat.frontends.onnx.convert_tensor import slice_value

ACTIVATIONS: dict[str, type[graph.UnaryOp]] = {"Sigmoid": graph.SigmoidOp, "Tanh": graph.TanhOp, "Relu": graph.ReluOp}
"""Activation functions without alpha/beta parameters."""


def direction_part(ctx: ConversionContext, name: str, d: int, shape: Sequence[int]) -> SSAValue:
    """Entry `d` of the leading (direction) dim of `name`, reshaped to `shape`."""
    full = ctx.shape(name)
    if not full or full[0] <= d or int(np.prod(full[1:])) != int(np.prod(shape)):
        raise ctx.shape_error(f"input '{name}' has shape {tuple(full)}; expected (directions, ...) "
                              f"with {int(np.prod(shape))} elements per direction, i.e. {tuple(shape)}")
    array = ctx.constant(name)
    if array is not None:
        return ctx.add_constant(np.ascontiguousarray(array[d]).reshape(shape).astype(np.float32), f"{name}.{d}")
    x = ctx.value(name)
    part = slice_value(ctx, x, [d] + [0] * (len(full) - 1), [1] * len(full), [1, *full[1:]])
    return ctx.reshape(part, shape)


def columns(ctx: ConversionContext, x: SSAValue, start: int, size: int) -> SSAValue:
    rows, _ = shape_of(x)
    return slice_value(ctx, x, [0, start], [1, 1], [rows, size])


def activations(ctx: ConversionContext, attrs: dict, directions: int,
                defaults: Sequence[str] = ("Sigmoid", "Tanh", "Tanh")) -> list[list[type[graph.UnaryOp]]]:
    """The activation functions of each direction (len(defaults) per direction)."""
    per = len(defaults)
    names = list(attrs.get("activations", list(defaults) * directions))
    if attrs.get("activation_alpha") or attrs.get("activation_beta"):
        raise ctx.unsupported("activation_alpha/activation_beta are not supported")
    unknown = sorted({n for n in names if n not in ACTIVATIONS})
    if unknown:
        raise ctx.unsupported(f"activations {unknown} are not supported; only {sorted(ACTIVATIONS)}")
    if len(names) != per * directions:
        raise ctx.shape_error(f"activations {names} should list {per} functions per direction")
    return [[ACTIVATIONS[n] for n in names[per * d:per * d + per]] for d in range(directions)]


def prepare_recurrence(
    ctx: ConversionContext, node: onnx.NodeProto, attrs: dict, gates: int
) -> tuple[SSAValue, str, int, int, int]:
    """Checks what LSTM, GRU and RNN share and returns the input X as
    [seq, batch, size] with (direction, layout, number of directions,
    hidden size). W and R must hold `gates` blocks per direction; clip and
    uneven sequence_lens are unsupported."""
    if "clip" in attrs:
        raise ctx.unsupported("the clip attribute is not supported")
    direction = attrs.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ctx.shape_error(f"direction '{direction}' is not forward, reverse or bidirectional")
    layout = attrs.get("layout", 0)
    x = ctx.value(node.input[0])
    if len(shape_of(x)) != 3:
        raise ctx.shape_error(f"X has shape {shape_of(x)}, expected rank 3")
    if layout:
        s0, s1, s2 = shape_of(x)
        x = ctx.emit(graph.TransposeOp(x, (1, 0, 2), tensor_type((s1, s0, s2))))
    seq, _, size_in = shape_of(x)
    dirs = 2 if direction == "bidirectional" else 1
    hidden = attrs.get("hidden_size", ctx.shape(node.input[2])[-1])
    width = gates * hidden
    if ctx.shape(node.input[1]) != (dirs, width, size_in) or ctx.shape(node.input[2]) != (dirs, width, hidden):
        raise ctx.shape_error(
            f"W {ctx.shape(node.input[1])} and R {ctx.shape(node.input[2])} do not fit {dirs} direction(s), "
            f"hidden_size {hidden} and input size {size_in}"
        )
    lens = ctx.input(node, 4)
    if lens is not None:
        values = ctx.shape_parameter(lens)
        if values is None or np.any(values != seq):
            raise ctx.unsupported("sequence_lens must be a constant equal to the sequence length for every batch entry")
    return x, direction, layout, dirs, hidden


def convert_lstm(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """LSTM (opsets 7+; layout from 14): forward, reverse or bidirectional,
    optional bias, initial states and peepholes; Y, Y_h and Y_c outputs.
    clip, input_forget and uneven sequence_lens are unsupported."""
    attrs = attributes(node)
    if attrs.get("input_forget", 0):
        raise ctx.unsupported("input_forget=1 is not supported")
    x, direction, layout, dirs, hidden = prepare_recurrence(ctx, node, attrs, gates=4)
    seq, batch, size_in = shape_of(x)
    acts = activations(ctx, attrs, dirs)
    h0, c0, peep = ctx.input(node, 5), ctx.input(node, 6), ctx.input(node, 7)
    if layout:
        h0, c0 = (batch_first_state(ctx, n) if n else None for n in (h0, c0))

    state_type = tensor_type((batch, hidden))
    ys, hs, cs = [], [], []
    x2 = ctx.reshape(x, (seq * batch, size_in))
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        w = direction_part(ctx, node.input[1], d, (4 * hidden, size_in))
        r = direction_part(ctx, node.input[2], d, (4 * hidden, hidden))
        proj = ctx.emit(graph.MatmulOp(x2, w, tensor_type((seq * batch, 4 * hidden)), transpose_b=True))
        bias = ctx.input(node, 3)
        if bias is not None:
            b = direction_part(ctx, bias, d, (2, 4 * hidden))
            wb, rb = (ctx.reshape(slice_value(ctx, b, [k, 0], [1, 1], [1, 4 * hidden]), (4 * hidden,)) for k in (0, 1))
            bsum = ctx.emit(graph.AddOp(wb, rb, wb.type))
            proj = ctx.emit(graph.AddOp(proj, bsum, proj.type))
        zeros = None
        if h0 is None or c0 is None:
            zeros = ctx.add_constant(np.zeros((batch, hidden), np.float32), f"{ctx.node_label}.zeros")
        h = direction_part(ctx, h0, d, (batch, hidden)) if h0 else zeros
        c = direction_part(ctx, c0, d, (batch, hidden)) if c0 else zeros
        p = [columns(ctx, direction_part(ctx, peep, d, (1, 3 * hidden)), k * hidden, hidden)
             for k in range(3)] if peep else None
        f_act, g_act, h_act = acts[d]
        outputs: list[SSAValue] = [None] * seq  # type: ignore[list-item]
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            step = slice_value(ctx, proj, [t * batch, 0], [1, 1], [batch, 4 * hidden])
            rec = ctx.emit(graph.MatmulOp(h, r, tensor_type((batch, 4 * hidden)), transpose_b=True))
            gates = ctx.emit(graph.AddOp(step, rec, rec.type))
            pre_i, pre_o, pre_f, pre_c = (columns(ctx, gates, k * hidden, hidden) for k in range(4))
            if p:
                pre_i = ctx.emit(graph.AddOp(pre_i, ctx.emit(graph.MulOp(p[0], c, state_type)), state_type))
                pre_f = ctx.emit(graph.AddOp(pre_f, ctx.emit(graph.MulOp(p[2], c, state_type)), state_type))
            i_gate, f_gate, cand = ctx.emit(f_act(pre_i)), ctx.emit(f_act(pre_f)), ctx.emit(g_act(pre_c))
            c = ctx.emit(graph.AddOp(ctx.emit(graph.MulOp(f_gate, c, state_type)),
                                     ctx.emit(graph.MulOp(i_gate, cand, state_type)), state_type))
            if p:
                pre_o = ctx.emit(graph.AddOp(pre_o, ctx.emit(graph.MulOp(p[1], c, state_type)), state_type))
            o_gate = ctx.emit(f_act(pre_o))
            h = ctx.emit(graph.MulOp(o_gate, ctx.emit(h_act(c)), state_type))
            outputs[t] = ctx.reshape(h, (1, batch, hidden))
        ys.append(concat(ctx, outputs, 0))
        hs.append(ctx.reshape(h, (1, batch, hidden)))
        cs.append(ctx.reshape(c, (1, batch, hidden)))
    y = concat(ctx, [ctx.reshape(v, (seq, 1, batch, hidden)) for v in ys], 1)
    y_h, y_c = concat(ctx, hs, 0), concat(ctx, cs, 0)
    if layout:
        y = ctx.emit(graph.TransposeOp(y, (2, 0, 1, 3), tensor_type((batch, seq, dirs, hidden))))
        y_h, y_c = (ctx.emit(graph.TransposeOp(v, (1, 0, 2), tensor_type((batch, dirs, hidden)))) for v in (y_h, y_c))
    return [y, y_h, y_c]


def batch_first_state(ctx: ConversionContext, name: str) -> str:
    """Binds and returns a name for a layout-1 state [batch, dirs, H] as [dirs, batch, H]."""
    batch, dirs, hidden = ctx.shape(name)
    array = ctx.constant(name)
    value: Value = (np.transpose(array, (1, 0, 2)) if array is not None else
                    ctx.emit(graph.TransposeOp(ctx.value(name), (1, 0, 2), tensor_type((dirs, batch, hidden)))))
    ctx.bind(f"{name}.dirs_first", value)
    return f"{name}.dirs_first"


def concat(ctx: ConversionContext, values: list[SSAValue], axis: int) -> SSAValue:
    if len(values) == 1:
        return values[0]
    shape = list(shape_of(values[0]))
    shape[axis] = sum(shape_of(v)[axis] for v in values)
    return ctx.emit(graph.ConcatOp(values, axis, tensor_type(shape)))
