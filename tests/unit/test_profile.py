"""`ziggurat profile` (runtime/profile.py, the `profile` option of the LLVM backend): the instrumented
build times every kernel call of the real entry function, its rows name the ONNX nodes of each
kernel, the trace has one event per call, and the plain build is left as it was. Timings are only
checked for being non-negative: the figures themselves belong to the benchmarks."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat.cli.main import main as ziggurat_main
from ziggurat.runtime.profile import counters, profile_model, random_inputs

from tests.conftest import BANDWIDTH_GBS, PEAK_GFLOPS

TARGET = "llvm -num-cores=1"


def _model(layers: int = 2, softmax: bool = True, width: int = 32) -> onnx.ModelProto:
    """x[8, 16] -> MatMul+Relu (fc0) -> `layers - 1` more MatMul+Relu of one shape -> Softmax."""
    rng = np.random.default_rng(0)
    inits, nodes, x = [], [], "x"
    for i in range(layers):
        w = f"W{i}"
        inits.append(numpy_helper.from_array(rng.standard_normal((16 if i == 0 else width, width)).astype(np.float32), w))
        nodes += [helper.make_node("MatMul", [x, w], [f"h{i}"], name=f"fc{i}"),
                  helper.make_node("Relu", [f"h{i}"], [f"r{i}"], name=f"relu{i}")]
        x = f"r{i}"
    if softmax:
        nodes.append(helper.make_node("Softmax", [x], ["y"], name="softmax", axis=-1))
        x = "y"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [8, width])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def three_layers():
    model = _model(layers=3)
    return model, profile_model(model, target=TARGET, rounds=3, warmup=1)


def test_rows_name_kernels_nodes_and_calls(three_layers):
    _, prof = three_layers
    rows = {r.kernel: r for r in prof.rows}
    assert len(prof.sites) == 4 and sum(r.calls for r in prof.rows) == 4
    # fc1 and fc2 have one shape: one kernel, called twice, each call with its own nodes
    twice = [r for r in prof.rows if r.calls == 2]
    assert len(twice) == 1 and twice[0].kernel.startswith("fused_matmul")
    assert [s.nodes for s in twice[0].sites] == [("fc1", "relu1"), ("fc2", "relu2")]
    first = next(r for r in prof.rows if r.sites[0].nodes == ("fc0", "relu0"))
    assert first.calls == 1 and first.sites[0].ops[-1] == "graph.relu"
    assert rows["softmax_0"].nodes == ("softmax",)
    assert [s.index for s in prof.sites] == [0, 1, 2, 3]


def test_figures_are_consistent(three_layers):
    _, prof = three_layers
    assert prof.rows == sorted(prof.rows, key=lambda r: -r.seconds)
    assert abs(sum(r.share for r in prof.rows) - 1.0) < 1e-9 or prof.kernel_seconds == 0
    for r in prof.rows:
        assert r.seconds >= 0 and r.gflops >= 0 and r.gbs >= 0 and r.roof_pct >= 0
        assert r.bytes > 0
        # the roofline of tests/conftest.py's pinned peaks, one thread
        assert r.roof_seconds == pytest.approx(max(r.flops / (PEAK_GFLOPS * 1e9), r.bytes / (BANDWIDTH_GBS * 1e9)))
    fc0 = next(r for r in prof.rows if r.sites[0].nodes == ("fc0", "relu0"))
    assert fc0.flops >= 2 * 8 * 16 * 32  # at least the multiply-adds of [8, 16] x [16, 32]
    assert fc0.bytes == 4 * (8 * 16 + 16 * 32 + 8 * 32)  # x, the (packed) weights, the result
    assert prof.kernel_seconds >= 0 and prof.model_seconds > 0 and prof.instrumented_seconds > 0
    assert prof.peaks == (PEAK_GFLOPS, BANDWIDTH_GBS) and prof.threads == 1 and prof.rounds == 3


def test_table_and_json(three_layers):
    _, prof = three_layers
    table = prof.format_table(top=2)
    assert "softmax" in table and "(2 more kernels)" not in table and "(1 more kernels)" in table
    assert "kernels = " in table and "of the call" in table and "uninstrumented" in table
    data = json.loads(json.dumps(prof.to_json()))
    assert [k["kernel"] for k in data["kernels"]] == [r.kernel for r in prof.rows]
    assert sum(len(k["sites"]) for k in data["kernels"]) == 4 and data["coverage"] >= 0


def test_trace_has_one_complete_event_per_call(three_layers):
    _, prof = three_layers
    trace = json.loads(json.dumps(prof.chrome_trace()))
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(events) == len(prof.sites) == 4
    assert [e["name"] for e in events] == [s.kernel for s in prof.sites]
    assert events[0]["ts"] == 0 and all(e["ts"] >= 0 and e["dur"] >= 0 for e in events)
    assert all(a["ts"] + a["dur"] <= b["ts"] for a, b in zip(events, events[1:]))  # calls in order, no overlap
    assert events[-1]["args"]["nodes"] == ["softmax"] and {"pid", "tid"} <= set(events[0])


def test_instrumented_build_computes_the_same_outputs():
    model = _model(layers=3)
    plain = ziggurat.compile(model, target=TARGET)
    timed = ziggurat.compile(model, target=TARGET, profile=True)
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_array_equal(timed(x)[0], plain(x)[0])
    live = counters(timed)
    before = live.copy()
    for _ in range(3):
        timed(x)
    assert (live[:, 1] - before[:, 1] == 3).all()  # calls
    assert (live[:, 0] >= before[:, 0]).all() and (live[:, 3] >= live[:, 2]).all()  # ns, end >= start
    assert (live[1:, 2] >= live[:-1, 3]).all()  # each call starts after the one before it ended


def test_plain_build_has_no_hook_and_the_instrumented_one_times_each_call():
    model = _model(layers=2, softmax=False)
    plain = ziggurat.compile(model, target=TARGET)
    timed = ziggurat.compile(model, target=TARGET, profile=True)
    assert "clock_gettime" not in plain.info["llvm_ir"] and "profile" not in plain.info["llvm_ir"]
    assert "profile_sites" not in plain.info and not plain.info["llvm_options"].profile
    ir = timed.info["llvm_ir"]
    sites = timed.info["profile_sites"]
    assert len(sites) == 2
    assert ir.count('call i32 @"clock_gettime"(i32 1') == 2 * len(sites)
    assert ir.count(") noinline") == len(sites)
    assert 'define i64* @"ziggurat_profile"()' in ir and '@"ziggurat.profile" = internal global [8 x i64]' in ir
    with pytest.raises(ziggurat.errors.InputError, match="not instrumented"):
        counters(plain)


def test_random_inputs_fit_the_signature():
    from ziggurat.runtime.executor import TensorSpec

    specs = [TensorSpec("ids", (1, 5), np.dtype(np.int64)), TensorSpec("x", (2, 3), np.dtype(np.float32)),
             TensorSpec("m", (4,), np.dtype(bool))]
    ids, x, m = random_inputs(specs)
    assert ids.dtype == np.int64 and set(np.unique(ids)) <= {0, 1}
    assert x.dtype == np.float32 and x.shape == (2, 3) and m.dtype == bool


def _gather_model() -> onnx.ModelProto:
    """Token ids (int64) -> embedding rows -> Relu."""
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
             helper.make_node("Relu", ["e"], ["y"], name="act")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 4])], [table])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_cli_profile_prints_the_table_and_writes_the_trace(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(_model(layers=2), str(path))
    np.savez(tmp_path / "in.npz", x=np.ones((8, 16), np.float32))
    trace = tmp_path / "t.json"
    argv = ["profile", str(path), "--threads", "1", "--rounds", "2", "--warmup", "0", "--top", "5",
            "--inputs", str(tmp_path / "in.npz"), "--trace", str(trace)]
    assert ziggurat_main(argv) == 0
    out = capsys.readouterr()
    assert "kernel" in out.out and "softmax_0" in out.out and "fc0, relu0" in out.out and "of the call" in out.out
    assert "trace of one inference (3 kernel calls)" in out.err
    assert len([e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]) == 3

    ids = tmp_path / "ids.onnx"  # random int64 inputs (no --inputs), --json
    onnx.save(_gather_model(), str(ids))
    assert ziggurat_main(["profile", str(ids), "--target", TARGET, "--rounds", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["threads"] == 1 and {n for k in data["kernels"] for s in k["sites"] for n in s["nodes"]} >= {"act"}


def test_cli_profile_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    node = helper.make_node("NoSuchOp", ["x"], ["y"], name="mystery")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(bad))
    assert ziggurat_main(["profile", str(bad)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("ziggurat: error:") and "NoSuchOp" in err and "\n" not in err

    good = tmp_path / "m.onnx"
    onnx.save(_model(layers=1), str(good))
    np.savez(tmp_path / "wrong.npz", z=np.ones((8, 16), np.float32))
    assert ziggurat_main(["profile", str(good), "--inputs", str(tmp_path / "wrong.npz")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("ziggurat: error:") and "'x'" in err and "\n" not in err
    assert ziggurat_main(["profile", str(good), "--rounds", "0"]) == 1


def test_imported_model_sites_name_their_graph_ops():
    """An ImportedModel has no ONNX file: a call's nodes are its ops' result names (here none), its ops are known."""
    from ziggurat.dialects import graph

    from tests.helpers import graph_model, tensor

    def body(b, x):
        h = b.insert(graph.MatmulOp(x[0], x[1], tensor((4, 8)))).result
        h.name_hint = "hidden"
        return b.insert(graph.SoftmaxOp(h, 1)).results[0]

    prof = profile_model(graph_model([(4, 16), (16, 8)], body), target=TARGET, rounds=1, warmup=0)
    assert [s.ops for s in prof.sites] == [("graph.matmul",), ("graph.softmax",)]
    assert prof.sites[0].nodes == ("hidden",) and prof.sites[1].nodes == ()


def test_a_conv_folded_with_its_batchnorm_keeps_its_name():
    """simplify-graph folds BatchNormalization into the Conv before it; the kernel lists both nodes."""
    rng = np.random.default_rng(2)
    arrays = {"w": rng.standard_normal((8, 3, 3, 3)), "scale": rng.random(8) + 0.5, "bias": rng.standard_normal(8),
              "mean": rng.standard_normal(8), "var": rng.random(8) + 0.5}
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in arrays.items()]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"], name="bn"),
             helper.make_node("Relu", ["b"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])], inits)
    prof = profile_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), target=TARGET,
                         rounds=1, warmup=0)
    conv = [s for s in prof.sites if any(o.startswith("graph.conv2d") for o in s.ops)]  # (8 lanes: + layout transforms)
    assert len(conv) == 1 and conv[0].nodes[-3:] == ("conv", "bn", "relu"), prof.sites


@pytest.mark.skipif(not ziggurat.target.Target.parse("llvm").has("avx2"), reason="runs an AVX2 int8 GEMM")
def test_an_int8_gemm_counts_its_multiply_adds():
    """A QDQ MatMul's int8 GEMM (tensorized dot steps, no float op) counts 2 ops per multiply-add,
    as a float FMA does: its row shows 2 M N K ops, not 0 GFLOP/s."""
    from tests.unit.test_int8_qdq import qdq_matmul

    prof = profile_model(qdq_matmul(64, 96, 48), target="llvm -mcpu=haswell -num-cores=1", rounds=2, warmup=1)
    rows = [r for r in prof.rows if r.kernel.startswith("qgemm")]
    assert len(rows) == 1 and rows[0].flops == 2 * 64 * 96 * 48
    assert rows[0].gflops > 0
