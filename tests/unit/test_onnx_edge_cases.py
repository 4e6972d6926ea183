"""ONNX node-test edge cases (conformance): old opsets whose ops did not
change, zero-size reductions, Dropout outputs. Compared with onnx's reference
evaluator."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ziggurat
from ziggurat.errors import ModelLoadError, UnsupportedOpError

TARGET = "llvm -num-cores=1"


def model_of(nodes, inputs, outputs, opset=17, initializers=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs], list(initializers))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_opset_1_model_with_unchanged_ops_imports():
    model = model_of([helper.make_node("Not", ["x"], ["y"])], [("x", TensorProto.BOOL, [3, 4])],
                     [("y", TensorProto.BOOL, [3, 4])], opset=1)
    x = np.random.default_rng(0).integers(0, 2, (3, 4)).astype(bool)
    np.testing.assert_array_equal(ziggurat.compile(model, target=TARGET)(x=x)[0], ~x)


def test_opset_1_model_with_changed_ops_is_refused():
    model = model_of([helper.make_node("Add", ["x", "x"], ["y"])], [("x", TensorProto.FLOAT, [3])],
                     [("y", TensorProto.FLOAT, [3])], opset=1)
    with pytest.raises(ModelLoadError, match="Add changed since"):
        ziggurat.compile(model, target=TARGET)


REDUCTIONS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("elem,dtype", [(TensorProto.FLOAT, np.float32), (TensorProto.INT32, np.int32)])
def test_reduction_over_an_empty_axis_is_its_identity(op, elem, dtype):
    if dtype == np.int32 and op in ("ReduceMean", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"):
        pytest.skip("float-only result")
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    model = model_of([helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)], [("x", elem, [2, 0, 4])],
                     [("y", elem, [2, 1, 4])], opset=18, initializers=[axes])
    x = np.zeros((2, 0, 4), dtype)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = ziggurat.compile(model, target=TARGET)(x=x)[0]
    assert got.dtype == dtype and got.shape == want.shape  # the spec keeps T (the reference promotes int32 sums)
    np.testing.assert_array_equal(got, want)


def test_empty_reduction_feeds_compute():
    """The folded identity is used by a run-time op afterwards."""
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    nodes = [helper.make_node("ReduceProd", ["e", "axes"], ["p"], keepdims=0), helper.make_node("Add", ["x", "p"], ["y"])]
    model = model_of(nodes, [("e", TensorProto.FLOAT, [3, 0]), ("x", TensorProto.FLOAT, [3])],
                     [("y", TensorProto.FLOAT, [3])], opset=18, initializers=[axes])
    x = np.arange(3, dtype=np.float32)
    got = ziggurat.compile(model, target=TARGET)(e=np.zeros((3, 0), np.float32), x=x)[0]
    np.testing.assert_array_equal(got, x + 1)


@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_of_an_empty_input_with_runtime_k(upper):
    model = model_of([helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)],
                     [("x", TensorProto.INT64, [3, 0, 5]), ("k", TensorProto.INT64, [])],
                     [("y", TensorProto.INT64, [3, 0, 5])], opset=14)
    got = ziggurat.compile(model, target=TARGET)(x=np.zeros((3, 0, 5), np.int64), k=np.array(6, np.int64))[0]
    assert got.shape == (3, 0, 5) and got.dtype == np.int64


def test_empty_slice_of_a_runtime_tensor():
    inits = [helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("s", 1000), ("e", 1000), ("a", 1))]
    model = model_of([helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])], [("x", TensorProto.FLOAT, [4, 3])],
                     [("y", TensorProto.FLOAT, [4, 0])], opset=13, initializers=inits)
    got = ziggurat.compile(model, target=TARGET)(x=np.ones((4, 3), np.float32))[0]
    assert got.shape == (4, 0) and got.dtype == np.float32


@pytest.mark.parametrize("out_shape", [(1, 2, 5, 5), (1, 2, 4, 6), (1, 2, 4, 4)])
def test_max_unpool_output_shape_places_the_unpooled_block_at_the_origin(out_shape):
    shape = helper.make_tensor("shape", TensorProto.INT64, [4], list(out_shape))
    model = model_of([helper.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                     [("x", TensorProto.FLOAT, [1, 2, 2, 2]), ("i", TensorProto.INT64, [1, 2, 2, 2])],
                     [("y", TensorProto.FLOAT, list(out_shape))], opset=11, initializers=[shape])
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 2, 2)).astype(np.float32)
    i = rng.permutation(32)[:8].reshape(1, 2, 2, 2).astype(np.int64)  # flat positions in the 1x2x4x4 unpooled block
    want = ReferenceEvaluator(model).run(None, {"x": x, "i": i})[0]
    got = ziggurat.compile(model, target=TARGET)(x=x, i=i)[0]
    np.testing.assert_array_equal(got, want)


def test_max_unpool_output_shape_smaller_than_unpooled_is_refused():
    shape = helper.make_tensor("shape", TensorProto.INT64, [4], [1, 1, 3, 4])
    model = model_of([helper.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                     [("x", TensorProto.FLOAT, [1, 1, 2, 2]), ("i", TensorProto.INT64, [1, 1, 2, 2])],
                     [("y", TensorProto.FLOAT, [1, 1, 3, 4])], opset=11, initializers=[shape])
    with pytest.raises(UnsupportedOpError, match="smaller than the unpooled shape"):
        ziggurat.compile(model, target=TARGET)


def dropout_model(opset=22):
    model = model_of([helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], seed=0)],
                     [("x", TensorProto.FLOAT, [3, 4]), ("r", TensorProto.FLOAT, []), ("t", TensorProto.BOOL, [])],
                     [("y", TensorProto.FLOAT, [3, 4]), ("mask", TensorProto.BOOL, [3, 4])], opset=opset)
    return model


@pytest.mark.parametrize("ratio,training", [(0.5, False), (0.0, True)])
def test_deterministic_dropout_is_identity_with_a_true_mask(ratio, training):
    from ziggurat.frontends.onnx.specialize import SpecializingModel

    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    feeds = {"x": x, "r": np.array(ratio, np.float32), "t": np.array(training)}
    want = ReferenceEvaluator(dropout_model()).run(None, feeds)
    got = SpecializingModel(dropout_model(), lambda m, b: ziggurat.compile(m, bind=b, target=TARGET))(**feeds)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1].dtype == np.bool_
    np.testing.assert_array_equal(got[1], want[1])


def test_random_training_dropout_is_refused():
    with pytest.raises(UnsupportedOpError, match="random dropout is not supported"):
        ziggurat.compile(dropout_model(), bind={"r": np.array(0.5, np.float32), "t": np.array(True)}, target=TARGET)


@pytest.mark.parametrize("elem,dtype", [(TensorProto.INT64, np.int64), (TensorProto.INT32, np.int32),
                                        (TensorProto.UINT8, np.uint8), (TensorProto.UINT64, np.uint64)])
@pytest.mark.parametrize("largest,axis", [(1, -1), (0, 0)])
def test_integer_top_k_with_ties(elem, dtype, largest, axis):
    k = helper.make_tensor("k", TensorProto.INT64, [1], [3])
    model = model_of([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)],
                     [("x", elem, [4, 6])], [("v", elem, [3, 6] if axis == 0 else [4, 3]), ("i", TensorProto.INT64, [3, 6] if axis == 0 else [4, 3])], opset=11,
                     initializers=[k])
    x = np.random.default_rng(5).integers(0, 4, (4, 6)).astype(dtype)  # many ties
    if dtype == np.uint64:
        x[0, 0] = np.uint64(2**63 + 5)  # beyond int64: compared unsigned
    want = ReferenceEvaluator(model).run(None, {"x": x})
    got = ziggurat.compile(model, target=TARGET)(x=x)
    assert got[0].dtype == dtype
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("dshape,ishape,b", [((2, 3, 4), (2, 5, 1), 1), ((2, 3, 4), (2, 2), 1),
                                             ((2, 3, 4, 5), (2, 3, 2, 1), 2), ((3, 4, 2), (3, 2, 2), 1)])
@pytest.mark.parametrize("elem,dtype", [(TensorProto.INT32, np.int32), (TensorProto.BOOL, np.bool_)])
def test_gather_nd_batch_dims_with_runtime_indices(dshape, ishape, b, elem, dtype):
    q = ishape[-1]
    oshape = [*ishape[:-1], *dshape[b + q:]]
    model = model_of([helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=b)],
                     [("x", elem, list(dshape)), ("i", TensorProto.INT64, list(ishape))],
                     [("y", elem, oshape)], opset=13)
    rng = np.random.default_rng(6)
    x = rng.integers(-100, 100, dshape).astype(dtype)  # bool: a mask, as exported attention masks are
    i = np.stack([rng.integers(-n, n, ishape[:-1]) for n in dshape[b:b + q]], -1).astype(np.int64)
    want = ReferenceEvaluator(model).run(None, {"x": x, "i": i})[0]
    got = ziggurat.compile(model, target=TARGET)(x=x, i=i)[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("elem,dtype", [(TensorProto.UINT8, np.uint8), (TensorProto.INT8, np.int8),
                                        (TensorProto.INT16, np.int16), (TensorProto.UINT16, np.uint16)])
def test_integer_max_pool_is_exact(elem, dtype):
    model = model_of([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                     [("x", elem, [1, 2, 7, 7])], [("y", elem, [1, 2, 4, 4])], opset=12)
    info = np.iinfo(dtype)
    x = np.random.default_rng(7).integers(info.min, info.max, (1, 2, 7, 7), endpoint=True).astype(dtype)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = ziggurat.compile(model, target=TARGET)(x=x)[0]
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


def test_wide_integer_max_pool_is_refused():
    model = model_of([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])],
                     [("x", TensorProto.INT32, [1, 1, 4, 4])], [("y", TensorProto.INT32, [1, 1, 3, 3])], opset=12)
    with pytest.raises(UnsupportedOpError, match="element type int32"):
        ziggurat.compile(model, target=TARGET)


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "storage_order": 1},
    {"kernel_shape": [2, 3], "strides": [2, 1], "dilations": [2, 1], "ceil_mode": 1},
    {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": "SAME_UPPER", "storage_order": 1},
])
@pytest.mark.parametrize("elem,dtype", [(TensorProto.FLOAT, np.float32), (TensorProto.UINT8, np.uint8)])
def test_max_pool_indices(attrs, elem, dtype):
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    model = model_of([node], [("x", elem, [2, 3, 7, 6])], [("y", elem, list("nchw")), ("i", TensorProto.INT64, list("nchw"))],
                     opset=12)
    x = np.random.default_rng(8).integers(0, 5, (2, 3, 7, 6)).astype(dtype)  # ties: the first maximum wins
    # onnxruntime, on float32 (onnx's reference ignores storage_order when padding)
    as_float = model_of([node], [("x", TensorProto.FLOAT, [2, 3, 7, 6])],
                        [("y", TensorProto.FLOAT, list("nchw")), ("i", TensorProto.INT64, list("nchw"))], opset=12)
    want = ort.InferenceSession(as_float.SerializeToString()).run(None, {"x": x.astype(np.float32)})
    got = ziggurat.compile(model, target=TARGET)(x=x)
    np.testing.assert_array_equal(got[0], want[0].astype(dtype))
    assert got[1].dtype == np.int64
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("attrs,group", [
    ({}, 1),
    ({"strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1], "output_padding": [1, 0, 0]}, 1),
    ({"dilations": [2, 1, 1], "strides": [1, 2, 1]}, 2),
    ({"strides": [2, 2, 2], "output_shape": [7, 8, 9]}, 1),
    ({"strides": [2, 1, 1], "auto_pad": "SAME_UPPER"}, 1),
])
@pytest.mark.parametrize("weight_at_runtime", [False, True])
def test_conv_transpose_3d(attrs, group, weight_at_runtime):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 4, 3, 4, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 2, 3, 2)).astype(np.float32)
    b = rng.standard_normal((3 * group,)).astype(np.float32)
    inits = [helper.make_tensor("b", TensorProto.FLOAT, b.shape, b)]
    inputs = [("x", TensorProto.FLOAT, list(x.shape))]
    if weight_at_runtime:
        inputs.append(("w", TensorProto.FLOAT, list(w.shape)))
    else:
        inits.append(helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.reshape(-1)))
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], group=group, **attrs)
    model = model_of([node], inputs, [("y", TensorProto.FLOAT, list("ncdhw"))], opset=17, initializers=inits)
    feeds = {"x": x, "w": w} if weight_at_runtime else {"x": x}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    got = ziggurat.compile(model, target=TARGET)(**feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("policy", ["not_smaller", "not_larger"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("sizes,axes", [([1, 3], [2, 3]), ([7, 3], [2, 3]), ([1, 1, 5, 9], None)])
def test_resize_keep_aspect_ratio(policy, mode, sizes, axes):
    attrs = {"mode": mode, "keep_aspect_ratio_policy": policy} | ({"axes": axes} if axes else {})
    inits = [helper.make_tensor("sizes", TensorProto.INT64, [len(sizes)], sizes)]
    model = model_of([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)],
                     [("x", TensorProto.FLOAT, [1, 2, 4, 6])], [("y", TensorProto.FLOAT, list("nchw"))], opset=19,
                     initializers=inits)
    x = np.random.default_rng(10).standard_normal((1, 2, 4, 6)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = ziggurat.compile(model, target=TARGET)(x=x)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode,weights", [("TF", None), ("IDF", None), ("IDF", [0.5, 2, 3, 1, 4, 1.5, 2.5]),
                                          ("TFIDF", [0.5, 2, 3, 1, 4, 1.5, 2.5])])
@pytest.mark.parametrize("lo,hi,skip", [(1, 1, 0), (1, 2, 2), (2, 3, 1), (3, 3, 0)])
@pytest.mark.parametrize("shape,elem,dtype", [((2, 9), TensorProto.INT32, np.int32), ((11,), TensorProto.INT64, np.int64)])
def test_tfidf_vectorizer(mode, weights, lo, hi, skip, shape, elem, dtype):
    # unigrams 2, 3; bigrams (5,4) (5,6) (7,8) (6,7); trigram (5,6,7); two n-grams share output 1
    attrs = dict(mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skip, ngram_counts=[0, 2, 10],
                 ngram_indexes=[0, 1, 1, 2, 3, 4, 5], pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 5, 6, 7])
    if weights:
        attrs["weights"] = weights[:6]
    out = [shape[0], 6] if len(shape) == 2 else [6]
    model = model_of([helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)], [("x", elem, list(shape))],
                     [("y", TensorProto.FLOAT, out)], opset=9)
    x = np.random.default_rng(11).integers(2, 9, shape).astype(dtype)
    if mode == "IDF" and not weights:  # the reference needs weights here: 1 where the TF count is > 0
        tf = model_of([helper.make_node("TfIdfVectorizer", ["x"], ["y"], **(attrs | {"mode": "TF"}))],
                      [("x", elem, list(shape))], [("y", TensorProto.FLOAT, out)], opset=9)
        want = (ReferenceEvaluator(tf).run(None, {"x": x})[0] > 0).astype(np.float32)
    else:
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = ziggurat.compile(model, target=TARGET)(x=x)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_preview_domain_op_expands_through_its_function_body():
    """FlexAttention (ai.onnx.preview) has no converter: its context-dependent body is converted."""
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 2, 4, 8]),
                                        helper.make_tensor_value_info("k", TensorProto.FLOAT, [1, 2, 5, 8]),
                                        helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 2, 5, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 8])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid("ai.onnx.preview", 1)])
    rng = np.random.default_rng(12)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in (("q", (1, 2, 4, 8)), ("k", (1, 2, 5, 8)),
                                                                        ("v", (1, 2, 5, 8)))}
    q, k, v = feeds["q"], feeds["k"], feeds["v"]
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(8)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    got = ziggurat.compile(model, target=TARGET)(**feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
