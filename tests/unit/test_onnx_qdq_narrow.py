"""QuantizeLinear/DequantizeLinear to and from the narrow storage types:
2- and 4-bit integers, float8 and float4, per tensor and per axis, bit for bit
against onnx's reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

import ziggurat

RNG = np.random.default_rng(5)
CODES = [T.INT4, T.UINT4, T.INT2, T.UINT2, T.FLOAT8E4M3FN, T.FLOAT8E5M2, T.FLOAT4E2M1]
IDS = [T.DataType.Name(c) for c in CODES]


def _np(code):
    return np.dtype(helper.tensor_dtype_to_np_dtype(code))


def _run(m, feeds):
    want = ReferenceEvaluator(m).run(None, feeds)
    got = ziggurat.compile(m, target="llvm -num-cores=1")(**feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint8) if g.dtype.itemsize == 1 else g,
                                      np.ascontiguousarray(w).view(np.uint8) if w.dtype.itemsize == 1 else w)


@pytest.mark.parametrize("code", CODES, ids=IDS)
@pytest.mark.parametrize("per_axis", [False, True], ids=["tensor", "axis"])
def test_quantize_then_dequantize(code, per_axis):
    """x -> QuantizeLinear (zero point of the narrow type) -> DequantizeLinear -> float32."""
    x = (RNG.normal(size=(3, 8)) * 4).astype(np.float32)
    x[0, :4] = [0.5, 1.5, -2.5, 1e6]  # ties and out of range
    scale = np.array([0.5, 0.25, 1.0], np.float32) if per_axis else np.array(0.5, np.float32)
    zero = 0 if code in (T.FLOAT8E4M3FN, T.FLOAT8E5M2) else 1
    zp = np.full(scale.shape, zero).astype(_np(code))
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=0),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=0)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [3, 8]),
                                       helper.make_tensor_value_info("s", T.FLOAT, list(scale.shape)),
                                       helper.make_tensor_value_info("zp", code, list(zp.shape))],
                          [helper.make_tensor_value_info("q", code, [3, 8]),
                           helper.make_tensor_value_info("y", T.FLOAT, [3, 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 25)])
    _run(m, {"x": x, "s": scale, "zp": zp})


@pytest.mark.parametrize("code", [T.FLOAT8E4M3FN, T.FLOAT8E5M2], ids=["e4m3fn", "e5m2"])
def test_float8_quantize_without_saturation(code):
    x = np.array([1.0, -3.0, 1e5, -1e5, np.inf, 0.3], np.float32)
    scale = np.array(0.5, np.float32)
    g = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "s"], ["q"], saturate=0, output_dtype=code)],
                          "g", [helper.make_tensor_value_info("x", T.FLOAT, [6]),
                                helper.make_tensor_value_info("s", T.FLOAT, [])],
                          [helper.make_tensor_value_info("q", code, [6])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 25)])
    _run(m, {"x": x, "s": scale})
