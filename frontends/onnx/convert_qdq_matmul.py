"""A QDQ MatMul (and pointwise Conv) as an int8 GEMM: what onnxruntime's quantize_static writes,
run on `vpdpbusd`.

In a QDQ model (onnxruntime.quantization, `QuantFormat.QDQ`) a quantized MatMul is

    xq -> DequantizeLinear(sx, zx) -> MatMul <- DequantizeLinear(sw, zw, axis=1) <- wq (constant int8)

`(xq - zx) sx @ (wq - zw) sw` equals `sx sw[j] * sum_k (xq - zx)(wq - zw)`: an integer GEMM in
i32 (`convert_quant.int8_matmul`: `graph.qgemm` with the weight packed for `vpdpbusd`, zero
points folded into constant column sums) scaled once per column. The float result goes on
to the model's next QuantizeLinear as before; each DequantizeLinear is still converted, and
dropped as dead when the MatMul was its only reader.

The importer takes this path where the target has an int8 dot product
(`import_onnx(..., int8_dot=...)`: `ziggurat.compile` passes `Target.int8_dot`): AVX512-VNNI's
`vpdpbusd`, or AVX2's `vpmaddubsw` + `vpmaddwd`. `vpmaddubsw` sums each pair of u8 x s8
products with int16 saturation; onnxruntime's AVX2 kernels accept that error and document
`reduce_range` (7-bit weights) against it. Here the AVX2 path is taken only for weights no
pair of which can saturate against any uint8 activation (`qgemm.no_pair_saturates`: 7-bit
weights always pass), so its results are exact; other weights take AVX2's `vpmaddwd` on both
operands widened to int16 (`graph.qgemm`'s wide form: exact, about 1.5x the fp32 FMA rate on a
Zen 3 core), pointwise Convs included. With `-int8=saturate` (`Target.int8_pairs`) a GEMM of
`qgemm.PARALLEL_MACS` or more with uint8 activations takes `vpmaddubsw` anyway, pairs saturating
as in onnxruntime, in the operand order `qgemm.saturating_form` picks from the weight and the
activation's zero point ('pairs16', or 'swap16': activation - 128 times weight + 128), where
one keeps typical activations' pairs in range. On targets without an int8 dot product the MatMul
stays a float one on the folded weight. Conditions: x uint8 or int8 at run time, rank >= 2,
per-tensor scale and zero point; w a constant 2-D int8 with per-tensor or per-column
(axis 1) scale and zero point. A pointwise Conv (1x1, stride 1, no padding, one group) with a
per-output-channel int8 weight is the same GEMM on the activations laid out as rows (`qdq_conv_1x1`);
a Conv of one group with a larger window (1-D or 2-D) is that GEMM over im2col rows where AVX2 runs it
on `vpmaddubsw` (`qdq_conv_im2col`).
"""

from __future__ import annotations

import numpy as np
import onnx
from xdsl.dialects.builtin import f32
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, attributes, element_type, shape_of
from ziggurat.frontends.onnx.convert_layout import _concat, _pad_part
from ziggurat.frontends.onnx.convert_qdq import constant_params
from ziggurat.frontends.onnx.convert_quant import SI8, UI8, _bin, _cast, _const, _t, int8_matmul
from ziggurat.frontends.onnx.convert_tensor import slice_value
from ziggurat.lowering.qgemm import PARALLEL_MACS, no_pair_saturates, saturating_form


def _dequantize(ctx: ConversionContext, name: str) -> tuple[str, np.ndarray, np.ndarray | None, int] | None:
    """(quantized input, scale, zero point or None, axis) of the DequantizeLinear that makes
    `name`, where its float32 scale and zero point are constants and it is not blocked; else None."""
    node = ctx.producers.get(name)
    if node is None or node.op_type != "DequantizeLinear" or node.domain not in ("", "ai.onnx"):
        return None
    params = constant_params(ctx, node)
    if params is None or params[0].dtype != np.float32:
        return None
    return (node.input[0], *params)


def _operands(ctx: ConversionContext, node: onnx.NodeProto, rank: int) -> tuple | None:
    """(xq, sx, zx, wq, w, sw, zw, axis): `node`'s two inputs dequantized (`_dequantize`), the first at run
    time, the second a constant int8 array `w` of `rank` dimensions; None otherwise."""
    a, b = _dequantize(ctx, node.input[0]), _dequantize(ctx, node.input[1])
    if a is None or b is None:
        return None
    (xq, sx, zx, _), (wq, sw, zw, axis) = a, b
    w = ctx.constant(wq)
    if ctx.constant(xq) is not None or w is None or w.dtype != np.int8 or w.ndim != rank:
        return None
    return xq, sx, zx, wq, w, sw, zw, axis


def _zero_point(ctx: ConversionContext, zp: np.ndarray | None, label: str) -> SSAValue | None:
    if zp is None or not np.any(zp):
        return None
    return _const(ctx, np.ascontiguousarray(zp.astype(np.int32)), label)


def _weight_gemm(ctx: ConversionContext, x: SSAValue, wt: np.ndarray, sx: np.ndarray, zx: np.ndarray | None,
                 sw: np.ndarray, zw: np.ndarray | None, axis: int, column_axis: int, rank: int) -> tuple[bool, str] | None:
    """(per_column, form) of the int8 GEMM of the run-time 8-bit `x` (per-tensor scale and zero point)
    by the constant int8 weight `wt` (K x N), dequantized per tensor or per output column (the
    DequantizeLinear's `axis` of the stored rank-`rank` weight is its `column_axis`); None where any of
    that does not hold. `form` (`convert_quant.int8_matmul`): 'pairs16' where no pair of the weight's
    products can saturate AVX2's `vpmaddubsw`; '' where the target's int8 dot product is not AVX2's
    (VNNI, AMX: exact); with `-int8=saturate`, 'pairs16' or 'swap16' as `saturating_form` picks for a
    large GEMM; else 'wide16' (both operands widened to int16, `vpmaddwd`: exact). What qdq_matmul, qdq_gemm
    and qdq_conv_1x1 check alike."""
    n = wt.shape[1]
    if element_type(x) not in (UI8, SI8) or sx.size != 1 or (zx is not None and zx.size != 1):
        return None
    per_column = sw.size == n and n > 1
    if sw.size not in (1, n) or (per_column and axis % rank != column_axis) or (zw is not None and zw.size != sw.size):
        return None
    if no_pair_saturates(wt):
        return per_column, "pairs16"
    if ctx.int8_dot != "avx2":
        return per_column, ""
    macs = int(np.prod([int(d) for d in shape_of(x)])) * n  # M K N: x holds M x K values
    if ctx.int8_pairs == "saturate" and macs >= PARALLEL_MACS:
        form = saturating_form(wt, int(zx.reshape(())) if zx is not None else 0) if element_type(x) == UI8 else ""
        if form:
            return per_column, form
    return per_column, "wide16"


def qdq_matmul(ctx: ConversionContext, node: onnx.NodeProto) -> SSAValue | None:
    """The int8 GEMM for MatMul `node` when its operands are dequantized as above; None otherwise."""
    dot = ctx.int8_dot
    found = _operands(ctx, node, 2) if dot != "none" else None
    if found is None:
        return activation_matmul(ctx, node) if dot == "amx" else None
    xq, sx, zx, wq, w, sw, zw, axis = found
    x = ctx.value(xq)
    params = _weight_gemm(ctx, x, w, sx, zx, sw, zw, axis, 1, 2) if len(shape_of(x)) >= 2 else None
    if params is None:
        return None
    return _scaled_product(ctx, x, ctx.value(wq), sx, zx, sw, zw, params[0], ctx.node_label or "qdq_matmul", params[1])


def _scaled_product(ctx: ConversionContext, x: SSAValue, w: SSAValue, sx: np.ndarray, zx: np.ndarray | None,
                    sw: np.ndarray, zw: np.ndarray | None, per_column: bool, label: str, form: str) -> SSAValue:
    """`(x - zx) sx @ (w - zw) sw` as the int8 GEMM in i32 and one float scale (per column, or one)."""
    acc = int8_matmul(ctx, x, w, _zero_point(ctx, zx.reshape(()) if zx is not None else None, f"{label}_zx"),
                      _zero_point(ctx, zw.reshape(-1) if zw is not None and per_column else
                                  (zw.reshape(()) if zw is not None else None), f"{label}_zw"), label, form)
    scale = (np.float32(sx.reshape(())) * sw.astype(np.float32).reshape(-1)).astype(np.float32)
    factor = _const(ctx, scale if per_column else scale.reshape(()), f"{label}_scale")
    return _bin(ctx, graph.MulOp, _cast(ctx, acc, f32), factor)


def activation_matmul(ctx: ConversionContext, node: onnx.NodeProto) -> SSAValue | None:
    """Attention's MatMuls (Q K^T, P V): both operands dequantized from run-time 8-bit tensors with
    per-tensor scales and zero points, as the int8 GEMM with B packed at run time (a copy of one
    operand, `[K/4][4 N]`) and the zero points' row and column sums taken at run time. Taken where
    the target has AMX (`int8_dot == 'amx'`): with VNNI the same GEMM measured no faster than the
    float MatMul it replaces (docs/quantization.md), with AMX tiles it is."""
    a, b = _dequantize(ctx, node.input[0]), _dequantize(ctx, node.input[1])
    if a is None or b is None:
        return None
    (xq, sx, zx, _), (yq, sy, zy, _) = a, b
    if ctx.constant(xq) is not None or ctx.constant(yq) is not None:
        return None
    x, y = ctx.value(xq), ctx.value(yq)
    xs, ys = list(shape_of(x)), list(shape_of(y))
    if element_type(x) not in (UI8, SI8) or element_type(y) not in (UI8, SI8) or len(xs) < 2 or len(ys) < 2:
        return None
    if (len(ys) > 2 and ys[:-2] != xs[:-2]) or any(p is not None and p.size != 1 for p in (zx, zy)) \
            or sx.size != 1 or sy.size != 1:
        return None
    return _scaled_product(ctx, x, y, sx, zx, sy, zy, False, ctx.node_label or "qdq_matmul", "")


def qdq_gemm(ctx: ConversionContext, node: onnx.NodeProto, trans_b: bool) -> SSAValue | None:
    """`A @ B'` of a QDQ Gemm without transA (B' = B, or B transposed where `trans_b`) as the int8 GEMM
    when A is dequantized at run time and B is a dequantized constant int8 weight, per tensor or per
    output column; else None. The weight is transposed once, at compile time; alpha and C stay
    Gemm's float steps (`convert_nn.convert_gemm`). A classifier head `Gemm(DQ(x), DQ(w), bias,
    transB=1)` at batch 1 reads a quarter of the float weight's bytes this way."""
    found = _operands(ctx, node, 2) if ctx.int8_dot != "none" else None
    if found is None:
        return None
    xq, sx, zx, wq, w, sw, zw, axis = found
    wt = np.ascontiguousarray(w.T) if trans_b else w  # K x N
    x = ctx.value(xq)
    if len(shape_of(x)) != 2 or shape_of(x)[1] != wt.shape[0]:
        return None
    params = _weight_gemm(ctx, x, wt, sx, zx, sw, zw, axis, 0 if trans_b else 1, 2)
    if params is None:
        return None
    label = ctx.node_label or "qdq_gemm"
    weight = _const(ctx, wt, f"{label}_wt") if trans_b else ctx.value(wq)
    return _scaled_product(ctx, x, weight, sx, zx, sw, zw, params[0], label, params[1])


# Fewer channels than this on either side: the pointwise Conv stays a float one. Below it the GEMM is
# small next to the two layout transposes it needs, and in efficientnet_b0 (squeeze-excite convs of 4
# to 48 channels) the int8 form moved the output off the literal QDQ result by 13% of its range where
# the float form's deviation is 5.4% (paired on the VNNI host, 2026-11-27).
MIN_POINTWISE_CHANNELS = 64


def qdq_conv_1x1(ctx: ConversionContext, node: onnx.NodeProto) -> SSAValue | None:
    """The int8 GEMM for a QDQ pointwise Conv (1x1 kernel, stride 1, no padding, one group), else None.

    `Conv(DQ(xq), DQ(wq, axis=0))` over NCHW is, per image, `W[co, ci] @ X[ci, h w]`; the GEMM takes the
    activations as its u8 operand, so it runs transposed: `X^T[(n h w), ci] @ W^T[ci, co]` (the weight
    transposed once, at compile time, per-channel scales per column), and the result goes back to NCHW.
    The bias (a constant, or a dequantized int32 one) is added in float as Conv's is."""
    if ctx.int8_dot == "none" or len(node.input) < 2:
        return None
    attrs = attributes(node)
    if attrs.get("group", 1) != 1 or any(v != 1 for v in attrs.get("strides", [1, 1])) \
            or any(v != 1 for v in attrs.get("dilations", [1, 1])) or any(attrs.get("pads", [0, 0, 0, 0])) \
            or attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        return None
    found = _operands(ctx, node, 4)
    if found is None:
        return None
    xq, sx, zx, wq, w, sw, zw, axis = found
    if w.shape[2:] != (1, 1):
        return None
    x = ctx.value(xq)
    xs = list(shape_of(x))
    co, ci = w.shape[:2]
    if min(co, ci) < MIN_POINTWISE_CHANNELS:
        return None
    if len(xs) != 4 or xs[1] != ci:
        return None
    wt = np.ascontiguousarray(w.reshape(co, ci).T)  # [ci, co]: K x N
    params = _weight_gemm(ctx, x, wt, sx, zx, sw, zw, axis, 0, 4)
    if params is None:
        return None
    # Full-range weights on AVX2 take the wide form too: paired against the float pointwise Conv in
    # NCHW8c, 1 thread, znver3 (2026-12-02): regnet_y_small 1.18x, segformer_b0_seg 1.16x,
    # mobilenetv3_large 1.10x, efficientnet_b0 1.07x.
    per_channel, form = params
    label = ctx.node_label or "qdq_conv"
    n, _, h, wd = xs
    rows = ctx.emit(graph.TransposeOp(x, [0, 2, 3, 1], _t([n, h, wd, ci], element_type(x))))
    rows = ctx.reshape(rows, (n * h * wd, ci))
    y = _scaled_product(ctx, rows, _const(ctx, wt, f"{label}_wt"), sx, zx, sw, zw, per_channel, label, form)
    return _conv_output(ctx, node, y, (n, h, wd, co))


def _conv_output(ctx: ConversionContext, node: onnx.NodeProto, y: SSAValue, nhwc: tuple[int, int, int, int]) -> SSAValue:
    """A conv GEMM's rows `[(n h w), co]` as the Conv's NCHW result, its bias (a constant, or a
    dequantized int32 one) added in float as Conv's is."""
    n, h, wd, co = nhwc
    y = ctx.emit(graph.TransposeOp(ctx.reshape(y, nhwc), [0, 3, 1, 2], _t([n, co, h, wd], f32)))
    bias = ctx.input(node, 2)
    if bias is None:
        return y
    if ctx.shape(bias) != (co,):
        raise ctx.shape_error(f"bias shape {ctx.shape(bias)} should be ({co},)")
    return ctx.emit(graph.AddOp(y, ctx.reshaped(bias, (co, 1, 1)), y.type))


# The forms an im2col Conv takes: AVX2's vpmaddubsw ones (-int8=saturate). Paired against the float
# NCHW8c conv, 1 thread, znver3: whisper_tiny_encoder 1.056x; on the exact wide form 1.020x, and
# segformer_b0_seg's patch embeddings (all wide) 0.979x. VNNI and AMX were not measured.
SATURATING_FORMS = ("pairs16", "swap16")


def qdq_conv_im2col(ctx: ConversionContext, node: onnx.NodeProto) -> SSAValue | None:
    """The int8 GEMM for a QDQ Conv of one group whose window is larger than one point (1-D or 2-D,
    any strides, pads and dilations), else None: the uint8 activations gathered into rows (im2col:
    `X'[(n oh ow), (dy dx ci)]`, the padding filled with the zero point, which dequantizes to 0) times
    the weight transposed once at compile time (`W'[(dy dx ci), co]`), per-channel scales per column;
    the result goes back to NCHW and the bias is added in float, as in `qdq_conv_1x1`. Taken where
    both the window's K (`ci kh kw`) and `co` reach `MIN_POINTWISE_CHANNELS` (whisper's Conv1d front
    end, segformer's patch embeddings; not a 3-channel stem) and the GEMM has `PARALLEL_MACS`."""
    if ctx.int8_dot != "avx2" or len(node.input) < 2:  # the saturating forms are AVX2's
        return None
    attrs = attributes(node)
    rank = len(ctx.shape(node.input[0]))
    if rank not in (3, 4) or attrs.get("group", 1) != 1 or attrs.get("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
        return None
    found = _operands(ctx, node, rank)
    if found is None:
        return None
    xq, sx, zx, wq, w, sw, zw, axis = found
    x = ctx.value(xq)
    xs = list(shape_of(x))
    if not all(isinstance(d, int) and d > 0 for d in xs):  # run-time dims: the float conv
        return None
    if rank == 3:  # Conv1d: a 2-D window of height 1
        w = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])
        strides, dilations = [1, *attrs.get("strides", [1])], [1, *attrs.get("dilations", [1])]
        p = list(attrs.get("pads", [0, 0]))
        pads = [0, p[0], 0, p[1]] if len(p) == 2 else None
        x = ctx.reshape(x, (xs[0], xs[1], 1, xs[2]))
    else:
        strides, dilations = list(attrs.get("strides", [1, 1])), list(attrs.get("dilations", [1, 1]))
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
    co, ci, kh, kw = w.shape
    n, c, h, wd = shape_of(x)
    if pads is None or len(pads) != 4 or len(strides) != 2 or len(dilations) != 2 or c != ci or (kh, kw) == (1, 1):
        return None
    oh = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    k = ci * kh * kw
    if min(oh, ow) < 1 or min(k, co) < MIN_POINTWISE_CHANNELS or n * oh * ow * k * co < PARALLEL_MACS:
        return None
    wt = np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(k, co))  # [(dy dx ci), co]: K x N
    params = _weight_gemm(ctx, x, wt, sx, zx, sw, zw, axis, 0, rank)
    if params is None or params[1] not in SATURATING_FORMS:
        return None
    label = ctx.node_label or "qdq_conv"
    elt = element_type(x)
    fill = int(zx.reshape(())) if zx is not None else 0
    # NHWC first: the windows are slices along H and W with the channels innermost, so the rows read
    # contiguous channels; the frame is the zero point, as Pad's constant mode makes it
    x = ctx.emit(graph.TransposeOp(x, [0, 2, 3, 1], _t([n, h, wd, ci], elt)))
    for dim, (before, after) in ((1, (pads[0], pads[2])), (2, (pads[1], pads[3]))):
        parts = [_pad_part(ctx, x, dim, before, True, "constant", fill)] if before else []
        parts += [x] + ([_pad_part(ctx, x, dim, after, False, "constant", fill)] if after else [])
        x = _concat(ctx, parts, dim)
    windows = [slice_value(ctx, x, [0, dy * dilations[0], dx * dilations[1], 0], [1, *strides, 1], [n, oh, ow, ci])
               for dy in range(kh) for dx in range(kw)]
    rows = ctx.reshape(_concat(ctx, windows, 3), (n * oh * ow, k))
    y = _scaled_product(ctx, rows, _const(ctx, wt, f"{label}_wt"), sx, zx, sw, zw, params[0], label, params[1])
    y = _conv_output(ctx, node, y, (n, oh, ow, co))
    return ctx.reshape(y, (n, co, ow)) if rank == 3 else y
