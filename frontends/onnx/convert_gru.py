"""The GRU and RNN converters: like LSTM (convert_rnn.py), the recurrence is
unrolled over the static sequence length into matmuls and elementwise ops,
with the input projection computed once for the whole sequence."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of, tensor_type
from ziggurat.frontends.onnx.convert_rnn import (
    activations,
    batch_first_state,
    columns,
    concat,
    direction_part,
    prepare_recurrence,
)
from ziggurat.frontends.onnx.convert_tensor import slice_value


def _recurrent(ctx: ConversionContext, node: onnx.NodeProto, gates: int, defaults: Sequence[str]) -> Sequence[Value]:
    """GRU (gates=3, zrh) or RNN (gates=1): forward, reverse or bidirectional,
    layout 0 or 1, optional B and initial_h; outputs Y and Y_h."""
    attrs = attributes(node)
    x, direction, layout, dirs, hidden = prepare_recurrence(ctx, node, attrs, gates)
    seq, batch, size_in = shape_of(x)
    width = gates * hidden
    acts = activations(ctx, attrs, dirs, defaults)
    h0 = ctx.input(node, 5)
    if layout and h0:
        h0 = batch_first_state(ctx, h0)
    lbr = bool(attrs.get("linear_before_reset", 0))
    state = tensor_type((batch, hidden))

    def add(a: SSAValue, b: SSAValue) -> SSAValue:
        return ctx.emit(graph.AddOp(a, b, tensor_type(graph.broadcast_shapes(shape_of(a), shape_of(b)))))

    def mul(a: SSAValue, b: SSAValue) -> SSAValue:
        return ctx.emit(graph.MulOp(a, b, state))

    x2 = ctx.reshape(x, (seq * batch, size_in))
    ys, hs = [], []
    for d in range(dirs):
        f_act = acts[d][0]
        w = direction_part(ctx, node.input[1], d, (width, size_in))
        r = direction_part(ctx, node.input[2], d, (width, hidden))
        proj = ctx.emit(graph.MatmulOp(x2, w, tensor_type((seq * batch, width)), transpose_b=True))
        rb_h = None
        bias = ctx.input(node, 3)
        if bias is not None:
            b = direction_part(ctx, bias, d, (2, width))
            wb, rb = (ctx.reshape(slice_value(ctx, b, [k, 0], [1, 1], [1, width]), (width,)) for k in (0, 1))
            if gates == 3 and lbr:  # Rb_h stays inside r * (H R_h^T + Rb_h)
                rb_h = ctx.reshape(slice_value(ctx, rb, [2 * hidden], [1], [hidden]), (hidden,))
                rb = ctx.emit(graph.MulOp(rb, ctx.add_constant(
                    np.repeat(np.array([1, 1, 0], np.float32), hidden), f"{ctx.node_label}.mask"), rb.type))
            proj = add(proj, add(wb, rb))
        if h0:
            h = direction_part(ctx, h0, d, (batch, hidden))
        else:
            h = ctx.add_constant(np.zeros((batch, hidden), np.float32), f"{ctx.node_label}.zeros")
        outputs: list[SSAValue] = [None] * seq  # type: ignore[list-item]
        reverse = direction == "reverse" or d == 1
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            step = slice_value(ctx, proj, [t * batch, 0], [1, 1], [batch, width])
            if gates == 1:
                rec = ctx.emit(graph.MatmulOp(h, r, state, transpose_b=True))
                h = ctx.emit(f_act(add(step, rec)))
            else:
                h = _gru_step(ctx, step, h, r, rb_h, hidden, lbr, f_act, acts[d][1], add, mul)
            outputs[t] = ctx.reshape(h, (1, batch, hidden))
        ys.append(concat(ctx, outputs, 0))
        hs.append(ctx.reshape(h, (1, batch, hidden)))
    y = concat(ctx, [ctx.reshape(v, (seq, 1, batch, hidden)) for v in ys], 1)
    y_h = concat(ctx, hs, 0)
    if layout:
        y = ctx.emit(graph.TransposeOp(y, (2, 0, 1, 3), tensor_type((batch, seq, dirs, hidden))))
        y_h = ctx.emit(graph.TransposeOp(y_h, (1, 0, 2), tensor_type((batch, dirs, hidden))))
    return [y, y_h]


def _gru_step(ctx, step, h, r, rb_h, hidden, lbr, f_act, g_act, add, mul) -> SSAValue:
    """One GRU step: z, r from the first 2H columns; the candidate with the reset gate
    before (linear_before_reset=0) or after (1) the recurrent matmul; H = h~ + z (H - h~)."""
    batch = shape_of(h)[0]
    state = tensor_type((batch, hidden))
    r_zr = slice_value(ctx, r, [0, 0], [1, 1], [2 * hidden, hidden])
    r_h = slice_value(ctx, r, [2 * hidden, 0], [1, 1], [hidden, hidden])
    zr = add(columns(ctx, step, 0, 2 * hidden),
             ctx.emit(graph.MatmulOp(h, r_zr, tensor_type((batch, 2 * hidden)), transpose_b=True)))
    zr = ctx.emit(f_act(zr))
    z, reset = columns(ctx, zr, 0, hidden), columns(ctx, zr, hidden, hidden)
    if lbr:
        rec = ctx.emit(graph.MatmulOp(h, r_h, state, transpose_b=True))
        if rb_h is not None:
            rec = add(rec, rb_h)
        pre = add(columns(ctx, step, 2 * hidden, hidden), mul(reset, rec))
    else:
        pre = add(columns(ctx, step, 2 * hidden, hidden),
                  ctx.emit(graph.MatmulOp(mul(reset, h), r_h, state, transpose_b=True)))
    cand = ctx.emit(g_act(pre))
    return add(cand, mul(z, ctx.emit(graph.SubOp(h, cand, state))))


def convert_gru(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """GRU (opsets 7+; layout from 14), linear_before_reset 0 or 1; clip unsupported."""
    return _recurrent(ctx, node, 3, ("Sigmoid", "Tanh"))


def convert_rnn(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """RNN (opsets 7+; layout from 14): H = f(X W^T + H R^T + Wb + Rb); clip unsupported."""
    return _recurrent(ctx, node, 1, ("Tanh",))
