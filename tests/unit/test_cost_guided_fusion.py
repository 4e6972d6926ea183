"""The feedback channel end to end: cost-guided fusion of softmax and layer norm still computes
the right numbers, as fewer kernels than the rules make."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import ziggurat

FIXED = "peak-gflops=100 bandwidth-gbs=20"
RULES = "simplify-graph,fold-constants,cse,dce,fuse-ops"
GUIDED = f"simplify-graph,fold-constants,cse,dce,fuse-ops{{cost-guided=true {FIXED}}}"


def _model(nodes, shape, inits=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def softmax_model(shape=(8, 96)) -> onnx.ModelProto:
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    nodes = [
        helper.make_node("ReduceMax", ["x", "axes"], ["m"], keepdims=1),
        helper.make_node("Sub", ["x", "m"], ["d"]),
        helper.make_node("Exp", ["d"], ["e"]),
        helper.make_node("ReduceSum", ["e", "axes"], ["s"], keepdims=1),
        helper.make_node("Div", ["e", "s"], ["y"]),
    ]
    return _model(nodes, shape, [axes])


def layer_norm_model(shape=(2, 8, 64)) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [shape[-1]], rng.standard_normal(shape[-1]).tolist())
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [shape[-1]], rng.standard_normal(shape[-1]).tolist())
    nodes = [helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1, epsilon=1e-5)]
    return _model(nodes, shape, [scale, bias])


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layer_norm_ref(x: np.ndarray, model: onnx.ModelProto) -> np.ndarray:
    scale, bias = (onnx.numpy_helper.to_array(t) for t in model.graph.initializer)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * scale + bias


@pytest.mark.parametrize("case", ["softmax", "layer_norm"])
def test_cost_guided_fusion_makes_one_kernel_with_the_same_numbers(case: str) -> None:
    model = softmax_model() if case == "softmax" else layer_norm_model()
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    ref = _softmax_ref(x) if case == "softmax" else _layer_norm_ref(x, model)
    rules = ziggurat.compile(model, target="llvm -num-cores=1", pipeline=RULES)
    guided = ziggurat.compile(model, target="llvm -num-cores=1", pipeline=GUIDED)
    (y_rules,) = rules(x)
    (y_guided,) = guided(x)
    np.testing.assert_allclose(y_rules, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y_guided, ref, rtol=1e-4, atol=1e-5)
    assert rules.info["stats"].kernels > 1
    assert guided.info["stats"].kernels == 1


def test_explain_fusion_prints_the_decision_table(tmp_path, capsys) -> None:
    from ziggurat.cli.main import main as ziggurat_main

    path = tmp_path / "ln.onnx"
    path.write_bytes(layer_norm_model().SerializeToString())
    assert ziggurat_main(["compile", str(path), "-O2", "--explain-fusion", "--target", "llvm -num-cores=1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == ["value", "decision", "rule-based", "cost-guided", "rule", "us", "guided", "us", "ops"]
    row = lines[1].split()
    assert row[:7] == ["@main", "%y", "merged", "4", "kernels", "1", "kernel"]
    rule_us, guided_us = float(row[7]), float(row[8])
    assert 0 < guided_us < rule_us
    assert row[9:] == ["reduce", "sub", "mul", "reduce", "add", "sqrt", "div", "mul", "add"]


def test_explain_fusion_without_fuse_ops_says_so(tmp_path, capsys) -> None:
    from ziggurat.cli.main import main as ziggurat_main

    path = tmp_path / "sm.onnx"
    path.write_bytes(softmax_model().SerializeToString())
    assert ziggurat_main(["compile", str(path), "-O1", "--explain-fusion"]) == 0
    assert "has no fuse-ops; nothing to explain" in capsys.readouterr().out


def test_o3_is_cost_guided_and_o2_rule_based() -> None:
    from ziggurat.lowering.pipelines import GRAPH

    assert "fuse-ops{cost-guided=true}" in GRAPH[3]
    assert GRAPH[2].endswith("fuse-ops") and "cost-guided" not in GRAPH[2]


def _total_cost(text: str, fuse: str) -> tuple[float, int]:
    from xdsl.parser import Parser

    from ziggurat.dialects import graph, make_context
    from ziggurat.transforms.annotate_costs import AnnotateCostsPass
    from ziggurat.transforms.fuse_ops import FuseOpsPass

    ctx = make_context()
    module = Parser(ctx, text).parse_module()
    FuseOpsPass(cost_guided=fuse == "guided", peak_gflops=100, bandwidth_gbs=20).apply(ctx, module)
    AnnotateCostsPass(peak_gflops=100, bandwidth_gbs=20).apply(ctx, module)
    costs = [op.attributes["graph.cost"] for op in module.walk() if "graph.cost" in op.attributes]
    assert all(isinstance(c, graph.CostAttr) for c in costs)
    return sum(c.time_us.data for c in costs), len(costs)


@settings(max_examples=6, deadline=None)
@given(st.integers(1, 48), st.integers(2, 300), st.sampled_from(["max", "sum", "mean"]))
def test_cost_guided_never_costs_more_than_the_rules(rows: int, cols: int, kind: str) -> None:
    """On a reduce-normalize chain the cost-guided partition's summed estimate is at most the
    rule-based one's (each decision must lower it), with at most as many kernels."""
    t = f"tensor<{rows}x{cols}xf32>"
    r = f"tensor<{rows}x1xf32>"
    text = f"""func.func @f(%x: {t}) -> {t} {{
  %m = graph.reduce %x {{kind = "{kind}", axes = array<i64: 1>, keepdims = true}} : {t} -> {r}
  %d = graph.sub %x, %m : {t}, {r} -> {t}
  %e = graph.exp %d : {t}
  %s = graph.reduce %e {{kind = "sum", axes = array<i64: 1>, keepdims = true}} : {t} -> {r}
  %y = graph.div %e, %s : {t}, {r} -> {t}
  func.return %y : {t}
}}"""
    rules, n_rules = _total_cost(text, "rules")
    guided, n_guided = _total_cost(text, "guided")
    assert guided <= rules + 1e-3 and n_guided <= n_rules
