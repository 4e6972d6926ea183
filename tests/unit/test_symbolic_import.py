"""The symbolic import (issue 22: one compile for every shape): shape arithmetic folded on
symbolic extents (frontends/onnx/fold_symbolic.py), the generators over them
(convert_symbolic.py), the constraints the nodes put on the shapes, and whole models with
exporter-style shape subgraphs and strided convolutions run at random shapes from one compile
against onnxruntime. Models are built with onnx.helper (nothing from ../shared)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from ziggurat.compiler import compile_symbolic
from ziggurat.errors import InputError
from ziggurat.frontends.onnx.fold_symbolic import FOLDS
from ziggurat.symbolic import Sym

RNG = np.random.default_rng(3)


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array, name)


def _session(model: onnx.ModelProto):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return lambda **feeds: s.run(None, feeds)


def position_model() -> onnx.ModelProto:
    """x: [batch, seq, 8] -> x + table[Slice(0, seq)] + Range(0, seq) * batch, reshaped through a
    Shape/Gather/Concat target, then ConstantOfShape-masked: every symbolic converter and fold."""
    table = RNG.standard_normal((16, 8)).astype(np.float32)
    c = lambda n, v: helper.make_node("Constant", [], [n], value=_init(n, np.array(v, np.int64)))  # noqa: E731
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        c("one", 1), c("zero", 0), c("zero1", [0]), c("axis0", [0]), c("step", 1), c("eight", [8]),
        helper.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["seq", "axis0"], ["seq1"]),
        helper.make_node("Slice", ["table", "zero1", "seq1", "axis0"], ["pos"]),
        helper.make_node("Range", ["zero", "seq", "step"], ["r"]),
        helper.make_node("Mul", ["r", "batch"], ["rb"]),
        helper.make_node("Cast", ["rb"], ["rbf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["rbf", "one1"], ["rcol"]),
        helper.make_node("Add", ["x", "pos"], ["a"]),
        helper.make_node("Add", ["a", "rcol"], ["b"]),
        helper.make_node("Mul", ["batch", "seq"], ["rows"]),
        helper.make_node("Unsqueeze", ["rows", "axis0"], ["rows1"]),
        helper.make_node("Concat", ["rows1", "eight"], ["target"], axis=0),
        helper.make_node("Reshape", ["b", "target"], ["flat"]),
        helper.make_node("Shape", ["flat"], ["fshape"]),
        helper.make_node("ConstantOfShape", ["fshape"], ["ones"], value=_init("v", np.array([2.0], np.float32))),
        helper.make_node("Mul", ["flat", "ones"], ["y"]),
    ]
    g = helper.make_graph(nodes, "pos", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", 8])],
                          [_init("table", table), _init("one1", np.array([1], np.int64))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def cnn_model() -> onnx.ModelProto:
    """A strided conv, a ceil-mode average pool and a global mean over [batch, 3, height, width]."""
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("AveragePool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        helper.make_node("MaxPool", ["p"], ["q"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["q"], ["y"]),
    ]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 1, 1])], [_init("w", w)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def position():
    m = position_model()
    return compile_symbolic(m), _session(m)


@pytest.fixture(scope="module")
def cnn():
    m = cnn_model()
    return compile_symbolic(m), _session(m)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 6), st.integers(1, 16))
def test_symbolic_shape_subgraphs_match_onnxruntime(position, b: int, s: int):
    model, ref = position
    x = RNG.standard_normal((b, s, 8)).astype(np.float32)
    np.testing.assert_allclose(model(x)[0], ref(x=x)[0], rtol=1e-6, atol=1e-6)


def test_a_shape_past_the_table_is_one_clear_error(position):
    model, _ = position
    assert [str(c) for c in model.constraints] == ["seq <= 16"]
    with pytest.raises(InputError, match=r"constraint seq <= 16 \(17 <= 16 is false; needed by Slice node .*'seq' = 17 "
                                         r"\(input 'x' axis 1\)"):
        model(np.zeros((1, 17, 8), np.float32))
    with pytest.raises(InputError, match=r"input 'x' axis 2 must be 8"):
        model(np.zeros((1, 3, 7), np.float32))


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(2, 70), st.integers(2, 70))
def test_strided_convs_and_pools_match_onnxruntime(cnn, b: int, h: int, w: int):
    model, ref = cnn
    x = RNG.standard_normal((b, 3, h, w)).astype(np.float32)
    np.testing.assert_allclose(model(x)[0], ref(x=x)[0], rtol=1e-5, atol=1e-5)


def test_symbolic_folds_match_numpy_on_ints():
    """Each fold of FOLDS on an object array of ints gives what ONNX's reference gives on int64."""
    from onnx.reference import ReferenceEvaluator

    from ziggurat.frontends.onnx.context import ConversionContext

    data = np.array([[3, 4, 5], [6, 7, 8]], np.int64)
    cases = {
        "Unsqueeze": ([data, np.array([0], np.int64)], {}),
        "Squeeze": ([data[None], np.array([0], np.int64)], {}),
        "Gather": ([data, np.array([1, 0], np.int64)], {"axis": 1}),
        "Concat": ([data, data], {"axis": 0}),
        "Slice": ([data, np.array([1], np.int64), np.array([3], np.int64), np.array([1], np.int64)], {}),
        "Cast": ([data], {"to": TensorProto.INT64}),
        "Reshape": ([data, np.array([3, 2], np.int64)], {}),
        "Flatten": ([data[None]], {"axis": 1}),
        "Add": ([data, data[:1]], {}), "Sub": ([data, data[:1]], {}), "Mul": ([data, data[:1]], {}),
        "Div": ([data * 6, np.array([3], np.int64)], {}),
        "Neg": ([data], {}),
        "Equal": ([data, np.array([4], np.int64)], {}),
        "Where": ([data > 4, data, -data], {}),
        "Expand": ([data[:1], np.array([3, 3], np.int64)], {}),
        "Identity": ([data], {}),
    }
    assert set(cases) == set(FOLDS)
    for op, (arrays, attrs) in cases.items():
        names = [f"i{k}" for k in range(len(arrays))]
        node = helper.make_node(op, names, ["o"], **attrs)
        model = helper.make_model(helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in names],
                                                    [helper.make_tensor_value_info("o", TensorProto.UNDEFINED, None)]),
                                  opset_imports=[helper.make_opsetid("", 17)])
        want = ReferenceEvaluator(model).run(None, dict(zip(names, arrays)))[0]
        ctx = ConversionContext(None, None, 17)  # type: ignore[arg-type]
        for n, a in zip(names, arrays):
            ctx.bind(n, a)
        ctx.begin_node(node, op)
        data_at = 1 if op == "Where" else 0  # the operand that carries shape values; the rest stay int64 / bool
        symbolic = [np.array(a.tolist(), dtype=object) if k == data_at else a for k, a in enumerate(arrays)]
        got = FOLDS[op](ctx, node, *symbolic)[0]
        np.testing.assert_array_equal(np.asarray(got).astype(want.dtype), want, err_msg=op)


def test_a_comparison_a_binding_decides_refuses_the_generic_compile():
    """Equal(batch, 1) depends on the shape: no generic form (the DynamicModel then compiles per shape)."""
    import ziggurat

    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Constant", [], ["one"], value=_init("one", np.array([1, 4], np.int64))),
             helper.make_node("Equal", ["s", "one"], ["e"]),
             helper.make_node("Cast", ["e"], ["ef"], to=TensorProto.FLOAT),
             helper.make_node("ReduceSum", ["ef"], ["k"], keepdims=1),
             helper.make_node("Mul", ["x", "k"], ["y"])]
    g = helper.make_graph(nodes, "eq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    m = ziggurat.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert m.generic is None and "whether 'batch' equals '1' depends on the input shapes" in m.generic_error
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(m(x)[0], x)  # the variant for batch=2: 1 of 2 dims equal


def test_sym_bounds_decide_constraints():
    n = Sym.of("n")
    from ziggurat.symbolic import Constraint

    assert Constraint(1, "<=", n, "x").decided() is True
    assert Constraint(n + 1, "<=", n, "x").decided() is False
    assert Constraint(n, "<=", 512, "x").decided() is None
    assert Constraint(1, "<=", (n + 1) // 2, "x").decided() is True  # a derived symbol's least value
