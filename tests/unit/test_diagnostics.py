"""Pipeline and CLI mistakes give one error that names the pass or option at fault, with a suggestion."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from ziggurat.cli.main import main as ziggurat_main
from ziggurat.cli.opt import main as opt_main
from ziggurat.errors import CompileError
from ziggurat.registry import parse_pipeline


def test_an_unknown_pass_gets_a_suggestion() -> None:
    with pytest.raises(CompileError, match=r"unknown pass 'fuse-opps' \(did you mean 'fuse-ops'\?\)"):
        parse_pipeline("cse,fuse-opps")


def test_an_unknown_option_names_the_pass_the_option_and_the_close_ones() -> None:
    with pytest.raises(CompileError, match=r"pass 'fuse-ops' has no option 'max-round' \(did you mean 'max-rounds'"):
        parse_pipeline("fuse-ops{max-round=2}")


def test_a_bad_option_value_names_the_pass_and_the_option() -> None:
    with pytest.raises(CompileError, match=r"pass 'fuse-ops': option 'cost-guided' expects a bool \(true or false\), "
                                           r"got 'maybe'"):
        parse_pipeline("fuse-ops{cost-guided=maybe}")


def test_a_malformed_pipeline_says_how_to_write_one() -> None:
    with pytest.raises(CompileError, match="options separated by spaces"):
        parse_pipeline("fuse-ops{")


def test_good_pipelines_parse_with_their_options() -> None:
    (cse, fuse) = parse_pipeline('cse,fuse-ops{cost-guided=true vector-width=8}')
    assert cse.name == "cse" and fuse.cost_guided is True and fuse.vector_width == 8


def test_ziggurat_opt_reports_an_unknown_pass_with_a_suggestion(tmp_path, capsys) -> None:
    src = tmp_path / "m.mlir"
    src.write_text("builtin.module {}\n")
    assert opt_main([str(src), "-p", "loop-vectorize-inermost"]) != 0
    err = capsys.readouterr().err
    assert "loop-vectorize-inermost" in err and "loop-vectorize-innermost" in err


def _model(tmp_path):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    path = tmp_path / "relu.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return str(path)


def test_print_after_a_pass_that_never_ran_is_an_error(tmp_path, capsys) -> None:
    assert ziggurat_main(["compile", _model(tmp_path), "--print-after", "fuse-op"]) == 1
    err = capsys.readouterr().err
    assert "--print-after fuse-op: no pass of that name ran (did you mean 'fuse-ops'?)" in err


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        ziggurat_main(["--version"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("ziggurat ") and "xdsl 0.74" in out


def test_run_refuses_inputs_under_other_names_and_takes_named_or_positional_ones(tmp_path, capsys) -> None:
    import numpy as np

    model = _model(tmp_path)
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    wrong, named, positional = (tmp_path / f"{k}.npz" for k in ("wrong", "named", "positional"))
    np.savez(wrong, input=x)
    np.savez(named, x=x)
    np.savez(positional, x)
    assert ziggurat_main(["run", model, "--inputs", str(wrong)]) == 1
    assert "does not name the model's inputs: missing ['x'], unknown ['input']" in capsys.readouterr().err
    expected = tmp_path / "expected.npz"
    np.savez(expected, y=np.maximum(x, 0))
    for good in (named, positional):
        assert ziggurat_main(["run", model, "--inputs", str(good), "--check", str(expected)]) == 0
        assert capsys.readouterr().out.rstrip().endswith("PASS")


def test_an_unknown_cpu_is_one_clear_error(tmp_path, capsys) -> None:
    assert ziggurat_main(["compile", _model(tmp_path), "--target", "llvm -mcpu=notacpu"]) == 1
    assert "unknown CPU '-mcpu=notacpu'" in capsys.readouterr().err


def test_time_passes_is_a_table_with_shares_and_a_total_on_stderr(tmp_path, capsys) -> None:
    src = tmp_path / "relu.mlir"
    assert ziggurat_main(["import", _model(tmp_path), "-o", str(src)]) == 0
    capsys.readouterr()
    assert opt_main([str(src), "-p", "convert-graph-to-te,convert-te-to-loop", "--time-passes"]) == 0
    out, err = capsys.readouterr()
    assert "func.func @main" in out and "seconds" not in out
    rows = err.strip().splitlines()
    assert rows[0].split() == ["pass", "seconds", "share"]
    assert [r.split()[0] for r in rows[1:]] == ["convert-graph-to-te", "convert-te-to-loop", "total"]
    shares = [float(r.split()[2].rstrip("%")) for r in rows[1:-1]]
    assert abs(sum(shares) - 100.0) < 0.5 and rows[-1].split()[2] == "100.0%"


def _conv_bn_model(tmp_path):
    import numpy as np
    from onnx import numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")]
    for name in ("scale", "bias", "mean"):
        inits.append(numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), name))
    inits.append(numpy_helper.from_array(rng.uniform(0.5, 1.5, 4).astype(np.float32), "var"))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], inits)
    path = tmp_path / "conv_bn.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return str(path)


def test_imported_weights_travel_with_the_mlir_file(tmp_path, capsys, monkeypatch) -> None:
    """`ziggurat import --weights w.npz -o m.mlir` records the weights relative to m.mlir, and
    ziggurat-opt reads them from there whatever the working directory: simplify-graph, which needs
    the values, folds the BatchNorm into the conv."""
    folder = tmp_path / "model"
    folder.mkdir()
    mlir, npz = folder / "m.mlir", folder / "w.npz"
    assert ziggurat_main(["import", _conv_bn_model(tmp_path), "-o", str(mlir), "--weights", str(npz)]) == 0
    assert 'graph.weights_file = "w.npz"' in mlir.read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert opt_main([str(mlir), "-p", "simplify-graph"]) == 0
    out = capsys.readouterr().out
    assert "graph.conv2d" in out and "graph.batch_norm" not in out
    npz.unlink()
    assert opt_main([str(mlir), "-p", "simplify-graph"]) == 1
    assert "cannot read the weights file 'w.npz'" in capsys.readouterr().err


def test_list_passes_shows_each_pass_with_its_options_and_defaults(capsys) -> None:
    assert opt_main(["--list-passes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "separated by" in lines[0] + lines[1]
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["loop-vectorize-innermost"])
    assert lines[at + 1].split() == ["options:", "min-extent=16"]
    hw = next(i for i, line in enumerate(lines) if line.split()[:1] == ["apply-tuning"])
    assert 'database=""' in lines[hw + 1] and 'target="llvm"' in lines[hw + 1]


def test_compile_verifies_at_stage_ends_and_names_the_passes_since_the_last_check():
    """`compile` verifies after the stages (not every pass); an invalid IR names the passes since the
    last check, and `verify=True` (ziggurat-opt, --print-after) names the one pass."""
    from dataclasses import dataclass

    from xdsl.dialects import builtin
    from xdsl.passes import ModulePass

    from ziggurat.compiler import run_passes, verify_lowered
    from ziggurat.dialects import graph
    from ziggurat.errors import CompileError
    from ziggurat.registry import parse_pipeline

    @dataclass(frozen=True)
    class BreakShapes(ModulePass):
        name = "break-shapes"

        def apply(self, ctx, op: builtin.ModuleOp) -> None:
            from xdsl.rewriter import Rewriter

            for o in list(op.walk()):
                if isinstance(o, graph.ReluOp):  # the function now returns a 2x2 tensor: invalid
                    Rewriter.replace_op(o, graph.ReshapeOp(o.input, builtin.TensorType(builtin.f32, [2, 2])))

    text = """
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %y = graph.relu %x : tensor<4xf32>
      func.return %y : tensor<4xf32>
    }"""
    from xdsl.parser import Parser

    from ziggurat.dialects import make_context

    passes = [*parse_pipeline("cse"), BreakShapes(), *parse_pipeline("dce")]
    with pytest.raises(CompileError, match=r"one of the passes 'cse', 'break-shapes', 'dce' \(verified at stage ends"):
        run_passes(Parser(make_context(), text).parse_module(), passes, verify="stages")
    with pytest.raises(CompileError, match=r"the IR is invalid after pass 'break-shapes'"):
        run_passes(Parser(make_context(), text).parse_module(), passes, verify=True)
    # deferred: nothing checked after the last stage; the caller verifies where translation fails
    module = Parser(make_context(), text).parse_module()
    unverified = run_passes(module, passes, verify="deferred")
    assert unverified == ["cse", "break-shapes", "dce"]
    with pytest.raises(CompileError, match=r"invalid after one of the passes 'cse', 'break-shapes', 'dce'"):
        verify_lowered(module, unverified)
