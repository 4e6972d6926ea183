"""BatchNormalization with training_mode=1 (frontends/onnx/convert_nn.py)
against onnx's reference evaluator: batch statistics and updated running ones."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ziggurat


@pytest.mark.parametrize("shape,attrs", [((2, 3, 4, 5), {}), ((4, 2, 3), {"momentum": 0.6, "epsilon": 1e-2})])
def test_batch_norm_training_mode_matches_reference(shape, attrs):
    c = shape[1]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
                            training_mode=1, **attrs)
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", f, shape)] +
        [helper.make_tensor_value_info(n, f, [c]) for n in "sbmv"],
        [helper.make_tensor_value_info("y", f, shape), helper.make_tensor_value_info("rm", f, [c]),
         helper.make_tensor_value_info("rv", f, [c])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32) * 2 + 1,
             "s": rng.standard_normal(c).astype(np.float32), "b": rng.standard_normal(c).astype(np.float32),
             "m": rng.standard_normal(c).astype(np.float32), "v": rng.random(c).astype(np.float32) + 0.5}
    want = ReferenceEvaluator(model).run(None, feeds)
    got = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)(**feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
