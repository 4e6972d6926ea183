"""Graph-level passes end to end: fused and memory-planned models still match
onnxruntime, fusion cuts the kernel count, and the arena plan is sound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

import ziggurat
from ziggurat.transforms.loop.plan_memory import Interval, assign_offsets
from tests.unit.test_models_vs_onnxruntime import make, w

ort = pytest.importorskip("onnxruntime")


def conv_bn_relu_model():
    """conv+bn+relu twice, a residual add (a diamond), a max pool, GAP and a dense layer."""
    rng = np.random.default_rng(7)
    weights = {
        "k1": w(rng, 8, 3, 3, 3), "k2": w(rng, 8, 8, 3, 3),
        "fw": w(rng, 10, 8), "fb": w(rng, 10),
    }
    for i in (1, 2):
        weights |= {f"s{i}": 1 + w(rng, 8), f"b{i}": w(rng, 8), f"m{i}": w(rng, 8), f"v{i}": 1 + np.abs(w(rng, 8))}
    nodes = [
        helper.make_node("Conv", ["x", "k1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "s1", "b1", "m1", "v1"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "k2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2", "s2", "b2", "m2", "v2"], ["n2"]),
        helper.make_node("Add", ["n2", "r1"], ["sum"]),
        helper.make_node("Relu", ["sum"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
    ]
    model = make(nodes, [("x", [1, 3, 12, 12])], [("y", [1, 10])], weights)
    return model, {"x": w(rng, 1, 3, 12, 12, scale=1)}


@pytest.mark.parametrize("threads", [1, 2])
def test_fused_planned_model_matches_onnxruntime(threads):
    model, feeds = conv_bn_relu_model()
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    seen: dict[str, object] = {}

    def after(p, module, _s):
        if p.name == "plan-memory":
            seen["arena"] = module.attributes["plan.arena_bytes"].value.data
            seen["sum"] = module.attributes["plan.unplanned_bytes"].value.data

    fused = ziggurat.compile(model, target=f"llvm -num-cores={threads}", opt_level=3, after_pass=after)
    plain = ziggurat.compile(model, target=f"llvm -num-cores={threads}", opt_level=0)
    for m in (fused, plain):
        np.testing.assert_allclose(m(**feeds)[0], want[0], rtol=1e-3, atol=1e-4)
    # conv+bn+relu | conv+bn+add+relu (the residual diamond) | max_pool | GAP | flatten | gemm+bias
    assert plain.info["stats"].kernels == 12  # the Gemm is a matmul and a bias add
    # O2's rule-based fusion gives exactly those six groups on any host. O3 may
    # add one layout transform: convert-layout blocks channels by the host's
    # vector width, so with 8 f32 lanes (AVX2) the 8-channel conv chain goes
    # to NCHW8c, with 16 (AVX-512) it stays NCHW.
    rules = ziggurat.compile(model, target=f"llvm -num-cores={threads}", opt_level=2)
    np.testing.assert_allclose(rules(**feeds)[0], want[0], rtol=1e-3, atol=1e-4)
    assert rules.info["stats"].kernels == 6
    assert fused.info["stats"].kernels in (6, 7)
    assert seen["arena"] < seen["sum"]  # type: ignore[operator]


intervals = st.lists(
    st.tuples(st.integers(1, 5000), st.integers(0, 20), st.integers(0, 6)), min_size=1, max_size=25
)


@settings(max_examples=200, deadline=None)
@given(intervals)
def test_arena_plan_never_overlaps_live_buffers(spec):
    ivs = [Interval(None, -(-size // 64) * 64, start, start + length) for size, start, length in spec]  # type: ignore[arg-type]
    arena = assign_offsets(ivs)
    for n, a in enumerate(ivs):
        assert a.offset % 64 == 0 and a.offset + a.size <= arena
        for b in ivs[n + 1 :]:
            if a.overlaps(b):
                assert a.offset + a.size <= b.offset or b.offset + b.size <= a.offset
    peak_live = max(sum(i.size for i in ivs if i.start <= t <= i.end) for t in range(27))
    assert peak_live <= arena <= sum(i.size for i in ivs)


def two_dense_layers(seed: int):
    rng = np.random.default_rng(seed)
    weights = {"w1": w(rng, 16, 16), "b1": w(rng, 16), "w2": w(rng, 16, 16), "b2": w(rng, 16)}
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["h2"], transB=1),
        helper.make_node("Relu", ["h2"], ["y"]),
    ]
    return make(nodes, [("x", [2, 16])], [("y", [2, 16])], weights), weights


def two_dense_reference(x: np.ndarray, wt: dict[str, np.ndarray]) -> np.ndarray:
    f = {k: v.astype(np.float64) for k, v in wt.items()}
    return np.maximum(np.maximum(x.astype(np.float64) @ f["w1"].T + f["b1"], 0) @ f["w2"].T + f["b2"], 0)


def test_identical_layers_compile_once():
    model, wt = two_dense_layers(3)
    x = w(np.random.default_rng(4), 2, 16, scale=1)
    m = ziggurat.compile(model, target="llvm -num-cores=1")
    assert (m.info["stats"].kernels, m.info["stats"].kernel_calls) == (1, 2)
    np.testing.assert_allclose(m(x)[0], two_dense_reference(x, wt), rtol=1e-5, atol=1e-5)


def test_second_compile_reuses_native_code():
    model, wt = two_dense_layers(5)
    other, wt_other = two_dense_layers(6)  # same graph, other weights: no reuse
    x = w(np.random.default_rng(7), 2, 16, scale=1)
    first = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)
    again = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)
    fresh = ziggurat.compile(other, target="llvm -num-cores=1", opt_level=2)
    assert again.info["stats"].cache_hit and not fresh.info["stats"].cache_hit
    assert "passes" not in again.info["stats"].seconds
    np.testing.assert_allclose(first(x)[0], two_dense_reference(x, wt), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(again(x)[0], first(x)[0])
    np.testing.assert_allclose(fresh(x)[0], two_dense_reference(x, wt_other), rtol=1e-5, atol=1e-5)
    assert not np.allclose(two_dense_reference(x, wt), two_dense_reference(x, wt_other))


def test_cli_print_after_fuse_ops(tmp_path, capsys):
    from ziggurat.cli.main import main as ziggurat_main

    model, _ = conv_bn_relu_model()
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    assert ziggurat_main(["compile", str(path), "--print-after", "fuse-ops"]) == 0
    out = capsys.readouterr()
    assert "IR after fuse-ops" in out.out and "graph.fused" in out.out and "graph.yield" in out.out
    assert "memory plan: arena" in out.err


def test_executor_fast_and_checked_paths_agree():
    model, wt = two_dense_layers(8)
    m = ziggurat.compile(model, target="llvm -num-cores=1")
    x = w(np.random.default_rng(9), 2, 16, scale=1)
    fast = m(x)[0]  # fast path: float32, C-contiguous, right shape
    np.testing.assert_allclose(fast, two_dense_reference(x, wt), rtol=1e-5, atol=1e-5)
    wide = np.zeros((2, 32), np.float32)
    wide[:, ::2] = x  # a strided view, a Fortran-order copy and a mapping take the checked path
    for other in (wide[:, ::2], np.asfortranarray(x), {"x": x}):
        np.testing.assert_array_equal(m(other)[0], fast)  # the same kernel on the same values
    m.cast_inputs = True  # float64 converts only when asked (strict inputs by default)
    np.testing.assert_array_equal(m(x.astype(np.float64))[0], fast)
    first, second = m(x)[0], m(x)[0]
    assert first is not second and np.array_equal(first, second)  # fresh outputs per call
