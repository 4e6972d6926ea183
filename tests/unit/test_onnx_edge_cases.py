"""ONNX node-test edge cases (conformance): old opsets whose ops did not
change, zero-size reductions, Dropout outputs. Compared with onnx's reference
evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ziggurat
from ziggurat.errors import ModelLoadError

TARGET = "llvm -num-cores=1"


def model_of(nodes, inputs, outputs, opset=17, initializers=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs], list(initializers))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_opset_1_model_with_unchanged_ops_imports():
    model = model_of([helper.make_node("Not", ["x"], ["y"])], [("x", TensorProto.BOOL, [3, 4])],
                     [("y", TensorProto.BOOL, [3, 4])], opset=1)
    x = np.random.default_rng(0).integers(0, 2, (3, 4)).astype(bool)
    np.testing.assert_array_equal(ziggurat.compile(model, target=TARGET)(x=x)[0], ~x)


def test_opset_1_model_with_changed_ops_is_refused():
    model = model_of([helper.make_node("Add", ["x", "x"], ["y"])], [("x", TensorProto.FLOAT, [3])],
                     [("y", TensorProto.FLOAT, [3])], opset=1)
    with pytest.raises(ModelLoadError, match="Add changed since"):
        ziggurat.compile(model, target=TARGET)
