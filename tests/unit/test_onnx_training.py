"""The ai.onnx.preview.training optimizers (frontends/onnx/convert_training.py)
against onnx's reference evaluator, at the first step (T = 0) and later."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ziggurat
from ziggurat.errors import ModelLoadError, UnsupportedOpError
from ziggurat.frontends.onnx.importer import import_onnx

DOMAIN = "ai.onnx.preview.training"
CASES = {
    "Adagrad": (("X", "G", "H"), ("X_new", "H_new"),
                {"decay_factor": 0.1, "epsilon": 1e-5, "norm_coefficient": 0.001}),
    "Adam": (("X", "G", "V", "H"), ("X_new", "V_new", "H_new"),
             {"alpha": 0.95, "beta": 0.85, "epsilon": 0.01, "norm_coefficient": 0.001, "norm_coefficient_post": 0.02}),
    "Momentum": (("X", "G", "V"), ("X_new", "V_new"),
                 {"alpha": 0.95, "beta": 0.85, "mode": "standard", "norm_coefficient": 0.001}),
    "Nesterov": (("X", "G", "V"), ("X_new", "V_new"),
                 {"alpha": 0.95, "beta": 0.7, "mode": "nesterov", "norm_coefficient": 0.01}),
}


def optimizer_model(case: str, shapes, domain=DOMAIN):
    kinds, outs, attrs = CASES[case]
    op = "Momentum" if case == "Nesterov" else case
    ins = [f"{k}{i}" for k in kinds for i in range(len(shapes))]
    outputs = [f"{k}{i}" for k in outs for i in range(len(shapes))]
    node = helper.make_node(op, ["R", "T", *ins], outputs, domain=DOMAIN, **attrs)
    f = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("R", f, []), helper.make_tensor_value_info("T", TensorProto.INT64, [])]
    inputs += [helper.make_tensor_value_info(n, f, shapes[i % len(shapes)]) for i, n in enumerate(ins)]
    graph = helper.make_graph([node], "g", inputs, [
        helper.make_tensor_value_info(n, f, shapes[i % len(shapes)]) for i, n in enumerate(outputs)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, 1)])


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("step", [0, 3])
def test_optimizer_matches_reference(case, step):
    shapes = [(3,), (2, 4)]
    model = optimizer_model(case, shapes)
    rng = np.random.default_rng(1)
    feeds = {"R": np.array(0.1, np.float32), "T": np.array(step, np.int64)}
    for info in model.graph.input[2:]:
        dims = [d.dim_value for d in info.type.tensor_type.shape.dim]
        feeds[info.name] = np.abs(rng.standard_normal(dims)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)(**feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_unknown_momentum_mode_is_refused():
    model = optimizer_model("Momentum", [(3,)])
    model.graph.node[0].attribute[2].s = b"heavy"
    with pytest.raises(UnsupportedOpError, match="heavy"):
        import_onnx(model)


def test_other_domain_only_model_is_refused():
    model = optimizer_model("Adam", [(3,)])
    model.opset_import[0].domain = "com.example"
    model.graph.node[0].domain = "com.example"
    with pytest.raises(ModelLoadError, match="default ONNX domain"):
        import_onnx(model)
