"""End-to-end checks of the ONNX ops decomposed onto the graph core (slice,
concat, reduce, broadcast_to, ...) and of import-time shape folding, against
onnxruntime. Models are built with onnx.helper."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat.errors import UnsupportedOpError
from ziggurat.frontends.onnx import import_onnx

ort = pytest.importorskip("onnxruntime")
RTOL, ATOL = 1e-3, 1e-4

SHAPE_OPS = {"Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "ConstantOfShape", "Range", "Cast",
             "Equal", "Where", "Expand", "Mod", "Slice"}


def make(nodes, inputs, outputs, inits=(), opset=17):
    """A model over float inputs; the outputs get symbolic dims of the rank
    the ONNX reference evaluator computes."""
    from onnx.reference import ReferenceEvaluator

    def build(out_infos):
        graph = helper.make_graph(
            nodes, "g",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            out_infos,
            [numpy_helper.from_array(v, k) for k, v in dict(inits).items()],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)

    untyped = [helper.make_value_info(n, onnx.TypeProto()) for n in outputs]
    with np.errstate(all="ignore"):
        results = ReferenceEvaluator(build(untyped)).run(None, {n: rand(*s) for n, s in inputs})
    model = build([helper.make_tensor_value_info(n, TensorProto.FLOAT, [f"{n}{d}" for d in range(r.ndim)])
                   for n, r in zip(outputs, results, strict=True)])
    onnx.checker.check_model(model)
    return model


def check(model, feeds, threads=1, reference="onnxruntime"):
    """Compares with onnxruntime, or with onnx's reference evaluator for what
    onnxruntime lacks (batch-first LSTM)."""
    if reference == "onnxruntime":
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)
    else:
        from onnx.reference import ReferenceEvaluator

        want = ReferenceEvaluator(model).run(None, feeds)
    got = ziggurat.compile(model, target=f"llvm -num-cores={threads}")(**feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def i64(*values):
    return np.array(values, np.int64)


def graph_op_names(model) -> set[str]:
    main = import_onnx(model).module.ops.first
    return {op.name for op in main.body.block.ops}


def test_shape_chain_folds_away_and_matches_onnxruntime():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as PyTorch exports a view."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["batch"], axis=0),
        helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes0"], ["b1"]),
        helper.make_node("Unsqueeze", ["seq", "axes0"], ["s1"]),
        helper.make_node("Mul", ["s1", "two"], ["s2"]),
        helper.make_node("Concat", ["b1", "s2", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("ConstantOfShape", ["target_static"], ["ones"],
                         value=numpy_helper.from_array(np.array([1.5], np.float32))),
        helper.make_node("Add", ["r", "ones"], ["y"]),
    ]
    inits = {"zero": np.array(0, np.int64), "one": np.array(1, np.int64), "axes0": i64(0), "two": i64(2), "minus1": i64(-1),
             "target_static": i64(2, 8, 3)}
    model = make(nodes, [("x", [2, 4, 6])], ["y"], inits)
    names = graph_op_names(model)
    assert names == {"graph.reshape", "graph.add", "graph.constant", "func.return"}, names
    check(model, {"x": rand(2, 4, 6)})


def test_attention_mask_and_range_fold():
    """Range/Equal/Where/Less/Cast on shapes fold into one constant mask."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "last"], ["n"], axis=0),
        helper.make_node("Range", ["zero", "n", "step"], ["pos"]),
        helper.make_node("Unsqueeze", ["pos", "axes1"], ["col"]),
        helper.make_node("Less", ["pos", "col"], ["future"]),
        helper.make_node("Not", ["future"], ["allowed"]),
        helper.make_node("Where", ["allowed", "fzero", "ninf"], ["mask"]),
        helper.make_node("Add", ["x", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["y"], axis=-1),
    ]
    inits = {"last": np.array(1, np.int64), "zero": np.array(0, np.int64), "step": np.array(1, np.int64), "axes1": i64(1),
             "fzero": np.array(0, np.float32), "ninf": np.array(-np.inf, np.float32)}
    model = make(nodes, [("x", [5, 5])], ["y"], inits)
    assert not {n.removeprefix("graph.") for n in graph_op_names(model)} & {s.lower() for s in SHAPE_OPS}
    check(model, {"x": rand(5, 5)})


_TRIG = [helper.make_node(op, ["x"], [op.lower()]) for op in ("Sin", "Cos", "Tan", "Atan", "Sinh", "Cosh", "Asinh", "Round")]
_TRIG += [helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Asin", ["t"], ["as"]),
          helper.make_node("Acos", ["t"], ["ac"]), helper.make_node("Atanh", ["t"], ["ath"]),
          helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Add", ["a", "one"], ["a1"]),
          helper.make_node("Acosh", ["a1"], ["ach"]),
          helper.make_node("Sum", [n.output[0] for n in _TRIG[:8]] + ["as", "ac", "ath", "ach"], ["y"])]

_LOGIC = [
    helper.make_node("Less", ["x", "zero"], ["neg"]), helper.make_node("Not", ["neg"], ["nonneg"]),
    helper.make_node("GreaterOrEqual", ["x", "half"], ["big"]), helper.make_node("And", ["nonneg", "big"], ["both"]),
    helper.make_node("Or", ["neg", "big"], ["either"]), helper.make_node("Xor", ["both", "either"], ["odd"]),
    helper.make_node("Cast", ["odd"], ["oddf"], to=TensorProto.FLOAT),
    helper.make_node("Where", ["both", "x", "ninf"], ["masked"]), helper.make_node("Softmax", ["masked"], ["sm"]),
    helper.make_node("Sign", ["x"], ["sg"]), helper.make_node("ThresholdedRelu", ["x"], ["tr"], alpha=0.3),
    helper.make_node("Sum", ["sm", "oddf", "sg", "tr"], ["y"]),
]

CASES = {
    "function_body_expansion": (
        [helper.make_node("Shrink", ["x"], ["s"], lambd=0.4, bias=0.1), helper.make_node("Relu", ["s"], ["y"])],
        [("x", [3, 5])], {},
    ),
    "masks_and_where": (_LOGIC, [("x", [4, 6])], {"zero": np.array(0, np.float32), "half": np.array([-0.5], np.float32),
                                                   "ninf": np.array(-np.inf, np.float32)}),
    "trigonometric": (_TRIG, [("x", [3, 7])], {"one": np.array([1.0], np.float32)}),
    "slice_negative_steps": (
        [helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])],
        [("x", [6, 8])], {"s": i64(-1, 1), "e": i64(-7, 100), "a": i64(0, 1), "st": i64(-2, 3)},
    ),
    "gather_runs_and_repeats": (
        [helper.make_node("Gather", ["x", "idx"], ["y"], axis=1)],
        [("x", [3, 7, 2])], {"idx": np.array([[6, 0], [1, 2], [2, 2]], np.int64)},
    ),
    "gather_elements": (
        [helper.make_node("GatherElements", ["x", "idx"], ["y"], axis=-2)],
        [("x", [4, 5, 3])], {"idx": np.random.default_rng(3).integers(-5, 5, (4, 2, 3))},
    ),
    "gather_scattered_indices": (
        [helper.make_node("Gather", ["x", "idx"], ["y"], axis=1)],
        [("x", [2, 9])], {"idx": np.array([8, 0, 5, 5, 1, 7, 2, 3, 0, 6], np.int64)},
    ),
    "concat_three": (
        [helper.make_node("Concat", ["x", "c", "x"], ["y"], axis=1)],
        [("x", [2, 3])], {"c": rand(2, 1, seed=3)},
    ),
    "split_unsqueeze_squeeze": (
        [helper.make_node("Split", ["x", "sp"], ["a", "b"], axis=1),
         helper.make_node("Unsqueeze", ["b", "ax"], ["u"]),
         helper.make_node("Squeeze", ["u", "ax"], ["v"]),
         helper.make_node("Mul", ["a", "v"], ["y"])],
        [("x", [2, 6])], {"sp": i64(3, 3), "ax": i64(0)},
    ),
    "expand": (
        [helper.make_node("Expand", ["x", "shape"], ["y"])],
        [("x", [3, 1])], {"shape": i64(2, 1, 4)},
    ),
    "reductions": (
        [helper.make_node("ReduceSum", ["x", "ax"], ["s"], keepdims=0),
         helper.make_node("ReduceMax", ["x"], ["m"], axes=[0, 2], keepdims=0),
         helper.make_node("ReduceLogSumExp", ["x"], ["l"], axes=[0, 2], keepdims=0),
         helper.make_node("ReduceL2", ["x"], ["q"], axes=[0, 2], keepdims=0),
         helper.make_node("Sum", ["s", "m", "l", "q"], ["y"])],
        [("x", [2, 3, 4])], {"ax": i64(-1, 0)},
    ),
    "reduce_all_to_scalar": (
        [helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0)],
        [("x", [2, 3])], {},
    ),
    "layer_norm_two_axes": (
        [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-2, epsilon=1e-3)],
        [("x", [2, 3, 4])], {"g": rand(3, 4, seed=1), "b": rand(4, seed=2)},
    ),
    "elementwise_extras": (
        [helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Log", ["a"], ["l"]),
         helper.make_node("Max", ["l", "x", "c"], ["m"]), helper.make_node("Min", ["m", "a"], ["n"]),
         helper.make_node("Pow", ["a", "c"], ["p"]), helper.make_node("Floor", ["p"], ["f"]),
         helper.make_node("Ceil", ["n"], ["e"]), helper.make_node("Add", ["f", "e"], ["y"])],
        [("x", [2, 5])], {"c": np.array([0.5], np.float32)},
    ),
}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_op_matches_onnxruntime(case):
    nodes, inputs, inits = CASES[case]
    model = make(nodes, inputs, [nodes[-1].output[0]], inits)
    check(model, {name: rand(*shape, seed=7) for name, shape in inputs})


@pytest.mark.parametrize("attrs", [
    {"mode": "nearest"},
    {"mode": "linear", "coordinate_transformation_mode": "half_pixel"},
    {"mode": "cubic", "coordinate_transformation_mode": "align_corners"},
])
def test_resize_matches_onnxruntime(attrs):
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], **attrs)
    model = make([node], [("x", [1, 2, 5, 4])], ["y"], {"scales": np.array([1, 1, 1.6, 0.5], np.float32)})
    check(model, {"x": rand(1, 2, 5, 4, seed=9)})


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 3], "pads": [1, 0, 2, 1], "output_padding": [1, 0]},
    {"group": 2, "strides": [2, 2], "output_shape": [10, 9]},
    {"dilations": [2, 1], "auto_pad": "SAME_LOWER", "strides": [2, 2]},
])
def test_conv_transpose_matches_onnxruntime(attrs):
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    inits = {"w": rand(4, 3, 3, 2, seed=1), "b": rand(3 * attrs.get("group", 1), seed=2)}
    graph = helper.make_graph(  # built by hand: onnx's reference ConvTranspose mishandles some groups
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "h", "w"])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    check(model, {"x": rand(1, 4, 5, 4, seed=3)})


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_lstm_matches_onnxruntime(direction, layout):
    dirs, seq, batch, size, hidden = (2 if direction == "bidirectional" else 1), 4, 2, 3, 5
    x_shape = [batch, seq, size] if layout else [seq, batch, size]
    state = [batch, dirs, hidden] if layout else [dirs, batch, hidden]
    inits = {"W": rand(dirs, 4 * hidden, size, seed=1) * 0.5, "R": rand(dirs, 4 * hidden, hidden, seed=2) * 0.5,
             "B": rand(dirs, 8 * hidden, seed=3) * 0.5, "P": rand(dirs, 3 * hidden, seed=4) * 0.5}
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0", "P"], ["y", "yh", "yc"],
                            hidden_size=hidden, direction=direction, layout=layout)
    model = make([node], [("x", x_shape), ("h0", state), ("c0", state)], ["y", "yh", "yc"], inits)
    feeds = {"x": rand(*x_shape, seed=5), "h0": rand(*state, seed=6), "c0": rand(*state, seed=7)}
    check(model, feeds, reference="onnx" if layout else "onnxruntime")


@pytest.mark.parametrize("op,lbr,direction", [("GRU", 0, "forward"), ("GRU", 1, "bidirectional"),
                                              ("RNN", 0, "reverse")])
def test_gru_and_rnn_match_onnxruntime(op, lbr, direction):
    dirs, seq, batch, size, hidden = (2 if direction == "bidirectional" else 1), 4, 2, 3, 5
    gates = 3 if op == "GRU" else 1
    inits = {"W": rand(dirs, gates * hidden, size, seed=1) * 0.5, "R": rand(dirs, gates * hidden, hidden, seed=2) * 0.5,
             "B": rand(dirs, 2 * gates * hidden, seed=3) * 0.5}
    attrs = {"linear_before_reset": lbr} if op == "GRU" else {}
    node = helper.make_node(op, ["x", "W", "R", "B", "", "h0"], ["y", "yh"], hidden_size=hidden,
                            direction=direction, **attrs)
    model = make([node], [("x", [seq, batch, size]), ("h0", [dirs, batch, hidden])], ["y", "yh"], inits)
    check(model, {"x": rand(seq, batch, size, seed=5), "h0": rand(dirs, batch, hidden, seed=6)})


def test_lstm_clip_is_unsupported():
    node = helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=2, clip=1.0, name="rnn")
    model = make([node], [("x", [3, 1, 2])], ["y"], {"W": rand(1, 8, 2), "R": rand(1, 8, 2)})
    with pytest.raises(UnsupportedOpError, match="LSTM.*rnn.*clip"):
        import_onnx(model)


def test_runtime_gather_indices_become_graph_gather():
    """Run-time int64 indices are a real tensor (numbers: tests/unit/test_onnx_dtypes.py)."""
    node = helper.make_node("Gather", ["x", "i"], ["y"], name="g")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    imported = import_onnx(model)
    assert "graph.gather %" in str(imported.module) and "tensor<2xi64>" in str(imported.module)
