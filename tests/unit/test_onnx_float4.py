"""FLOAT4E2M1 (float4, a storage type: one element per byte, ml_dtypes'
layout): Cast to and from float32/float16/float64 bit for bit against onnx's
reference evaluator (ml_dtypes' conversion), data movement and BitCast."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

import ziggurat

FP4 = np.dtype(helper.tensor_dtype_to_np_dtype(T.FLOAT4E2M1))
RNG = np.random.default_rng(11)
NP = {T.FLOAT: np.float32, T.FLOAT16: np.float16, T.DOUBLE: np.float64}


def _compile_and_reference(nodes, inputs, outputs, opset=25):
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info(n, c, list(a.shape)) for n, (c, a) in inputs.items()],
                          [helper.make_tensor_value_info(n, c, s) for n, (c, s) in outputs.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {n: a for n, (_, a) in inputs.items()}
    return ziggurat.compile(m, target="llvm -num-cores=1")(**feeds), ReferenceEvaluator(m).run(None, feeds)


def _values(dtype):
    """Every float4 value, every tie between neighbours, specials, random values of many magnitudes."""
    table = np.arange(16, dtype=np.uint8).view(FP4).astype(np.float64)
    finite = np.unique(table)
    ties = (finite[:-1] + finite[1:]) / 2
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 6, 7, 1e30, -1e-30, 0.25, 0.2500001, 5.0, 5.0001]
    rand = np.concatenate([RNG.normal(size=200) * s for s in (1e-2, 0.3, 1.0, 3.0, 10.0, 1e3)])
    return np.concatenate([table, ties, specials, rand]).astype(dtype)


@pytest.mark.parametrize("src", [T.FLOAT, T.FLOAT16, T.DOUBLE], ids=["float32", "float16", "float64"])
def test_cast_to_float4_and_back(src):
    """Round to nearest even, saturating at +-6 (infinities too); NaN becomes a
    zero of the opposite sign, as ml_dtypes."""
    x = _values(NP[src])
    n = [len(x)]
    nodes = [helper.make_node("Cast", ["x"], ["q"], to=T.FLOAT4E2M1), helper.make_node("Cast", ["q"], ["y"], to=src)]
    got, want = _compile_and_reference(nodes, {"x": (src, x)}, {"q": (T.FLOAT4E2M1, n), "y": (src, n)})
    assert got[0].dtype == FP4
    np.testing.assert_array_equal(got[0].view(np.uint8), np.ascontiguousarray(want[0]).view(np.uint8))
    np.testing.assert_array_equal(got[1], want[1])


def test_float4_data_movement_castlike_and_bitcast():
    codes = np.arange(16, dtype=np.uint8).reshape(4, 4).view(FP4)
    like = np.zeros((0,), np.float16)
    nodes = [helper.make_node("Transpose", ["q"], ["t"]), helper.make_node("CastLike", ["t", "like"], ["h"]),
             helper.make_node("BitCast", ["q"], ["u"], to=T.UINT4),
             helper.make_node("Concat", ["q", "q"], ["c"], axis=0)]
    got, want = _compile_and_reference(
        nodes, {"q": (T.FLOAT4E2M1, codes), "like": (T.FLOAT16, like)},
        {"t": (T.FLOAT4E2M1, [4, 4]), "h": (T.FLOAT16, [4, 4]), "u": (T.UINT4, [4, 4]), "c": (T.FLOAT4E2M1, [8, 4])},
        opset=26)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.view(np.uint8), np.ascontiguousarray(w).view(np.uint8))
