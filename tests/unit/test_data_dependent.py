"""Outputs sized at run time (frontends/onnx/convert_data_dependent.py): NonZero, Unique,
Compress with a run-time condition, TopK with a run-time k, and the elementwise, Transpose,
Gather and GatherND consumers that carry the extent to a graph output; against onnxruntime.
One compile serves every input: the executor cuts each output to the extent the call computed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat.errors import InputError, UnsupportedOpError
from ziggurat.signature import Extent, TensorSpec

ort = pytest.importorskip("onnxruntime")
TYPES = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.int32: TensorProto.INT32,
         np.int64: TensorProto.INT64, np.bool_: TensorProto.BOOL}
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def model(nodes, inputs, outputs, inits=(), opset=18):
    """`inputs`: name -> (dtype, shape); `outputs`: name -> (dtype, rank), every dim symbolic."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(k, TYPES[d], list(s)) for k, (d, s) in inputs.items()],
        [helper.make_tensor_value_info(k, TYPES[d], [f"{k}{i}" for i in range(r)]) for k, (d, r) in outputs.items()],
        [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def ort_run(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def check(compiled, m, feeds):
    got, want = compiled(**feeds), ort_run(m, feeds)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g, w)
        np.testing.assert_array_equal(g, w)


def sparse(rng, shape, dtype, density):
    values = rng.integers(1, 5, size=shape) * (rng.random(shape) < density)
    return values.astype(dtype)


@pytest.fixture(scope="module")
def nonzero_models():
    compiled = {}
    for dtype in (np.float32, np.int64, np.bool_, np.float64):
        m = model([helper.make_node("NonZero", ["x"], ["y"])], {"x": (dtype, (3, 4))}, {"y": (np.int64, 2)})
        compiled[dtype] = (ziggurat.compile(m, target="llvm -num-cores=1", cache=False), m)
    return compiled


@SETTINGS
@given(dtype=st.sampled_from([np.float32, np.int64, np.bool_, np.float64]), density=st.sampled_from([0, 0.3, 1]),
       seed=st.integers(0, 2**16))
def test_nonzero_matches_onnxruntime_for_any_input(nonzero_models, dtype, density, seed):
    compiled, _ = nonzero_models[dtype]  # onnxruntime has no float64 NonZero: numpy is the reference
    x = sparse(np.random.default_rng(seed), (3, 4), dtype, density)
    got = compiled(x)[0]
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.array(np.nonzero(x)))


@pytest.fixture(scope="module")
def compress_models():
    compiled = {}
    for axis, length in ((None, 12), (1, 4), (0, 2), (-1, 6)):  # 6 > the axis: the tail is ignored
        attrs = {} if axis is None else {"axis": axis}
        m = model([helper.make_node("Compress", ["x", "c"], ["y"], **attrs)],
                  {"x": (np.float32, (3, 4)), "c": (np.bool_, (length,))}, {"y": (np.float32, 1 if axis is None else 2)})
        compiled[axis] = (ziggurat.compile(m, target="llvm -num-cores=1", cache=False), m, length)
    return compiled


@SETTINGS
@given(axis=st.sampled_from([None, 1, 0, -1]), seed=st.integers(0, 2**16))
def test_compress_with_a_run_time_condition(compress_models, axis, seed):
    compiled, m, length = compress_models[axis]
    rng = np.random.default_rng(seed)
    cond = rng.random(length) < 0.5
    if axis == -1:
        cond[4:] = False  # onnxruntime refuses a true entry past the axis
    check(compiled, m, {"x": rng.standard_normal((3, 4)).astype(np.float32), "c": cond})


@pytest.fixture(scope="module")
def topk_model():
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=0)],
              {"x": (np.float32, (2, 7)), "k": (np.int64, (1,))}, {"v": (np.float32, 2), "i": (np.int64, 2)})
    return ziggurat.compile(m, target="llvm -num-cores=1", cache=False), m


@pytest.mark.parametrize("k", [0, 1, 4, 7])
def test_topk_with_a_run_time_k_compiles_once(topk_model, k):
    compiled, m = topk_model
    x = np.round(np.random.default_rng(k).standard_normal((2, 7)), 1).astype(np.float32)  # ties
    check(compiled, m, {"x": x, "k": np.array([k], np.int64)})


def test_topk_k_out_of_range_is_one_clear_error(topk_model):
    compiled, _ = topk_model
    with pytest.raises(InputError, match=r"TopK node .* would hold 8 entries along axis 1, outside \[0, 7\]"):
        compiled(x=np.zeros((2, 7), np.float32), k=np.array([8], np.int64))


@pytest.mark.parametrize("axis,sort,shape", [(None, 1, (10,)), (None, 0, (3, 4)), (0, 1, (5, 3)), (1, 0, (2, 6)),
                                             (-1, 1, (2, 3, 4))])
def test_unique_all_outputs_match_onnxruntime(axis, sort, shape):
    attrs = {"sorted": sort} if axis is None else {"sorted": sort, "axis": axis}
    rank = 1 if axis is None else len(shape)
    m = model([helper.make_node("Unique", ["x"], ["y", "i", "inv", "n"], **attrs)], {"x": (np.float32, shape)},
              {"y": (np.float32, rank), "i": (np.int64, 1), "inv": (np.int64, 1), "n": (np.int64, 1)}, opset=11)
    compiled = ziggurat.compile(m, target="llvm -num-cores=1", cache=False)
    rng = np.random.default_rng(len(shape))
    for x in (rng.integers(0, 3, size=shape), np.zeros(shape), np.arange(np.prod(shape)).reshape(shape)[..., ::-1]):
        check(compiled, m, {"x": np.ascontiguousarray(x, dtype=np.float32)})


def test_nonzero_rows_gathered_through_transpose_and_gathernd():
    """x[x > 0] as exporters write it: NonZero -> Transpose -> GatherND, then elementwise ops."""
    nodes = [helper.make_node("Greater", ["x", "zero"], ["pos"]), helper.make_node("NonZero", ["pos"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idx"], ["vals"]), helper.make_node("Mul", ["vals", "two"], ["y"]),
             helper.make_node("Cast", ["y"], ["z"], to=TensorProto.DOUBLE)]
    m = model(nodes, {"x": (np.float32, (4, 5))}, {"z": (np.float64, 1), "idx": (np.int64, 2)},
              [("zero", np.zeros(1, np.float32)), ("two", np.full((1,), 2, np.float32))])
    compiled = ziggurat.compile(m, target="llvm -num-cores=1", cache=False)
    for seed in range(3):
        check(compiled, m, {"x": np.random.default_rng(seed).standard_normal((4, 5)).astype(np.float32)})
    check(compiled, m, {"x": -np.ones((4, 5), np.float32)})  # nothing kept: empty outputs


def test_a_reduction_over_the_sized_axis_is_refused_naming_both_nodes():
    nodes = [helper.make_node("NonZero", ["x"], ["nz"], name="find"),
             helper.make_node("ReduceSum", ["nz"], ["s"], name="total", keepdims=0)]
    m = model(nodes, {"x": (np.float32, (4,))}, {"s": (np.int64, 0)})
    with pytest.raises(UnsupportedOpError, match=r"total.*'nz'.*known only at run time \(from NonZero node 'find'\)"):
        ziggurat.compile(m, cache=False)


def test_extent_survives_export_and_the_signature_json(tmp_path):
    m = model([helper.make_node("NonZero", ["x"], ["y"])], {"x": (np.float32, (6,))}, {"y": (np.int64, 2)})
    compiled = ziggurat.compile(m, cache=False)
    hidden = compiled.checks[0]
    assert hidden.extent == Extent(0, 1, "<node #0>", "NonZero") and TensorSpec.from_json(hidden.to_json()) == hidden
    compiled.export(tmp_path / "nz.so")
    loaded = ziggurat.runtime.load(tmp_path / "nz.so")
    x = np.array([0, 3, 0, 0, 1, 2], np.float32)
    np.testing.assert_array_equal(loaded(x)[0], np.array(np.nonzero(x)))


@pytest.fixture(scope="module")
def nms_models():
    compiled = {}
    for center in (0, 1):
        inputs = {"b": (np.float32, (2, 8, 4)), "s": (np.float32, (2, 3, 8)), "m": (np.int64, (1,)),
                  "iou": (np.float32, (1,)), "st": (np.float32, (1,))}
        m = model([helper.make_node("NonMaxSuppression", list(inputs), ["y"], center_point_box=center)], inputs,
                  {"y": (np.int64, 2)}, opset=11)
        compiled[center] = (ziggurat.compile(m, target="llvm -num-cores=1", cache=False), m)
    return compiled


@SETTINGS
@given(center=st.sampled_from([0, 1]), cap=st.integers(0, 9), iou=st.sampled_from([0.0, 0.3, 0.7]),
       score=st.sampled_from([-1.0, 0.4]), seed=st.integers(0, 2**16))
def test_nms_matches_onnxruntime(nms_models, center, cap, iou, score, seed):
    compiled, m = nms_models[center]
    rng = np.random.default_rng(seed)
    corner, size = rng.random((2, 8, 2)) * 6, rng.random((2, 8, 2)) * 4 - 0.5  # some flipped or empty boxes
    boxes = np.concatenate([corner, size] if center else [corner, corner + size], axis=-1).astype(np.float32)
    feeds = {"b": boxes, "s": rng.random((2, 3, 8)).astype(np.float32), "m": np.array([cap], np.int64),
             "iou": np.array([iou], np.float32), "st": np.array([score], np.float32)}
    check(compiled, m, feeds)


def test_nms_with_too_many_boxes_is_refused():
    inputs = {"b": (np.float32, (1, 300, 4)), "s": (np.float32, (1, 1, 300))}
    m = model([helper.make_node("NonMaxSuppression", list(inputs), ["y"])], inputs, {"y": (np.int64, 2)}, opset=11)
    with pytest.raises(UnsupportedOpError, match="300 boxes per batch.*at most 256"):
        ziggurat.compile(m, cache=False)


@pytest.mark.parametrize("reshape", ["unsqueeze_squeeze", "reshape_keeps_axis"])
def test_reshapes_that_keep_the_sized_axis_whole_carry_the_extent(reshape):
    """NonZero -> Unsqueeze -> Squeeze, or a Reshape that splits another dim: the count stays one dim."""
    if reshape == "unsqueeze_squeeze":
        nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Unsqueeze", ["nz", "ax"], ["u"]),
                 helper.make_node("Squeeze", ["u", "ax"], ["y"])]
        inits, rank = [("ax", np.array([0], np.int64))], 2
    else:
        nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Reshape", ["nz", "shape"], ["y"])]
        inits, rank = [("shape", np.array([1, 2, -1], np.int64))], 3
    m = model(nodes, {"x": (np.float32, (2, 3))}, {"y": (np.int64, rank)}, inits)
    compiled = ziggurat.compile(m, target="llvm -num-cores=1", cache=False)
    for x in (np.array([[0, 1, 0], [2, 0, 3]], np.float32), np.zeros((2, 3), np.float32)):
        check(compiled, m, {"x": x})


def test_a_reshape_that_merges_the_sized_axis_is_refused():
    nodes = [helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
             helper.make_node("Reshape", ["nz", "shape"], ["y"], name="flat")]
    m = model(nodes, {"x": (np.float32, (2, 3))}, {"y": (np.int64, 1)}, [("shape", np.array([-1], np.int64))])
    with pytest.raises(UnsupportedOpError, match=r"flat.*reshapes that keep that axis whole"):
        ziggurat.compile(m, cache=False)


def test_two_sized_inputs_on_different_output_axes_are_refused():
    """NonZero [1, n] plus its transpose [n, 1] broadcasts to [n, n]: sized along both axes, which
    one extent cannot describe."""
    nodes = [helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
             helper.make_node("Transpose", ["nz"], ["t"], perm=[1, 0]),
             helper.make_node("Add", ["nz", "t"], ["y"], name="both")]
    m = model(nodes, {"x": (np.float32, (2,))}, {"y": (np.int64, 2)})
    with pytest.raises(UnsupportedOpError, match=r"both.*known only at run time \(from NonZero node 'nz'\)"):
        ziggurat.compile(m, cache=False)
