"""ai.onnx.ml ops (frontends/onnx/convert_ml.py) against onnx's reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ziggurat
from ziggurat.errors import UnsupportedOpError
from ziggurat.frontends.onnx.importer import import_onnx

ML = "ai.onnx.ml"


def ml_model(node, inputs, outputs, version=1, with_default=False):
    graph = helper.make_graph([node], "g", inputs, outputs)
    opsets = [helper.make_opsetid(ML, version)] + ([helper.make_opsetid("", 21)] if with_default else [])
    return helper.make_model(graph, opset_imports=opsets)


def check(model, feeds, exact=False):
    want = ReferenceEvaluator(model).run(None, feeds)
    got = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)(**feeds)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=0 if exact else 1e-5, atol=0 if exact else 1e-6)


@pytest.mark.parametrize("elem,dtype", [(TensorProto.FLOAT, np.float32), (TensorProto.INT32, np.int32)])
def test_binarizer(elem, dtype):
    node = helper.make_node("Binarizer", ["x"], ["y"], domain=ML, threshold=0.5)
    model = ml_model(node, [helper.make_tensor_value_info("x", elem, [3, 4])],
                     [helper.make_tensor_value_info("y", elem, [3, 4])], with_default=True)
    x = (np.random.default_rng(0).standard_normal((3, 4)) * 3).astype(dtype)
    check(model, {"x": x}, exact=True)


@pytest.mark.parametrize("shape,count", [((3, 4), 2), ((2, 2, 5), 3), ((6,), 2)])
def test_array_feature_extractor(shape, count):
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain=ML)
    out = [1, count] if len(shape) == 1 else [*shape[:-1], count]
    model = ml_model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape)),
                            helper.make_tensor_value_info("i", TensorProto.INT64, [count])],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    check(model, {"x": x, "i": np.array([shape[-1] - 1, 0, 1][:count], np.int64)}, exact=True)


def tree_model(aggregate, tracks=None, dtype=TensorProto.FLOAT):
    """Two trees over 2 features, 3 targets; tree 0 has a membership node."""
    f = np.float32 if dtype == TensorProto.FLOAT else np.float64
    attrs = dict(
        nodes_featureids=[0, 1, 1, 0], nodes_modes=numpy_helper.from_array(np.array([0, 6, 3, 1], np.uint8)),
        nodes_splits=numpy_helper.from_array(np.array([0.5, np.nan, -0.2, 1.5], f)),
        nodes_truenodeids=[1, 0, 0, 1], nodes_trueleafs=[0, 1, 1, 1],
        nodes_falsenodeids=[2, 1, 3, 2], nodes_falseleafs=[1, 1, 0, 1],
        tree_roots=[0, 2], leaf_targetids=[0, 1, 2, 0],
        leaf_weights=numpy_helper.from_array(np.array([1.0, 10.0, -3.0, 0.25], f)),
        membership_values=numpy_helper.from_array(np.array([1.0, 2.0, np.nan], f)),
        n_targets=3, aggregate_function=aggregate, post_transform=0)
    if tracks is not None:
        attrs["nodes_missing_value_tracks_true"] = tracks
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain=ML, **attrs)
    return ml_model(node, [helper.make_tensor_value_info("x", dtype, [6, 2])],
                    [helper.make_tensor_value_info("y", dtype, [6, 3])], version=5)


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
@pytest.mark.parametrize("tracks", [None, [1, 0, 1, 0]])
def test_tree_ensemble(aggregate, tracks):
    x = np.array([[0.0, 1.0], [0.7, 2.0], [np.nan, -1.0], [2.0, np.nan], [0.2, 3.0], [1.0, -0.1]], np.float32)
    check(tree_model(aggregate, tracks), {"x": x})


def test_tree_ensemble_double():
    x = np.array([[0.0, 1.0], [0.7, 2.0], [0.1, -1.0], [2.0, 0.0], [0.2, 3.0], [1.0, -0.1]], np.float64)
    check(tree_model(1, dtype=TensorProto.DOUBLE), {"x": x})


def test_tree_ensemble_post_transform_is_refused():
    model = tree_model(1)
    for attr in model.graph.node[0].attribute:
        if attr.name == "post_transform":
            attr.i = 2
    with pytest.raises(UnsupportedOpError, match="post_transform"):
        import_onnx(model)
