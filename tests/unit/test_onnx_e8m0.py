"""FLOAT8E8M0 (an exponent byte, a storage type): Cast from float32/float16
with each round_mode, saturating or not, and back, bit for bit against onnx's
reference evaluator (onnx.numpy_helper.to_float8e8m0, ml_dtypes)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

import ziggurat

E8M0 = np.dtype(helper.tensor_dtype_to_np_dtype(T.FLOAT8E8M0))
RNG = np.random.default_rng(13)


def _values() -> np.ndarray:
    """Every power of two float32 holds (and 2^-127), its neighbours and
    midpoints, guard/round/sticky patterns, subnormals, specials, random values."""
    powers = np.arange(1, 255, dtype=np.uint32) << 23
    pattern = np.concatenate([powers, powers | 0x400000, powers | 0x600000, powers | 0x400001, powers | 0x200000,
                              powers | 0x7FFFFF, powers | 0x1, np.array([0x00400000, 0x1, 0x7FFFFF, 0], np.uint32)])
    x = pattern.view(np.float32)
    specials = np.array([np.inf, -np.inf, np.nan, -0.0, -3.0, 3e38, -1e-40], np.float32)
    rand = np.exp(RNG.normal(size=400) * 20).astype(np.float32)
    return np.concatenate([x, specials, rand])


def _model(src, shape, **attrs):
    nodes = [helper.make_node("Cast", ["x"], ["q"], to=T.FLOAT8E8M0, **attrs),
             helper.make_node("Cast", ["q"], ["y"], to=T.FLOAT)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", src, shape)],
                          [helper.make_tensor_value_info("q", T.FLOAT8E8M0, shape),
                           helper.make_tensor_value_info("y", T.FLOAT, shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 25)])


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
def test_cast_to_e8m0_and_back(round_mode, saturate):
    x = _values()
    m = _model(T.FLOAT, [len(x)], round_mode=round_mode, saturate=saturate)
    want = ReferenceEvaluator(m).run(None, {"x": x})
    q, y = ziggurat.compile(m, target="llvm -num-cores=1")(x=x)
    assert q.dtype == E8M0
    np.testing.assert_array_equal(q.view(np.uint8), want[0].view(np.uint8))
    np.testing.assert_array_equal(y, want[1])


def test_cast_from_float16_and_every_byte_back():
    x = np.concatenate([np.exp2(np.arange(-24, 16)), [0.124, 1.1, 3.0, 65504, np.inf, np.nan]]).astype(np.float16)
    m = _model(T.FLOAT16, [len(x)])
    want = ReferenceEvaluator(m).run(None, {"x": x})
    q, _ = ziggurat.compile(m)(x=x)
    np.testing.assert_array_equal(q.view(np.uint8), want[0].view(np.uint8))
    every = np.arange(256, dtype=np.uint8).view(E8M0)
    g = helper.make_graph([helper.make_node("Cast", ["q"], ["y"], to=T.FLOAT)], "g",
                          [helper.make_tensor_value_info("q", T.FLOAT8E8M0, [256])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [256])])
    (y,) = ziggurat.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 25)]))(q=every)
    np.testing.assert_array_equal(y, every.astype(np.float32))
