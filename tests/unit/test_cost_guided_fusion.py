"""The feedback channel end to end: cost-guided fusion of softmax and layer norm still computes
the right numbers, as fewer kernels than the rules make."""

from __future__ import annotations

import os

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


def softmax_chain_model(n: int, shape=(8, 96)) -> onnx.ModelProto:
    """`n` softmax chains one after another (each reads the last one's result)."""
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    nodes = []
    for k in range(n):
        src = "x" if k == 0 else f"y{k - 1}"
        nodes += [helper.make_node("ReduceMax", [src, "axes"], [f"m{k}"], keepdims=1),
                  helper.make_node("Sub", [src, f"m{k}"], [f"d{k}"]), helper.make_node("Exp", [f"d{k}"], [f"e{k}"]),
                  helper.make_node("ReduceSum", [f"e{k}", "axes"], [f"s{k}"], keepdims=1),
                  helper.make_node("Div", [f"e{k}", f"s{k}"], [f"y{k}"])]
    nodes.append(helper.make_node("Identity", [f"y{n - 1}"], ["y"]))
    return _model(nodes, shape, [axes])


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
    from ziggurat.lowering.pipelines import graph_stage
    from ziggurat.target import Target

    tgt = Target.parse("llvm -mcpu=haswell")
    assert "fuse-ops{cost-guided=true vector-width=8}" in graph_stage(3, tgt)
    assert graph_stage(2, tgt).endswith("fuse-ops{cost-guided=false vector-width=8}")


def _total_cost(text: str, fuse: str) -> tuple[float, int]:
    from xdsl.parser import Parser

    from ziggurat.dialects import graph, make_context
    from ziggurat.transforms.graph.annotate_costs import AnnotateCostsPass
    from ziggurat.transforms.graph.fuse_ops import FuseOpsPass

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


def qkv_model(seq: int = 32, dim: int = 128, heads: int = 4) -> onnx.ModelProto:
    """A fused QKV projection split into heads as nn.MultiheadAttention exports it: the
    projection's reshape-transpose is read by three slices (the shape `duplicated` targets)."""
    rng = np.random.default_rng(2)
    d = dim // heads
    w = rng.standard_normal((dim, 3 * dim)).ravel().tolist()
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [dim, 3 * dim], w),
             helper.make_tensor("shape3", TensorProto.INT64, [3], [seq, 3, dim]),
             helper.make_tensor("heads", TensorProto.INT64, [3], [seq, heads, d])]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]),
             helper.make_node("Reshape", ["p", "shape3"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0, 2])]
    outs = []
    for i, n in enumerate("qkv"):
        inits += [helper.make_tensor(f"{n}_s", TensorProto.INT64, [1], [i]),
                  helper.make_tensor(f"{n}_e", TensorProto.INT64, [1], [i + 1])]
        nodes += [helper.make_node("Slice", ["t", f"{n}_s", f"{n}_e"], [f"{n}0"]),
                  helper.make_node("Reshape", [f"{n}0", "heads"], [f"{n}1"]),
                  helper.make_node("Transpose", [f"{n}1"], [n], perm=[1, 0, 2])]
        outs.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, [heads, seq, d]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, dim])
    g = helper.make_graph(nodes, "qkv", [x], outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_duplicated_layout_change_matches_onnxruntime() -> None:
    import onnxruntime as ort

    model = qkv_model()
    x = np.random.default_rng(3).standard_normal((32, 128)).astype(np.float32)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    rules = ziggurat.compile(model, target="llvm -num-cores=1", pipeline=RULES)
    guided = ziggurat.compile(model, target="llvm -num-cores=1", pipeline=GUIDED)
    for got in (rules(x), guided(x)):
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)
    assert guided.info["stats"].kernels < rules.info["stats"].kernels


def test_roofline_prices_scalar_loops_and_gathering_divisions() -> None:
    """A kernel the vectorizer leaves scalar, and one whose vector lanes divide their index
    by 3, cost more than their traffic; a plain vectorized relu only its traffic."""
    from tests.helpers import tensor
    from ziggurat.transforms.costs.cost_oracle import SCALAR_SLOWDOWN, DefaultCostOracle, Peaks, count_work
    from ziggurat.dialects import graph
    from ziggurat.transforms.costs.kernels import kernel_of_ops, lower_kernel

    def work(op):
        module, _ = lower_kernel(kernel_of_ops([op]))
        return count_work(module, "kernel")

    relu = work(graph.ReluOp(graph.ConstantOp("x", tensor([64, 256])).results[0]))
    assert relu.scalar_flops == 0 and relu.scalar_index_ops == 0
    column = work(graph.ExpOp(graph.ConstantOp("x", tensor([64, 1])).results[0]))
    assert column.scalar_flops == column.flops > 0  # an innermost extent of 1 stays scalar
    fixed = Peaks(100.0, 20.0)
    assert fixed.time(column.flops, column.bytes, column.scalar_flops) == pytest.approx(
        max(SCALAR_SLOWDOWN * column.flops / 100e9, column.bytes / 20e9))
    # [64, 3] -> [3, 64]: x[(64 i + j) // 3, (64 i + j) % 3] with j the vector lanes (a head split such
    # as [32, 384] -> [3, 32, 128] no longer divides: loop-simplify-index cancels its div/rem pairs)
    x = graph.ConstantOp("x", tensor([64, 3]))
    r = graph.ReshapeOp(x.results[0], tensor([3, 64]))
    module, key = lower_kernel(kernel_of_ops([r]))
    gather = count_work(module, "kernel")
    assert gather.scalar_index_ops > 0
    assert DefaultCostOracle(peaks=fixed).cost(module, "kernel", key).time > gather.bytes / 20e9


def test_bench_feedback_times_both_pipelines() -> None:
    from ziggurat.benchmarks.run import bench_feedback, format_feedback

    model = layer_norm_model()
    x = np.random.default_rng(4).standard_normal((2, 8, 64)).astype(np.float32)
    row = bench_feedback("ln", model, {"x": x}, threads=1, rounds=10)
    assert row["kernels"][0] < row["kernels"][1] and row["max_diff"] < 1e-5
    assert row["speedup"] == pytest.approx(row["rules_ms"] / row["guided_ms"])
    assert "geometric mean speedup" in format_feedback([row])


@settings(max_examples=3, deadline=None)
@given(st.integers(4, 24), st.sampled_from([1, 2, 4]), st.sampled_from([8, 16]))
def test_duplication_computes_what_the_rules_compute(seq: int, heads: int, d: int) -> None:
    """Whatever the cost-guided pass duplicates, the outputs equal the rule-based ones, and both
    equal onnxruntime's."""
    import onnxruntime as ort

    model = qkv_model(seq, heads * d, heads)
    x = np.random.default_rng(seq).standard_normal((seq, heads * d)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    rules = ziggurat.compile(model, target="llvm -num-cores=1", pipeline=RULES)(x)
    guided = ziggurat.compile(model, target="llvm -num-cores=1", pipeline=GUIDED)(x)
    assert len(rules) == len(guided) == len(want) == 3
    for a, b, w in zip(rules, guided, want):  # the same products, perhaps summed in another order
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(b, w, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_explain_fusion_lists_duplications(tmp_path, capsys) -> None:
    from ziggurat.cli.main import main as ziggurat_main

    path = tmp_path / "qkv.onnx"
    path.write_bytes(qkv_model().SerializeToString())
    assert ziggurat_main(["compile", str(path), "--explain-fusion", "--target", "llvm -num-cores=1"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if " duplicated " in line]
    assert len(rows) == 3
    for row in rows:
        assert row[2:7] == ["duplicated", "4", "kernels", "3", "kernels"]
        assert 0 < float(row[8]) < float(row[7])


_MATMUL = """func.func @main(%x: tensor<16x32xf32>) -> tensor<16x64xf32> {
  %w = graph.constant "w" : tensor<32x64xf32>
  %y = graph.matmul %x, %w : tensor<16x32xf32>, tensor<32x64xf32> -> tensor<16x64xf32>
  func.return %y : tensor<16x64xf32>
}"""


@pytest.mark.parametrize("plain_us, transposed_us, packed_us, chosen",
                         [(10.0, 5.0, 20.0, "transposed"), (5.0, 10.0, 20.0, None), (10.0, 8.0, 4.0, "packed")])
def test_weight_layout_follows_the_records(tmp_path, plain_us: float, transposed_us: float, packed_us: float,
                                           chosen: str | None) -> None:
    """With measured records (here written by hand), a matmul's constant weight is stored
    transposed or in column panels exactly when that kernel is the cheapest; the decision
    carries both costs and the new constant holds the rearranged weight."""
    from xdsl.dialects.builtin import TensorType, f32
    from xdsl.parser import Parser

    from ziggurat.database import JSONDatabase, TuningRecord
    from ziggurat.dialects import graph, make_context
    from ziggurat.dialects.graph_layout import MatmulPanelsOp, pack_panels
    from ziggurat.weights import WeightStore
    from ziggurat.target import Target
    from ziggurat.transforms.costs.kernels import kernel_of_ops, lower_kernel
    from ziggurat.transforms.graph.fuse_ops import FuseOpsPass
    from ziggurat.transforms.graph.weight_binding import bind_weights

    lanes = Target().vector_width
    ctx = make_context()
    module = Parser(ctx, _MATMUL).parse_module()
    w = np.random.default_rng(5).standard_normal((32, 64)).astype(np.float32)
    store = WeightStore({"w": w})
    bind_weights(module, store)
    mm = next(op for op in module.walk() if isinstance(op, graph.MatmulOp))
    wt = graph.ConstantOp("w.T", TensorType(f32, [64, 32]))
    alt = graph.MatmulOp(mm.operands[0], wt.results[0], mm.results[0].type, transpose_b=True)
    wp = graph.ConstantOp(f"w.p{lanes}", TensorType(f32, [64 // lanes, 32, lanes]))
    panels = MatmulPanelsOp(mm.operands[0], wp.results[0], mm.results[0].type)
    path = tmp_path / "records.jsonl"
    with JSONDatabase(path) as db:
        for ops, us in (([mm], plain_us), ([alt], transposed_us), ([panels], packed_us)):
            db.commit(TuningRecord(lower_kernel(kernel_of_ops(ops))[1], "llvm", {"schedule": "default"}, costs=[us * 1e-6]))
    alt.erase()
    panels.erase()
    FuseOpsPass(cost_guided=True, peak_gflops=100, bandwidth_gbs=20, database=str(path)).apply(ctx, module)
    (out,) = [op for op in module.walk() if isinstance(op, (graph.MatmulOp, MatmulPanelsOp))]
    if chosen == "transposed":
        assert out.transpose_b is not None and out.operands[1].owner.ref.data == "w.T"
        assert out.attributes["graph.fusion_decision"].data == "transposed: 1 group -> 1, cost 10.00us -> 5.00us"
        np.testing.assert_array_equal(store["w.T"], w.T)
    elif chosen == "packed":
        assert isinstance(out, MatmulPanelsOp) and out.operands[1].owner.ref.data == f"w.p{lanes}"
        assert out.attributes["graph.fusion_decision"].data == "packed: 1 group -> 1, cost 10.00us -> 4.00us"
        np.testing.assert_array_equal(store[f"w.p{lanes}"], pack_panels(w, lanes))
    else:
        assert isinstance(out, graph.MatmulOp) and out.transpose_b is None
        assert "graph.fusion_decision" not in out.attributes


def test_repeated_groups_are_priced_once_and_decide_the_same(monkeypatch) -> None:
    """Two identical softmax chains in one model: the oracle prices each distinct
    group once (`structural_key`), and the result equals pricing every group apart. (In one
    process: the prices a forked child computes are not counted here.)"""
    from ziggurat.backends.llvm import codegen_pool
    from ziggurat.transforms.costs import prices

    monkeypatch.setenv(codegen_pool.JOBS_ENV, "1")

    model = softmax_chain_model(2)
    calls = []
    real = prices.make_price

    def counting(*args, **kwargs):
        price = real(*args, **kwargs)
        return lambda ops: calls.append(len(ops)) or price(ops)

    monkeypatch.setattr(prices, "make_price", counting)
    seen = {}
    ziggurat.compile(model, pipeline=GUIDED, after_pass=lambda p, m, s: seen.__setitem__(p.name, str(m)))
    shared = len(calls)
    monkeypatch.setattr(prices, "structural_key", lambda ops: tuple(ops))
    calls.clear()
    seen_apart = {}
    ziggurat.compile(model, pipeline=GUIDED, after_pass=lambda p, m, s: seen_apart.__setitem__(p.name, str(m)))
    assert seen["fuse-ops"] == seen_apart["fuse-ops"]
    assert 0 < shared < len(calls)


def test_a_fresh_machine_measures_its_peaks_once_before_pricing_in_two_processes(tmp_path, monkeypatch) -> None:
    """No cached roofline yet (a fresh machine): the peaks are measured once, in this process, before
    the prices are shared with a forked child. Were each process to measure its own (at the same
    moment, so each saw the other's load), one decision would compare prices on two rooflines.
    Here the child would measure 10x lower peaks: the decisions equal those of fixed peaks."""
    from ziggurat.backends.llvm import codegen_pool
    from ziggurat.transforms.costs import cost_oracle
    from ziggurat.transforms.costs.cost_oracle import Peaks

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv(codegen_pool.JOBS_ENV, "2")
    main = os.getpid()
    measured = []

    def peaks() -> Peaks:
        measured.append(os.getpid())
        return Peaks(100.0, 20.0) if os.getpid() == main else Peaks(10.0, 2.0)

    monkeypatch.setattr(cost_oracle, "measure_peaks", peaks)
    model = softmax_chain_model(4)  # a round's candidate groups: more than MIN_BATCH, priced in a batch
    seen: dict[str, str] = {}
    fresh = "simplify-graph,fold-constants,cse,dce,fuse-ops{cost-guided=true}"
    ziggurat.compile(model, pipeline=fresh, after_pass=lambda p, m, s: seen.__setitem__("fresh", str(m)))
    assert measured == [main]
    ziggurat.compile(model, pipeline=GUIDED, after_pass=lambda p, m, s: seen.__setitem__("fixed", str(m)))
    assert seen["fresh"] == seen["fixed"]
