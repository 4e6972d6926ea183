"""The public API (calling conventions, errors, threads) and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat.errors import InputError
from ziggurat.cli.main import main as ziggurat_main
from ziggurat.errors import InputError, UnsupportedOpError, ZigguratError
from ziggurat.target import Target

BIN = Path(sys.executable).parent


def small_model(op: str = "Relu") -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    wt = rng.standard_normal((4, 3)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["input.1", "w"], ["m"], name="mm"), helper.make_node(op, ["m"], ["out"], name="act")]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(wt, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="module")
def compiled():
    return ziggurat.compile(small_model(), target="llvm -num-cores=1")


def reference(x: np.ndarray) -> np.ndarray:
    wt = numpy_helper.to_array(small_model().graph.initializer[0])
    return np.maximum(x @ wt, 0)


def test_calling_conventions(compiled):
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    want = reference(x)
    for got in (compiled(x), compiled(**{"input.1": x}), compiled({"input.1": x})):
        assert isinstance(got, list) and len(got) == 1
        np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)
    assert compiled.output_names == ["out"]
    assert compiled.input_names == ["input.1"]


def test_reused_and_new_buffers_rebind(compiled):
    """The executor skips the address lookup for the array objects of the last call; a new array, a
    read-only one, or an earlier one passed again must still be read and written where it lies."""
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(3)]
    xs[2].flags.writeable = False  # no writable buffer: the ctypes path
    ys = [np.empty((2, 3), np.float32) for _ in range(2)]
    for x, y in [(xs[0], ys[0]), (xs[0], ys[0]), (xs[1], ys[0]), (xs[1], ys[1]), (xs[2], ys[0]), (xs[0], ys[1])]:
        y.fill(np.nan)
        compiled.run_native([x], [y])
        np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(compiled(x)[0], reference(x), rtol=1e-5, atol=1e-6)


def test_float64_inputs_are_refused_unless_cast_inputs(compiled):
    x = np.ones((2, 4))
    with pytest.raises(InputError, match="must be float32, got float64"):
        compiled(x)
    compiled.cast_inputs = True
    try:
        np.testing.assert_allclose(compiled(x)[0], reference(x.astype(np.float32)), rtol=1e-5)
    finally:
        compiled.cast_inputs = False


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: m(np.zeros((3, 4), np.float32)), "must have shape (2, 4)"),
        (lambda m: m(wrong=np.zeros((2, 4), np.float32)), "unknown input(s) ['wrong']"),
        (lambda m: m(), "takes 1 input(s)"),
        (lambda m: m(np.zeros((2, 4), np.complex64)), "must be float32"),
    ],
)
def test_input_errors(compiled, call, message):
    with pytest.raises(InputError, match=None) as err:
        call(compiled)
    assert message in str(err.value)


def test_thread_count_from_target_and_environment(monkeypatch):
    assert Target.parse("llvm -num-cores=3").num_threads == 3
    monkeypatch.setenv("ZIGGURAT_NUM_THREADS", "2")
    assert Target.parse("llvm").num_threads == 2
    with pytest.raises(ZigguratError, match="unknown target option"):
        Target.parse("llvm -cores=2")
    with pytest.raises(ZigguratError, match="unknown target"):
        Target.parse("rocm")
    assert Target.parse("cuda -arch=sm_90").num_threads == 1  # a GPU's threads are its grid's


def test_unsupported_op_names_the_node():
    with pytest.raises(UnsupportedOpError) as err:
        ziggurat.compile(small_model("RandomUniformLike"))
    assert "RandomUniformLike" in str(err.value) and "'act'" in str(err.value) and "opset 17" in str(err.value)


def test_generated_code_runs_the_model_without_numpy_kernels(compiled):
    """The model's work happens in the generated entry function."""
    ir = compiled.info["llvm_ir"]
    assert "ziggurat_entry" in ir and "fmul" in ir
    assert compiled.info["stats"].kernels == 1  # matmul + relu fused into one kernel at O3


def test_cli_import_run_and_check(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(small_model(), path)
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", **{"input.1": x})
    np.savez(tmp_path / "good.npz", out=reference(x))
    np.savez(tmp_path / "bad.npz", out=reference(x) + 1)
    assert ziggurat_main(["import", str(path)]) == 0
    assert "graph.matmul" in capsys.readouterr().out
    assert ziggurat_main(["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--check", str(tmp_path / "good.npz")]) == 0
    assert "PASS" in capsys.readouterr().out
    assert ziggurat_main(["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--check", str(tmp_path / "bad.npz")]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_cli_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    proc = subprocess.run([str(BIN / "ziggurat"), "import", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("ziggurat: error:")
    proc = subprocess.run([str(BIN / "ziggurat-opt"), str(bad), "-p", "no-such-pass"], capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr


def test_cli_opt_pipeline_on_imported_model(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(small_model(), path)
    ir = subprocess.run([str(BIN / "ziggurat"), "import", str(path)], capture_output=True, text=True, check=True).stdout
    src = tmp_path / "m.mlir"
    src.write_text(ir)
    out = subprocess.run(
        [str(BIN / "ziggurat-opt"), str(src), "-p", "convert-graph-to-te,convert-te-to-loop"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "loop.block" in out and "loop.const_buffer" in out
    lowered = tmp_path / "l.mlir"
    lowered.write_text(out)
    again = subprocess.run([str(BIN / "ziggurat-opt"), str(lowered)], capture_output=True, text=True, check=True).stdout
    assert again == out
    listing = subprocess.run([str(BIN / "ziggurat-opt"), "--list-passes"], capture_output=True, text=True, check=True).stdout
    assert "convert-te-to-loop" in listing


def test_demo_command():
    env = {**os.environ, "ZIGGURAT_NUM_THREADS": "1"}
    proc = subprocess.run([str(BIN / "ziggurat"), "demo"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "PASS" in proc.stdout
