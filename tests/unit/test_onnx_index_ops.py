"""End-to-end checks of the index-computing ONNX ops decomposed onto the graph
core by frontends/onnx/convert_index.py (CumSum, Hardmax, ArgMax/ArgMin, TopK,
Trilu, GatherND, ScatterElements/Scatter/ScatterND, ReverseSequence, Compress),
against onnxruntime. Index inputs are initializers (compile-time constants)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ziggurat
import ziggurat.dialects.graph  # noqa: F401 - before graph_dtype (graph imports it)

ort = pytest.importorskip("onnxruntime")
RTOL, ATOL = 1e-3, 1e-4


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def model_of(node, feeds, inits=(), opset=18, out_types=None):
    """A one-node model; the outputs get symbolic dims of the rank the ONNX reference evaluator computes."""
    from onnx.reference import ReferenceEvaluator

    def build(outputs):
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in feeds.items()],
            outputs, [numpy_helper.from_array(v, k) for k, v in inits])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)

    out_types = out_types or [TensorProto.FLOAT] * len(node.output)
    untyped = build([helper.make_value_info(name, onnx.TypeProto()) for name in node.output])
    results = ReferenceEvaluator(untyped).run(None, feeds)
    return build([helper.make_tensor_value_info(name, t, [f"{name}{d}" for d in range(np.ndim(r))])
                  for name, t, r in zip(node.output, out_types, results)])


def run_both(node, feeds, inits=(), opset=18, out_types=None):
    model = model_of(node, feeds, inits, opset, out_types)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    got = ziggurat.compile(model, target="llvm -num-cores=1")(**feeds)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("axis,exclusive,reverse", [(0, 0, 0), (1, 1, 0), (-1, 0, 1), (0, 1, 1)])
def test_cumsum(axis, exclusive, reverse):
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    run_both(node, {"x": rand(3, 5, 2)}, [("axis", np.array(axis, np.int64))])


def test_cumsum_keeps_infinities():
    x = np.array([1.0, np.inf, 2.0, -1.0], np.float32)
    node = helper.make_node("CumSum", ["x", "axis"], ["y"])
    model = model_of(node, {"x": x}, [("axis", np.array(0, np.int32))])
    (got,) = ziggurat.compile(model)(x)
    np.testing.assert_array_equal(got, np.cumsum(x))


@pytest.mark.parametrize("axis,opset", [(-1, 13), (0, 13), (1, 11)])
def test_hardmax_first_of_ties(axis, opset):
    x = np.round(rand(3, 3, 5) * 2) / 2  # many ties
    run_both(helper.make_node("Hardmax", ["x"], ["y"], axis=axis), {"x": x}, opset=opset)


def test_wide_rows_vectorize_their_compares():
    """Rows of 16+ elements vectorize graph.compare (hw.vcmpf)."""
    x = np.round(rand(3, 40) * 2) / 2
    run_both(helper.make_node("Hardmax", ["x"], ["y"], axis=1), {"x": x}, opset=11)
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=1)
    run_both(node, {"x": rand(2, 33)}, [("axis", np.array(1, np.int64))])


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", [dict(axis=1), dict(axis=-1, keepdims=0), dict(axis=0, select_last_index=1)])
def test_arg(op, attrs):
    pytest.importorskip("ziggurat.dialects.graph_dtype", reason="int64 outputs need graph.cast")
    x = np.round(rand(3, 4, 5) * 2) / 2
    run_both(helper.make_node(op, ["x"], ["y"], **attrs), {"x": x}, out_types=[TensorProto.INT64])


@pytest.mark.parametrize("attrs", [dict(axis=-1), dict(axis=0, largest=0)])
def test_topk_values_and_indices(attrs):
    pytest.importorskip("ziggurat.dialects.graph_dtype", reason="int64 indices need graph.cast")
    x = np.round(rand(4, 6) * 2) / 2
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], **attrs)
    run_both(node, {"x": x}, [("k", np.array([3], np.int64))], out_types=[TensorProto.FLOAT, TensorProto.INT64])


@pytest.mark.parametrize("upper,k", [(1, 0), (0, -1), (1, 2)])
def test_trilu(upper, k):
    node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)
    run_both(node, {"x": rand(2, 4, 5)}, [("k", np.array(k, np.int64))])


@pytest.mark.parametrize("batch_dims,indices", [(0, [[0, 1], [2, 0]]), (0, [[1], [0]]), (1, [[1], [0], [2]])])
def test_gather_nd(batch_dims, indices):
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)
    run_both(node, {"x": rand(3, 3, 4)}, [("i", np.array(indices, np.int64))])


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_with_duplicates(reduction):
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=reduction)
    indices = np.array([[0, 2, 0], [1, -1, 1]], np.int64)
    run_both(node, {"x": rand(2, 4), "u": rand(2, 3, seed=1)}, [("i", indices)])


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
def test_scatter_nd(reduction):
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    indices = np.array([[0], [2], [0]] if reduction != "none" else [[0], [2]], np.int64)
    updates = rand(len(indices), 3, 2, seed=1)
    run_both(node, {"x": rand(4, 3, 2), "u": updates}, [("i", indices)])


def test_reverse_sequence():
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=1, batch_axis=0)
    run_both(node, {"x": rand(3, 4, 2)}, [("lens", np.array([4, 1, 2], np.int64))])


@pytest.mark.parametrize("axis", [None, 1])
def test_compress(axis):
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node("Compress", ["x", "c"], ["y"], **attrs)
    run_both(node, {"x": rand(3, 4)}, [("c", np.array([1, 0, 1, 1], bool))])


def runtime_model(node, float_feeds, int_feeds, opset=18):
    """A one-node model whose integer inputs (indices, k) are run-time graph inputs."""
    from onnx.reference import ReferenceEvaluator

    def build(outputs):
        inputs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in float_feeds.items()]
        inputs += [helper.make_tensor_value_info(k, TensorProto.INT64, list(v.shape)) for k, v in int_feeds.items()]
        graph = helper.make_graph([node], "g", inputs, outputs)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)

    feeds = {**float_feeds, **int_feeds}
    (r,) = ReferenceEvaluator(build([helper.make_value_info("y", onnx.TypeProto())])).run(None, feeds)
    return build([helper.make_tensor_value_info("y", TensorProto.FLOAT, [f"y{d}" for d in range(r.ndim)])]), feeds


def run_runtime(node, float_feeds, int_feeds):
    pytest.importorskip("ziggurat.dialects.graph_dtype", reason="run-time int64 inputs need graph.cast")
    model, feeds = runtime_model(node, float_feeds, int_feeds)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    (got,) = ziggurat.compile(model, target="llvm -num-cores=1")(**feeds)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
def test_scatter_elements_runtime_indices(reduction):
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=reduction)
    indices = np.array([[0, 3, 0], [1, -1, 1]], np.int64)
    run_runtime(node, {"x": rand(2, 4), "u": rand(2, 3, seed=1)}, {"i": indices})


@pytest.mark.parametrize("reduction", ["none", "mul"])
def test_scatter_nd_runtime_indices(reduction):
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    indices = np.array([[0, 1], [2, -1]] if reduction == "none" else [[0, 1], [2, 2], [0, 1]], np.int64)
    run_runtime(node, {"x": rand(3, 3, 2), "u": rand(len(indices), 2, seed=1)}, {"i": indices})


def test_gather_nd_runtime_indices():
    node = helper.make_node("GatherND", ["x", "i"], ["y"])
    run_runtime(node, {"x": rand(3, 4, 2)}, {"i": np.array([[0, 3], [2, -1], [1, 0]], np.int64)})


@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_runtime_k(upper):
    node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)
    run_runtime(node, {"x": rand(2, 3, 5)}, {"k": np.array(-1, np.int64)})


def test_runtime_indices_with_batch_dims():
    # more shapes against onnx's reference: tests/unit/test_onnx_edge_cases.py
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)
    run_runtime(node, {"x": rand(2, 3)}, {"i": np.array([[1], [0]], np.int64)})


@pytest.mark.parametrize("axis", [0, -1])
def test_cumsum_runtime_axis(axis):
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], reverse=1)
    run_runtime(node, {"x": rand(3, 4)}, {"axis": np.array(axis, np.int64)})


def test_reverse_sequence_runtime_lengths():
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=0, batch_axis=1)
    run_runtime(node, {"x": rand(4, 3, 2)}, {"lens": np.array([4, 1, 3], np.int64)})


def test_max_unpool_runtime_indices():
    node = helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    indices = np.array([[[[5, 7], [13, 15]]]], np.int64)
    run_runtime(node, {"x": rand(1, 1, 2, 2)}, {"i": indices})


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_matches_reference(mode):
    from onnx.reference import ReferenceEvaluator

    pytest.importorskip("ziggurat.dialects.graph_dtype", reason="run-time int64 inputs need graph.cast")
    node = helper.make_node("TensorScatter", ["cache", "update", "w"], ["y"], mode=mode)
    model, feeds = runtime_model(node, {"cache": rand(2, 3, 5, 4), "update": rand(2, 3, 2, 4, seed=1)},
                                 {"w": np.array([1, 4 if mode == "circular" else 3], np.int64)}, opset=24)
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    (got,) = ziggurat.compile(model, target="llvm -num-cores=1")(**feeds)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
