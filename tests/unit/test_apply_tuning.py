"""apply-tuning as a pass: a tuned compile is the default pipeline with `apply-tuning{...}` in it, so
`ziggurat import` + `ziggurat-opt -p '<that pipeline>'` reproduces it exactly; tuned kernels are
correct; a record line as `ziggurat tune` writes it loads and replays."""

from __future__ import annotations

import re

import json
import random
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.parser import Parser

import ziggurat
from ziggurat.autotune import DEFAULT_TRACE, SearchSpace, extract_tasks
from ziggurat.backends.llvm.translate import LLVMOptions, translate_module
from ziggurat.cli.main import main as ziggurat_main
from ziggurat.cli.opt import main as opt_main
from ziggurat.database import JSONDatabase, TuningRecord, WorkloadKey
from ziggurat.dialects import make_context
from ziggurat.lowering import pipelines

TARGET = "llvm -num-cores=1"


def matmul_model() -> onnx.ModelProto:
    """y = x @ w + b, x: 16x64, w: 64x48."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 48)).astype(np.float32)
    b = rng.standard_normal(48).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 48])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def reference(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    w, b = (numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer)
    return x.astype(np.float64) @ w + b


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """The model file and a database holding one (sampled, non-default) record of its one kernel."""
    folder = tmp_path_factory.mktemp("apply_tuning")
    model = matmul_model()
    path = folder / "mm.onnx"
    onnx.save(model, path)
    tasks = extract_tasks(str(path), target=TARGET)
    assert len(tasks) == 1
    name, text, _ = tasks[0]
    cand = SearchSpace(text, name).sample(random.Random(0), 1)[0]
    assert cand.trace != DEFAULT_TRACE
    db = folder / "records.jsonl"
    with JSONDatabase(db, fsync=False) as opened:
        opened.commit(TuningRecord(WorkloadKey.from_text(text, name), TARGET, cand.trace, [1e-6]))
    return model, path, db, name


def test_tuned_compile_is_a_pipeline_that_ziggurat_opt_reproduces(tuned, tmp_path, capsys, monkeypatch):
    model, path, db, name = tuned
    monkeypatch.chdir(tmp_path)  # relative paths in the pipeline string, as a user would type them
    (tmp_path / "records.jsonl").write_bytes(db.read_bytes())
    (tmp_path / "mm.onnx").write_bytes(path.read_bytes())
    spec = pipelines.default_pipeline(3, TARGET, tuning_db="records.jsonl")
    assert 'apply-tuning{database="records.jsonl" target=' in spec
    assert 'target="llvm -num-cores=1"},loop-default-schedule' in spec

    compiled = ziggurat.compile("mm.onnx", target=TARGET, tuning_db="records.jsonl")
    assert compiled.info["pipeline"] == spec
    assert compiled.info["stats"].tuned_kernels == [name]
    x = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32)
    np.testing.assert_allclose(compiled(x)[0], reference(model, x), rtol=1e-4, atol=1e-4)

    # ziggurat compile --tuning-db: the hw-level IR
    capsys.readouterr()
    assert ziggurat_main(["compile", "mm.onnx", "--target", TARGET, "--tuning-db", "records.jsonl", "--emit", "hw"]) == 0
    out = capsys.readouterr()
    assert "tuning: 1 kernel(s) scheduled from records.jsonl" in out.err
    hw_compiled = out.out
    assert f"func.func @{name}(" in hw_compiled and "loop.scheduled" in hw_compiled.split(f"func.func @{name}(", 1)[1].split("\n", 1)[0]

    # the same pipeline by hand: ziggurat import, then ziggurat-opt -p '<pipeline>'
    assert ziggurat_main(["import", "mm.onnx", "-o", "mm.mlir", "--weights", "w.npz"]) == 0
    assert opt_main(["mm.mlir", "-p", spec, "-o", "hw.mlir"]) == 0
    hw_opt = (tmp_path / "hw.mlir").read_text()
    # the only difference: ziggurat-opt's module still names its weights file
    header, body = hw_opt.split("\n", 1)
    assert header == hw_compiled.split("\n", 1)[0].replace("attributes {", 'attributes {graph.weights_file = "w.npz", ')
    # the .mlir that ziggurat-opt reads has no locations, so its kernels name no ONNX nodes (graph.source_nodes)
    hw_compiled = re.sub(r', graph.source_nodes = \[[^]]*\]', "", hw_compiled)
    assert body.rstrip("\n") == hw_compiled.split("\n", 1)[1].rstrip("\n")  # (trailing newlines: print vs file)
    # and the LLVM IR translated from ziggurat-opt's result is the compiled model's, byte for byte
    module = Parser(make_context(), hw_opt).parse_module()
    options = compiled.info["llvm_options"]
    assert isinstance(options, LLVMOptions)
    assert str(translate_module(module, options)[0]) == compiled.info["llvm_ir"]


def test_the_default_schedule_is_what_an_untuned_kernel_gets(tuned):
    model, path, db, name = tuned
    plain = ziggurat.compile(str(path), target=TARGET)
    tuned_model = ziggurat.compile(str(path), target=TARGET, tuning_db=str(db))
    assert plain.info["stats"].tuned_kernels == [] and tuned_model.info["stats"].tuned_kernels == [name]
    assert "apply-tuning" not in plain.info["pipeline"]
    assert plain.info["llvm_ir"] != tuned_model.info["llvm_ir"]  # the record's schedule, not the default
    # a database without a record of this kernel: the untuned build, byte for byte
    other = db.parent / "other.jsonl"
    with JSONDatabase(other, fsync=False) as opened:
        opened.commit(TuningRecord(WorkloadKey("0" * 16, "elsewhere"), TARGET, DEFAULT_TRACE, [1e-6]))
    untouched = ziggurat.compile(str(path), target=TARGET, tuning_db=str(other))
    assert untouched.info["stats"].tuned_kernels == []
    assert untouched.info["llvm_ir"] == plain.info["llvm_ir"]


# Record lines written before apply-tuning became a pass (the code of 6557ba4), copied verbatim:
# - OLD_TEMPLATE: `ziggurat tune mm.onnx --trials 4 --target 'llvm -num-cores=1'` on an AVX-512 host, a
#   template record of the O3 kernel (whose text, and so its key, depends on the 16-lane fusion decisions);
# - OLD_SKETCH: a sketch record (a split of the column loop) of the O2 kernel, committed through that
#   code's JSONDatabase; at O2 the kernel's text is the same for every vector width, so it replays on any host.
OLD_TEMPLATE = (
    '{"costs":[2.2774000058234378e-05],"error":"ok","finished":1795736341.8761415,"message":"slow: timed '
    'once","started":1795736341.8735623,"target":"llvm -num-cores=1","trace":{"template":[{"block":"matmu'
    'l","jouter":0,"kc":0,"kind":"vector","nvec":1,"pack":0,"pack_a":0,"rorder":[0],"tile":[[0,2]]}]},"v"'
    ':1,"versions":{"cpu":"znver4","llvmlite":"0.50.0","xdsl":"0.74.0","ziggurat":"0.1.0"},"workload":{"h'
    'ash":"56965b28141d52bf","name":"fused_matmul_panels_add_0"}}'
)
OLD_SKETCH = (
    '{"costs":[2.5e-05],"error":"ok","finished":1795739168.0081701,"message":"","started":1795739168.00817,'
    '"target":"llvm -num-cores=1","trace":[{"block":"matmul","factor":16,"loop":1,"prim":"split"}],"v":1,'
    '"versions":{"cpu":"znver4","llvmlite":"0.50.0","xdsl":"0.74.0","ziggurat":"0.1.0"},"workload":{"hash":'
    '"bb165dd23b39903e","name":"fused_matmul_add_0"}}'
)


def test_record_lines_written_before_the_pass_still_load_and_replay(tmp_path):
    model = matmul_model()
    db = tmp_path / "old.jsonl"
    db.write_text(OLD_TEMPLATE + "\n" + OLD_SKETCH + "\n")
    with JSONDatabase(db, fsync=False) as opened:
        recs = opened.records()
        assert opened.skipped == 0 and len(recs) == 2 and all(r.ok and r.trace != DEFAULT_TRACE for r in recs)
        for rec, line in zip(recs, (OLD_TEMPLATE, OLD_SKETCH)):  # the same format today
            assert json.dumps(rec.to_json(), sort_keys=True, separators=(",", ":")) == line
    seen = {}

    def grab(p, module, seconds):
        if p.name == "apply-tuning":
            seen["ir"] = str(module)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # measured on another CPU, when this host is not that one
        compiled = ziggurat.compile(model, target=TARGET, opt_level=2, tuning_db=str(db), after_pass=grab)
    assert compiled.info["stats"].tuned_kernels == ["fused_matmul_add_0"]
    assert "loop.for %i1_o = 0 to 3 serial" in seen["ir"]  # the record's split of the 48 columns by 16
    x = np.random.default_rng(2).standard_normal((16, 64)).astype(np.float32)
    np.testing.assert_allclose(compiled(x)[0], reference(model, x), rtol=1e-4, atol=1e-4)
