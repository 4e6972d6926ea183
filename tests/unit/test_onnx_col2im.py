"""Col2Im (frontends/onnx/convert_col2im.py) against onnx's reference evaluator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ziggurat
from ziggurat.errors import ShapeError
from ziggurat.frontends.onnx.convert_col2im import contributors
from ziggurat.frontends.onnx.importer import import_onnx


def col2im_model(n, c, image, block, attrs):
    rank = len(image)
    table, positions = contributors(image, block, attrs.get("dilations", [1] * rank), attrs.get("pads", [0] * 2 * rank),
                                    attrs.get("strides", [1] * rank))
    node = helper.make_node("Col2Im", ["x", "im", "bl"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c * math.prod(block), positions])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, c, *image])],
        [numpy_helper.from_array(np.array(image, np.int64), "im"), numpy_helper.from_array(np.array(block, np.int64), "bl")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), positions


@pytest.mark.parametrize("n,c,image,block,attrs", [
    (1, 1, [5, 5], [2, 2], {}),
    (2, 3, [6, 5], [3, 2], {"strides": [2, 1], "pads": [1, 0, 1, 1], "dilations": [1, 2]}),
    (1, 2, [3, 4, 3], [2, 2, 1], {"strides": [1, 2, 1]}),
])
def test_col2im_matches_reference(n, c, image, block, attrs):
    model, positions = col2im_model(n, c, image, block, attrs)
    x = np.random.default_rng(0).standard_normal((n, c * math.prod(block), positions)).astype(np.float32)
    x[0, 0, 0] = np.inf  # lands on one pixel only
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)(x=x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_col2im_with_wrong_block_count_is_refused():
    model, positions = col2im_model(1, 1, [5, 5], [2, 2], {})
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_value = positions + 1
    with pytest.raises(ShapeError, match="block positions"):
        import_onnx(model)
