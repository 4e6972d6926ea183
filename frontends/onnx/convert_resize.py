"""The Resize (and Upsample) converter: one constant interpolation matrix per
resized axis, applied with `graph.matmul`.

ONNX's nearest, linear and cubic modes (with every coordinate transformation,
nearest rounding mode, cubic coefficient, exclude_outside and antialias
option) are separable: along one axis, output = M @ input for a matrix M of
shape [out, in]. The importer computes M by running ONNX's reference Resize
on the identity matrix, so that the semantics are exactly the standard's,
then resizes the run-time tensor axis by axis (transpose the axis last,
multiply by M^T, transpose back).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of, tensor_type
from ziggurat.frontends.onnx.fold import evaluate

_NAMES = ("X", "roi", "scales", "sizes")


def _constant_inputs(ctx: ConversionContext, node: onnx.NodeProto) -> dict[str, np.ndarray | None]:
    names = _NAMES if node.op_type == "Resize" and ctx.opset >= 11 else ("X", "scales")
    out: dict[str, np.ndarray | None] = {}
    for index, role in enumerate(names[1:], start=1):
        name = ctx.input(node, index)
        array = ctx.shape_parameter(name) if name else None
        if name and array is None:
            raise ctx.unsupported(f"input '{role}' must be known at compile time")
        out[role] = array if array is None or array.size else None
    return out


def _run(ctx: ConversionContext, node: onnx.NodeProto, x: np.ndarray, params: dict[str, np.ndarray | None],
         attrs: dict) -> np.ndarray:
    """The reference Resize of `x` with `params` and `attrs`."""
    roles = _NAMES if node.op_type == "Resize" and ctx.opset >= 11 else ("X", "scales")
    names = [role if role == "X" or params.get(role) is not None else "" for role in roles]
    while names and not names[-1]:
        names.pop()
    probe = onnx.helper.make_node(node.op_type, names, ["Y"], **attrs)
    feeds = {"X": x, **{k: v for k, v in params.items() if v is not None and k in names}}
    return evaluate(ctx, probe, feeds)[0]


def convert_resize(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Resize (opsets 10+) and Upsample (7-9) with compile-time roi/scales/sizes."""
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    rank = len(shape)
    params = _constant_inputs(ctx, node)
    out_shape = _run(ctx, node, np.zeros(shape, np.float32), params, attrs).shape
    axes = attrs.pop("axes", None)
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    policy = attrs.get("keep_aspect_ratio_policy", "stretch")
    keep_aspect = policy != "stretch" and params.get("sizes") is not None
    y = x
    for k, axis in enumerate(axes):
        n, m = shape[axis], out_shape[axis]
        if keep_aspect:
            matrix, offset = _keep_aspect_axis(ctx, node, attrs, params, shape, axes, k)
            if matrix.shape != (m, n):
                raise ctx.unsupported(f"axis {axis}: the per-axis interpolation gives {matrix.shape}, expected {(m, n)}")
            if not (m == n and np.array_equal(matrix, np.eye(n, dtype=np.float32)) and not offset.any()):
                y = _apply(ctx, y, axis, matrix.astype(np.float32), offset.astype(np.float32))
            continue
        one = {"roi": None, "scales": None, "sizes": None}
        roi = params.get("roi")
        if roi is not None:
            one["roi"] = np.array([roi[k], 0, roi[k + len(axes)], 1], roi.dtype)
        if params.get("scales") is not None:
            one["scales"] = np.array([params["scales"][k], 1], np.float32)
        else:
            one["sizes"] = np.array([m, n], np.int64)
        if node.op_type != "Resize" or ctx.opset < 11:
            one = {"scales": one["scales"] if one["scales"] is not None else np.array([m / n, 1], np.float32)}
        # affine in general: extrapolated positions (tf_crop_and_resize) hold a constant
        offset = _run(ctx, node, np.zeros((n, 1), np.float32), one, attrs)[:, 0]
        matrix = _run(ctx, node, np.eye(n, dtype=np.float32), one, attrs) - offset[:, None]
        if matrix.shape != (m, n):
            raise ctx.unsupported(f"axis {axis}: the per-axis interpolation gives {matrix.shape}, expected {(m, n)}")
        if m == n and np.array_equal(matrix, np.eye(n, dtype=np.float32)) and not offset.any():
            continue
        y = _apply(ctx, y, axis, matrix.astype(np.float32), offset.astype(np.float32))
    return [y]


def _keep_aspect_axis(ctx: ConversionContext, node: onnx.NodeProto, attrs: dict, params: dict,
                      shape: Sequence[int], axes: list[int], k: int) -> tuple[np.ndarray, np.ndarray]:
    """(matrix, offset) of axis `axes[k]` under keep_aspect_ratio_policy: one
    scale, decided by the axis whose sizes/shape ratio is the largest
    (not_smaller) or smallest (not_larger), rounds every axis's size. The
    reference runs on a 3-D probe [n, K, n] resizing axes 0 and 1, where axis
    1 (extent K) repeats the deciding axis, so the same scale is chosen."""
    sizes = [int(v) for v in params["sizes"].reshape(-1)]
    ratios = [size / shape[a] for size, a in zip(sizes, axes)]
    j = int(np.argmax(ratios) if attrs["keep_aspect_ratio_policy"] == "not_smaller" else np.argmin(ratios))
    n, extent = shape[axes[k]], shape[axes[j]]
    one: dict[str, np.ndarray | None] = {"roi": None, "scales": None,
                                         "sizes": np.array([sizes[k], sizes[j]], np.int64)}
    roi = params.get("roi")
    if roi is not None:
        one["roi"] = np.array([roi[k], roi[j], roi[k + len(axes)], roi[j + len(axes)]], roi.dtype)
    probe = {**attrs, "axes": [0, 1]}
    offset = _run(ctx, node, np.zeros((n, extent, 1), np.float32), one, probe)[:, 0, 0]
    basis = np.ascontiguousarray(np.broadcast_to(np.eye(n, dtype=np.float32)[:, None, :], (n, extent, n)))
    matrix = _run(ctx, node, basis, one, probe)[:, 0, :] - offset[:, None]
    return matrix, offset


def _apply(ctx: ConversionContext, y: SSAValue, axis: int, matrix: np.ndarray, offset: np.ndarray) -> SSAValue:
    """y with `axis` mapped through matrix [m, n] plus `offset` [m]: axis moved
    last, @ matrix^T + offset, moved back."""
    shape = shape_of(y)
    rank = len(shape)
    perm = [d for d in range(rank) if d != axis] + [axis]
    moved = y if axis == rank - 1 else ctx.emit(graph.TransposeOp(y, perm, tensor_type([shape[p] for p in perm])))
    moved_shape = shape_of(moved)
    flat = ctx.reshape(moved, (int(np.prod(moved_shape[:-1])), moved_shape[-1]))
    weight = ctx.add_constant(matrix, f"{ctx.node_label}.interp{axis}")
    out = ctx.emit(graph.MatmulOp(flat, weight, tensor_type((shape_of(flat)[0], matrix.shape[0])), transpose_b=True))
    if offset.any():
        bias = ctx.add_constant(offset, f"{ctx.node_label}.extrapolation{axis}")
        out = ctx.emit(graph.AddOp(out, bias, out.type))
    out = ctx.reshape(out, (*moved_shape[:-1], matrix.shape[0]))
    if axis == rank - 1:
        return out
    inverse = [perm.index(d) for d in range(rank)]
    out_shape = shape_of(out)
    return ctx.emit(graph.TransposeOp(out, inverse, tensor_type([out_shape[p] for p in inverse])))
