"""The points of issue 24 (a researcher's first hour) that the audit closed: the tutorial's plugin
pass that reads a constant, through both command lines; `--debug`; a pass's bug or invalid output
named with the pass, its options, the op and its ONNX node; `ziggurat import --print-debuginfo`;
the profiler's nodes taken from the kernels' `graph.source_nodes`; plugin passes' options in
`--list-passes`. `--verify-diagnostics` is tests/filecheck/cli/verify-diagnostics.mlir."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ziggurat import plugins
from ziggurat.cli.main import main as ziggurat_main
from ziggurat.cli.opt import main as opt_main

ACT_PLUGIN = str(Path(__file__).resolve().parents[2] / "docs" / "examples" / "act_plugin.py")

# A plugin with two broken passes: one with a bug, one whose output does not verify.
BROKEN_PLUGIN = '''
from dataclasses import dataclass

from xdsl.dialects import builtin
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from ziggurat import plugins
from ziggurat.dialects import graph


@plugins.register_pass
@dataclass(frozen=True)
class AuditKeyErrorPass(ModulePass):
    """Raises KeyError: a bug."""

    name = "audit-key-error"
    depth: int = 1

    def apply(self, ctx, op) -> None:
        {}["missing"]


@plugins.register_pass
@dataclass(frozen=True)
class AuditBreakPass(ModulePass):
    """Replaces each relu with a reshape to `width` x 2 elements, keeping its location."""

    name = "audit-break"
    width: int = 2

    def apply(self, ctx, op) -> None:
        for relu in [o for o in op.walk() if isinstance(o, graph.ReluOp)]:
            new = graph.ReshapeOp(relu.input, builtin.TensorType(builtin.f32, [self.width, 2]))
            new.location = relu.location
            Rewriter.replace_op(relu, new)
'''


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("plugin") / "broken_plugin.py"
    path.write_text(BROKEN_PLUGIN)
    plugins.load_plugin(str(path))
    return str(path)


def _relu_model(folder: Path) -> str:
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu_node")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    path = folder / "relu.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


RELU_IR = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.relu %x : tensor<4xf32> loc("relu_node")
  func.return %y : tensor<4xf32>
}
"""


# 1. The tutorial's plugin: a pass that reads a constant, loaded with --load-plugin, compiles a model


def _swish_model(folder: Path, beta: float = 1.702) -> tuple[str, np.ndarray, np.ndarray]:
    """x * sigmoid(x * beta), beta an initializer; the inputs and numpy's outputs as .npz files."""
    nodes = [helper.make_node("Mul", ["x", "c"], ["xc"], name="scale"), helper.make_node("Sigmoid", ["xc"], ["s"], name="sig"),
             helper.make_node("Mul", ["x", "s"], ["y"], name="swish")]
    g = helper.make_graph(nodes, "swish", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 16])],
                          [numpy_helper.from_array(np.array(beta, np.float32), "c")])
    path = folder / "swish.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    x = np.random.default_rng(3).standard_normal((3, 16)).astype(np.float32) * 3
    np.savez(folder / "in.npz", x=x)
    np.savez(folder / "expected.npz", y=x / (1 + np.exp(-beta * x)))
    return str(path), folder / "in.npz", folder / "expected.npz"


def test_the_tutorial_plugin_reads_the_constant_and_compiles_from_the_command_line(tmp_path, capsys):
    onnx_path, inputs, expected = _swish_model(tmp_path)
    pipeline = "raise-silu,convert-act-to-graph,fuse-ops"
    assert ziggurat_main(["compile", onnx_path, "--load-plugin", ACT_PLUGIN, "-p", pipeline,
                          "--print-after", "raise-silu"]) == 0
    out = capsys.readouterr().out
    assert "act.silu %x {beta = 1.702000e+00 : f32}" in out and "graph.sigmoid" not in out.split("//----- //")[1]
    assert ziggurat_main(["run", onnx_path, "--load-plugin", ACT_PLUGIN, "-p", pipeline, "--inputs", str(inputs),
                          "--check", str(expected)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("PASS")
    # ziggurat-opt: the imported IR with its weights beside it; without them, one clear error
    m = tmp_path / "m.mlir"
    assert ziggurat_main(["import", onnx_path, "--weights", str(tmp_path / "w.npz"), "-o", str(m)]) == 0
    capsys.readouterr()
    assert opt_main(["--load-plugin", ACT_PLUGIN, str(m), "-p", "raise-silu"]) == 0
    assert "beta = 1.702000e+00" in capsys.readouterr().out
    bare = tmp_path / "bare.mlir"
    bare.write_text(m.read_text().replace('graph.weights_file = "w.npz"', ""))
    assert opt_main(["--load-plugin", ACT_PLUGIN, str(bare), "-p", "raise-silu"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pass 'raise-silu' needs the values of the weights" in err and "'c'" in err


# 2. --debug (or ZIGGURAT_DEBUG=1) shows the traceback in both command lines; without it, one line


def test_a_bug_in_a_pass_is_one_line_naming_the_pass_and_its_options(broken, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ZIGGURAT_DEBUG", raising=False)
    src = tmp_path / "relu.mlir"
    src.write_text(RELU_IR)
    assert opt_main(["--load-plugin", broken, str(src), "-p", "audit-key-error{depth=3}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ziggurat-opt: error: pass 'audit-key-error{depth=3}' failed with KeyError: 'missing'")
    assert "Traceback" not in err and err.count("\n") == 1 and "--debug" in err
    assert ziggurat_main(["compile", _relu_model(tmp_path), "--load-plugin", broken, "-p", "audit-key-error"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ziggurat: error: pass 'audit-key-error' failed with KeyError: 'missing'")
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_shows_the_traceback_in_both_command_lines(broken, tmp_path, capsys, monkeypatch, how):
    monkeypatch.delenv("ZIGGURAT_DEBUG", raising=False)
    flag = ["--debug"] if how == "flag" else []
    if how == "env":
        monkeypatch.setenv("ZIGGURAT_DEBUG", "1")
    src = tmp_path / "relu.mlir"
    src.write_text(RELU_IR)
    assert opt_main(["--load-plugin", broken, str(src), "-p", "audit-key-error", *flag]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and 'in apply\n    {}["missing"]' in err
    assert err.rstrip().splitlines()[-1] == "ziggurat-opt: error: pass 'audit-key-error' failed with KeyError: 'missing'"
    onnx_path = _relu_model(tmp_path)
    assert ziggurat_main(["compile", onnx_path, "--load-plugin", broken, "-p", "audit-key-error", *flag]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "(raised in pass 'audit-key-error')" in err
    # a user error too: its traceback with --debug, one line without
    assert ziggurat_main(["compile", str(tmp_path / "missing.onnx"), *flag]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().endswith("no such file. Check the path.")


# 3. A pass that breaks the IR: the pass with its options, the failing op, its ONNX node, the op in its IR


def test_invalid_ir_names_the_pass_the_op_and_its_onnx_node(broken, tmp_path, capsys):
    src = tmp_path / "relu.mlir"
    src.write_text(RELU_IR)
    assert opt_main(["--load-plugin", broken, str(src), "-p", "cse,audit-break{width=3},dce"]) == 1
    err = capsys.readouterr().err
    first, *shown = err.rstrip().splitlines()
    assert first == ("ziggurat-opt: error: the IR is invalid after pass 'audit-break{width=3}': 'graph.reshape' op "
                     "element counts differ: 4 vs 6 (ONNX node 'relu_node')")
    marked = next(i for i, line in enumerate(shown) if line.strip().startswith("^"))
    assert shown[marked - 1].strip().startswith('%y = graph.reshape %x') and 'loc("relu_node")' in shown[marked - 1]
    assert "| 'graph.reshape' op element counts differ: 4 vs 6" in shown[marked + 1]
    assert ziggurat_main(["compile", _relu_model(tmp_path), "--load-plugin", broken, "-p", "audit-break{width=3}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ziggurat: error: the IR is invalid after pass 'audit-break{width=3}': 'graph.reshape' op "
                          "element counts differ: 4 vs 6 (ONNX node 'relu_node')\n")
    assert "^^^^" in err and "Traceback" not in err


def test_invalid_input_ir_shows_the_op_and_its_location(tmp_path, capsys):
    src = tmp_path / "bad.mlir"
    src.write_text(RELU_IR.replace("graph.relu %x : tensor<4xf32>",
                                   "graph.reshape %x : tensor<4xf32> -> tensor<3xf32>").replace(
        "func.return %y : tensor<4xf32>", "func.return %x : tensor<4xf32>"))
    assert opt_main([str(src)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ziggurat-opt: error: the input IR is invalid: 'graph.reshape' op element counts differ: "
                          "4 vs 3 (ONNX node 'relu_node')")
    assert "^^^^" in err


def test_run_passes_names_the_pass_with_options_and_the_node():
    from xdsl.parser import Parser

    from ziggurat.compiler import run_passes
    from ziggurat.errors import CompileError
    from ziggurat.registry import make_context, parse_pipeline

    namespace: dict = {}  # the plugin's pass classes, not registered: run_passes takes pass instances
    exec(compile(textwrap.dedent(BROKEN_PLUGIN).replace("@plugins.register_pass\n", ""), "broken", "exec"), namespace)
    module = Parser(make_context(), RELU_IR).parse_module()
    passes = [*parse_pipeline("cse"), namespace["AuditBreakPass"](width=5)]
    with pytest.raises(CompileError) as info:
        run_passes(module, passes, verify=True)
    first = str(info.value).splitlines()[0]
    assert first == ("the IR is invalid after pass 'audit-break{width=5}': 'graph.reshape' op element counts differ: "
                     "4 vs 10 (ONNX node 'relu_node')")
    with pytest.raises(CompileError, match=r"after one of the passes 'cse', 'audit-break\{width=5\}' \(verified at "
                                           r"stage ends.*\): 'graph.reshape' op element counts differ: 4 vs 10 \(ONNX"):
        run_passes(Parser(make_context(), RELU_IR).parse_module(), passes, verify="stages")
    with pytest.raises(KeyError) as bug:  # a bug keeps its type (the fuzzer tells bugs from errors) and names the pass
        run_passes(Parser(make_context(), RELU_IR).parse_module(), [namespace["AuditKeyErrorPass"](depth=2)])
    assert bug.value.ziggurat_pass == "audit-key-error{depth=2}"  # type: ignore[attr-defined]


# 4. ziggurat import prints the ONNX node locations on request


def test_import_prints_locations_with_print_debuginfo(tmp_path, capsys):
    onnx_path = _relu_model(tmp_path)
    assert ziggurat_main(["import", onnx_path, "--print-debuginfo"]) == 0
    assert '%y = graph.relu %x : tensor<4xf32> loc("relu_node")' in capsys.readouterr().out
    assert ziggurat_main(["import", onnx_path]) == 0
    assert "loc(" not in capsys.readouterr().out  # plain output stays readable


# 5. The profiler's nodes are the kernels' graph.source_nodes, as viz and errors use them


def test_profile_nodes_are_the_kernels_source_nodes(tmp_path):
    import subprocess
    import sys

    from ziggurat.runtime.profile import profile_model

    script = Path(__file__).resolve().parents[1] / "filecheck" / "lowering" / "Inputs" / "locations_model.py"
    path = tmp_path / "locations.onnx"
    subprocess.run([sys.executable, str(script), str(path)], check=True)
    prof = profile_model(str(path), target="llvm -num-cores=1", rounds=1, warmup=0)
    by_nodes = {s.nodes: s.kernel for s in prof.sites}
    assert ("mm1", "add1", "relu1") in by_nodes
    # the two Tanh nodes share one kernel after dedupe-kernels; each call names its own node, the unnamed
    # one as the importer's location does (`<node #4>`), not by an output-name heuristic
    assert by_nodes[("tanh_a",)] == by_nodes[("<node #4>",)]
    row = next(r for r in prof.rows if r.kernel == by_nodes[("tanh_a",)])
    assert row.calls == 2 and row.nodes == ("tanh_a", "<node #4>")


# 6. --list-passes shows each pass's options, the plugins' too


def test_list_passes_shows_plugin_pass_options(broken, capsys):
    assert opt_main(["--list-passes", "--load-plugin", broken]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["audit-break"])
    assert lines[at + 1].split() == ["options:", "width=2"]
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["fuse-ops"])
    assert lines[at + 1].split()[0] == "options:" and "cost-guided=false" in lines[at + 1]
