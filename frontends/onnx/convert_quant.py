"""Quantized ONNX ops on the VNNI int8 GEMM: MatMulInteger, QLinearMatMul,
ConvInteger and QLinearConv.

Every one becomes `graph.qgemm` (ui8 x packed i8 -> i32, tensorized onto
`vpdpbusd`) plus ordinary graph ops:

- signedness: a signed A is moved to unsigned (`A + 128`), an unsigned B to
  signed (`B - 128`); the shifts join the zero points, so
  `(A - za) @ (B - zb) = A'@B' - za' * colsum(B') - rowsum(A') * zb' + K za' zb'`;
- packing: B is zero-padded to K % 4 == 0 and N % 16 == 0 and laid out
  `[K/4][N*4]` with reshape/transpose (constant B folds at compile time);
- convolutions: im2col as a gather with a compile-time index table, the
  padding reading the input's zero point;
- QLinear*: the i32 result times `a_scale * b_scale / y_scale`, rounded half
  to even, plus `y_zero_point`, clipped and cast to the output type.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.dialects.builtin import IntegerType, Signedness, TensorType, f32
from xdsl.ir import SSAValue

from ziggurat import dtypes
from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp
from ziggurat.dialects.graph_quant import QGemmOp
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, shape_of

I32 = IntegerType(32)
UI8 = IntegerType(8, Signedness.UNSIGNED)
SI8 = IntegerType(8)
I16 = IntegerType(16)


def _t(shape: Sequence[int], elt) -> TensorType:
    return TensorType(elt, list(shape))


def _cast(ctx: ConversionContext, x: SSAValue, elt) -> SSAValue:
    if element_type(x) == elt:
        return x
    return ctx.emit(CastOp(x, _t(shape_of(x), elt)))


def _const(ctx: ConversionContext, array: np.ndarray, label: str) -> SSAValue:
    return ctx.add_constant(np.ascontiguousarray(array), label)


def _bin(ctx: ConversionContext, cls, a: SSAValue, b: SSAValue) -> SSAValue:
    sa, sb = shape_of(a), shape_of(b)
    rank = max(len(sa), len(sb))
    sa, sb = (1,) * (rank - len(sa)) + tuple(sa), (1,) * (rank - len(sb)) + tuple(sb)
    out = [max(x, y) for x, y in zip(sa, sb)]
    return ctx.emit(cls(ctx.reshape(a, sa), ctx.reshape(b, sb), _t(out, element_type(a))))


def _reshape(ctx: ConversionContext, x: SSAValue, shape: Sequence[int]) -> SSAValue:
    return ctx.reshape(x, list(shape))


def _pad_last2(ctx: ConversionContext, x: SSAValue, rows: int, cols: int, label: str) -> SSAValue:
    """x [..., R, C] zero-padded to [..., R + rows, C + cols]."""
    shape = list(shape_of(x))
    elt = element_type(x)
    np_dtype = dtypes.to_numpy(elt)
    for axis, extra in ((len(shape) - 1, cols), (len(shape) - 2, rows)):
        if extra:
            zshape = list(shape)
            zshape[axis] = extra
            z = _const(ctx, np.zeros(zshape, np_dtype), f"{label}_pad")
            shape[axis] += extra
            x = ctx.emit(graph.ConcatOp([x, z], axis, _t(shape, elt)))
    return x


def _zero_point(ctx: ConversionContext, node: onnx.NodeProto, index: int, what: str) -> SSAValue | None:
    name = ctx.input(node, index)
    if name is None:
        return None
    arr = ctx.constant(name)
    if arr is not None and not np.any(arr):
        return None
    return _cast(ctx, ctx.value(name), I32)


def int8_matmul(ctx: ConversionContext, a: SSAValue, b: SSAValue, za: SSAValue | None, zb: SSAValue | None,
                label: str, form: str = "") -> SSAValue:
    """(a - za) @ (b - zb) in i32 for 8-bit a [..., M, K] and b [..., K, N] (2-D b broadcasts);
    za is a scalar or per row of a ([M]), zb a scalar or per column of b ([N]). `form`: 'pairs16',
    the caller checked that b (signed) keeps every int16 pair of products in range (`graph.qgemm`'s
    property: AVX2's `vpmaddubsw` GEMM may run it); 'wide16', both operands widened to int16 and b
    packed `[K/2][2 N]` (`graph.qgemm`'s wide form: AVX2's exact `vpmaddwd` GEMM); 'swap16', a as
    signed bytes (minus 128) and b as unsigned ones (plus 128), AVX2's `vpmaddubsw` with the weight
    as its unsigned operand, pairs saturating (the caller chose it, convert_qdq_matmul.py); '' the
    8-bit form for the target's int8 dot product."""
    a_shape, b_shape = list(shape_of(a)), list(shape_of(b))
    if len(a_shape) < 2 or len(b_shape) < 2 or a_shape[-1] != b_shape[-2]:
        raise ctx.shape_error(f"cannot multiply {a_shape} by {b_shape}")
    if len(b_shape) > 2 and b_shape[:-2] != a_shape[:-2]:
        raise ctx.unsupported(f"batch dims of B {b_shape[:-2]} must equal A's {a_shape[:-2]} or be absent")
    m, k = a_shape[-2:]
    n = b_shape[-1]
    wide, swap = form == "wide16", form == "swap16"  # int16 holds u8 and s8 alike: no shift to the instruction's signs
    # the instruction's operand signs: u8 a x s8 b; swap16: s8 a x u8 b (the weight plus 128)
    a_elt, b_elt = (SI8, UI8) if swap else (UI8, SI8)
    za_shift = 0 if wide or element_type(a) == a_elt else (-128 if swap else 128)
    zb_shift = 0 if wide or element_type(b) == b_elt else (128 if swap else -128)
    if za_shift and swap:  # through f32, as the wide form: u8 -> i32 (extui) has no vector form
        a = _cast(ctx, _bin(ctx, graph.AddOp, _cast(ctx, a, f32), _const(ctx, np.array(za_shift, np.float32), f"{label}_s")), a_elt)
    elif za_shift:
        a = _cast(ctx, _bin(ctx, graph.AddOp, _cast(ctx, a, I32), _const(ctx, np.array(za_shift, np.int32), f"{label}_s")), a_elt)
    if zb_shift:
        b = _cast(ctx, _bin(ctx, graph.AddOp, _cast(ctx, b, I32), _const(ctx, np.array(zb_shift, np.int32), f"{label}_s")), b_elt)
    # the zero points follow the shifts: za' = za + za_shift, zb' = zb + zb_shift
    if za_shift:
        shift = _const(ctx, np.array(za_shift, np.int32), f"{label}_za")
        za = shift if za is None else _bin(ctx, graph.AddOp, za, shift)
    if zb_shift:
        shift = _const(ctx, np.array(zb_shift, np.int32), f"{label}_zb")
        zb = shift if zb is None else _bin(ctx, graph.AddOp, zb, shift)
    kp, np_ = -(-k // 4) * 4, -(-n // 16) * 16
    ap = _pad_last2(ctx, a, 0, kp - k, f"{label}_a")
    bp = _pad_last2(ctx, b, kp - k, np_ - n, f"{label}_b")
    lead = list(shape_of(bp)[:-2])
    g, lane_t = (2, I16) if wide else (4, b_elt)
    if wide:
        # a (run time) through f32: exact for 8-bit values, and int <-> float casts have vector forms (extui
        # has none); b (a constant int8 weight) sign-extended directly, a cast fold-constants evaluates, so the
        # packed weight is made once at compile time (through f32 it was repacked on every call: a float to
        # int cast saturates, and graph_reference folds none)
        ap, bp = _cast(ctx, _cast(ctx, ap, f32), I16), _cast(ctx, bp, I16)
    packed = _reshape(ctx, bp, lead + [kp // g, g, np_])
    perm = list(range(len(lead))) + [len(lead), len(lead) + 2, len(lead) + 1]
    packed = ctx.emit(graph.TransposeOp(packed, perm, _t(lead + [kp // g, np_, g], lane_t)))
    packed = _reshape(ctx, packed, lead + [kp // g, g * np_])
    if ctx.int8_dot == "avx2" and (np_ // 16) % 2 == 0:
        # A register block walks down one 16-column panel, a packed row per k step: rows of an even number
        # of 64-byte lines put those steps into few L1 sets (N = 1024: all in one, 4 KB apart), so the panel
        # came from L2 on every pass. One more line of zeros (never read) makes it odd: 128x256 @ 256x1024
        # wide, 1 thread, znver3: 766 -> 564 us.
        packed = _pad_last2(ctx, packed, 0, 16 * g, f"{label}_row")
    pairs16 = swap or (form == "pairs16" and not zb_shift)
    c = ctx.emit(QGemmOp(ap, packed, _t(a_shape[:-2] + [m, np_], I32), pairs16=pairs16))
    if np_ != n:
        starts = [0] * len(shape_of(c))
        c = ctx.emit(graph.SliceOp(c, starts, [1] * len(starts), _t(a_shape[:-2] + [m, n], I32)))
    if zb is not None:  # - rowsum(a') * zb'
        rows = ctx.emit(graph.ReduceOp(_cast(ctx, a, I32), "sum", [len(a_shape) - 1], True, _t(a_shape[:-1] + [1], I32)))
        c = _bin(ctx, graph.SubOp, c, _bin(ctx, graph.MulOp, rows, zb))
    if za is not None:  # - za' * colsum(b')
        za_col = za if len(shape_of(za)) == 0 else _reshape(ctx, za, list(shape_of(za)) + [1])
        b32 = _cast(ctx, b, I32)
        cols = ctx.emit(graph.ReduceOp(b32, "sum", [len(b_shape) - 2], True, _t(b_shape[:-2] + [1, n], I32)))
        c = _bin(ctx, graph.SubOp, c, _bin(ctx, graph.MulOp, za_col, cols))
        if zb is not None:  # + K za' zb'
            kk = _const(ctx, np.array(k, np.int32), f"{label}_k")
            c = _bin(ctx, graph.AddOp, c, _bin(ctx, graph.MulOp, _bin(ctx, graph.MulOp, za_col, zb), kk))
    return c


def _check_8bit(ctx: ConversionContext, x: SSAValue, what: str) -> None:
    if element_type(x) not in (UI8, SI8):
        raise ctx.unsupported(f"{what} must be uint8 or int8, got {element_type(x)}")


def convert_matmul_integer(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    a, b = ctx.value(node.input[0]), ctx.value(node.input[1])
    _check_8bit(ctx, a, "A")
    _check_8bit(ctx, b, "B")
    za, zb = _zero_point(ctx, node, 2, "a_zero_point"), _zero_point(ctx, node, 3, "b_zero_point")
    return [int8_matmul(ctx, a, b, za, zb, ctx.node_label or "mmi")]


def _requantize(ctx: ConversionContext, acc: SSAValue, scale_names: Sequence[str], y_scale: str, y_zp: str | None,
                out_elt, label: str) -> SSAValue:
    """saturate(round_half_even(acc * prod(scales) / y_scale) + y_zp) as out_elt."""
    x = _cast(ctx, acc, f32)
    for s in scale_names:
        x = _bin(ctx, graph.MulOp, x, _cast(ctx, ctx.value(s), f32))
    x = _bin(ctx, graph.DivOp, x, _cast(ctx, ctx.value(y_scale), f32))
    x = ctx.emit(graph.RoundOp(x))
    if y_zp is not None:
        x = _bin(ctx, graph.AddOp, x, _cast(ctx, ctx.value(y_zp), f32))
    lo, hi = (0.0, 255.0) if out_elt == UI8 else (-128.0, 127.0)
    x = _bin(ctx, graph.MaxOp, x, _const(ctx, np.array(lo, np.float32), f"{label}_lo"))
    x = _bin(ctx, graph.MinOp, x, _const(ctx, np.array(hi, np.float32), f"{label}_hi"))
    return _cast(ctx, x, out_elt)


def convert_qlinear_matmul(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    a, b = ctx.value(node.input[0]), ctx.value(node.input[3])
    _check_8bit(ctx, a, "a")
    _check_8bit(ctx, b, "b")
    acc = int8_matmul(ctx, a, b, _zero_point(ctx, node, 2, "a_zero_point"), _zero_point(ctx, node, 5, "b_zero_point"),
                      ctx.node_label or "qlmm")
    y_zp = ctx.input(node, 7)
    out_elt = element_type(ctx.value(y_zp)) if y_zp else UI8
    return [_requantize(ctx, acc, [node.input[1], node.input[4]], node.input[6], y_zp, out_elt, ctx.node_label or "qlmm")]


def _im2col(ctx: ConversionContext, x: SSAValue, zp: SSAValue | None, kernel: Sequence[int], strides, pads,
            dilations, group_c: int, g: int, label: str) -> tuple[SSAValue, tuple[int, int, int]]:
    """Patches [N*OH*OW, Cg*KH*KW] of group g of x [N, C, H, W]; out-of-image reads give zp."""
    n, c, h, w = shape_of(x)
    kh, kw = kernel
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    total = n * c * h * w
    nn, oy, ox, cc, ky, kx = np.ix_(range(n), range(oh), range(ow), range(group_c), range(kh), range(kw))
    yy = oy * sh + ky * dh - pt
    xx = ox * sw + kx * dw - pl
    inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
    flat = ((nn * c + g * group_c + cc) * h + np.clip(yy, 0, h - 1)) * w + np.clip(xx, 0, w - 1)
    table = np.where(inside, flat, total).reshape(n * oh * ow, group_c * kh * kw).astype(np.int64)
    elt = element_type(x)
    src = _reshape(ctx, x, [total])
    pad_value = _const(ctx, np.zeros(1, np.uint8 if elt == UI8 else np.int8), f"{label}_zero") if zp is None else \
        _cast(ctx, _reshape(ctx, zp, [1]) if len(shape_of(zp)) == 0 else zp, elt)
    src = ctx.emit(graph.ConcatOp([src, _reshape(ctx, pad_value, [1])], 0, _t([total + 1], elt)))
    idx = _const(ctx, table.reshape(-1), f"{label}_im2col")
    from ziggurat.dialects.graph_dtype import GatherOp

    gathered = ctx.emit(GatherOp(src, idx, 0, _t([table.size], elt)))
    return _reshape(ctx, gathered, list(table.shape)), (n, oh, ow)


def _conv_integer(ctx: ConversionContext, node: onnx.NodeProto, x: SSAValue, w: SSAValue, zx_name: str | None,
                  zw: SSAValue | None) -> SSAValue:
    attrs = attributes(node)
    xs, ws = shape_of(x), shape_of(w)
    one_d = len(xs) == 3 and len(ws) == 3  # Conv1d (whisper's front end): a 2-D conv of height 1
    if one_d:
        x, w = _reshape(ctx, x, [xs[0], xs[1], 1, xs[2]]), _reshape(ctx, w, [ws[0], ws[1], 1, ws[2]])
        xs, ws = shape_of(x), shape_of(w)
        lead = {"kernel_shape": [1], "strides": [1], "dilations": [1]}
        attrs = {**attrs, **{k: lead[k] + list(v) for k, v in attrs.items() if k in lead}}
        if "pads" in attrs:
            attrs["pads"] = [0, attrs["pads"][0], 0, attrs["pads"][1]]
    if len(xs) != 4 or len(ws) != 4:
        raise ctx.unsupported(f"only 1-D and 2-D convolutions are supported, got input {list(xs)} and weight "
                              f"{list(ws)}")
    group = int(attrs.get("group", 1))
    kernel = list(attrs.get("kernel_shape", ws[2:]))
    strides = list(attrs.get("strides", [1, 1]))
    dil = list(attrs.get("dilations", [1, 1]))
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    if attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise ctx.unsupported(f"auto_pad '{attrs['auto_pad']}' is not supported; give explicit pads")
    zx = ctx.value(zx_name) if zx_name else None
    zx32 = _cast(ctx, zx, I32) if zx is not None else None
    label = ctx.node_label or "convi"
    oc, cg = ws[0], ws[1]
    outs = []
    for g in range(group):
        patches, (n, oh, ow) = _im2col(ctx, x, zx, kernel, strides, pads, dil, cg, g, f"{label}_g{g}")
        wg = w if group == 1 else ctx.emit(graph.SliceOp(w, [g * (oc // group), 0, 0, 0], [1, 1, 1, 1],
                                                         _t([oc // group, cg, *ws[2:]], element_type(w))))
        wm = _reshape(ctx, wg, [oc // group, cg * kernel[0] * kernel[1]])
        wt = ctx.emit(graph.TransposeOp(wm, [1, 0], _t([cg * kernel[0] * kernel[1], oc // group], element_type(w))))
        zb = zw
        if zw is not None and math.prod(shape_of(zw)) > 1:  # per output channel: this group's part
            ocg = oc // group
            zb = _reshape(ctx, zw, [oc])
            if group > 1:
                zb = ctx.emit(graph.SliceOp(zb, [g * ocg], [1], _t([ocg], I32)))
        elif zw is not None and len(shape_of(zw)):
            zb = _reshape(ctx, zw, [])
        y = int8_matmul(ctx, patches, wt, zx32, zb, f"{label}_g{g}")
        y = _reshape(ctx, y, [n, oh, ow, oc // group])
        outs.append(ctx.emit(graph.TransposeOp(y, [0, 3, 1, 2], _t([n, oc // group, oh, ow], I32))))
    n, _, oh, ow = shape_of(outs[0])
    y = outs[0] if len(outs) == 1 else ctx.emit(graph.ConcatOp(outs, 1, _t([n, oc, oh, ow], I32)))
    return _reshape(ctx, y, [n, oc, ow]) if one_d else y


def convert_conv_integer(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    x, w = ctx.value(node.input[0]), ctx.value(node.input[1])
    _check_8bit(ctx, x, "x")
    _check_8bit(ctx, w, "w")
    zw = _zero_point(ctx, node, 3, "w_zero_point")
    return [_conv_integer(ctx, node, x, w, ctx.input(node, 2), zw)]


def convert_qlinear_conv(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    x, w = ctx.value(node.input[0]), ctx.value(node.input[3])
    _check_8bit(ctx, x, "x")
    _check_8bit(ctx, w, "w")
    acc = _conv_integer(ctx, node, x, w, ctx.input(node, 2), _zero_point(ctx, node, 5, "w_zero_point"))
    bias = ctx.input(node, 8)
    if bias is not None:
        shape = [1, shape_of(acc)[1]] + [1] * (len(shape_of(acc)) - 2)
        acc = _bin(ctx, graph.AddOp, acc, _reshape(ctx, _cast(ctx, ctx.value(bias), I32), shape))
    y_zp = ctx.input(node, 7)
    out_elt = element_type(ctx.value(y_zp)) if y_zp else UI8
    return [_requantize(ctx, acc, [node.input[1], node.input[4]], node.input[6], y_zp, out_elt, ctx.node_label or "qlconv")]


QUANT_CONVERTERS = {
    "MatMulInteger": convert_matmul_integer,
    "QLinearMatMul": convert_qlinear_matmul,
    "ConvInteger": convert_conv_integer,
    "QLinearConv": convert_qlinear_conv,
}
