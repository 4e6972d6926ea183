"""Value specialization (frontends/onnx/specialize.py): shape-parameter graph
inputs are named by the importer's error, bound by `compile(bind=...)`, and
compiled per value by `SpecializingModel` and the ONNX backend."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ziggurat
from ziggurat.errors import InputError, UnsupportedOpError
from ziggurat.frontends.onnx import backend
from ziggurat.frontends.onnx.specialize import SpecializingModel

RNG = np.random.default_rng(3)


def reduce_model() -> onnx.ModelProto:
    """ReduceSum(x, axes) with `axes` a graph input, then a Relu on the result."""
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=1), helper.make_node("Relu", ["s"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                                       helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c"])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_error_names_the_input_to_bind():
    with pytest.raises(UnsupportedOpError) as err:
        ziggurat.compile(reduce_model())
    assert err.value.needs_values == ("axes",)  # x is data: never bound, although small
    assert "ReduceSum" in str(err.value) and "bind={'axes': value}" in str(err.value)


def test_bind_makes_the_input_a_constant():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    compiled = ziggurat.compile(reduce_model(), bind={"axes": np.array([1])})
    assert [t.name for t in compiled.inputs] == ["x"]
    np.testing.assert_allclose(compiled(x=x)[0], np.maximum(x.sum(1, keepdims=True), 0), rtol=1e-5)
    with pytest.raises(InputError, match="cannot bind 'nope'"):
        ziggurat.compile(reduce_model(), bind={"nope": np.array([1])})


def test_specializing_model_compiles_once_per_value():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    model = SpecializingModel(reduce_model(), lambda m, b: ziggurat.compile(m, bind=b))
    for axis in (2, 0, 2, -1):
        got = model(x, np.array([axis], np.int64))[0]
        np.testing.assert_allclose(got, np.maximum(x.sum(axis, keepdims=True), 0), rtol=1e-5)
    assert model.needs == ["axes"]
    assert model.compiles == 3  # axes 2, 0 and -1; the second 2 reuses the first variant


def test_backend_specializes_by_itself():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    rep = backend.prepare(reduce_model())
    (got,) = rep.run([x, np.array([0], np.int64)])
    np.testing.assert_allclose(got, np.maximum(x.sum(0, keepdims=True), 0), rtol=1e-5)


def test_data_dependent_refusal_is_not_specialized():
    """An op without a run-time conversion is refused as before: specializing
    its data input would only fold the op away at import time."""
    g = helper.make_graph([helper.make_node("RandomUniformLike", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    with pytest.raises(UnsupportedOpError) as err:
        ziggurat.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))
    assert err.value.needs_values == ()
