"""End-to-end checks of the window ops of other spatial ranks than 2 (1-D and
3-D Conv/MaxPool/AveragePool/LpPool, 1-D ConvTranspose), decomposed onto the
2-D graph ops by frontends/onnx/convert_window.py, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ziggurat

ort = pytest.importorskip("onnxruntime")
RTOL, ATOL = 1e-3, 1e-4


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def run_both(node, x, inits=(), opset=18):
    """Compiles a one-node model over float input `x` and compares with onnxruntime."""
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [f"d{i}" for i in range(x.ndim)])],  # rank kept
        [numpy_helper.from_array(v, k) for k, v in inits],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x})
    (got,) = ziggurat.compile(model, target="llvm -num-cores=1")(x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3], pads=[1, 2], strides=[2]),
    dict(kernel_shape=[2], dilations=[2], group=2),
    dict(kernel_shape=[3], auto_pad="SAME_UPPER"),
])
def test_conv_1d(attrs):
    group = attrs.get("group", 1)
    w = rand(4, 4 // group, attrs["kernel_shape"][0], seed=1)
    b = rand(4, seed=2)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    run_both(node, rand(2, 4, 9), [("w", w), ("b", b)])


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[2, 3, 3], pads=[1, 1, 0, 0, 1, 1], strides=[2, 1, 2]),
    dict(kernel_shape=[3, 2, 2], dilations=[2, 1, 1], group=2),
])
def test_conv_3d(attrs):
    group = attrs.get("group", 1)
    w = rand(4, 4 // group, *attrs["kernel_shape"], seed=1)
    b = rand(4, seed=2)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    run_both(node, rand(1, 4, 6, 5, 6), [("w", w), ("b", b)])


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[2, 2, 2])),
    ("MaxPool", dict(kernel_shape=[3, 2, 3], strides=[2, 2, 1], pads=[1, 0, 1, 1, 1, 0], dilations=[1, 2, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3, 2], pads=[1, 1, 0, 1, 0, 1], strides=[2, 1, 2], ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[3, 3, 2], pads=[1, 1, 0, 1, 0, 1], count_include_pad=1)),
    ("LpPool", dict(kernel_shape=[2, 2, 2], strides=[2, 1, 2], p=3)),
])
def test_pool_3d(op, attrs):
    run_both(helper.make_node(op, ["x"], ["y"], **attrs), rand(2, 3, 5, 6, 5))


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ("AveragePool", dict(kernel_shape=[3], pads=[1, 0], count_include_pad=0)),
    ("LpPool", dict(kernel_shape=[3], strides=[2], p=1)),
])
def test_pool_1d(op, attrs):
    run_both(helper.make_node(op, ["x"], ["y"], **attrs), rand(2, 3, 11))


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], pads=[1, 0, 1, 2], strides=[2, 1]),
    dict(kernel_shape=[2, 3], auto_pad="SAME_LOWER"),
    dict(kernel_shape=[2, 3], dilations=[2, 1], pads=[1, 1, 0, 1]),
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
])
def test_lp_pool_2d(attrs):
    run_both(helper.make_node("LpPool", ["x"], ["y"], p=2, **attrs), rand(1, 3, 7, 8))


def test_conv_transpose_1d():
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2], pads=[1, 0], output_padding=[1])
    run_both(node, rand(1, 2, 5), [("w", rand(2, 3, 3, seed=1))])


def test_max_pool_indices_output_is_refused():
    from ziggurat.errors import UnsupportedOpError

    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2, 2])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c", "d", "e"]),
                               helper.make_tensor_value_info("i", TensorProto.INT64, ["a", "b", "c", "d", "e"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    with pytest.raises(UnsupportedOpError, match="Indices"):
        ziggurat.compile(model)
