"""winograd-conv (transforms/graph/winograd_conv.py): 3x3 stride-1 convolutions as Winograd F(2x2, 3x3)
match onnxruntime's direct convolution over random shapes, paddings, batches and thread counts;
other convolutions are left alone; bad options and malformed transform ops give one clear error."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat.errors import CompileError
from ziggurat.lowering import pipelines

# the O3 graph pipeline with every eligible conv taken (thresholds down to one channel, 4 pixels)
ALWAYS = pipelines.graph_stage(3, options={"winograd-conv": {"min-channels": 1, "min-pixels": 4}})


def _conv_model(n, c, o, h, w, pads, strides=(1, 1), k=3, group=1, relu=False, seed=0):
    rng = np.random.default_rng(seed)
    wt = rng.standard_normal((o, c // group, k, k)).astype(np.float32) * 0.3
    nodes = [helper.make_node("Conv", ["x", "w"], ["c" if relu else "y"], pads=list(pads), strides=list(strides),
                              group=group)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    ho, wo = (h + pads[0] + pads[2] - k) // strides[0] + 1, (w + pads[1] + pads[3] - k) // strides[1] + 1
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, o, ho, wo])],
                          [numpy_helper.from_array(wt, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _ops(model) -> list[str]:
    seen: list[str] = []

    def grab(p, module, seconds):
        if p.name == "winograd-conv":
            seen.extend(op.name for op in module.walk())

    ziggurat.compile(model, target="llvm -num-cores=1", pipeline=ALWAYS, after_pass=grab)
    return seen


@settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.sampled_from([1, 2]), c=st.integers(1, 20), o=st.integers(1, 20), th=st.integers(1, 6),
       tw=st.integers(1, 7), pad=st.sampled_from([(1, 1, 1, 1), (0, 0, 0, 0), (2, 1, 0, 1), (1, 0, 1, 2)]),
       relu=st.booleans(), threads=st.sampled_from([1, 2]))
def test_winograd_matches_onnxruntime(n, c, o, th, tw, pad, relu, threads):
    t, l, b, r = pad
    h, w = 2 * th + 2 - t - b, 2 * tw + 2 - l - r  # an even output of th x tw tiles
    if h < 1 or w < 1:
        return
    model = _conv_model(n, c, o, h, w, pad, relu=relu, seed=c * o + h)
    x = np.random.default_rng(h * w).standard_normal((n, c, h, w)).astype(np.float32)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = ziggurat.compile(model, target=f"llvm -num-cores={threads}", pipeline=ALWAYS)(x)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(ref).max())))


def test_the_conv_is_rewritten_and_others_stay():
    assert "graph.winograd_input" in _ops(_conv_model(1, 4, 4, 6, 6, (1, 1, 1, 1)))
    for other in (_conv_model(1, 4, 4, 6, 6, (1, 1, 1, 1), strides=(2, 2)),  # strided
                  _conv_model(1, 4, 4, 6, 6, (0, 0, 0, 0), k=1),  # 1x1
                  _conv_model(1, 4, 4, 6, 6, (1, 1, 1, 1), group=2),  # grouped
                  _conv_model(1, 4, 4, 5, 5, (1, 1, 1, 1))):  # odd output
        ops = _ops(other)
        assert "graph.winograd_input" not in ops and "graph.conv2d" in ops


def test_default_thresholds_keep_small_convs():
    """O3's winograd-conv takes convs of at least 256 channels and 784 output pixels only (smaller
    ones measured slower than the direct conv, or no faster: vgg_small_bn's 64 x 16 x 16,
    resnet_small's 32 x 32 x 32, conv3x3 1x64x56x56, resnet10t's 64 and 128 channel convs)."""
    seen: list[str] = []

    def grab(p, module, seconds):
        if p.name == "winograd-conv":
            seen.extend(op.name for op in module.walk())

    for c, hw, taken in ((64, 28, False), (128, 28, False), (256, 26, False), (256, 28, True)):
        seen.clear()
        ziggurat.compile(_conv_model(1, c, c, hw, hw, (1, 1, 1, 1)), target="llvm -num-cores=1", after_pass=grab)
        assert ("graph.winograd_input" in seen) == taken and ("graph.conv2d" in seen) != taken


def test_bad_options_and_malformed_ops_give_one_clear_error():
    model = _conv_model(1, 4, 4, 6, 6, (1, 1, 1, 1))
    with pytest.raises(CompileError, match="winograd-conv: min-channels"):
        ziggurat.compile(model, pipeline="winograd-conv{min-channels=0}")
    from xdsl.parser import Parser

    from ziggurat.dialects import make_context

    bad = """builtin.module {
      func.func @main(%x: tensor<1x4x5x6xf32>) -> tensor<16x4x6xf32> {
        %v = graph.winograd_input %x {pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x5x6xf32> -> tensor<16x4x6xf32>
        func.return %v : tensor<16x4x6xf32>
      }
    }"""
    from xdsl.utils.exceptions import VerifyException

    with pytest.raises(VerifyException, match="must be even"):
        Parser(make_context(), bad).parse_module().verify()
