"""simplify-graph's value patterns (they need the weight store, so the filecheck tests,
which run on bare text, cannot reach them): results match onnxruntime and the ops go."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ziggurat


def _pow_model(exponent: float, shape: tuple[int, ...], scalar: bool):
    e = np.full(() if scalar else (1,), exponent, np.float32)
    nodes = [helper.make_node("Pow", ["x", "e"], ["p"]), helper.make_node("ReduceMean", ["p"], ["y"], axes=[-1])]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [*shape[:-1], 1])],
                          [numpy_helper.from_array(e, "e")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _graph_ops(model) -> list[str]:
    from ziggurat.compiler import parse_pipeline, run_passes
    from ziggurat.frontends.onnx import import_onnx
    from ziggurat.transforms.graph.weight_binding import bind_weights

    imported = import_onnx(model)
    bind_weights(imported.module, imported.weights)
    run_passes(imported.module, parse_pipeline("simplify-graph,dce"))
    return [op.name for op in imported.module.walk() if op.name.startswith("graph.")]


@settings(max_examples=12, deadline=None)
@given(exponent=st.sampled_from([2.0, 0.5, 1.0, 3.0]), rows=st.integers(1, 5), cols=st.integers(1, 40),
       scalar=st.booleans())
def test_pow_by_a_constant_becomes_mul_or_sqrt_and_matches_onnxruntime(exponent, rows, cols, scalar):
    """RMSNorm's pow(x, 2): a multiply (vectorized) instead of a scalar powf call per element."""
    model = _pow_model(exponent, (rows, cols), scalar)
    x = np.random.default_rng(rows * 41 + cols).uniform(0.1, 3.0, (rows, cols)).astype(np.float32)
    (ref,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    (got,) = ziggurat.compile(model, target="llvm -num-cores=1", cache=False)(x)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    ops = _graph_ops(model)
    assert ("graph.pow" in ops) == (exponent == 3.0)
    assert ("graph.mul" in ops) == (exponent == 2.0)
    assert ("graph.sqrt" in ops) == (exponent == 0.5)
