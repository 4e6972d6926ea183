"""Reliability of compiled models at run time: concurrent calls, strict inputs, index bounds checks.

References are numpy (and onnxruntime for the index semantics). The concurrency tests fail on an
executor whose calls share one arena: the model's intermediates live there, and calls overlapping
in time overwrite each other's.
"""

from __future__ import annotations

import threading

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

import ziggurat
from ziggurat.errors import InputError

N = 96


def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _chain_model() -> tuple[onnx.ModelProto, np.ndarray, np.ndarray]:
    """x @ W1 -> tanh -> @ W2 -> + x: two matmul kernels whose intermediates live in the arena."""
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32)
    w2 = (rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32)
    nodes = [h.make_node("MatMul", ["x", "W1"], ["a"]), h.make_node("Tanh", ["a"], ["b"]),
             h.make_node("MatMul", ["b", "W2"], ["c"]), h.make_node("Add", ["c", "x"], ["y"])]
    model = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [N, N])],
                   [h.make_tensor_value_info("y", T.FLOAT, [N, N])],
                   [onnx.numpy_helper.from_array(w1, "W1"), onnx.numpy_helper.from_array(w2, "W2")])
    return model, w1, w2


def _reference(x: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    return np.tanh(x @ w1) @ w2 + x


@pytest.fixture(scope="module")
def chain():
    model, w1, w2 = _chain_model()
    return ziggurat.compile(model, cache=False), w1, w2


def _hammer(call, w1, w2, plans: list[list[int]]) -> list[str]:
    """Runs one thread per plan (a list of input seeds, one call each) at once; the failures."""
    failures: list[str] = []
    start = threading.Barrier(len(plans))

    def work(t: int, seeds: list[int]) -> None:
        inputs = [np.random.default_rng(s).standard_normal((N, N)).astype(np.float32) for s in seeds]
        start.wait()
        for s, x in zip(seeds, inputs):
            got = call(x, t)
            if not np.allclose(got, _reference(x, w1, w2), rtol=1e-4, atol=1e-4):
                failures.append(f"thread {t}, seed {s}")

    threads = [threading.Thread(target=work, args=(t, p)) for t, p in enumerate(plans)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return failures


@settings(max_examples=6, deadline=None, derandomize=True)
@given(plans=st.lists(st.lists(st.integers(0, 10_000), min_size=20, max_size=60), min_size=8, max_size=8),
       style=st.sampled_from(["positional", "by-name", "run_native"]))
def test_concurrent_calls_are_correct(chain, plans, style):
    """8 threads call one model at once, each with its own inputs and calling convention; every
    result matches numpy (a shared arena gives other threads' intermediates: wrong results)."""
    model, w1, w2 = chain

    def call(x, t):
        if style == "positional":
            return model(x)[0]
        if style == "by-name":
            return model(x=x)[0]
        out = np.empty((N, N), np.float32)
        model.run_native([x], [out])
        return out

    assert _hammer(call, w1, w2, plans) == []


def test_exported_model_is_thread_safe(chain, tmp_path):
    model, w1, w2 = chain
    loaded = ziggurat.runtime.load(model.export(tmp_path / "chain.so"))
    plans = [[t * 100 + i for i in range(40)] for t in range(8)]
    assert _hammer(lambda x, t: loaded(x)[0], w1, w2, plans) == []


# -- strict inputs ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def relu():
    model = _model([h.make_node("Relu", ["x"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                   [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    return model, ziggurat.compile(model, cache=False)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.float16, np.int32])
def test_wrong_dtype_is_refused(relu, dtype):
    _, m = relu
    with pytest.raises(InputError, match=r"input 'x' must be float32, got .*cast_inputs=True"):
        m(np.ones((2, 3), dtype))


@pytest.mark.parametrize("bad, message", [
    (np.ones((3, 2), np.float32), r"must have shape \(2, 3\), got \(3, 2\)"),
    (np.ones((2, 3, 1), np.float32), r"must have shape \(2, 3\), got \(2, 3, 1\)"),
    (np.ones(6, np.float32), r"must have shape"),
])
def test_wrong_rank_or_shape_is_refused(relu, bad, message):
    with pytest.raises(InputError, match=message):
        relu[1](bad)


def test_wrong_names_and_counts_are_refused(relu):
    _, m = relu
    x = np.ones((2, 3), np.float32)
    with pytest.raises(InputError, match=r"unknown input\(s\) \['z'\]"):
        m(z=x)
    with pytest.raises(InputError, match=r"takes 1 input\(s\) \['x'\], got 2"):
        m(x, x)
    with pytest.raises(InputError, match=r"missing input\(s\) \['x'\]"):
        m({})


def test_cast_inputs_opts_into_conversion(relu):
    model, strict = relu
    x = np.array([[1.5, -2.0, 0.0], [3.0, -0.5, 7.25]])
    loose = ziggurat.compile(model, cast_inputs=True, cache=False)
    np.testing.assert_array_equal(loose(x)[0], np.maximum(x, 0).astype(np.float32))
    np.testing.assert_array_equal(loose(x.astype(np.int64))[0], np.maximum(x.astype(np.int64), 0))
    # Python lists carry no dtype: they convert in strict mode too, where 'same_kind' allows it.
    np.testing.assert_array_equal(strict(x.tolist())[0], np.maximum(x, 0).astype(np.float32))


def test_strict_int_input_refuses_floats():
    model = _model([h.make_node("Neg", ["i"], ["y"])], [h.make_tensor_value_info("i", T.INT64, [3])],
                   [h.make_tensor_value_info("y", T.INT64, [3])])
    m = ziggurat.compile(model, cache=False)
    with pytest.raises(InputError, match="must be int64"):
        m([1.5, 2.0, 3.0])
    with pytest.raises(InputError, match="must be int64, got int32"):
        m(np.arange(3, dtype=np.int32))
    np.testing.assert_array_equal(m([1, 2, 3])[0], [-1, -2, -3])


# -- index bounds checks ---------------------------------------------------------------------

DATA = np.arange(4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3)


def _index_model(op: str, ishape: list[int], **attrs) -> onnx.ModelProto:
    ins = ["D", "i"] + (["U"] if op.startswith("Scatter") else [])
    inputs = [h.make_tensor_value_info("i", T.INT64, ishape)]
    if op.startswith("Scatter"):
        ushape = ishape if op == "ScatterElements" else ishape[:-1] + list(DATA.shape[ishape[-1]:])
        inputs.append(h.make_tensor_value_info("U", T.FLOAT, ushape))
    node = h.make_node(op, ins, ["y"], name=f"my_{op.lower()}", **attrs)
    axis = attrs.get("axis", 0)
    yshape = {"Gather": [*DATA.shape[:axis], *ishape, *DATA.shape[axis + 1:]], "GatherElements": ishape,
              "GatherND": ishape[:-1] + list(DATA.shape[ishape[-1]:])}.get(op, list(DATA.shape))
    return _model([node], inputs, [h.make_tensor_value_info("y", T.FLOAT, yshape)],
                  [onnx.numpy_helper.from_array(DATA, "D")])


def _compare_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    m = ziggurat.compile(model, cache=False)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(m(**feeds)[0], want[0])


CASES = [  # op, indices shape, attributes, an in-range index array (negatives included), bad index, axis size
    ("Gather", [2, 2], {"axis": 1}, np.array([[0, -1], [4, -5]]), 5, 5),
    ("Gather", [3], {"axis": 0}, np.array([3, -4, 0]), -5, 4),
    ("GatherElements", [4, 2, 3], {"axis": 1}, np.tile(np.array([[0], [-5]]), (4, 1, 3)), 7, 5),
    ("GatherND", [2, 2], {}, np.array([[3, 4], [-4, -1]]), None, None),
    ("ScatterElements", [4, 1, 3], {"axis": 1}, np.tile(np.array([[-2]]), (4, 1, 3)), -6, 5),
    ("ScatterND", [2, 1], {}, np.array([[1], [-1]]), 4, 4),
]


@pytest.mark.parametrize("op, ishape, attrs, good, bad, size", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_index_checks(op, ishape, attrs, good, bad, size):
    model = _index_model(op, ishape, **attrs)
    feeds = {"i": good.astype(np.int64)}
    if op.startswith("Scatter"):
        ushape = ishape if op == "ScatterElements" else ishape[:-1] + list(DATA.shape[ishape[-1]:])
        feeds["U"] = np.random.default_rng(1).standard_normal(ushape).astype(np.float32)
    _compare_ort(model, feeds)  # in range, negative indices included: onnxruntime's results
    m = ziggurat.compile(model, cache=False)
    if bad is None:  # GatherND: the second coordinate of one tuple, against axis 1 (size 5)
        idx, bad, size = good.copy(), 5, 5
        idx[1, 1] = bad
    else:
        idx = good.copy()
        idx.reshape(-1)[-1] = bad
    feeds["i"] = idx.astype(np.int64)
    with pytest.raises(InputError, match=rf"{op} node 'my_{op.lower()}': input 'i' holds the index {bad}"
                                         rf".*out of range \[{-size}, {size - 1}\]"):
        m(**feeds)
    with pytest.raises(InputError):  # onnxruntime refuses it too
        try:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        except Exception as err:  # noqa: BLE001 - onnxruntime's own error types
            raise InputError(str(err)) from None


def test_index_checks_survive_export_and_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ZIGGURAT_CACHE_DIR", str(tmp_path / "cache"))
    model = _index_model("Gather", [3], axis=0)
    first = ziggurat.compile(model, cache=True)
    ziggurat.compiler.clear_cache()
    again = ziggurat.compile(model, cache=True)
    assert again.info["stats"].cache == "disk"
    loaded = ziggurat.runtime.load(first.export(tmp_path / "g.so"))
    for m in (first, again, loaded):
        assert m.output_names == ["y"] and len(m.checks) == 1
        np.testing.assert_array_equal(m(np.array([1, -1, 0]))[0], DATA[[1, -1, 0]])
        with pytest.raises(InputError, match="holds the index 9"):
            m(np.array([1, 9, 0]))


def test_constant_indices_need_no_run_time_check():
    nodes = [h.make_node("Gather", ["x", "k"], ["y"], axis=0)]
    model = _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [4, 2])], [h.make_tensor_value_info("y", T.FLOAT, [2, 2])],
                   [onnx.numpy_helper.from_array(np.array([3, -4], np.int64), "k")])
    m = ziggurat.compile(model, cache=False)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    assert m.checks == []
    np.testing.assert_array_equal(m(x)[0], x[[3, 0]])


def test_check_indices_false_leaves_the_checks_out():
    model = _index_model("Gather", [3], axis=0)
    m = ziggurat.compile(model, cache=False, check_indices=False)
    assert m.checks == []
    np.testing.assert_array_equal(m(np.array([1, -1, 0]))[0], DATA[[1, -1, 0]])
    np.testing.assert_array_equal(m(np.array([9, 0, 0]))[0], DATA[[3, 0, 0]])  # clamped: never outside the buffer
