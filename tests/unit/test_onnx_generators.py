"""Generator ops (frontends/onnx/fold.py): ConstantOfShape, Range, the window
functions and MelWeightMatrix take only shape parameters, so a run-time input
of theirs is bound by value (specialization) and the op folds; EyeLike reads
only its input's shape and folds without binding. Compared with onnx's
reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ziggurat
from ziggurat.errors import UnsupportedOpError
from ziggurat.frontends.onnx.specialize import SpecializingModel


def model_of(node, inputs, outputs, opset=17):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def run_specialized(model, feeds):
    """The model run with every input it needs as a constant bound by value."""
    return SpecializingModel(model, lambda m, b: ziggurat.compile(m, bind=b, target="llvm -num-cores=1"))(**feeds)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_window_with_runtime_size(op, periodic):
    model = model_of(helper.make_node(op, ["n"], ["w"], periodic=periodic),
                     [("n", TensorProto.INT32, [])], [("w", TensorProto.FLOAT, ["N"])])
    with pytest.raises(UnsupportedOpError, match="must be known at compile time") as err:
        ziggurat.compile(model)
    assert err.value.needs_values == ("n",)
    feeds = {"n": np.array(10, np.int32)}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = run_specialized(model, feeds)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("start,limit,delta,elem,dtype", [
    (1.0, 5.5, 0.5, TensorProto.FLOAT, np.float32), (10, 2, -3, TensorProto.INT32, np.int32),
    (0, 7, 1, TensorProto.INT64, np.int64)])
def test_range_with_runtime_bounds(start, limit, delta, elem, dtype):
    model = model_of(helper.make_node("Range", ["s", "l", "d"], ["y"]),
                     [("s", elem, []), ("l", elem, []), ("d", elem, [])], [("y", elem, ["N"])])
    feeds = {"s": np.array(start, dtype), "l": np.array(limit, dtype), "d": np.array(delta, dtype)}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = run_specialized(model, feeds)[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_constant_of_shape_with_runtime_shape_feeds_compute():
    """The folded constant is used by a run-time op afterwards."""
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.5])),
             helper.make_node("Add", ["x", "c"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
                                       helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    got = run_specialized(model, {"x": x, "shape": np.array([3, 4], np.int64)})[0]
    np.testing.assert_allclose(got, x + 2.5, rtol=1e-6)


def test_mel_weight_matrix_with_runtime_parameters():
    names = ["bins", "dft", "rate", "lo", "hi"]
    model = model_of(helper.make_node("MelWeightMatrix", names, ["m"]),
                     [(n, TensorProto.INT64, []) for n in names[:3]] + [(n, TensorProto.FLOAT, []) for n in names[3:]],
                     [("m", TensorProto.FLOAT, ["a", "b"])])
    feeds = {"bins": np.array(8, np.int64), "dft": np.array(16, np.int64), "rate": np.array(8192, np.int64),
             "lo": np.array(0, np.float32), "hi": np.array(4096, np.float32)}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = run_specialized(model, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("k,dtype_attr", [(0, None), (1, TensorProto.DOUBLE), (-2, TensorProto.INT32)])
def test_eye_like_of_runtime_input_needs_no_binding(k, dtype_attr):
    attrs = {"k": k} if dtype_attr is None else {"k": k, "dtype": dtype_attr}
    model = model_of(helper.make_node("EyeLike", ["x"], ["y"], **attrs),
                     [("x", TensorProto.FLOAT, [4, 5])], [("y", dtype_attr or TensorProto.FLOAT, [4, 5])])
    x = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = ziggurat.compile(model, target="llvm -num-cores=1")(x=x)[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
