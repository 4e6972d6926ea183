"""End-to-end: models built with onnx.helper, compiled by ziggurat, compared
with onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ziggurat

ort = pytest.importorskip("onnxruntime")
RTOL, ATOL = 1e-3, 1e-4


def make(nodes, inputs, outputs, weights, opset=17):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model)
    return model


def check(model, feeds: dict[str, np.ndarray], threads: int = 1) -> None:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    compiled = ziggurat.compile(model, target=f"llvm -num-cores={threads}")
    got = compiled(**feeds)
    assert compiled.output_names == [o.name for o in sess.get_outputs()]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


def w(rng, *shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("threads", [1, 2])
def test_mlp(threads):
    rng = np.random.default_rng(0)
    weights = {"w1": w(rng, 64, 100), "b1": w(rng, 64), "w2": w(rng, 10, 64), "b2": w(rng, 10)}
    nodes = [
        helper.make_node("Gemm", ["input.1", "w1", "b1"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["logits"], transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    model = make(nodes, [("input.1", [3, 100])], [("probs", [3, 10]), ("logits", [3, 10])], weights)
    check(model, {"input.1": w(rng, 3, 100, scale=1)}, threads)


@pytest.mark.parametrize("threads", [1, 2])
def test_lenet_like(threads):
    rng = np.random.default_rng(1)
    weights = {"c1": w(rng, 6, 1, 5, 5), "cb": w(rng, 6), "c2": w(rng, 16, 6, 5, 5), "fw": w(rng, 10, 16 * 5 * 5, scale=0.05), "fb": w(rng, 10)}
    nodes = [
        helper.make_node("Conv", ["x", "c1", "cb"], ["a"]),
        helper.make_node("Tanh", ["a"], ["t"]),
        helper.make_node("AveragePool", ["t"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "c2"], ["b"]),
        helper.make_node("Sigmoid", ["b"], ["s"]),
        helper.make_node("AveragePool", ["s"], ["q"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["q"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
    ]
    model = make(nodes, [("x", [1, 1, 32, 32])], [("y", [1, 10])], weights)
    check(model, {"x": w(rng, 1, 1, 32, 32, scale=1)}, threads)


@pytest.mark.parametrize("threads", [1, 2])
def test_vgg_block_with_batchnorm(threads):
    rng = np.random.default_rng(2)
    weights = {
        "k": w(rng, 8, 3, 3, 3), "s": (1 + w(rng, 8)), "bb": w(rng, 8), "m": w(rng, 8), "v": (1 + np.abs(w(rng, 8))),
        "dw": w(rng, 8, 1, 3, 3), "fw": w(rng, 5, 8 * 4 * 4),
    }
    nodes = [
        helper.make_node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"], epsilon=1e-3),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "dw"], ["d"], group=8, pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Flatten", ["d"], ["f"]),
        helper.make_node("MatMul", ["f", "fwT"], ["y"]),
    ]
    weights["fwT"] = np.ascontiguousarray(weights.pop("fw").T)
    model = make(nodes, [("x", [1, 3, 16, 16])], [("y", [1, 5])], weights)
    check(model, {"x": w(rng, 1, 3, 16, 16, scale=1)}, threads)


def test_pooling_edge_cases():
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("AveragePool", ["x"], ["b"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0),
        helper.make_node("AveragePool", ["x"], ["c"], kernel_shape=[2, 3], strides=[1, 2], pads=[0, 1, 1, 0], count_include_pad=1),
        helper.make_node("GlobalAveragePool", ["x"], ["g"]),
    ]
    model = make(nodes, [("x", [1, 2, 7, 9])], [("a", [1, 2, 4, 5]), ("b", [1, 2, 4, 5]), ("c", [1, 2, 7, 4]), ("g", [1, 2, 1, 1])], {})
    check(model, {"x": w(rng, 1, 2, 7, 9, scale=1)})


def test_shape_ops_and_broadcasting():
    rng = np.random.default_rng(4)
    weights = {"shape": np.array([2, 0, -1], dtype=np.int64), "bias": w(rng, 6)}
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
        helper.make_node("Reshape", ["t", "shape"], ["r"]),
        helper.make_node("Add", ["r", "bias"], ["a"]),
        helper.make_node("Sub", ["a", "y"], ["s"]),
        helper.make_node("Div", ["s", "z"], ["d"]),
        helper.make_node("Mul", ["d", "d"], ["m"]),
        helper.make_node("Softmax", ["m"], ["o"], axis=1),
    ]
    model = make(nodes, [("x", [3, 2, 6]), ("y", [1, 3, 6]), ("z", [6])], [("o", [2, 3, 6])], {k: v for k, v in weights.items()})
    z = (np.abs(w(rng, 6)) + 0.5).astype(np.float32)
    check(model, {"x": w(rng, 3, 2, 6, scale=1), "y": w(rng, 1, 3, 6, scale=1), "z": z})


def test_batched_matmul_and_unary_math():
    rng = np.random.default_rng(5)
    nodes = [
        helper.make_node("MatMul", ["a", "b"], ["m"]),
        helper.make_node("Exp", ["m"], ["e"]),
        helper.make_node("Sqrt", ["e"], ["q"]),
        helper.make_node("Erf", ["q"], ["f"]),
        helper.make_node("Neg", ["f"], ["y"]),
    ]
    model = make(nodes, [("a", [2, 1, 5, 7]), ("b", [3, 7, 4])], [("y", [2, 3, 5, 4])], {})
    check(model, {"a": w(rng, 2, 1, 5, 7), "b": w(rng, 3, 7, 4)})


def test_output_that_is_an_input_or_a_weight():
    rng = np.random.default_rng(6)
    nodes = [helper.make_node("Identity", ["x"], ["same"]), helper.make_node("Identity", ["c"], ["const"]), helper.make_node("Relu", ["x"], ["r"])]
    model = make(nodes, [("x", [4])], [("same", [4]), ("const", [3]), ("r", [4])], {"c": w(rng, 3)})
    check(model, {"x": w(rng, 4, scale=1)})
