"""`ziggurat quantize` (quantize.py): the QDQ model it writes against onnxruntime's quantize_static
on the same calibration data (the same int8 weights and weight scales, activation scales within
an ulp of the observed ranges and zero points within one, for the tensors both quantize), and its runs through ziggurat against onnxruntime's run of the same QDQ model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx import numpy_helper as nh

import ziggurat
from ziggurat.cli.main import main as cli_main
from ziggurat.errors import InputError, ModelLoadError
from ziggurat.quantize import activation_params, quantize, weight_params

ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")


def cnn_mlp(opset: int = 17) -> onnx.ModelProto:
    """Conv -> Relu -> Flatten -> MatMul -> Relu -> Gemm(transB=1): each weight kind once."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "cw"),
             nh.from_array((rng.standard_normal((64, 32)) * 0.2).astype(np.float32), "w1"),
             nh.from_array((rng.standard_normal((10, 32)) * 0.2).astype(np.float32), "w2"),
             nh.from_array(rng.standard_normal(10).astype(np.float32), "b2")]
    nodes = [helper.make_node("Conv", ["img", "cw"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]), helper.make_node("MatMul", ["f", "w1"], ["m1"]),
             helper.make_node("Relu", ["m1"], ["r1"]), helper.make_node("Gemm", ["r1", "w2", "b2"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("img", TensorProto.FLOAT, [2, 3, 4, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def calibration(count: int = 4) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [{"img": rng.standard_normal((2, 3, 4, 2)).astype(np.float32)} for _ in range(count)]


def ort_quantized(model: onnx.ModelProto, samples, tmp_path, per_channel: bool = True) -> onnx.ModelProto:
    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.it = iter(samples)

        def get_next(self):
            return next(self.it, None)

    src, dst = tmp_path / "float.onnx", tmp_path / "ort.onnx"
    onnx.save(model, src)
    quantization.quantize_static(str(src), str(dst), Reader(), quant_format=quantization.QuantFormat.QDQ,
                                 per_channel=per_channel, activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8,
                                 calibrate_method=quantization.CalibrationMethod.MinMax)
    return onnx.load(dst)


@pytest.mark.parametrize("per_channel", [True, False])
def test_minmax_matches_onnxruntime_quantize_static(tmp_path, per_channel):
    model, samples = cnn_mlp(), calibration()
    ours = quantize(model, samples, per_channel=per_channel)
    theirs = ort_quantized(model, samples, tmp_path, per_channel)
    ours_init = {t.name: nh.to_array(t) for t in ours.graph.initializer}
    theirs_init = {t.name: nh.to_array(t) for t in theirs.graph.initializer}
    compared = 0
    for node in theirs.graph.node:
        if node.op_type == "QuantizeLinear" and f"{node.input[0]}_scale" in ours_init:  # an activation both quantize
            # ranges from each engine's own run: a float sum in another order moves the last bit
            np.testing.assert_allclose(ours_init[f"{node.input[0]}_scale"], theirs_init[node.input[1]], rtol=1e-6)
            assert abs(int(ours_init[f"{node.input[0]}_zero_point"]) - int(theirs_init[node.input[2]])) <= 1
            compared += 1
        if node.op_type == "DequantizeLinear" and theirs_init.get(node.input[0], np.zeros(0)).dtype == np.int8:
            np.testing.assert_array_equal(ours_init[node.input[0]], theirs_init[node.input[0]])  # the int8 weight
            np.testing.assert_array_equal(ours_init[node.input[1]], theirs_init[node.input[1]])
            compared += 1
    assert compared == 6  # img, f, r1 and three weights


def test_the_qdq_model_runs_the_same_in_ziggurat_and_onnxruntime():
    model = cnn_mlp()
    ours = quantize(model, calibration())
    x = calibration(1)[0]
    got = ziggurat.compile(ours, cache=False)(**x)[0]
    want = ort.InferenceSession(ours.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)[0]
    np.testing.assert_allclose(got, want, atol=1e-5)
    exact = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)[0]
    assert np.abs(got - exact).max() < 0.05 * np.abs(exact).max()  # int8 stays near the float model


@pytest.mark.parametrize("method", ["percentile", "entropy"])
def test_other_methods_clip_inside_the_observed_range(method):
    """percentile: inside [min, max]; entropy: a symmetric [-t, t] with t <= max |x|."""
    model, samples = cnn_mlp(), calibration()
    scale = {}
    for m in ("minmax", method):
        q = quantize(model, samples, method=m)
        scale[m] = next(float(nh.to_array(t)) for t in q.graph.initializer if t.name == "img_scale")
    peak = max(float(np.abs(s["img"]).max()) for s in samples)
    bound = scale["minmax"] if method == "percentile" else 2 * peak / 255
    assert 0 < scale[method] <= bound * (1 + 1e-6)


def test_reduce_range_keeps_weights_in_seven_bits_and_runs_on_avx2():
    q = quantize(cnn_mlp(), calibration(), reduce_range=True)
    weights = [nh.to_array(t) for t in q.graph.initializer if t.name.endswith("_quantized")]
    assert weights and all(np.abs(w.astype(int)).max() <= 64 for w in weights)
    m = ziggurat.compile(q, target="llvm -mcpu=haswell -num-cores=1", cache=False)
    assert "vpmaddubsw" in m._keepalive.assembly()  # the MatMul (2-D input) on AVX2's int8 GEMM


def test_params_follow_onnxruntime_formulas():
    scale, zp = activation_params(0.5, 2.0)  # widened to [0, 2]
    assert scale == np.float32(2.0 / 255) and zp == 0
    scale, zp = activation_params(-1.0, 3.0)
    assert zp == np.uint8(round(1.0 / float(scale)))
    w = np.array([[0.5, -2.0], [0.25, 1.0]], np.float32)
    q, s = weight_params(w, 1, False)
    np.testing.assert_array_equal(s, np.array([0.5, 2.0], np.float32) / 127)
    assert q[0, 1] == -127 and q[0, 0] == 127


def test_cli_writes_a_model_that_compiles(tmp_path, capsys):
    onnx.save(cnn_mlp(), tmp_path / "m.onnx")
    np.savez(tmp_path / "c.npz", img=np.stack([s["img"] for s in calibration()]))  # a leading sample axis
    out = tmp_path / "q.onnx"
    assert cli_main(["quantize", str(tmp_path / "m.onnx"), "--calibrate", str(tmp_path / "c.npz"), "-o", str(out)]) == 0
    assert "3 quantized activation(s)" in capsys.readouterr().out
    q = onnx.load(out)
    x = calibration(1)[0]
    np.testing.assert_allclose(ziggurat.compile(q, cache=False)(**x)[0],
                               ort.InferenceSession(q.SerializeToString()).run(None, x)[0], atol=1e-5)


def test_errors_are_clear():
    with pytest.raises(InputError, match="unknown calibration method 'kl'"):
        quantize(cnn_mlp(), calibration(), method="kl")
    with pytest.raises(ModelLoadError, match="opset 13 or later"):
        quantize(cnn_mlp(opset=11), calibration())
    with pytest.raises(InputError, match="lacks the input"):
        quantize(cnn_mlp(), [{"x": np.zeros(1, np.float32)}])
    relu = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
                             opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(InputError, match="nothing to quantize"):
        quantize(relu, [{"x": np.zeros(2, np.float32)}])
