"""Small models the target tests (AArch64, WebAssembly, portable C) compile for each target and
compare with onnxruntime: an MLP, a CNN, a normalization block and an embedding lookup."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def model(nodes, inputs, outputs, inits, opset=17):
    """A model whose values are float32, except the int64 input `ids`."""
    def info(n, s):
        return helper.make_tensor_value_info(n, TensorProto.INT64 if n == "ids" else TensorProto.FLOAT, s)

    g = helper.make_graph(nodes, "m", [info(n, s) for n, s in inputs], [info(n, s) for n, s in outputs],
                          [numpy_helper.from_array(a, n) for n, a in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def mlp():
    rng = np.random.default_rng(1)
    inits = {"w1": rng.standard_normal((64, 96)).astype(np.float32) * 0.2,
             "b1": rng.standard_normal(96).astype(np.float32),
             "w2": rng.standard_normal((96, 10)).astype(np.float32) * 0.2}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]), helper.make_node("MatMul", ["h2", "w2"], ["y"])]
    return model(nodes, [("x", [16, 64])], [("y", [16, 10])], inits)


def cnn():
    rng = np.random.default_rng(2)
    inits = {"w": rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3,
             "b": rng.standard_normal(8).astype(np.float32),
             "fc": rng.standard_normal((10, 8 * 4 * 4)).astype(np.float32) * 0.1,
             "fb": rng.standard_normal(10).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1)]
    return model(nodes, [("x", [2, 3, 8, 8])], [("y", [2, 10])], inits)


def norm_block(tanh: bool = True, erf: bool = False):
    """LayerNorm, MatMul, Softmax (the vector exp), and with `tanh` / `erf` a Tanh / an Erf added in."""
    rng = np.random.default_rng(3)
    inits = {"g": rng.standard_normal(32).astype(np.float32), "be": rng.standard_normal(32).astype(np.float32),
             "w": rng.standard_normal((32, 32)).astype(np.float32) * 0.2}
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "be"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("MatMul", ["n", "w"], ["m"]), helper.make_node("Softmax", ["m"], ["s"], axis=-1)]
    last = "s"
    for op, use in (("Tanh", tanh), ("Erf", erf)):
        if use:
            nodes += [helper.make_node(op, ["m"], [op.lower()]), helper.make_node("Add", [last, op.lower()], [last + "+"])]
            last += "+"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    return model(nodes, [("x", [2, 8, 32])], [("y", [2, 8, 32])], inits)


def embedding():
    """Gather on run-time token ids: the index check's output travels with the model's."""
    table = np.random.default_rng(4).standard_normal((10, 8)).astype(np.float32)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], axis=0), helper.make_node("Relu", ["e"], ["y"])]
    return model(nodes, [("ids", [1, 5])], [("y", [1, 5, 8])], {"table": table})
