"""Property tests for loop-default-schedule + outer-loop vectorization:
random shapes that are not multiples of the register tile or the vector
width, compiled end to end at 1 and 2 threads, against numpy/onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import ziggurat
from tests.helpers import graph_model, run_with_schedule_ir, tensor
from tests.unit.test_lowering_properties import np_conv, rand
from ziggurat.dialects import graph
from ziggurat.target import Target

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def compile_and_run(model, inputs, threads):
    """Runs `model`; also returns the loop IR right after loop-default-schedule."""
    return run_with_schedule_ir(model, inputs, f"llvm -num-cores={threads}")


@SETTINGS
@given(m=st.integers(1, 20), n=st.one_of(st.integers(8, 70), st.sampled_from([16, 48])), k=st.sampled_from([1, 5, 31, 768, 1536]),
       batch=st.integers(1, 2), threads=st.sampled_from([1, 2]))
def test_scheduled_matmul_matches_numpy(m, n, k, batch, threads):
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a_shape, b_shape, out_shape = (batch, m, k), (k, n), (batch, m, n)
    model = graph_model(
        [a_shape, b_shape],
        lambda b, x: b.insert(graph.MatmulOp(x[0], x[1], tensor(out_shape))).result,
    )
    a, w = rand(rng, a_shape), rand(rng, b_shape)
    (got,), ir = compile_and_run(model, [a, w], threads)
    assert '"matmul_store"' in ir  # the schedule fired
    if k < 256 or k == 1536:  # the reduction is blocked only when long (768 may be one packed block: ONE_BLOCK)
        assert ('"matmul_load"' in ir) == (k == 1536)
    np.testing.assert_allclose(got, a.astype(np.float64) @ w.astype(np.float64), rtol=1e-4, atol=1e-3)


@st.composite
def wide_convs(draw):
    kind = draw(st.sampled_from(["dense", "grouped", "depthwise"]))
    if kind == "depthwise":
        groups = cin = cout = draw(st.integers(1, 5))
    else:
        groups = 2 if kind == "grouped" else 1
        cin, cout = groups * draw(st.integers(1, 3)), groups * draw(st.integers(1, 5))
    k = draw(st.integers(1, 3))
    s = draw(st.integers(1, 2))
    p = draw(st.integers(0, k // 2 + 1))
    h, w = draw(st.integers(k, 9)), draw(st.integers(max(k, 8 * s), 40))
    return groups, cin, cout, k, s, p, h, w


@SETTINGS
@given(case=wide_convs(), threads=st.sampled_from([1, 2]))
def test_scheduled_conv2d_matches_numpy(case, threads):
    groups, cin, cout, k, s, p, h, w = case
    rng = np.random.default_rng(cin * 100 + cout * 7 + h * 3 + w)
    x_shape, w_shape = (1, cin, h, w), (cout, cin // groups, k, k)
    x, wt = rand(rng, x_shape), rand(rng, w_shape)
    want = np_conv(x, wt, (s, s), [p] * 4, (1, 1), groups)
    model = graph_model(
        [x_shape, w_shape],
        lambda b, v: b.insert(graph.Conv2dOp(v[0], v[1], tensor(want.shape), (s, s), [p] * 4, (1, 1), groups)).result,
    )
    (got,), ir = compile_and_run(model, [x, wt], threads)
    if want.shape[-1] >= 8:
        assert '"conv2d_store"' in ir
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@SETTINGS
@given(op=st.sampled_from(["MaxPool", "AveragePool"]), c=st.integers(1, 3), h=st.integers(3, 8),
       w=st.integers(16, 40), k=st.integers(2, 3), s=st.integers(1, 2), p=st.integers(0, 1),
       threads=st.sampled_from([1, 2]))
def test_scheduled_pooling_matches_onnxruntime(op, c, h, w, k, s, p, threads):
    import onnxruntime as ort

    attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4}
    if op == "AveragePool":
        attrs["count_include_pad"] = 0
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    g = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], **attrs)], "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, oh, ow])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = rand(np.random.default_rng(c * 31 + h * 7 + w), (1, c, h, w))
    (got,), _ = compile_and_run(model, [x], threads)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_parallel_loop_never_binds_a_blocked_reduction():
    """The reduction-block loop of a long matmul stays serial; the row loop inside it is parallel."""
    model = graph_model([(32, 1536), (1536, 16)], lambda b, x: b.insert(graph.MatmulOp(x[0], x[1], tensor((32, 16)))).result)
    seen = {}

    def grab(p, module, seconds):
        if p.name == "loop-parallelize-outer":
            seen["ir"] = str(module)

    ziggurat.compile(model, target="llvm -num-cores=2", after_pass=grab)
    assert "loop.for %r0o = 0 to 1536 step 256 serial" in seen["ir"]
    rows = 8 if Target.parse("llvm").vector_width == 16 else 4  # AVX2: 4 rows x 2 vectors
    assert f"0 to 32 step {rows} parallel" in seen["ir"]


@SETTINGS
@given(m=st.integers(1, 13), n=st.integers(1, 13), k=st.sampled_from([16, 40, 100]), threads=st.sampled_from([1, 2]))
def test_register_tiled_dense_matches_numpy(m, n, k, threads):
    """Dense with a transposed weight: the dot-product register tile."""
    rng = np.random.default_rng(m * 100 + n * 10 + k)
    model = graph_model(
        [(m, k), (n, k)],
        lambda b, x: b.insert(graph.MatmulOp(x[0], x[1], tensor((m, n)), transpose_b=True)).result,
    )
    a, w = rand(rng, (m, k)), rand(rng, (n, k))
    (got,), ir = compile_and_run(model, [a, w], threads)
    if max(m, n) % 2 == 0 or max(m, n) % 3 == 0:
        assert ir.count('loop.block "matmul" [') > 1  # the update block is repeated per tile point
    np.testing.assert_allclose(got, a.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("key", ["resnet_small", "bert_layer", "mlp_b64"])
@pytest.mark.parametrize("threads", [1, 2])
def test_scheduled_models_match_onnxruntime(key, threads):
    """Fused kernels (conv+BN+ReLU+add, attention, Gemm+ReLU) under the default schedules."""
    import onnxruntime as ort

    from ziggurat.benchmarks.workloads import BUILDERS

    name, model, inputs, _ = BUILDERS[key]()
    compiled = ziggurat.compile(model, target=f"llvm -num-cores={threads}")
    got = compiled(**inputs)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def _pointwise_conv_model(cin: int, cout: int, hw: int, rng):
    from onnx import numpy_helper

    w = numpy_helper.from_array((rng.standard_normal((cout, cin, 1, 1)) * 0.05).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])], "pw",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, hw, hw])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("cin,inside", [(512, True), (64, False)])
def test_output_channel_blocks_go_inside_when_the_input_map_is_large(cin, inside):
    """A blocked conv whose input map is larger than `plan.REREAD_BYTES` (a core's L2) runs its
    output-channel blocks innermost of the spatial loops, so the map is read once rather than once
    per pass over them (segformer's 1x1 fuse conv: 1.9x); the rows become the parallel loop. A
    small map keeps the blocks outermost. The numbers match onnxruntime either way."""
    import onnxruntime as ort

    rng = np.random.default_rng(cin)
    model = _pointwise_conv_model(cin, 64, 32, rng)
    for cpu, lanes in (("skylake-avx512", 16), ("haswell", 8)):
        texts: dict[str, str] = {}
        ziggurat.compile(model, target=f"llvm -mcpu={cpu} -num-cores=2",
                         after_pass=lambda p, m, s: texts.__setitem__(p.name, str(m)))
        kernel = texts["loop-parallelize-outer"].split("func.func @fused_conv2d_nchwc_relu_0", 1)[1]
        first = next(line for line in kernel.splitlines() if " parallel {" in line)
        blocks = 64 // lanes
        assert (f"0 to {blocks} step 2 parallel" not in first) == inside, first
        assert (" 0 to 32 " in first) == inside, first
    x = rng.standard_normal((1, cin, 32, 32)).astype(np.float32)
    (ref,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    (got,) = ziggurat.compile(model, target="llvm -num-cores=2")(x)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels", [64, 20])
def test_global_average_pool_of_channels_last_values_is_vector_code(channels):
    """GlobalAveragePool over values read channels-last (an int8 pointwise conv's rows, transposed back
    to NCHW) with per-channel [C, 1, 1] constants on the way: the sums are [N, C], so the channels are
    the nest's vector loop, and the constants read along C are contiguous (one masked load each). Before,
    the nest's last loops had 1 trip and the whole kernel stayed scalar (mobilenetv3's int8 head)."""
    import onnxruntime as ort
    from onnx import numpy_helper as nh
    from xdsl.dialects import func

    rng = np.random.default_rng(channels)
    inits = [nh.from_array(rng.standard_normal((channels, 1, 1)).astype(np.float32), n) for n in ("s", "b")]
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("Mul", ["t", "s"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["y"])]
    g = helper.make_graph(nodes, "gap", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 7, 7, channels])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, 1, 1])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    pools: list[str] = []

    def after(p, module, seconds):
        if p.name == "convert-loop-to-hw":
            pools.extend(str(f) for f in module.walk() if isinstance(f, func.FuncOp) and "global_avg_pool" in str(f))

    m = ziggurat.compile(model, target="llvm -mcpu=haswell -num-cores=1", cache=False, after_pass=after)
    assert len(pools) == 1 and "hw.vload" in pools[0] and "hw.not_vectorized" not in pools[0]
    if Target.parse("llvm").has("avx2"):
        x = rng.standard_normal((1, 7, 7, channels)).astype(np.float32)
        ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.testing.assert_allclose(m(x)[0], ref, rtol=1e-5, atol=1e-5)
