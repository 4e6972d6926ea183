"""Quantized ONNX ops (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv) on the
VNNI int8 GEMM, against onnx's reference evaluator (the QDQ ops against
onnxruntime); where the target has VNNI the generated code must use vpdpbusd, and where it has
not, it must not."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ziggurat
from ziggurat.target import Target

ort = pytest.importorskip("onnxruntime")
DOT = Target.parse("llvm").int8_dot  # the default target's int8 GEMM: amx, vnni (ZIGGURAT_HOST_CPU=haswell: avx2)
RNG = np.random.default_rng(7)
NP = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8, TensorProto.FLOAT: np.float32, TensorProto.INT32: np.int32}


def _model(op: str, inputs: list[tuple[str, int, list[int]]], out: tuple[str, int, list[int]], attrs=None,
           consts: dict[str, np.ndarray] | None = None, opset: int = 13) -> onnx.ModelProto:
    consts = consts or {}
    ins = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs if n not in consts]
    inits = [onnx.numpy_helper.from_array(v, n) for n, v in consts.items()]
    node = helper.make_node(op, [n for n, _, _ in inputs], [out[0]], **(attrs or {}))
    g = helper.make_graph([node], "q", ins, [helper.make_tensor_value_info(*out)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def _feeds(inputs, consts, values):
    return {n: values[n] for n, _, _ in inputs if n not in consts}


def _check(model: onnx.ModelProto, feeds: dict[str, np.ndarray], exact: bool = True) -> None:
    """Against onnx's numpy reference evaluator, which computes the integer
    products exactly. onnxruntime is not the reference here: on a CPU without
    VNNI its u8 x s8 kernels add pairs of products in int16 (vpmaddubsw) and
    saturate, off by up to ~3e4 on random data."""
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    cm = ziggurat.compile(model)
    got = cm(**feeds)
    got = got[0] if isinstance(got, (list, tuple)) else got
    if exact:
        np.testing.assert_array_equal(got, want)
    else:  # requantized: ties may round differently by one step
        assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1
    assert ("llvm.x86.avx512.vpdpbusd" in cm.info["llvm_ir"]) == (DOT == "vnni")
    assert ("llvm.x86.tdpbusd" in cm.info["llvm_ir"]) == (DOT == "amx")


def _rand(t: int, shape) -> np.ndarray:
    lo, hi = (0, 256) if t == TensorProto.UINT8 else (-128, 128)
    return RNG.integers(lo, hi, shape).astype(NP[t])


@pytest.mark.parametrize("ta,tb", [(TensorProto.UINT8, TensorProto.INT8), (TensorProto.UINT8, TensorProto.UINT8),
                                   (TensorProto.INT8, TensorProto.INT8)])
@pytest.mark.parametrize("const_b", [False, True])
def test_matmul_integer(ta, tb, const_b) -> None:
    m, k, n = 13, 37, 21  # none a multiple of the register block or of 4
    values = {"A": _rand(ta, (m, k)), "B": _rand(tb, (k, n)),
              "za": np.array(3 if ta == TensorProto.UINT8 else -2, NP[ta]), "zb": _rand(tb, (n,))}
    inputs = [("A", ta, [m, k]), ("B", tb, [k, n]), ("za", ta, []), ("zb", tb, [n])]
    consts = {"B": values["B"], "zb": values["zb"]} if const_b else {}
    model = _model("MatMulInteger", inputs, ("Y", TensorProto.INT32, [m, n]), consts=consts, opset=10)
    _check(model, _feeds(inputs, consts, values))


def test_qlinear_matmul_batched() -> None:
    a = _rand(TensorProto.UINT8, (2, 5, 24))
    b = _rand(TensorProto.INT8, (2, 24, 33))
    scalars = {"sa": np.array(0.02, np.float32), "za": np.array(120, np.uint8), "sb": np.array(0.01, np.float32),
               "zb": np.array(0, np.int8), "sy": np.array(0.05, np.float32), "zy": np.array(100, np.uint8)}
    inputs = [("a", TensorProto.UINT8, [2, 5, 24]), ("sa", TensorProto.FLOAT, []), ("za", TensorProto.UINT8, []),
              ("b", TensorProto.INT8, [2, 24, 33]), ("sb", TensorProto.FLOAT, []), ("zb", TensorProto.INT8, []),
              ("sy", TensorProto.FLOAT, []), ("zy", TensorProto.UINT8, [])]
    model = _model("QLinearMatMul", inputs, ("y", TensorProto.UINT8, [2, 5, 33]), consts=scalars, opset=10)
    _check(model, {"a": a, "b": b}, exact=False)


@pytest.mark.parametrize("pads,strides", [([0, 0, 0, 0], [1, 1]), ([1, 1, 1, 1], [2, 2]), ([1, 0, 2, 1], [1, 2])])
def test_conv_integer(pads, strides) -> None:
    x = _rand(TensorProto.UINT8, (1, 3, 9, 8))
    w = _rand(TensorProto.UINT8, (5, 3, 3, 3))
    oh = (9 + pads[0] + pads[2] - 3) // strides[0] + 1
    ow = (8 + pads[1] + pads[3] - 3) // strides[1] + 1
    inputs = [("x", TensorProto.UINT8, [1, 3, 9, 8]), ("w", TensorProto.UINT8, [5, 3, 3, 3]),
              ("zx", TensorProto.UINT8, []), ("zw", TensorProto.UINT8, [])]
    values = {"x": x, "w": w, "zx": np.array(17, np.uint8), "zw": np.array(130, np.uint8)}
    consts = {"w": w, "zw": values["zw"]}
    model = _model("ConvInteger", inputs, ("y", TensorProto.INT32, [1, 5, oh, ow]),
                   {"pads": pads, "strides": strides, "kernel_shape": [3, 3]}, consts=consts, opset=10)
    _check(model, _feeds(inputs, consts, values))


@pytest.mark.parametrize("pads,strides,dil", [([1, 1], [1], [1]), ([0, 2], [2], [2])])
def test_conv_integer_1d(pads, strides, dil) -> None:
    """Conv1d as quantize_dynamic writes whisper's front end: a 2-D conv of height 1."""
    x = _rand(TensorProto.UINT8, (2, 4, 11))
    w = _rand(TensorProto.INT8, (6, 4, 3))
    ow = (11 + sum(pads) - dil[0] * 2 - 1) // strides[0] + 1
    inputs = [("x", TensorProto.UINT8, [2, 4, 11]), ("w", TensorProto.INT8, [6, 4, 3]), ("zx", TensorProto.UINT8, [])]
    consts = {"w": w}
    values = {"x": x, "w": w, "zx": np.array(128, np.uint8)}
    model = _model("ConvInteger", inputs, ("y", TensorProto.INT32, [2, 6, ow]),
                   {"pads": pads, "strides": strides, "dilations": dil, "kernel_shape": [3]}, consts=consts, opset=10)
    _check(model, _feeds(inputs, consts, values))


def test_qlinear_conv_with_bias_and_groups() -> None:
    x = _rand(TensorProto.UINT8, (1, 4, 6, 6))
    w = _rand(TensorProto.INT8, (6, 2, 3, 3))
    bias = RNG.integers(-500, 500, (6,)).astype(np.int32)
    consts = {"sx": np.array(0.03, np.float32), "zx": np.array(128, np.uint8), "w": w,
              "sw": np.array(0.02, np.float32), "zw": np.array(0, np.int8), "sy": np.array(0.1, np.float32),
              "zy": np.array(10, np.uint8), "bias": bias}
    inputs = [("x", TensorProto.UINT8, [1, 4, 6, 6]), ("sx", TensorProto.FLOAT, []), ("zx", TensorProto.UINT8, []),
              ("w", TensorProto.INT8, [6, 2, 3, 3]), ("sw", TensorProto.FLOAT, []), ("zw", TensorProto.INT8, []),
              ("sy", TensorProto.FLOAT, []), ("zy", TensorProto.UINT8, []), ("bias", TensorProto.INT32, [6])]
    model = _model("QLinearConv", inputs, ("y", TensorProto.UINT8, [1, 6, 6, 6]),
                   {"pads": [1, 1, 1, 1], "group": 2, "kernel_shape": [3, 3]}, consts=consts, opset=10)
    _check(model, {"x": x}, exact=False)


def test_int16_input_is_a_clear_error() -> None:
    inputs = [("A", TensorProto.INT16, [4, 4]), ("B", TensorProto.INT8, [4, 4])]
    g = helper.make_graph([helper.make_node("MatMulInteger", ["A", "B"], ["Y"])], "q",
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info("Y", TensorProto.INT32, [4, 4])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)])
    with pytest.raises(ziggurat.errors.UnsupportedOpError, match="MatMulInteger.*A must be uint8 or int8"):
        ziggurat.compile(model)


def test_quantize_dequantize_per_axis_against_onnxruntime() -> None:
    x = (RNG.standard_normal((2, 3, 4)) * 4).astype(np.float32)
    scale = np.array([0.05, 0.1, 0.2], np.float32)
    zp = np.array([0, 10, 250], np.uint8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])],
                          [onnx.numpy_helper.from_array(scale, "s"), onnx.numpy_helper.from_array(zp, "z")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = ziggurat.compile(model)(x=x)
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(got, sess.run(None, {"x": x})[0], rtol=0, atol=1e-6)


def _dynamic_quantize_model(shape: list[int]) -> onnx.ModelProto:
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    outs = [helper.make_tensor_value_info("y", TensorProto.UINT8, shape),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("z", TensorProto.UINT8, [])]
    g = helper.make_graph([node], "dq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])


def test_dynamic_quantize_linear_against_onnxruntime() -> None:
    x = (RNG.standard_normal((5, 7)) * 3 + 1).astype(np.float32)
    model = _dynamic_quantize_model([5, 7])
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = ziggurat.compile(model)(x=x)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    np.testing.assert_array_equal(got[2], want[2])
    assert np.abs(got[0].astype(np.int32) - want[0].astype(np.int32)).max() <= 1


@pytest.mark.parametrize("seed", range(6))
def test_dynamic_quantize_linear_is_bit_exact(seed) -> None:
    """The scale (max - min) / 255 rounds as ONNX says (a division, not a multiplication by
    1/255: one ulp off moves the rounding ties of the whole tensor; seed 3 showed it)."""
    x = (np.random.default_rng(seed).standard_normal((128, 768)) * 3).astype(np.float32)
    model = _dynamic_quantize_model([128, 768])
    want = ReferenceEvaluator(model).run(None, {"x": x})
    got = ziggurat.compile(model, cache=False)(x=x)
    for g_, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g_, w)


@pytest.mark.parametrize("target, vnni", [("llvm -mcpu=haswell", False), ("llvm -mattr=+avx2,+fma", False),
                                          ("llvm -mcpu=cascadelake", True), ("llvm -mcpu=znver4", True)])
def test_int8_gemm_follows_the_target_not_the_host(target, vnni) -> None:
    """The qgemm schedule reads VNNI from the target: vpdpbusd for VNNI CPUs whatever the host, the
    plain integer nest for AVX2 ones (on a VNNI host too); the results run where the host can."""
    assert Target.parse(target).has("avx512vnni") == vnni
    m, k, n = 13, 37, 21
    values = {"A": _rand(TensorProto.UINT8, (m, k)), "B": _rand(TensorProto.INT8, (k, n))}
    inputs = [("A", TensorProto.UINT8, [m, k]), ("B", TensorProto.INT8, [k, n])]
    model = _model("MatMulInteger", inputs, ("Y", TensorProto.INT32, [m, n]), consts={"B": values["B"]}, opset=10)
    cm = ziggurat.compile(model, target=target)
    assert ("llvm.x86.avx512.vpdpbusd" in cm.info["llvm_ir"]) == vnni
    if Target.parse(target).features() <= Target.parse("llvm").features():  # this host runs that code
        got = cm(A=values["A"])
        got = got[0] if isinstance(got, (list, tuple)) else got
        np.testing.assert_array_equal(got, values["A"].astype(np.int32) @ values["B"].astype(np.int32))
