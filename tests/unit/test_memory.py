"""What the memory work (benchmarks/memory.py, docs/benchmarks.md "Peak memory") must not change:
constants are copied only when they are not 64-byte aligned, a compile frees what it imported
without touching a caller's ImportedModel, and the outputs stay those of the earlier flow."""

from __future__ import annotations

import hashlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat import cache_key
from ziggurat.compiler import clear_cache
from ziggurat.frontends.onnx import import_onnx
from ziggurat.runtime.executor import ALIGN, CompiledModel, aligned, aligned_copy, is_aligned

TARGET = "llvm -num-cores=1"


def conv_dense_model() -> onnx.ModelProto:
    """y = relu(conv3x3(x) + b) flattened @ w: weights that graph passes repack (convert-layout)
    and fold, so that the compile replaces some of what it imported."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32), "k"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal((16 * 6 * 6, 10)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([1, 16 * 6 * 6], np.int64), "shape")]
    nodes = [helper.make_node("Conv", ["x", "k", "b"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["f"]), helper.make_node("MatMul", ["f", "w"], ["y"])]
    graph = helper.make_graph(nodes, "conv_dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def reference(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    w = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    k, b = w["k"], w["b"]
    windows = np.lib.stride_tricks.sliding_window_view(x[0], (3, 3), axis=(1, 2))  # [C, 6, 6, 3, 3]
    conv = np.einsum("chwij,ocij->ohw", windows, k) + b[:, None, None]
    return np.maximum(conv, 0).reshape(1, -1) @ w["w"]


def test_aligned_copies_only_what_is_unaligned_or_strided():
    a = aligned_copy(np.arange(24, dtype=np.float32).reshape(4, 6))
    assert is_aligned(a) and aligned(a) is a
    for given in (_unaligned_copy(a), a.T, a[:, 1:]):
        got = aligned(given)
        assert got is not given and is_aligned(got) and not np.shares_memory(got, given)
        np.testing.assert_array_equal(got, given)


def test_the_executor_uses_aligned_constants_in_place():
    m = ziggurat.compile(conv_dense_model(), target=TARGET, cache=False)
    assert len(m.constants) > 1 and all(is_aligned(c) for c in m.constants)
    # A second executor over the same code: aligned constants are used as they are, unaligned
    # ones are copied into aligned buffers; both compute what the compiled model computes.
    entry = m._keepalive.address(m.info["entry_symbol"])
    x = np.random.default_rng(1).standard_normal((1, 8, 8, 8)).astype(np.float32)
    for constants in (m.constants, [_unaligned_copy(c) for c in m.constants]):
        again = CompiledModel(entry, m.inputs, m.outputs, constants, m.arena_bytes, keepalive=m)
        assert all(is_aligned(c) for c in again.constants)
        assert [np.shares_memory(a, b) for a, b in zip(again.constants, constants)] == [is_aligned(c) for c in constants]
        np.testing.assert_array_equal(again(x)[0], m(x)[0])
    np.testing.assert_allclose(m(x)[0], reference(conv_dense_model(), x), rtol=1e-4, atol=1e-4)


def _unaligned_copy(c: np.ndarray) -> np.ndarray:
    """A copy of `c` 4 bytes past a 64-byte boundary."""
    raw = np.empty(c.nbytes + 2 * ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN + 4
    out = raw[start:start + c.nbytes].view(c.dtype).reshape(c.shape)
    out[...] = c
    return out


def _owner(a: np.ndarray) -> object:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def test_a_callers_imported_model_is_left_as_it_was_and_outputs_match():
    clear_cache()
    model = conv_dense_model()
    imported = import_onnx(model)
    text, weights = str(imported.module), {k: np.array(v) for k, v in imported.weights.items()}
    x = np.random.default_rng(2).standard_normal((1, 8, 8, 8)).astype(np.float32)
    from_imported = ziggurat.compile(imported, target=TARGET, cache=False)(x)[0]
    assert str(imported.module) == text and sorted(imported.weights) == sorted(weights)
    for k, v in weights.items():
        np.testing.assert_array_equal(imported.weights[k], v)
    clear_cache()
    from_proto = ziggurat.compile(model, target=TARGET, cache=False)(x)[0]  # imported here, freed as it goes
    np.testing.assert_array_equal(from_proto, from_imported)
    np.testing.assert_allclose(from_proto, reference(model, x), rtol=1e-4, atol=1e-4)


def test_a_disk_hit_runs_on_the_entrys_buffer_without_copies(tmp_path, monkeypatch):
    monkeypatch.setenv("ZIGGURAT_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "m.onnx"
    onnx.save_model(conv_dense_model(), str(path))
    clear_cache()
    cold = ziggurat.compile(path, target=TARGET, cache=True)
    clear_cache()
    warm = ziggurat.compile(path, target=TARGET, cache=True)
    assert warm.info["stats"].cache == "disk"
    assert len(warm.constants) > 1 and len({id(_owner(c)) for c in warm.constants}) == 1  # views of the entry's buffer
    x = np.random.default_rng(3).standard_normal((1, 8, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(warm(x)[0], cold(x)[0])


@pytest.mark.parametrize("where", [0, 1, 3, 7, 8])
def test_the_model_file_is_hashed_in_chunks_with_the_same_key(tmp_path, monkeypatch, where):
    monkeypatch.setattr(cache_key, "_CHUNK", 16)
    data = bytes(range(40)) + b"x" * where + b"location" + bytes(50)
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    h, external = cache_key._model_file_digest(path)
    assert h.hexdigest() == hashlib.sha256(data).hexdigest() and external  # found across a chunk boundary
    path.write_bytes(data.replace(b"location", b"locatioN"))
    assert not cache_key._model_file_digest(path)[1]


def conv3x3_model() -> onnx.ModelProto:
    """y = conv3x3(x, k), 16 -> 16 channels on 8x8 (padded): a Winograd candidate."""
    k = numpy_helper.from_array(np.random.default_rng(4).standard_normal((16, 16, 3, 3)).astype(np.float32), "k")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "k"], ["y"], pads=[1, 1, 1, 1])], "conv3x3",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 8, 8])], [k])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("case", ["convert-layout", "winograd-conv"])
def test_weights_that_passes_replaced_are_not_passed_to_the_native_code(case):
    """convert-layout and winograd-conv read a constant into a repacked copy: the original's
    `graph.constant` goes, so it is no constant buffer of the entry function (nor a weight the
    compiled model keeps), and the outputs are the reference's."""
    model, pipeline = {"convert-layout": (conv_dense_model(), None),
                       "winograd-conv": (conv3x3_model(), "winograd-conv{min-channels=16 min-pixels=16}")}[case]
    refs: dict[str, list[str]] = {}

    def seen(p, module, _seconds):
        refs[p.name] = [op.ref.data for op in module.walk() if op.name in ("graph.constant", "loop.const_buffer")]
        refs["unread"] = [op.ref.data for op in module.walk() if op.name == "loop.const_buffer" and not op.results[0].uses]

    m = ziggurat.compile(model, target=TARGET, pipeline=pipeline, after_pass=seen, cache=False)
    assert "k" not in refs[case] and any(r.startswith("k.") for r in refs[case])  # repacked, original gone
    assert refs["unread"] == [] and len(m.constants) == len(refs["convert-loop-to-hw"])
    x = np.random.default_rng(5).standard_normal(m.inputs[0].shape).astype(np.float32)
    if case == "winograd-conv":
        windows = np.lib.stride_tricks.sliding_window_view(np.pad(x[0], ((0, 0), (1, 1), (1, 1))), (3, 3), axis=(1, 2))
        expected = np.einsum("chwij,ocij->ohw", windows, numpy_helper.to_array(model.graph.initializer[0]))[None]
    else:
        expected = reference(model, x)
    np.testing.assert_allclose(m(x)[0], expected, rtol=1e-4, atol=1e-4)
