"""Concatenations in copy nests: one nest per input (transforms/schedule/split_ranges.py), vectorized.

References: onnxruntime and numpy.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import ziggurat
from ziggurat.target import Target

AVX512 = "llvm -mattr=+avx512f,+avx512bw,+avx512dq,+avx512vl,+fma -num-cores=1"
needs_avx512 = pytest.mark.skipif(not Target.parse("llvm").has("avx512f"),
                                  reason="this host cannot run the 16-lane (AVX-512) code these tests execute")


def _concat_conv(channels: list[int], hw: int, transposed_first: bool) -> onnx.ModelProto:
    """Inputs concatenated along channels (the first one NHWC-flattened and transposed back, as
    SegFormer's decode head), then a 1x1 conv: the concat fuses with the NCHW16c transform."""
    rng = np.random.default_rng(0)
    total = sum(channels)
    nodes, inputs, parts, inits = [], [], [], []
    for i, c in enumerate(channels):
        if i == 0 and transposed_first:
            inputs.append(h.make_tensor_value_info("x0", T.FLOAT, [1, hw * hw, c]))
            nodes += [h.make_node("Transpose", ["x0"], ["x0t"], perm=[0, 2, 1]),
                      h.make_node("Reshape", ["x0t", "shape0"], ["p0"])]
            inits.append(nh.from_array(np.array([1, c, hw, hw], np.int64), "shape0"))
            parts.append("p0")
        else:
            inputs.append(h.make_tensor_value_info(f"x{i}", T.FLOAT, [1, c, hw, hw]))
            parts.append(f"x{i}")
    nodes += [h.make_node("Concat", parts, ["cat"], axis=1, name="cat"),
              h.make_node("Conv", ["cat", "W"], ["y"], kernel_shape=[1, 1])]
    inits.append(nh.from_array((rng.standard_normal((32, total, 1, 1)) / np.sqrt(total)).astype(np.float32), "W"))
    g = h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info("y", T.FLOAT, [1, 32, hw, hw])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _feeds(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


def _check(model: onnx.ModelProto, target: str, seed: int = 1) -> ziggurat.runtime.CompiledModel:
    feeds = _feeds(model, seed)
    m = ziggurat.compile(model, target=target, cache=False)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(m(**feeds)[0], want, rtol=1e-4, atol=1e-4)
    return m


@needs_avx512
def test_decode_head_concat_splits_into_vector_copies():
    """Four 64-channel maps (the first transposed from NHWC) into NCHW16c: one copy nest per input,
    no select left, the transposed input read by vector loads, the NCHW ones by gathers."""
    model = _concat_conv([64, 64, 64, 64], 8, transposed_first=True)
    seen: dict[str, str] = {}

    def keep(p, module, _s):
        if p.name == "convert-loop-to-hw":
            seen["hw"] = str(module)

    m = ziggurat.compile(model, target=AVX512, cache=False, after_pass=keep)
    feeds = _feeds(model, 1)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(m(**feeds)[0], want, rtol=1e-4, atol=1e-4)
    kernel = next(f for f in seen["hw"].split("func.func @")[1:] if "concat" in f.split("(")[0])
    assert "arith.select" not in kernel and "not_vectorized" not in kernel
    assert kernel.count("hw.vgather") == 3 and kernel.count("hw.vstore") == 4
    assert kernel.count("loop.for %i1") == 4  # one nest per input, along the block loop


@pytest.mark.parametrize("width", [8, pytest.param(16, marks=needs_avx512)])
@settings(max_examples=8, deadline=None, derandomize=True)
@given(channels=st.lists(st.sampled_from([8, 16, 24, 32, 40, 48]), min_size=2, max_size=4),
       transposed=st.booleans())
def test_concatenations_into_the_blocked_layout_match_onnxruntime(channels, transposed, width):
    """Channel counts that fill the blocks or not (a piece of the block loop then tests per lane and
    stays one nest), at 8 and 16 lanes."""
    target = "llvm -mcpu=haswell -num-cores=1" if width == 8 else AVX512
    _check(_concat_conv(channels, 4, transposed), target)


def _windows_of_one_buffer(c: int, hw: int) -> onnx.ModelProto:
    """NHWC `x` framed by constant rows and columns (a concat along H, then one along W: an im2col's
    padding), then its 3 column windows side by side along channels (a concat of slices of one buffer)."""
    rng = np.random.default_rng(2)
    inits = [nh.from_array(rng.standard_normal((1, 1, hw, c)).astype(np.float32), "top"),
             nh.from_array(rng.standard_normal((1, 1, hw, c)).astype(np.float32), "bottom"),
             nh.from_array(rng.standard_normal((1, hw + 2, 1, c)).astype(np.float32), "left"),
             nh.from_array(rng.standard_normal((1, hw + 2, 1, c)).astype(np.float32), "right")]
    nodes = [h.make_node("Concat", ["top", "x", "bottom"], ["rows"], axis=1),
             h.make_node("Concat", ["left", "rows", "right"], ["framed"], axis=2),
             h.make_node("Relu", ["framed"], ["act"])]
    for dx in range(3):
        inits += [nh.from_array(np.array([0, 0, dx, 0], np.int64), f"s{dx}"),
                  nh.from_array(np.array([1, hw + 2, dx + hw, c], np.int64), f"e{dx}")]
        nodes.append(h.make_node("Slice", ["act", f"s{dx}", f"e{dx}"], [f"w{dx}"]))
    nodes.append(h.make_node("Concat", ["w0", "w1", "w2"], ["y"], axis=3, name="cat"))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, hw, hw, c])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, hw + 2, hw, 3 * c])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_windows_of_one_buffer_and_a_frame_split_into_plain_copies():
    """A concatenation whose parts are slices of one buffer splits like one of distinct inputs, and a
    piece that still selects along another variable (the frame's columns inside its rows) splits again:
    no select, masked load or scalar loop is left at 8 lanes."""
    model = _windows_of_one_buffer(16, 6)
    seen: dict[str, str] = {}

    def keep(p, module, _s):
        if p.name == "convert-loop-to-hw":
            seen["hw"] = str(module)

    target = "llvm -mcpu=haswell -num-cores=1"
    _check(model, target)
    ziggurat.compile(model, target=target, cache=False, after_pass=keep)
    kernels = seen["hw"].split("func.func @")[1:]
    assert kernels and not any(s in k for k in kernels for s in ("arith.select", "hw.vmaskload", "not_vectorized"))
