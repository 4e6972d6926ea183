"""OneHot (frontends/onnx/convert_onehot.py) against onnx's reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ziggurat
from ziggurat.errors import UnsupportedOpError
from ziggurat.frontends.onnx.importer import import_onnx


def onehot_model(shape, elem, depth, axis, values, depth_input=False):
    node = helper.make_node("OneHot", ["i", "depth", "v"], ["y"], axis=axis)
    rank = len(shape) + 1
    a = axis + rank if axis < 0 else axis
    out = [*shape[:a], int(depth), *shape[a:]]
    inputs = [helper.make_tensor_value_info("i", elem, list(shape))]
    inits = [numpy_helper.from_array(values, "v")]
    if depth_input:
        inputs.append(helper.make_tensor_value_info("depth", TensorProto.INT64, []))
    else:
        inits.append(numpy_helper.from_array(np.array(depth), "depth"))
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(values.dtype), out)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


@pytest.mark.parametrize("shape,dtype,elem,depth,axis,values", [
    ((3,), np.int64, TensorProto.INT64, 10, 1, np.float32([1, 3])),
    ((2, 2), np.float32, TensorProto.FLOAT, np.float32(10), 1, np.float32([0, 1])),
    ((2, 3), np.int32, TensorProto.INT32, 5, -1, np.int64([2, -7])),
    ((2, 3), np.int64, TensorProto.INT64, 4, 0, np.float32([0.5, 2.25])),
])
def test_onehot_matches_reference(shape, dtype, elem, depth, axis, values):
    model = onehot_model(shape, elem, depth, axis, values)
    rng = np.random.default_rng(0)
    i = rng.integers(-int(depth), int(depth) + 2, shape).astype(dtype)
    if dtype == np.float32:
        i[0, 0] = 1.5  # not an integer: no hit
    want = ReferenceEvaluator(model).run(None, {"i": i})[0]
    got = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)(i=i)[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_onehot_with_runtime_depth_names_the_input():
    model = onehot_model((3,), TensorProto.INT64, 4, -1, np.float32([0, 1]), depth_input=True)
    with pytest.raises(UnsupportedOpError, match="depth"):
        import_onnx(model)
