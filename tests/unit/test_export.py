"""Exported shared libraries: `CompiledModel.export` and `ziggurat.runtime.load`
give the same outputs as the in-process model and onnxruntime, in a process
that has neither xDSL nor llvmlite, and bad files give one clear error."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat.cli.main import main as cli_main
from ziggurat.errors import ModelLoadError
from ziggurat.runtime import load


def cnn_model():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    fc = numpy_helper.from_array(rng.standard_normal((8 * 8 * 8, 10)).astype(np.float32), "fc")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]), helper.make_node("MatMul", ["f", "fc"], ["y"])]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], [w, b, fc])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    model = cnn_model()
    compiled = ziggurat.compile(model, target="llvm -num-cores=2")
    path = compiled.export(tmp_path_factory.mktemp("export") / "cnn.so")
    return model, compiled, path


def test_loaded_library_matches_the_compiled_model_and_onnxruntime(exported) -> None:
    model, compiled, path = exported
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    loaded = load(path)
    assert loaded.input_names == ["x"] and loaded.output_names == ["y"]
    np.testing.assert_array_equal(loaded(x)[0], compiled(x)[0])
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(loaded(x=x)[0], want, rtol=1e-4, atol=1e-4)
    meta = json.loads((path.parent / "cnn.so.json").read_text())
    assert meta["exports"] == [meta["entry"]] and meta["inputs"][0]["shape"] == [1, 3, 8, 8]


def onnxruntime_output(model, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_loading_needs_neither_xdsl_nor_llvmlite(exported, tmp_path) -> None:
    model, compiled, path = exported
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    code = (f"import sys, numpy as np; from ziggurat.runtime import load; m = load({str(path)!r}); "
            f"np.save({str(tmp_path / 'y.npy')!r}, m(np.load({str(tmp_path / 'x.npy')!r}))[0]); "
            "print(sorted(k for k in ('xdsl', 'llvmlite', 'onnx') if k in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), compiled(x)[0])
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), onnxruntime_output(model, x), rtol=1e-4, atol=1e-4)


def test_bad_files_give_one_clear_error(exported, tmp_path) -> None:
    _, _, path = exported
    with pytest.raises(ModelLoadError, match="is missing"):
        load(tmp_path / "nope.so")
    for suffix in ("", ".json", ".weights.npz"):
        (tmp_path / f"m.so{suffix}").write_bytes((path.parent / f"cnn.so{suffix}").read_bytes())
    meta = json.loads((tmp_path / "m.so.json").read_text())
    (tmp_path / "m.so.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="is malformed"):
        load(tmp_path / "m.so")
    meta["features"] = meta["features"] + ",+amx-tile,+avx512f"
    (tmp_path / "m.so.json").write_text(json.dumps(meta))
    flags = open("/proc/cpuinfo").read()
    if "amx_tile" not in flags or "avx512f" not in flags:
        with pytest.raises(ModelLoadError, match="built for CPU features .* this CPU lacks"):
            load(tmp_path / "m.so")
    meta["features"] = ""
    meta["constants"] = 7
    (tmp_path / "m.so.json").write_text(json.dumps(meta))
    with pytest.raises(ModelLoadError, match="weights.npz' is unreadable"):
        load(tmp_path / "m.so")


def test_cli_compile_exports(tmp_path, capsys) -> None:
    import onnx

    onnx.save(cnn_model(), str(tmp_path / "cnn.onnx"))
    assert cli_main(["compile", str(tmp_path / "cnn.onnx"), "--export", str(tmp_path / "out.so")]) == 0
    assert "exported" in capsys.readouterr().err
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    got = load(tmp_path / "out.so")(x)[0]
    np.testing.assert_allclose(got, ziggurat.compile(cnn_model())(x)[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, onnxruntime_output(cnn_model(), x), rtol=1e-4, atol=1e-4)
