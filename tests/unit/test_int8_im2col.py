"""A QDQ Conv of one group with a window larger than one point (whisper's Conv1d front end,
segformer's patch embeddings and sequence reductions) as AVX2's `vpmaddubsw` int8 GEMM over
im2col rows (convert_qdq_matmul.py `qdq_conv_im2col`): the padding filled with the activation's
zero point, strides and dilations as slices. Results match onnxruntime's literal QDQ semantics
(graph optimizations off) where no pair of products saturates."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx import numpy_helper as nh
from tests.unit.test_int8_qdq import Y_SCALE, check, literal

import ziggurat
from ziggurat.target import Target

HASWELL = "llvm -mcpu=haswell -num-cores=1"  # AVX2: the 8-bit forms of vpmaddubsw


def qdq_conv(shape: tuple[int, ...], co: int, kernel: tuple[int, ...], strides, pads, dilations, seed: int,
             seven: bool, x_zero: int = 128):
    """x (f32, NCW or NCHW) -> Q/DQ (uint8) -> Conv with a per-output-channel int8 weight (7-bit where
    `seven`) and a float bias -> Q/DQ."""
    rng = np.random.default_rng(seed)
    ci = shape[1]
    w = rng.integers(-64, 64, (co, ci, *kernel)) if seven else rng.integers(-127, 128, (co, ci, *kernel))
    inits = [nh.from_array(w.astype(np.int8), "wq"),
             nh.from_array((rng.random(co) * 0.004 + 0.001).astype(np.float32), "ws"),
             nh.from_array(np.zeros(co, np.int8), "wz"), nh.from_array(np.array(0.05, np.float32), "xs"),
             nh.from_array(np.array(x_zero, np.uint8), "xz"), nh.from_array(np.array(Y_SCALE, np.float32), "ys"),
             nh.from_array(np.array(120, np.uint8), "yz"), nh.from_array(rng.standard_normal(co).astype(np.float32), "b")]
    conv = helper.make_node("Conv", ["xd", "wd", "b"], ["y"], name="conv", kernel_shape=list(kernel),
                            strides=list(strides), pads=list(pads), dilations=list(dilations))
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0), conv,
             helper.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["out"])]
    rank = len(kernel)
    out = [(shape[2 + i] + pads[i] + pads[rank + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
           for i in range(rank)]
    g = helper.make_graph(nodes, "qdq_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [shape[0], co, *out])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


CASES = {  # shape, co, kernel, strides, pads (begin..., end...), dilations
    "conv1d k3": ((1, 64, 64), 64, (3,), (1,), (1, 1), (1,)),
    "conv1d k3 stride 2 (whisper's conv2)": ((1, 64, 66), 72, (3,), (2,), (1, 1), (1,)),
    "3x3 stride 2 (a patch embedding)": ((1, 16, 16, 16), 64, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    "2x2 stride 2, no pads (a sequence reduction)": ((2, 32, 16, 16), 64, (2, 2), (2, 2), (0, 0, 0, 0), (1, 1)),
    "3x3 dilation 2, uneven pads": ((1, 8, 12, 13), 64, (3, 3), (1, 1), (2, 1, 2, 3), (2, 2)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_window_conv_is_an_int8_gemm_over_im2col_rows(case):
    """7-bit weights: no pair of products can saturate, so AVX2 takes vpmaddubsw on the default target
    and the result is exact: the literal QDQ result to a rounding tie."""
    shape, co, kernel, strides, pads, dilations = CASES[case]
    model = qdq_conv(shape, co, kernel, strides, pads, dilations, seed=len(case), seven=True)
    x = (np.random.default_rng(1).standard_normal(shape) * 3).astype(np.float32)
    m = ziggurat.compile(model, target=HASWELL)
    ir = m.info["llvm_ir"]
    assert "qgemm" in ir and "pmadd.ub.sw" in ir
    check(m(x)[0], literal(model, x))


def test_full_range_weights_take_the_gemm_with_int8_saturate_only():
    """Full-range weights may saturate pairs: the exact target keeps the float conv (the wide int16 GEMM
    measured slower than it over im2col rows); `-int8=saturate` takes vpmaddubsw. Activations near the
    zero point saturate no pair, so both match the literal result."""
    shape, co, kernel, strides, pads, dilations = CASES["conv1d k3 stride 2 (whisper's conv2)"]
    model = qdq_conv(shape, co, kernel, strides, pads, dilations, seed=3, seven=False)
    x = (np.random.default_rng(2).standard_normal(shape) * 0.4).astype(np.float32)
    ref = literal(model, x)
    exact = ziggurat.compile(model, target=HASWELL)
    assert "qgemm" not in exact.info["llvm_ir"]
    check(exact(x)[0], ref)
    saturate = ziggurat.compile(model, target=HASWELL + " -int8=saturate")
    assert "pmadd.ub.sw" in saturate.info["llvm_ir"]
    check(saturate(x)[0], ref)


@pytest.mark.skipif(not Target.parse("llvm").has("avx2"), reason="runs AVX2 code: the host has no AVX2")
@settings(max_examples=5, deadline=None)
@given(ci=st.integers(1, 40), co=st.integers(60, 80), size=st.integers(6, 14), k=st.integers(2, 3),
       stride=st.integers(1, 3), pad=st.integers(0, 2), zero=st.sampled_from([0, 128, 200]), seed=st.integers(0, 3))
@example(ci=24, co=64, size=12, k=3, stride=2, pad=1, zero=128, seed=0)
def test_random_window_convs_match_onnxruntime(ci, co, size, k, stride, pad, zero, seed):
    """Any window, stride, pad and zero point (the padding is the zero point, which dequantizes to 0):
    the im2col GEMM where it is taken, the float conv where it is not, both the literal result."""
    shape = (1, ci, size, size + 1)
    model = qdq_conv(shape, co, (k, k), (stride, stride), (pad,) * 4, (1, 1), seed, seven=True, x_zero=zero)
    x = (np.random.default_rng(seed).standard_normal(shape) * 3).astype(np.float32)
    check(ziggurat.compile(model, target=HASWELL)(x)[0], literal(model, x))


def test_a_run_time_length_keeps_the_float_conv():
    """A Conv1d over a dynamic axis: no static rows to gather, so the float conv, bound at run time."""
    model = qdq_conv((1, 64, 64), 64, (3,), (1,), (1, 1), (1,), seed=1, seven=True)
    for v in (model.graph.input[0], model.graph.output[0]):
        v.type.tensor_type.shape.dim[2].dim_param = "L"
    m = ziggurat.compile(model, target=HASWELL)
    x = (np.random.default_rng(0).standard_normal((1, 64, 40)) * 3).astype(np.float32)
    check(m(x)[0], literal(model, x))
