"""Plugins (ziggurat/plugins.py) and the tutorial's example plugin
(docs/examples/act_plugin.py): everything docs/tutorial.md shows runs here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import ziggurat
from ziggurat import plugins
from ziggurat.cli.main import main as cli_main
from ziggurat.cli.opt import main as opt_main
from ziggurat.dialects import get_all_dialects
from ziggurat.registry import all_passes, make_context
from ziggurat.transforms import get_all_passes

PLUGIN = str(Path(__file__).resolve().parents[2] / "docs" / "examples" / "act_plugin.py")

SILU_IR = """func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = graph.sigmoid %x : tensor<4x8xf32>
  %y = graph.mul %s, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
"""


@pytest.fixture(scope="module")
def act():
    return plugins.load_plugin(PLUGIN)


def silu_model(shape):
    g = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])], "silu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_registries_are_keyed_by_name_and_apart_from_ours(act) -> None:
    assert set(plugins.plugin_dialects()) >= {"act"}
    for key, factory in plugins.plugin_dialects().items():
        assert factory().name == key and key not in get_all_dialects()
    assert {"raise-silu", "convert-act-to-graph"} <= set(plugins.plugin_passes())
    for key, factory in plugins.plugin_passes().items():
        assert factory().name == key and key not in get_all_passes()
    assert make_context().get_optional_op("act.silu") is act.SiluOp
    assert plugins.load_plugin(PLUGIN) is act  # loaded once


def test_clashing_names_are_refused(act) -> None:
    with pytest.raises(plugins.PluginError, match="clashes with ziggurat's own pass"):
        plugins.register_pass(get_all_passes()["fuse-ops"]())
    with pytest.raises(plugins.PluginError, match="clashes with ziggurat's own dialect"):
        plugins.register_dialect(get_all_dialects()["graph"]())


def test_a_plugin_may_not_take_an_upstream_xdsl_name(act) -> None:
    """The registry refuses a plugin pass named like one of upstream xDSL's (`cse`) instead of
    letting either win silently; ours and the plugins' are all reachable by name."""
    from dataclasses import dataclass

    from xdsl.passes import ModulePass

    @dataclass(frozen=True)
    class Cse(ModulePass):
        name = "cse"

        def apply(self, ctx, op) -> None:
            pass

    with pytest.raises(plugins.PluginError, match="clashes with upstream xDSL's pass"):
        plugins.register_pass(Cse)
    passes = all_passes()
    assert passes["cse"]().__module__.startswith("xdsl.")
    assert {"raise-silu", "fuse-ops"} <= set(passes)


def test_bad_plugins_give_one_clear_error(tmp_path, capsys) -> None:
    with pytest.raises(plugins.PluginError, match="no such file"):
        plugins.load_plugin(str(tmp_path / "missing.py"))
    with pytest.raises(plugins.PluginError, match="cannot load plugin 'no_such_module_xyz'"):
        plugins.load_plugin("no_such_module_xyz")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(plugins.PluginError, match="failed while loading: RuntimeError: boom"):
        plugins.load_plugin(str(broken))
    assert opt_main(["--load-plugin", str(tmp_path / "missing.py"), "x.mlir"]) == 1
    assert "ziggurat-opt: error: cannot load plugin" in capsys.readouterr().err


def test_ziggurat_opt_runs_the_plugin_passes(tmp_path, capsys) -> None:
    src = tmp_path / "silu.mlir"
    src.write_text(SILU_IR)
    assert opt_main(["--load-plugin", PLUGIN, str(src), "-p", "raise-silu"]) == 0
    raised = capsys.readouterr().out
    assert "act.silu %x : tensor<4x8xf32>" in raised and "graph.sigmoid" not in raised
    (tmp_path / "raised.mlir").write_text(raised)
    assert opt_main([f"--load-plugin={PLUGIN}", str(tmp_path / "raised.mlir"), "-p", "convert-act-to-graph"]) == 0
    lowered = capsys.readouterr().out
    assert "act." not in lowered and "graph.sigmoid %x" in lowered and "graph.mul %x" in lowered


def test_a_plugin_op_left_before_te_is_a_clear_error(act) -> None:
    with pytest.raises(ziggurat.CompileError, match="'act.silu' .* is not a graph op; lower its dialect"):
        ziggurat.compile(silu_model([4, 8]), pipeline="raise-silu,fuse-ops")


def test_ziggurat_compile_cli_prints_the_plugin_pass(tmp_path, capsys) -> None:
    import onnx

    path = tmp_path / "silu.onnx"
    onnx.save(silu_model([2, 16]), str(path))
    assert cli_main(["compile", str(path), "--load-plugin", PLUGIN, "-p", "raise-silu,convert-act-to-graph",
                     "--print-after", "raise-silu"]) == 0
    assert "act.silu" in capsys.readouterr().out


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=3), threads=st.sampled_from([1, 2]))
def test_silu_through_the_plugin_matches_numpy(act, shape, threads) -> None:
    seen = []
    model = ziggurat.compile(silu_model(shape), target=f"llvm -num-cores={threads}",
                             pipeline="raise-silu,convert-act-to-graph,fuse-ops",
                             after_pass=lambda p, m, s: seen.append((p.name, str(m))))
    assert any(name == "raise-silu" and "act.silu" in ir for name, ir in seen)
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32) * 4
    np.testing.assert_allclose(model(x)[0], x / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)
