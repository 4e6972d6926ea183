"""What makes compiles faster must not change what they compute.

Parallel code generation: split.py cuts a module's LLVM IR into parts, codegen_pool.py compiles
them in worker processes, jit.py links the objects. The code must compute what the whole module
computes (checked against numpy), and a worker that dies or refuses must not lose a compile.
The collector thresholds that `compile` raises come back, also after concurrent compiles."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ziggurat
import ziggurat.backends.llvm as llvm_backend
from ziggurat.backends.llvm import codegen_pool
from ziggurat.backends.llvm.jit import declared_externals, emit_jit_object, jit_compile, load_objects
from ziggurat.backends.llvm.options import LLVMOptions
from ziggurat.backends.llvm.split import split_module
from ziggurat.compiler import clear_cache
from ziggurat.errors import CompileError

TOY = '''; ModuleID = "toy"
target triple = "unknown-unknown-unknown"

@"table" = internal constant [2 x float] [float 2.0, float 3.0]
declare float @"expf"(float %".1") nounwind

define internal void @"main"(float* %".1") nounwind
{
entry:
  call void @"k1"(float* %".1")
  call void @"k2"(float* %".1")
  ret void
}
define internal void @"k1_body"(float* %".1") nounwind
{
entry:
  %"v" = load float, float* %".1"
  %"t" = getelementptr [2 x float], [2 x float]* @"table", i64 0, i64 0
  %"c" = load float, float* %"t"
  %"w" = fmul float %"v", %"c"
  store float %"w", float* %".1"
  ret void
}
define internal void @"k1"(float* %".1") nounwind
{
entry:
  call void @"k1_body"(float* %".1")
  ret void
}
define internal void @"k2"(float* %".1") nounwind
{
entry:
  %"p" = getelementptr float, float* %".1", i64 1
  %"v" = load float, float* %"p"
  %"t" = getelementptr [2 x float], [2 x float]* @"table", i64 0, i64 1
  %"c" = load float, float* %"t"
  %"w" = fadd float %"v", %"c"
  %"e" = call float @"expf"(float %"w")
  store float %"e", float* %"p"
  ret void
}
define void @"ziggurat_entry"(float* %".1") nounwind
{
entry:
  call void @"main"(float* %".1")
  ret void
}
'''


def test_split_keeps_callees_with_their_kernel_and_declares_the_rest() -> None:
    parts = split_module(TOY, 2)
    assert parts is not None and len(parts) == 2
    home = {name: k for k, p in enumerate(parts) for name in ("main", "ziggurat_entry", "k1", "k1_body", "k2")
            if f'define internal void @"{name}"' in p or f'define void @"{name}"' in p}
    assert home["main"] == home["ziggurat_entry"] == 0
    assert home["k1"] == home["k1_body"]
    assert {home["k1"], home["k2"]} != {0}  # one kernel left part 0
    for p in parts:
        assert '@"table" = internal constant' in p  # each part has its own copy
        assert 'declare float @"expf"' in p
    other = 1 - home["main"]
    for name in ("k1", "k2"):
        if home[name] == other:
            assert f'define void @"{name}"' in parts[other]  # external: part 0 calls it
            assert f'declare void @"{name}"(float* %".1")' in parts[0]


def test_the_linked_parts_compute_what_the_whole_module_computes() -> None:
    import ctypes

    o = LLVMOptions(num_threads=1)
    parts = split_module(TOY, 2)
    objects = [emit_jit_object(p, o.cpu, o.features, o.opt_level) for p in parts]
    results = []
    for jm in (jit_compile(TOY, o), load_objects(objects, TOY, o, declared_externals(TOY))):
        buf = (ctypes.c_float * 2)(1.5, 0.25)
        jm.cfunc("ziggurat_entry", None, ctypes.c_void_p)(ctypes.addressof(buf))
        results.append(list(buf))
    np.testing.assert_allclose(results[1], [3.0, np.exp(3.25)], rtol=1e-6)
    assert results[0] == results[1]
    assert declared_externals(TOY) == ["expf"]


ONE_GROUP = TOY[:TOY.index('define internal void @"main"')] + TOY[TOY.index('define void @"ziggurat_entry"'):].replace(
    'call void @"main"(float* %".1")', 'store float 0.0, float* %".1"')


@pytest.mark.parametrize("text", [
    TOY.replace("internal constant", "constant"),  # a constant two parts would both define
    TOY.replace("internal constant", "internal global"),  # a variable the parts must share
    ONE_GROUP,  # nothing to spread
])
def test_modules_that_do_not_split_compile_whole(text: str) -> None:
    assert split_module(text, 2) is None
    assert split_module(TOY, 1) is None


def two_layer_model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w1", (32, 48)), ("w2", (48, 24)), ("b", (24,)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
             helper.make_node("MatMul", ["t", "w2"], ["u"]), helper.make_node("Add", ["u", "b"], ["v"]),
             helper.make_node("Softmax", ["v"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "two_layers", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 24])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def reference(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    w = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    v = np.tanh(x @ w["w1"]) @ w["w2"] + w["b"]
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture
def split_everything(monkeypatch):
    """Models of any size split in two, each compile built afresh."""
    monkeypatch.setenv("ZIGGURAT_CACHE", "0")
    monkeypatch.setenv(codegen_pool.JOBS_ENV, "2")
    monkeypatch.setattr(codegen_pool, "MIN_SPLIT_CHARS", 0)
    clear_cache()
    yield
    clear_cache()


def test_a_model_compiled_in_parts_matches_numpy(split_everything) -> None:
    model = two_layer_model()
    x = np.random.default_rng(1).standard_normal((8, 32)).astype(np.float32)
    m = ziggurat.compile(model)
    assert split_module(m.info["llvm_ir"], 2) is not None  # it did split
    np.testing.assert_allclose(m(x)[0], reference(model, x), rtol=1e-5, atol=1e-6)


def test_a_dead_worker_is_replaced_and_loses_nothing(split_everything) -> None:
    model = two_layer_model()
    x = np.random.default_rng(2).standard_normal((8, 32)).astype(np.float32)
    ziggurat.compile(model)
    assert codegen_pool._idle, "the worker went back to the pool"
    for w in codegen_pool._idle:
        w.proc.kill()
        w.proc.wait()
    clear_cache()
    np.testing.assert_allclose(ziggurat.compile(model)(x)[0], reference(model, x), rtol=1e-5, atol=1e-6)


def test_a_worker_that_cannot_start_leaves_the_part_to_this_process(split_everything, monkeypatch) -> None:
    def refuse(self):
        raise OSError("no processes left")

    monkeypatch.setattr(codegen_pool._Worker, "__init__", refuse)
    monkeypatch.setattr(codegen_pool, "_idle", [])
    model = two_layer_model()
    x = np.random.default_rng(3).standard_normal((8, 32)).astype(np.float32)
    np.testing.assert_allclose(ziggurat.compile(model)(x)[0], reference(model, x), rtol=1e-5, atol=1e-6)


def test_invalid_ir_in_a_worker_part_is_a_compile_error() -> None:
    bad = TOY.replace('%"w" = fadd float %"v", %"c"', '%"w" = fadd float %"v", %"nowhere"')
    parts = split_module(bad, 2)
    assert parts is not None
    with pytest.raises(CompileError, match="nowhere"):
        codegen_pool.compile_parts([parts[0] if "nowhere" not in parts[0] else parts[1],
                                    parts[1] if "nowhere" not in parts[0] else parts[0]], LLVMOptions(num_threads=1),
                                   emit_jit_object)


@pytest.mark.parametrize("raw", ["0", "two", "-1"])
def test_a_bad_jobs_setting_is_a_clear_error(monkeypatch, raw: str) -> None:
    monkeypatch.setenv(codegen_pool.JOBS_ENV, raw)
    with pytest.raises(CompileError, match="ZIGGURAT_COMPILE_JOBS"):
        codegen_pool.compile_jobs()


def test_the_lazy_package_names_every_public_name() -> None:
    assert sorted(llvm_backend._FROM) == sorted(llvm_backend.__all__)
    for name in llvm_backend.__all__:
        assert getattr(llvm_backend, name) is not None


def test_the_disk_cache_stores_and_links_every_part(split_everything, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("ZIGGURAT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ZIGGURAT_CACHE")
    model = two_layer_model()
    x = np.random.default_rng(4).standard_normal((8, 32)).astype(np.float32)
    cold = ziggurat.compile(model)
    assert len(cold._keepalive.objects) == 2
    clear_cache()
    warm = ziggurat.compile(model)
    assert warm.info["stats"].cache == "disk"
    assert warm._keepalive is not cold._keepalive and len(warm._keepalive.objects) == 2
    np.testing.assert_allclose(warm(x)[0], reference(model, x), rtol=1e-5, atol=1e-6)


def test_compile_restores_the_collector_thresholds(monkeypatch) -> None:
    import gc
    import threading

    from ziggurat import compiler

    monkeypatch.setenv("ZIGGURAT_CACHE", "0")
    before = gc.get_threshold()
    seen = []
    real = compiler._build

    def spy(*args, **kwargs):
        seen.append(gc.get_threshold()[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(compiler, "_build", spy)
    models = [two_layer_model() for _ in range(4)]
    threads = [threading.Thread(target=ziggurat.compile, args=(m,), kwargs={"cache": False}) for m in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 4 and min(seen) >= compiler.GC_GEN0
    assert gc.get_threshold() == before
