"""LRN, Det and DFT decomposed onto the graph core.

* LRN: the squares summed over a window of channels by a ones convolution
  over [N, 1, C, H*W] (`convert_window.window_sum_2d`), then
  x / (bias + alpha / size * sum)^beta.
* Det of 1x1, 2x2 and 3x3 matrices: the closed-form cofactor expansion over
  slices (larger matrices are refused).
* DFT (opsets 17+): a linear map along the signal axis, so a `graph.matmul`
  with constant matrices computed at import time by applying numpy's FFT to
  the identity. Real and complex input, inverse, onesided (rfft) and the
  inverse of a onesided spectrum (irfft, real output), and a compile-time
  dft_length that zero-pads or truncates.

```mlir
// DFT along axis 1 of a real tensor<1x10x10x1xf32>
%re = graph.matmul %fre, %x3 : tensor<10x10xf32>, tensor<1x10x10xf32> -> tensor<1x10x10xf32>
%im = graph.matmul %fim, %x3 : tensor<10x10xf32>, tensor<1x10x10xf32> -> tensor<1x10x10xf32>
%y = graph.concat %re4, %im4 {axis = 3 : i64} : ... -> tensor<1x10x10x2xf32>
```
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of
from ziggurat.frontends.onnx.convert_index import const, const_input, norm_axis, require_float, three_d
from ziggurat.frontends.onnx.convert_window import like, reshape, window_sum_2d


def convert_lrn(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """LRN (opsets 1+) over channels (axis 1) of a rank >= 3 input."""
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    require_float(ctx, x)
    shape = shape_of(x)
    if len(shape) < 3:
        raise ctx.shape_error(f"input shape {shape} needs rank >= 3 (N, C, spatial...)")
    size = int(attrs["size"])
    alpha, beta, bias = float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75)), float(attrs.get("bias", 1.0))
    n, c, rest = shape[0], shape[1], math.prod(shape[2:])
    squares = reshape(ctx, ctx.emit(graph.MulOp(x, x, x.type)), (n, 1, c, rest))
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sums = reshape(ctx, window_sum_2d(ctx, squares, [size, 1], [1, 1], [1, 1], [lo, 0, hi, 0], False, "ones"), shape)
    scaled = ctx.emit(graph.MulOp(sums, const(ctx, x, np.array([alpha / size]), "alpha"), x.type))
    base = ctx.emit(graph.AddOp(scaled, const(ctx, x, np.array([bias]), "bias"), x.type))
    denominator = ctx.emit(graph.PowOp(base, const(ctx, x, np.array([beta]), "beta"), x.type))
    return [ctx.emit(graph.DivOp(x, denominator, x.type))]


def _entry(ctx: ConversionContext, x: SSAValue, i: int, j: int) -> SSAValue:
    """x[..., i, j] as a [...] tensor (a [1] tensor for a single matrix)."""
    shape = shape_of(x)
    lead = list(shape[:-2])
    cell = ctx.emit(graph.SliceOp(x, [0] * len(lead) + [i, j], [1] * len(shape), like(x, [*lead, 1, 1])))
    return reshape(ctx, cell, lead or [1])


def convert_det(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Det (opsets 11+) of [..., n, n] for n <= 3 by cofactor expansion."""
    x = ctx.value(node.input[0])
    require_float(ctx, x)
    shape = shape_of(x)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ctx.shape_error(f"input shape {shape} is not a stack of square matrices")
    n = shape[-1]
    if n > 3:
        raise ctx.unsupported(f"determinants of {n}x{n} matrices are not supported; only up to 3x3")
    e = [[_entry(ctx, x, i, j) for j in range(n)] for i in range(n)]

    def mul(a: SSAValue, b: SSAValue) -> SSAValue:
        return ctx.emit(graph.MulOp(a, b, a.type))

    def minor2(a: SSAValue, b: SSAValue, c: SSAValue, d: SSAValue) -> SSAValue:
        return ctx.emit(graph.SubOp(mul(a, d), mul(b, c), a.type))

    if n == 1:
        det = e[0][0]
    elif n == 2:
        det = minor2(e[0][0], e[0][1], e[1][0], e[1][1])
    else:
        t0 = mul(e[0][0], minor2(e[1][1], e[1][2], e[2][1], e[2][2]))
        t1 = mul(e[0][1], minor2(e[1][0], e[1][2], e[2][0], e[2][2]))
        t2 = mul(e[0][2], minor2(e[1][0], e[1][1], e[2][0], e[2][1]))
        det = ctx.emit(graph.AddOp(ctx.emit(graph.SubOp(t0, t1, t0.type)), t2, t0.type))
    return [reshape(ctx, det, shape[:-2])]


def _dft_matrices(n_in: int, length: int, inverse: bool, onesided: bool, real_out: bool):
    """(re, im) parts of the complex matrix mapping the n_in input samples to
    the outputs; for real_out (irfft) the real matrices applied to (Re X, Im X)."""
    if real_out:  # irfft: n_in spectrum bins -> `length` real samples
        eye = np.eye(n_in)
        return (np.fft.irfft(eye, n=length, axis=0), np.fft.irfft(1j * eye, n=length, axis=0))
    full = (np.fft.ifft if inverse else np.fft.fft)(np.eye(length), axis=0)  # [length, length]
    if onesided:
        full = full[: length // 2 + 1]
    cols = np.zeros((full.shape[0], n_in), complex)
    used = min(n_in, length)
    cols[:, :used] = full[:, :used]  # samples past dft_length are dropped, missing ones are zeros
    return cols.real, cols.imag


def convert_dft(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """DFT (opsets 17+): axis attribute (input from 20, compile-time), inverse,
    onesided, compile-time dft_length; the last dim holds 1 (real) or 2
    (real, imaginary) components."""
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    require_float(ctx, x)
    shape = shape_of(x)
    if len(shape) < 3 or shape[-1] not in (1, 2):
        raise ctx.shape_error(f"input shape {shape} needs rank >= 3 and a last dim of 1 or 2")
    if ctx.opset >= 20:
        axis_value = const_input(ctx, node, 2, "axis")
        axis = -2 if axis_value is None else int(axis_value.reshape(-1)[0])
    else:
        axis = attrs.get("axis", 1)
    axis = norm_axis(ctx, axis, len(shape))
    if axis == len(shape) - 1:
        raise ctx.shape_error("axis must not be the last (component) dim")
    inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
    n = shape[axis]
    length_value = const_input(ctx, node, 1, "dft_length")
    real_out = inverse and onesided
    length = int(length_value.reshape(-1)[0]) if length_value is not None else (2 * (n - 1) if real_out else n)
    if length < 1:
        raise ctx.shape_error(f"dft_length {length} must be positive")
    re, im = _dft_matrices(n, length, inverse, onesided, real_out)
    parts = [ctx.emit(graph.SliceOp(x, [0] * len(shape), [1] * len(shape), like(x, [*shape[:-1], 1])))
             if shape[-1] == 2 else x]
    if shape[-1] == 2:
        parts.append(ctx.emit(graph.SliceOp(x, [0] * (len(shape) - 1) + [1], [1] * len(shape),
                                            like(x, [*shape[:-1], 1]))))
    pre, _, post = three_d([*shape[:-1], 1], axis)  # one component
    k = re.shape[0]
    out_shape = [k if d == axis else s for d, s in enumerate(shape[:-1])] + [1]

    def apply(matrix: np.ndarray, part: SSAValue, label: str) -> SSAValue | None:
        if not np.any(matrix):
            return None
        m = const(ctx, x, matrix, label)
        return ctx.emit(graph.MatmulOp(m, reshape(ctx, part, (pre, n, post)), like(x, (pre, k, post))))

    def combine(terms: list[SSAValue | None]) -> SSAValue:
        present = [t for t in terms if t is not None]
        if not present:
            return const(ctx, x, np.zeros((pre, k, post)), "zeros")
        total = present[0]
        for t in present[1:]:
            total = ctx.emit(graph.AddOp(total, t, total.type))
        return total

    xr, xi = parts[0], parts[1] if len(parts) > 1 else None
    if real_out:  # irfft: Re X and Im X map to real samples
        y = combine([apply(re, xr, "irfft_re"), apply(im, xi, "irfft_im") if xi is not None else None])
        return [reshape(ctx, y, out_shape)]
    out_re = combine([apply(re, xr, "dft_re"), apply(-im, xi, "dft_im_neg") if xi is not None else None])
    out_im = combine([apply(im, xr, "dft_im"), apply(re, xi, "dft_re_i") if xi is not None else None])
    out_re, out_im = reshape(ctx, out_re, out_shape), reshape(ctx, out_im, out_shape)
    return [ctx.emit(graph.ConcatOp([out_re, out_im], len(shape) - 1, like(x, [*out_shape[:-1], 2])))]


SIGNAL_CONVERTERS = {
    "LRN": convert_lrn,
    "Det": convert_det,
    "DFT": convert_dft,
}
"""ONNX op type -> converter, merged into the importer's table."""
