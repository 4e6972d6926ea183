"""The tail of the lowering in two processes (fork_build.py) and the merge of their LLVM IR texts
(split.merge_modules): same results as one process, nothing lost when the child fails."""

from __future__ import annotations

import ctypes
import os

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat import fork_build
from ziggurat.backends.llvm import codegen_pool
from ziggurat.backends.llvm.jit import declared_externals, jit_compile, load_objects
from ziggurat.backends.llvm.options import LLVMOptions
from ziggurat.backends.llvm.split import merge_modules, split_module
from ziggurat.compiler import clear_cache
from ziggurat.lowering import pipelines
from ziggurat.registry import parse_pipeline
from tests.unit.test_compile_speed import TOY, split_everything  # noqa: F401 - a fixture


def _run_toy(text: str, objects: list[bytes] | None = None) -> list[float]:
    o = LLVMOptions(num_threads=1)
    jm = jit_compile(text, o) if objects is None else load_objects(objects, text, o, declared_externals(text))
    buf = (ctypes.c_float * 2)(1.5, 0.25)
    jm.cfunc("ziggurat_entry", None, ctypes.c_void_p)(ctypes.addressof(buf))
    return list(buf)


def test_merging_the_parts_of_a_split_gives_the_module_back() -> None:
    parts = split_module(TOY, 2)
    assert parts is not None
    merged = merge_modules(parts)
    for name in ("main", "k1", "k1_body", "k2", "ziggurat_entry"):
        assert merged.count(f'@"{name}"(float* %".1") nounwind\n{{') == 1  # defined once
        assert f'declare void @"{name}"' not in merged  # no declaration of what a part defines
    assert merged.count('@"table" = internal constant') == 1
    assert merged.count('declare float @"expf"') == 1
    assert declared_externals(merged) == ["expf"]
    assert _run_toy(merged) == _run_toy(TOY)


@settings(max_examples=10, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=4))
def test_merged_metadata_keeps_each_part_s_own(ids: list[int]) -> None:
    """Numbered metadata of each part is renumbered past the parts before it; every reference follows."""
    texts = []
    for k, n in enumerate(ids):
        meta = "\n".join(f'!{i} = !{{ !"part{k}.{i}" }}' for i in range(n + 1))
        texts.append(f'define void @"f{k}"() !dbg_like !{n}\n{{\nentry:\n  ret void\n}}\n{meta}\n')
    merged = merge_modules(texts)
    offset = 0
    for k, n in enumerate(ids):
        assert f'!{offset + n} = !{{ !"part{k}.{n}" }}' in merged
        assert f'define void @"f{k}"() !dbg_like !{offset + n}' in merged
        offset += n + 1


def test_the_forked_tail_is_the_function_local_suffix_of_the_default_pipeline() -> None:
    names = [p.name for p in parse_pipeline(pipelines.default_pipeline(3, "llvm"))]
    tail = names[fork_build.tail_start(names):]
    assert tail == ["loop-default-schedule", "loop-parallelize-outer", "loop-vectorize-innermost",
                    "convert-loop-to-hw"]
    assert set(tail) <= fork_build.FUNCTION_LOCAL
    assert fork_build.tail_start(names + ["dedupe-kernels"]) == len(names) + 1  # a module pass ends it
    from ziggurat.registry import all_passes

    assert fork_build.FUNCTION_LOCAL <= set(all_passes())  # every name is a registered pass


def conv_model(channels: tuple[int, ...] = (3, 8, 16, 24)) -> onnx.ModelProto:
    """Conv + Relu layers of different widths (distinct kernels), global pooling, a Gemm head."""
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for k, (ci, co) in enumerate(zip(channels, channels[1:])):
        inits += [numpy_helper.from_array((rng.standard_normal((co, ci, 3, 3)) * 0.2).astype(np.float32), f"w{k}"),
                  numpy_helper.from_array(rng.standard_normal(co).astype(np.float32), f"b{k}")]
        nodes += [helper.make_node("Conv", [x, f"w{k}", f"b{k}"], [f"c{k}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{k}"], [f"r{k}"])]
        x = f"r{k}"
    inits += [numpy_helper.from_array(rng.standard_normal((channels[-1], 10)).astype(np.float32), "wf")]
    nodes += [helper.make_node("GlobalAveragePool", [x], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
              helper.make_node("Gemm", ["f", "wf"], ["y"])]
    graph = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 20, 20])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def fork_everything(split_everything, monkeypatch):
    """Every model with two kernels or more lowers in two processes (two jobs, each compile built
    afresh: test_compile_speed's `split_everything`)."""
    monkeypatch.setattr(fork_build, "MIN_OPS", 0)


def _spy(monkeypatch) -> list[bool]:
    forked: list[bool] = []
    original = fork_build.lower_tail

    def spy(*args, **kw):
        out = original(*args, **kw)
        forked.append(out is not None)
        return out

    monkeypatch.setattr(fork_build, "lower_tail", spy)
    return forked


def test_a_model_lowered_in_two_processes_matches_onnxruntime_and_one_process(fork_everything, monkeypatch) -> None:
    import onnxruntime as ort

    model = conv_model()
    x = np.random.default_rng(1).standard_normal((1, 3, 20, 20)).astype(np.float32)
    forked = _spy(monkeypatch)
    m = ziggurat.compile(model)
    assert forked == [True]
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(m(x)[0], expected, rtol=1e-4, atol=1e-4)
    clear_cache()
    monkeypatch.setenv(codegen_pool.JOBS_ENV, "1")  # one process: the same code
    one = ziggurat.compile(model)
    assert forked == [True]  # not asked again: usable() is False with one job
    np.testing.assert_array_equal(one(x)[0], m(x)[0])
    assert m.info["llvm_ir"].count("define ") == one.info["llvm_ir"].count("define ")


@pytest.mark.parametrize("fate", ["dies", "hangs"])
def test_a_child_that_fails_loses_nothing(fork_everything, monkeypatch, fate: str) -> None:
    """The child lowers its share of the kernels, then dies before it answers, or hangs (killed
    after the wait: here 1 s, at least; 60 s by default): this process lowers that share again
    from the kernels as they were before the fork, and the model is right."""
    import time

    parent = os.getpid()
    original = fork_build._compile_part

    def fail_in_the_child(module, options):
        if os.getpid() != parent:
            os._exit(9) if fate == "dies" else time.sleep(3600)
        return original(module, options)

    monkeypatch.setattr(fork_build, "_compile_part", fail_in_the_child)
    monkeypatch.setattr(fork_build, "MIN_WAIT_S", 1.0)
    monkeypatch.setattr(fork_build, "WAIT_FACTOR", 0.0)
    forked = _spy(monkeypatch)
    model = conv_model()
    x = np.random.default_rng(2).standard_normal((1, 3, 20, 20)).astype(np.float32)
    m = ziggurat.compile(model)
    assert forked == [True]
    monkeypatch.setattr(fork_build, "_compile_part", original)
    clear_cache()
    monkeypatch.setenv(codegen_pool.JOBS_ENV, "1")
    np.testing.assert_array_equal(m(x)[0], ziggurat.compile(model)(x)[0])


def test_a_profiled_compile_and_a_look_at_the_passes_stay_in_one_process(fork_everything, monkeypatch) -> None:
    forked = _spy(monkeypatch)
    model = conv_model((3, 8, 8))
    ziggurat.compile(model, profile=True)
    ziggurat.compile(model, after_pass=lambda p, module, seconds: None)
    assert forked == []


def test_map_floats_shares_the_work_and_recovers_what_a_child_never_sends(monkeypatch) -> None:
    import time

    monkeypatch.setenv(codegen_pool.JOBS_ENV, "2")
    parent = os.getpid()
    assert fork_build.map_floats(lambda i: i * 0.5, 40) == [i * 0.5 for i in range(40)]
    monkeypatch.setattr(fork_build, "MIN_WAIT_S", 0.5)
    monkeypatch.setattr(fork_build, "WAIT_FACTOR", 0.0)

    def slow_in_the_child(i: int) -> float:
        if os.getpid() != parent:
            time.sleep(3600)
        return float(i)

    assert fork_build.map_floats(slow_in_the_child, 6) == [float(i) for i in range(6)]
    with pytest.raises(ZeroDivisionError):  # an error in this process's share reaches the caller
        fork_build.map_floats(lambda i: 1 / (i - i), 4)
