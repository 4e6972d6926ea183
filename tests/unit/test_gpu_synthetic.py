"""benchmarks/gpu_synthetic.py: a model folder stripped of its large float weights and restored from
their statistics still runs, with weights of the same shapes, ranges and (roughly) moments."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from ziggurat.benchmarks import gpu_synthetic


def test_strip_then_restore_keeps_shapes_and_statistics(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((64, 48)) * 0.3 + 0.1).astype(np.float32)
    var = (rng.random(48) + 0.5).astype(np.float32)  # small: kept as it is
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "v"], ["z"])],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 48])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(var, "v")])
    shared = tmp_path / "models"
    (shared / "tiny").mkdir(parents=True)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(shared / "tiny" / "model.onnx"))
    np.savez(shared / "tiny" / "inputs.npz", x=rng.standard_normal((2, 64)).astype(np.float32))
    np.savez(shared / "tiny" / "expected.npz", z=np.zeros((2, 48), np.float32))
    (shared / "tiny" / "meta.json").write_text("{}")
    monkeypatch.setattr(gpu_synthetic, "SHARED", shared)

    out = tmp_path / "synth"
    gpu_synthetic.strip(out, "")
    recipe = json.loads((out / "tiny" / "weights.json").read_text())
    assert list(recipe) == ["w"] and recipe["w"]["shape"] == [64, 48]
    assert not (out / "tiny" / "expected.npz").exists() and (out / "tiny" / "inputs.npz").exists()
    assert (out / "tiny" / "model.onnx").stat().st_size < w.nbytes // 4

    gpu_synthetic.restore(out)
    model = onnx.load(str(out / "tiny" / "model.onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    np.testing.assert_array_equal(inits["v"], var)
    redrawn = inits["w"]
    assert redrawn.shape == w.shape and redrawn.min() >= w.min() and redrawn.max() <= w.max()
    assert abs(redrawn.mean() - w.mean()) < 0.02 and abs(redrawn.std() - w.std()) < 0.02
    x = dict(np.load(out / "tiny" / "inputs.npz"))
    (z,) = ort.InferenceSession(model.SerializeToString()).run(None, x)
    np.testing.assert_allclose(z, x["x"] @ redrawn + var, rtol=1e-5, atol=1e-5)
