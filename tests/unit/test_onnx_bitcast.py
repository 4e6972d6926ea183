"""ONNX BitCast on run-time tensors (graph.bitcast): every same-width pair of
ziggurat's element types, bit for bit against onnx's reference evaluator
(numpy's view)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

import ziggurat
from ziggurat.errors import ShapeError, UnsupportedOpError

RNG = np.random.default_rng(3)


def _np(code):
    return np.dtype(helper.tensor_dtype_to_np_dtype(code))


def _data(code, shape):
    """Random bits of type `code` (bool: 0 or 1; 4-bit: the low nibble)."""
    dtype = _np(code)
    if code == T.BOOL:
        return RNG.integers(0, 2, shape).astype(bool)
    if code in (T.INT4, T.UINT4, T.FLOAT4E2M1):
        return RNG.integers(0, 16, shape).astype(np.uint8).view(dtype)
    raw = RNG.integers(0, 256, (*shape, dtype.itemsize), dtype=np.uint8)
    out = raw.view(dtype).reshape(shape)
    if dtype.kind == "f":  # a few specials
        out.flat[:3] = [np.nan, -np.inf, -0.0]
    return out


def _model(src, dst, shape, opset=26):
    g = helper.make_graph([helper.make_node("BitCast", ["x"], ["y"], to=dst)], "g",
                          [helper.make_tensor_value_info("x", src, shape)],
                          [helper.make_tensor_value_info("y", dst, shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


PAIRS = [(T.FLOAT, T.INT32), (T.INT32, T.FLOAT), (T.FLOAT, T.UINT32), (T.DOUBLE, T.INT64), (T.UINT64, T.DOUBLE),
         (T.FLOAT16, T.INT16), (T.UINT16, T.FLOAT16), (T.FLOAT16, T.BFLOAT16), (T.BFLOAT16, T.UINT16),
         (T.INT16, T.BFLOAT16), (T.INT8, T.UINT8), (T.BOOL, T.UINT8), (T.BOOL, T.INT8),
         (T.FLOAT8E4M3FN, T.UINT8), (T.INT8, T.FLOAT8E5M2), (T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2FNUZ),
         (T.INT4, T.UINT4), (T.UINT4, T.INT4)]


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{T.DataType.Name(a)}-{T.DataType.Name(b)}" for a, b in PAIRS])
def test_bitcast_matches_numpy_view(src, dst):
    x = _data(src, (3, 5))
    m = _model(src, dst, [3, 5])
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = ziggurat.compile(m, target="llvm -num-cores=1")(x=x)[0]
    assert got.dtype == _np(dst) and got.shape == (3, 5)
    np.testing.assert_array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))


def test_uint8_to_bool_reads_nonzero_bytes_as_true():
    x = np.array([0, 1, 2, 255], np.uint8)
    got = ziggurat.compile(_model(T.UINT8, T.BOOL, [4]))(x=x)[0]
    np.testing.assert_array_equal(got, [False, True, True, True])


def test_bitcast_feeds_arithmetic():
    """float32 -> int32 bits -> masked exponent -> back: the IEEE exponent field."""
    x = np.array([1.0, 2.0, 0.75, -8.5], np.float32)
    mask = helper.make_tensor("mask", T.INT32, [], [0x7F800000])
    nodes = [helper.make_node("BitCast", ["x"], ["b"], to=T.INT32),
             helper.make_node("BitwiseAnd", ["b", "mask"], ["e"]),
             helper.make_node("BitCast", ["e"], ["y"], to=T.FLOAT)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [4])], [mask])
    got = ziggurat.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 26)]))(x=x)[0]
    np.testing.assert_array_equal(got, [1.0, 2.0, 0.5, 8.0])


def test_width_mismatch_is_a_clean_error():
    with pytest.raises((ShapeError, UnsupportedOpError), match="BitCast"):
        ziggurat.compile(_model(T.FLOAT, T.INT64, [3]))
