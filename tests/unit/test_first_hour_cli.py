"""A researcher's first hour with the command line: weights travel with text IR, `.mlir` of any
level compiles and runs, options and targets fail with one clear message (docs/index.md,
'Command line'). The lit tests in tests/filecheck/cli/ check the same from the shell."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from ziggurat.cli.main import main as ziggurat_main
from ziggurat.cli.opt import main as opt_main
from ziggurat.errors import CompileError, ZigguratError


def _conv_bn_model(folder) -> str:
    """Conv + BatchNorm + Relu: simplify-graph folds the BatchNorm into new weights (w.bn, ...)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")]
    for name in ("scale", "bias", "mean"):
        inits.append(numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), name))
    inits.append(numpy_helper.from_array(rng.uniform(0.5, 1.5, 4).astype(np.float32), "var"))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"]),
             helper.make_node("Relu", ["b"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], inits)
    path = os.path.join(folder, "conv_bn.onnx")
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return path


@pytest.fixture
def model(tmp_path):
    """(onnx path, inputs .npz, expected .npz) of the Conv+BN+Relu model, expected from onnx's reference."""
    from onnx.reference import ReferenceEvaluator

    path = _conv_bn_model(str(tmp_path))
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    (y,) = ReferenceEvaluator(path).run(None, {"x": x})
    np.savez(tmp_path / "in.npz", x=x)
    np.savez(tmp_path / "expected.npz", y=y)
    return path, str(tmp_path / "in.npz"), str(tmp_path / "expected.npz")


def _run_passes(capsys, argv) -> str:
    capsys.readouterr()
    assert ziggurat_main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert out.rstrip().endswith("PASS"), out
    return out


# 1. Weights travel with text IR


def test_imported_weights_and_the_weights_passes_make_travel_with_the_ir(model, tmp_path, capsys, monkeypatch):
    """import --weights -o records the file relative to the .mlir; ziggurat-opt -p simplify-graph (new
    weights w.bn, ...) --weights-out saves old + new and names them; the next ziggurat-opt and `ziggurat
    run` find them from another working directory."""
    onnx_path, inputs, expected = model
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "elsewhere").mkdir()
    m, w = tmp_path / "a" / "m.mlir", tmp_path / "a" / "w.npz"
    assert ziggurat_main(["import", onnx_path, "--weights", str(w), "-o", str(m)]) == 0
    assert 'graph.weights_file = "w.npz"' in m.read_text()
    monkeypatch.chdir(tmp_path / "elsewhere")
    f, fw = tmp_path / "b" / "f.mlir", tmp_path / "b" / "fw.npz"
    assert opt_main([str(m), "-p", "simplify-graph", "--weights-out", str(fw), "-o", str(f)]) == 0
    text = f.read_text()
    assert 'graph.weights_file = "fw.npz"' in text and "graph.batch_norm" not in text
    with np.load(fw) as saved:
        names = set(saved.files)
    assert {"w", "scale"} <= names and any(n.startswith("w.bn") for n in names)  # old and made by the pass
    capsys.readouterr()
    assert opt_main([str(f), "-p", "fold-constants,simplify-graph"]) == 0
    assert "graph.conv2d" in capsys.readouterr().out
    _run_passes(capsys, ["run", str(f), "--inputs", inputs, "--check", expected])


def test_without_weights_out_the_output_is_repointed_and_unsaved_weights_are_named(model, tmp_path, capsys):
    onnx_path, _, _ = model
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    m = tmp_path / "a" / "m.mlir"
    assert ziggurat_main(["import", onnx_path, "--weights", str(tmp_path / "a" / "w.npz"), "-o", str(m)]) == 0
    capsys.readouterr()
    assert opt_main([str(m), "-p", "simplify-graph", "-o", str(tmp_path / "b" / "f.mlir")]) == 0
    err = capsys.readouterr().err
    assert "warning: the output names" in err and "w.bn" in err and "--weights-out" in err
    assert 'graph.weights_file = "../a/w.npz"' in (tmp_path / "b" / "f.mlir").read_text()


def test_import_without_weights_says_how_to_keep_them(model, tmp_path, capsys):
    assert ziggurat_main(["import", model[0], "-o", str(tmp_path / "m.mlir")]) == 0
    assert "--weights W.npz" in capsys.readouterr().err


def test_a_pass_that_needs_weight_values_without_them_is_one_error(model, tmp_path, capsys):
    onnx_path, _, _ = model
    m = tmp_path / "m.mlir"
    assert ziggurat_main(["import", onnx_path, "-o", str(m)]) == 0
    for name in ("simplify-graph", "fold-constants"):
        capsys.readouterr()
        assert opt_main([str(m), "-p", f"cse,{name}"]) == 1
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"pass '{name}' needs the values of the weights" in err
        assert "graph.constant 'w'" in err and "--weights" in err and "ziggurat import MODEL --weights" in err
    np.savez(tmp_path / "w.npz", **{k: v for k, v in np.load(_saved_weights(onnx_path, tmp_path)).items()})
    assert opt_main([str(m), "-p", "simplify-graph", "--weights", str(tmp_path / "w.npz")]) == 0
    assert "graph.batch_norm" not in capsys.readouterr().out


def _saved_weights(onnx_path, tmp_path) -> str:
    from ziggurat.frontends.onnx import import_onnx

    return import_onnx(onnx_path).weights.save(str(tmp_path / "imported.npz"))


# 2. .mlir of any level into compile and run; ziggurat-opt -t llvm and .onnx input


@pytest.mark.parametrize("level", ["graph", "te", "loop", "hw"])
def test_run_takes_mlir_of_every_level(model, tmp_path, capsys, level):
    onnx_path, inputs, expected = model
    ir = tmp_path / f"{level}.mlir"
    if level == "graph":
        assert ziggurat_main(["import", onnx_path, "--weights", str(tmp_path / "w.npz"), "-o", str(ir)]) == 0
    else:  # the IR at that stage, with the weights it names (made by the graph passes too)
        capsys.readouterr()
        assert ziggurat_main(["compile", onnx_path, "--emit", level, "--weights-out", str(tmp_path / "w.npz")]) == 0
        ir.write_text(capsys.readouterr().out)
    _run_passes(capsys, ["run", str(ir), "--inputs", inputs, "--check", expected])
    capsys.readouterr()
    assert ziggurat_main(["compile", str(ir), "--emit", "llvm"]) == 0
    assert 'define void @"ziggurat_entry"' in capsys.readouterr().out


def test_levels_are_detected_and_the_rest_of_the_default_pipeline_runs():
    from ziggurat.cli.mlir_model import STAGES, detect_level, remaining_pipeline
    from ziggurat.lowering import pipelines
    from ziggurat.registry import parse_pipeline

    full = [p.name for p in parse_pipeline(pipelines.default_pipeline(3, "llvm -mcpu=haswell"))]
    assert remaining_pipeline("graph", 3, "llvm -mcpu=haswell") == pipelines.default_pipeline(3, "llvm -mcpu=haswell")
    for level in ("te", "loop"):
        rest = [p.name for p in parse_pipeline(remaining_pipeline(level, 3, "llvm -mcpu=haswell"))]
        assert rest == full[full.index(STAGES[level]) + 1:]
    assert remaining_pipeline("hw", 3) == ""
    planned = [p.name for p in parse_pipeline(remaining_pipeline("loop", 3, "llvm", planned=True))]
    assert planned == full[full.index(pipelines.MODULE[3][-1]) + 1:]
    from xdsl.parser import Parser

    from ziggurat.registry import make_context

    graph_ir = 'func.func @main(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {\n' \
               ' %y = graph.relu %x : tensor<4x64xf32>\n func.return %y : tensor<4x64xf32>\n}'
    module = Parser(make_context(), graph_ir).parse_module()
    assert detect_level(module) == "graph"
    seen = {}

    def keep(p, m, s):
        for level, name in STAGES.items():
            if p.name == name:
                seen[level] = detect_level(m)

    from ziggurat.compiler import run_passes

    run_passes(module, parse_pipeline(pipelines.default_pipeline(3, "llvm -mcpu=haswell")), after_pass=keep)
    assert seen == {"te": "te", "loop": "loop", "hw": "hw"}


def test_mlir_model_errors_are_one_clear_message(model, tmp_path, capsys):
    onnx_path, inputs, _ = model
    m = tmp_path / "m.mlir"
    assert ziggurat_main(["import", onnx_path, "-o", str(m)]) == 0  # no weights saved
    capsys.readouterr()
    assert ziggurat_main(["run", str(m), "--inputs", inputs]) == 1
    err = capsys.readouterr().err
    assert "but no weights file (graph.weights_file)" in err and "'w'" in err and "--weights-out" in err
    np.savez(tmp_path / "wrong.npz", input=np.zeros((1, 3, 8, 8), np.float32))
    assert ziggurat_main(["import", onnx_path, "--weights", str(tmp_path / "w.npz"), "-o", str(m)]) == 0
    capsys.readouterr()
    assert ziggurat_main(["run", str(m), "--inputs", str(tmp_path / "wrong.npz")]) == 1
    assert "does not name the model's inputs: missing ['x'], unknown ['input']" in capsys.readouterr().err
    hw = tmp_path / "hw.mlir"
    assert ziggurat_main(["compile", onnx_path, "--emit", "hw", "--weights-out", str(tmp_path / "hw.npz")]) == 0
    hw.write_text(capsys.readouterr().out)
    assert ziggurat_main(["compile", str(hw), "-p", "cse"]) == 1
    assert "holds hw-level IR; run passes on it with ziggurat-opt" in capsys.readouterr().err


def test_ziggurat_opt_imports_onnx_and_emits_llvm_for_any_level(model, tmp_path, capsys):
    onnx_path, _, _ = model
    capsys.readouterr()
    assert opt_main([onnx_path, "-p", "simplify-graph"]) == 0  # the imported weights are bound
    out, err = capsys.readouterr()
    assert "graph.conv2d" in out and "graph.batch_norm" not in out and "--weights-out" in err
    assert opt_main([onnx_path, "-p", "simplify-graph", "--weights-out", str(tmp_path / "w.npz"),
                     "-o", str(tmp_path / "m.mlir")]) == 0
    assert 'graph.weights_file = "w.npz"' in (tmp_path / "m.mlir").read_text()
    assert opt_main([onnx_path, "-t", "llvm"]) == 0
    assert 'define void @"ziggurat_entry"' in capsys.readouterr().out
    capsys.readouterr()
    assert ziggurat_main(["compile", onnx_path, "--emit", "hw"]) == 0
    hw = tmp_path / "hw.mlir"
    hw.write_text(capsys.readouterr().out)
    assert opt_main([str(hw), "-t", "llvm"]) == 0
    llvm_ir = capsys.readouterr().out
    assert 'define void @"ziggurat_entry"' in llvm_ir and "x float>" in llvm_ir


def test_help_says_llvm_is_our_target(capsys):
    with pytest.raises(SystemExit):
        opt_main(["--help"])
    assert "'llvm' is ziggurat's (not xDSL's)" in " ".join(capsys.readouterr().out.split())


# 3. Options of the CLIs


def test_an_unknown_cpu_is_refused_before_llvm_sees_it(capfd):
    from ziggurat.target import Target

    for text in ("llvm -mcpu=notacpu -mattr=+avx2", "llvm -mcpu=i686 -mattr=+sse2"):  # i686 aborts LLVM at x86-64
        with pytest.raises(ZigguratError, match=r"unknown CPU '-mcpu=(notacpu|i686)'"):
            Target.parse(text)
    with pytest.raises(ZigguratError, match=r"unknown CPU '-mcpu=haswel' \(did you mean 'haswell'\?\)"):
        Target.parse("llvm -mcpu=haswel")
    assert Target.parse("llvm -mcpu=ivybridge -mattr=+avx").llvm_cpu == "ivybridge"
    assert "not a recognized processor" not in capfd.readouterr().err


def test_the_cpu_list_is_what_llvm_knows():
    """Every name of LLVM_X86_64_CPUS builds x86-64 code without LLVM's 'not a recognized processor'
    warning (a child process: LLVM aborts on a 32-bit CPU)."""
    from ziggurat.target import CPU_ISA, LLVM_X86_64_CPUS

    assert set(CPU_ISA) <= LLVM_X86_64_CPUS
    code = (
        "import sys, llvmlite.binding as llvm\n"
        "llvm.initialize_native_target(); llvm.initialize_native_asmprinter()\n"
        "t = llvm.Target.from_triple('x86_64-unknown-linux-gnu')\n"
        "m = llvm.parse_assembly('define i64 @f(i64 %a) {\\n %b = add i64 %a, 1\\n ret i64 %b\\n}')\n"
        "for cpu in sys.argv[1:]:\n"
        "    tm = t.create_target_machine(cpu=cpu)\n"
        "    assert tm.emit_object(m)\n"
        "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code, *sorted(LLVM_X86_64_CPUS)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
    assert "not a recognized processor" not in proc.stderr


def test_print_after_an_unknown_pass_fails_with_a_suggestion(model, tmp_path, capsys):
    onnx_path, _, _ = model
    m = tmp_path / "m.mlir"
    assert ziggurat_main(["import", onnx_path, "--weights", str(tmp_path / "w.npz"), "-o", str(m)]) == 0
    capsys.readouterr()
    assert opt_main([str(m), "-p", "simplify-graph,cse", "--print-after", "simplify-grph"]) == 1
    assert "did you mean 'simplify-graph'?" in capsys.readouterr().err
    assert opt_main([str(m), "-p", "simplify-graph,cse", "--print-after", "simplify-graph"]) == 0
    out = capsys.readouterr().out
    assert out.count("// -----// IR after simplify-graph //----- //") == 1 and out.count("builtin.module") == 2
    assert ziggurat_main(["compile", onnx_path, "--print-after", "fuse-op"]) == 1
    assert "did you mean 'fuse-ops'?" in capsys.readouterr().err


def _check_table(err: str, passes: list[str]) -> None:
    rows = [r.split() for r in err.strip().splitlines() if r.split()[:1] in (["pass"], ["total"], *[[p] for p in passes])]
    assert rows[0] == ["pass", "seconds", "share"] and rows[-1][0] == "total"
    body = rows[1:-1]
    assert [r[0] for r in body] == passes
    for r in body + rows[-1:]:
        digits = r[1].replace(".", "").lstrip("0")
        assert 3 <= len(digits) <= 4 or float(r[1]) == 0, r  # 3-4 significant digits
    assert abs(sum(float(r[2].rstrip("%")) for r in body) - 100.0) < 1.0 and rows[-1][2] == "100.0%"
    assert abs(sum(float(r[1]) for r in body) - float(rows[-1][1])) <= 0.002 * float(rows[-1][1]) + 1e-6


def test_time_passes_prints_seconds_shares_and_a_total(model, tmp_path, capsys):
    onnx_path, _, _ = model
    capsys.readouterr()
    assert ziggurat_main(["compile", onnx_path, "-O1", "--time-passes"]) == 0
    from ziggurat.lowering import pipelines
    from ziggurat.registry import parse_pipeline

    _check_table(capsys.readouterr().err, [p.name for p in parse_pipeline(pipelines.default_pipeline(1))])
    m = tmp_path / "m.mlir"
    assert ziggurat_main(["import", onnx_path, "--weights", str(tmp_path / "w.npz"), "-o", str(m)]) == 0
    capsys.readouterr()
    assert opt_main([str(m), "-p", "simplify-graph,cse,convert-graph-to-te", "--time-passes"]) == 0
    _check_table(capsys.readouterr().err, ["simplify-graph", "cse", "convert-graph-to-te"])


def test_seconds_have_four_significant_digits():
    from ziggurat.cli.timing import seconds

    assert [seconds(v) for v in (12.3456, 1.23456, 0.0123456, 0.000123456, 0.0)] == \
        ["12.35", "1.235", "0.01235", "0.0001235", "0.000"]


# 4. Option errors name the pass and the option


@pytest.mark.parametrize("spec, message", [
    ("loop-default-schedule{fuse-epilogues=maybe}",
     "pass 'loop-default-schedule': option 'fuse-epilogues' expects a bool (true or false), got 'maybe'"),
    ("loop-default-schedule{vector-width=8.5}", "pass 'loop-default-schedule': option 'vector-width' expects an integer, got '8.5'"),
    ("loop-tile{loops=a,b}", "pass 'loop-tile': option 'loops' expects integers separated by commas (e.g. 8,16), got 'a,b'"),
    ("apply-tuning{database=5}", "pass 'apply-tuning': option 'database' expects a string"),
    ("loop-vectorize-inermost", "unknown pass 'loop-vectorize-inermost' (did you mean 'loop-vectorize-innermost'"),
])
def test_option_errors_name_the_pass_and_the_option(spec, message):
    from ziggurat.registry import parse_pipeline

    with pytest.raises(CompileError) as err:
        parse_pipeline(spec)
    assert message in str(err.value)


def test_the_docs_say_options_are_separated_by_spaces_and_show_the_new_flags():
    docs = os.path.join(os.path.dirname(__file__), "..", "..", "docs")
    with open(os.path.join(docs, "passes.md")) as f:
        passes = f.read()
    with open(os.path.join(docs, "index.md")) as f:
        index = f.read()
    assert "separated by spaces" in passes and "-p 'a{k=v k2=v2}'" in passes
    for flag in ("--weights-out", "--print-after PASS", "--time-passes", "-t llvm", "ziggurat run M.mlir"):
        assert flag in index, flag
