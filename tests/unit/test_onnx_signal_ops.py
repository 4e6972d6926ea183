"""LRN, Det and DFT decomposed onto the graph core (frontends/onnx/convert_signal.py),
against onnxruntime (LRN, Det) and numpy's FFT (DFT)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ziggurat
from ziggurat.errors import UnsupportedOpError

ort = pytest.importorskip("onnxruntime")
RTOL, ATOL = 1e-3, 1e-4


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def one_node(node, x, out_shape, opset=19):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model)
    return model


def against_ort(model, x):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x})
    (got,) = ziggurat.compile(model, target="llvm -num-cores=1")(x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("size", [1, 3, 5])  # onnxruntime takes odd sizes only
def test_lrn(size):
    x = rand(2, 7, 3, 4)
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=0.01, beta=0.6, bias=1.5)
    against_ort(one_node(node, x, x.shape, opset=13), x)


@pytest.mark.parametrize("shape", [(2, 2), (4, 3, 3), (3, 1, 1)])
def test_det(shape):
    x = rand(*shape)
    against_ort(one_node(helper.make_node("Det", ["x"], ["y"]), x, shape[:-2], opset=13), x)


def test_det_4x4_is_refused():
    model = one_node(helper.make_node("Det", ["x"], ["y"]), rand(4, 4), (), opset=13)
    with pytest.raises(UnsupportedOpError, match="4x4"):
        ziggurat.compile(model)


@pytest.mark.parametrize("attrs,components", [
    ({"axis": 1}, 1), ({"axis": 2}, 2), ({"axis": 1, "inverse": 1}, 2), ({"axis": 1, "onesided": 1}, 1),
    ({"axis": 1, "inverse": 1, "onesided": 1}, 2),
])
def test_dft_matches_numpy(attrs, components):
    x = rand(2, 8, 5, components)
    c = x[..., 0] + (1j * x[..., 1] if components == 2 else 0)
    axis = attrs["axis"]
    if attrs.get("inverse") and attrs.get("onesided"):
        want = np.fft.irfft(c, n=2 * (x.shape[axis] - 1), axis=axis)[..., None]
    else:
        f = (np.fft.ifft if attrs.get("inverse") else np.fft.fft)(c, axis=axis)
        if attrs.get("onesided"):
            f = np.take(f, range(x.shape[axis] // 2 + 1), axis=axis)
        want = np.stack([f.real, f.imag], -1)
    model = one_node(helper.make_node("DFT", ["x"], ["y"], **attrs), x, want.shape)
    (got,) = ziggurat.compile(model, target="llvm -num-cores=1")(x)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
