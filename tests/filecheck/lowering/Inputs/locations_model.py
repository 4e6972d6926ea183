"""Writes the ONNX model of onnx-locations.mlir to argv[1]: a MatMul, Add and Relu that fuse into one
kernel, and two Tanh nodes (one without a name) whose identical kernels dedupe-kernels merges."""

import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
w = nh.from_array(np.ones((8, 16), np.float32), "w")
b = nh.from_array(np.ones(16, np.float32), "b")
nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="mm1"), h.make_node("Add", ["m", "b"], ["a"], name="add1"),
         h.make_node("Relu", ["a"], ["y"], name="relu1"), h.make_node("Tanh", ["x2"], ["t"], name="tanh_a"),
         h.make_node("Tanh", ["x3"], ["u"])]
io = lambda n, s: h.make_tensor_value_info(n, T.FLOAT, s)
g = h.make_graph(nodes, "g", [io("x", [4, 8]), io("x2", [4, 8]), io("x3", [4, 8])], [io("y", [4, 16]), io("t", [4, 8]), io("u", [4, 8])], [w, b])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), sys.argv[1])
