"""CumProd (frontends/onnx/convert_cumprod.py) against onnx's reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ziggurat


def cumprod_model(shape, axis, elem, exclusive, reverse):
    node = helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, shape)],
                              [helper.make_tensor_value_info("y", elem, shape)],
                              [numpy_helper.from_array(np.array(axis, np.int64), "axis")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


@pytest.mark.parametrize("dtype,elem", [(np.int32, TensorProto.INT32), (np.float32, TensorProto.FLOAT),
                                        (np.int64, TensorProto.INT64)])
@pytest.mark.parametrize("axis,exclusive,reverse", [(0, 0, 0), (1, 1, 0), (-1, 0, 1), (0, 1, 1)])
def test_cumprod_matches_reference(dtype, elem, axis, exclusive, reverse):
    model = cumprod_model([3, 5], axis, elem, exclusive, reverse)
    x = np.random.default_rng(0).integers(-3, 4, (3, 5)).astype(dtype)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)(x=x)[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
