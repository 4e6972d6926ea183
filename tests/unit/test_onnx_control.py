"""If and Loop (frontends/onnx/convert_control.py) against onnx's reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ziggurat
from ziggurat.errors import UnsupportedOpError
from ziggurat.frontends.onnx.importer import import_onnx

F = TensorProto.FLOAT


def branch(name, op, out_shape):
    """A branch computing op(x, 2) from the outer-scope x."""
    two = helper.make_node("Constant", [], [f"{name}_two"], value=numpy_helper.from_array(np.float32([2.0])))
    node = helper.make_node(op, ["x", f"{name}_two"], [f"{name}_out"])
    return helper.make_graph([two, node], name, [], [helper.make_tensor_value_info(f"{name}_out", F, out_shape)])


def if_model(cond_initializer=None, else_branch=None):
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("then", "Mul", [2, 3]),
                            else_branch=else_branch or branch("else", "Add", [2, 3]))
    tanh = helper.make_node("Tanh", ["y"], ["z"])
    inputs = [helper.make_tensor_value_info("x", F, [2, 3])]
    inits = []
    if cond_initializer is None:
        inputs.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    else:
        inits.append(numpy_helper.from_array(np.array(cond_initializer), "c"))
    graph = helper.make_graph([node, tanh], "g", inputs, [helper.make_tensor_value_info("z", F, [2, 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run_both(model, feeds):
    want = ReferenceEvaluator(model).run(None, feeds)
    got = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)(**feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


X = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_constant_condition_inlines_one_branch(cond):
    model = if_model(cond_initializer=cond)
    run_both(model, {"x": X})
    names = [op.name for op in import_onnx(model).module.ops.first.body.block.ops]
    assert "graph.where" not in names
    assert ("graph.mul" in names) == cond and ("graph.add" in names) != cond


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_runtime_condition_selects_with_where(cond):
    model = if_model()
    run_both(model, {"x": X, "c": np.array(cond)})
    assert "graph.where" in [op.name for op in import_onnx(model).module.ops.first.body.block.ops]


def test_if_with_branches_of_different_shapes_is_refused():
    other = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["e_out"], keepdims=1)], "else", [],
        [helper.make_tensor_value_info("e_out", F, [1, 1])])
    model = if_model(else_branch=other)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("z", F, ["d0", "d1"]))
    with pytest.raises(UnsupportedOpError, match="differs between the branches"):
        import_onnx(model)


def loop_model(trip: int):
    """y' = y * 0.5 + i for i in range(trip), scanning out y'."""
    half = helper.make_node("Constant", [], ["half"], value=numpy_helper.from_array(np.float32([0.5])))
    body = helper.make_graph(
        [half, helper.make_node("Mul", ["y_in", "half"], ["h"]), helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Add", ["h", "fi"], ["y_out"]), helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Identity", ["y_out"], ["scan"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("y_in", F, [3])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("y_out", F, [3]),
         helper.make_tensor_value_info("scan", F, [3])])
    node = helper.make_node("Loop", ["M", "C", "y"], ["y_final", "ys"], body=body)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("y", F, [3])],
                              [helper.make_tensor_value_info("y_final", F, [3]),
                               helper.make_tensor_value_info("ys", F, [trip, 3])],
                              [numpy_helper.from_array(np.array(trip, np.int64), "M"),
                               numpy_helper.from_array(np.array(True), "C")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_loop_with_constant_trip_count_is_unrolled():
    run_both(loop_model(4), {"y": np.float32([1.0, -2.0, 3.0])})


def test_long_loop_is_refused():
    with pytest.raises(UnsupportedOpError, match="exceeds 16"):
        import_onnx(loop_model(40))
