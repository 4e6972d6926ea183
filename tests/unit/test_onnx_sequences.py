"""ONNX sequences: compile-time lists inside a graph (convert_sequence.py) and
sequence graph inputs/outputs flattened per structure (sequence_io.py), checked
against onnx.reference.ReferenceEvaluator."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ziggurat
from ziggurat.errors import ShapeError, UnsupportedOpError
from ziggurat.frontends.onnx import backend
from ziggurat.frontends.onnx.sequence_io import SequenceModel

OPSET = 17
rng = np.random.default_rng(0)


def model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "seq", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def tensor(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def seq(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_sequence_value_info(name, elem, shape)


def ints(name, values):
    return onnx.numpy_helper.from_array(np.array(values, np.int64), name)


def check(m, feeds):
    want = ReferenceEvaluator(m).run(None, feeds)
    got = ziggurat.compile(m)(**feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_construct_and_concat_from_sequence():
    m = model([helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
               helper.make_node("ConcatFromSequence", ["s"], ["cat"], axis=1),
               helper.make_node("ConcatFromSequence", ["s"], ["stack"], axis=-1, new_axis=1)],
              [tensor("a", [2, 3]), tensor("b", [2, 3]), tensor("c", [2, 3])],
              [tensor("cat", [2, 9]), tensor("stack", [2, 3, 3])])
    check(m, {k: rng.standard_normal((2, 3), dtype=np.float32) for k in "abc"})


def test_split_at_insert_erase_length():
    nodes = [helper.make_node("SplitToSequence", ["x", "sizes"], ["s"], axis=1),
             helper.make_node("SequenceInsert", ["s", "y", "zero"], ["s2"]),
             helper.make_node("SequenceErase", ["s2", "minus1"], ["s3"]),
             helper.make_node("SequenceAt", ["s3", "zero"], ["first"]),
             helper.make_node("SequenceAt", ["s3", "minus1"], ["last"]),
             helper.make_node("SequenceLength", ["s3"], ["n"]),
             helper.make_node("ConcatFromSequence", ["s3"], ["cat"], axis=1)]
    m = model(nodes, [tensor("x", [3, 6]), tensor("y", [3, 2])],
              [tensor("first", [3, 2]), tensor("last", [3, 2]), tensor("n", [], TensorProto.INT64),
               tensor("cat", [3, 5])],  # [y, x[:, :1], x[:, 1:3]]: the erase drops the [3, 3] chunk
              [ints("sizes", [1, 2, 3]), ints("zero", 0), ints("minus1", -1)])
    check(m, {"x": rng.standard_normal((3, 6), dtype=np.float32), "y": rng.standard_normal((3, 2), dtype=np.float32)})


def test_split_to_sequence_scalar_split_and_nokeepdims_int64():
    m = model([helper.make_node("SplitToSequence", ["x", "two"], ["s"], axis=0),
               helper.make_node("SequenceAt", ["s", "last"], ["tail"]),
               helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
               helper.make_node("ConcatFromSequence", ["rows"], ["flat"], axis=0)],
              [tensor("x", [5, 2], TensorProto.INT64)],
              [tensor("tail", [1, 2], TensorProto.INT64), tensor("flat", [10], TensorProto.INT64)],
              [ints("two", 2), ints("last", 2)])
    check(m, {"x": rng.integers(-9, 9, (5, 2))})


def test_sequence_map_with_a_tensor_input():
    body = helper.make_graph([helper.make_node("Mul", ["e", "w"], ["p"]), helper.make_node("Relu", ["p"], ["r"])],
                             "body", [tensor("e", [2, 3]), tensor("w", [2, 3])], [tensor("r", [2, 3])])
    m = model([helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
               helper.make_node("SequenceMap", ["s", "w"], ["mapped"], body=body),
               helper.make_node("ConcatFromSequence", ["mapped"], ["out"], axis=0)],
              [tensor("a", [2, 3]), tensor("b", [2, 3]), tensor("w", [2, 3])], [tensor("out", [4, 3])])
    check(m, {k: rng.standard_normal((2, 3), dtype=np.float32) for k in "abw"})


def sequence_io_model():
    """Sequence in, sequence out: appends x + 1 and returns the sequence and its length."""
    return model([helper.make_node("Add", ["x", "one"], ["x1"]),
                  helper.make_node("SequenceInsert", ["s", "x1"], ["out"]),
                  helper.make_node("SequenceLength", ["out"], ["n"])],
                 [seq("s"), tensor("x", ["N", 3])], [seq("out"), tensor("n", [], TensorProto.INT64)],
                 [onnx.numpy_helper.from_array(np.float32(1), "one")])


def test_sequence_inputs_and_outputs_compile_per_structure():
    m = sequence_io_model()
    run = SequenceModel(m, lambda flat: ziggurat.compile(flat))
    ref = ReferenceEvaluator(m)
    cases = [([rng.standard_normal((2, 3), dtype=np.float32)], rng.standard_normal((1, 3), dtype=np.float32)),
             ([rng.standard_normal((2, 3), dtype=np.float32)], rng.standard_normal((1, 3), dtype=np.float32)),
             ([rng.standard_normal((4, 2), dtype=np.float32), rng.standard_normal((1, 1), dtype=np.float32)],
              rng.standard_normal((2, 3), dtype=np.float32)),
             ([], rng.standard_normal((1, 3), dtype=np.float32))]
    for s, x in cases:
        got = run(s, x)
        want = ref.run(None, {"s": s, "x": x})
        assert isinstance(got[0], list) and len(got[0]) == len(want[0])
        for g, w in zip(got[0], want[0]):
            np.testing.assert_allclose(g, w, rtol=1e-6)
        assert int(got[1]) == int(want[1]) == len(s) + 1
    assert run.compiles == 3  # the second call reuses the first structure; other shapes recompile


def test_backend_takes_and_returns_lists():
    rep = backend.prepare(sequence_io_model())
    s = [np.arange(6, dtype=np.float32).reshape(2, 3)]
    out, n = rep.run([s, np.zeros((1, 3), np.float32)])
    assert len(out) == 2 and int(n) == 2
    np.testing.assert_array_equal(out[0], s[0])
    np.testing.assert_array_equal(out[1], np.ones((1, 3), np.float32))


def test_run_time_position_is_refused():
    m = model([helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
               helper.make_node("SequenceAt", ["s", "i"], ["y"])],
              [tensor("a", [2]), tensor("b", [2]), tensor("i", [], TensorProto.INT64)], [tensor("y", [2])])
    with pytest.raises(UnsupportedOpError, match="position"):
        ziggurat.compile(m)
    # bound by value (what the backend does by itself), it compiles per position
    rep = backend.prepare(m)
    a, b = np.float32([1, 2]), np.float32([3, 4])
    np.testing.assert_array_equal(rep.run([a, b, np.int64(1)])[0], b)
    np.testing.assert_array_equal(rep.run([a, b, np.int64(-2)])[0], a)


def test_out_of_range_position_and_empty_concat_are_clean_errors():
    m = model([helper.make_node("SequenceConstruct", ["a"], ["s"]),
               helper.make_node("SequenceAt", ["s", "i"], ["y"])],
              [tensor("a", [2])], [tensor("y", [2])], [ints("i", 3)])
    with pytest.raises(ShapeError, match="out of range"):
        ziggurat.compile(m)
    m = model([helper.make_node("SequenceEmpty", [], ["s"]),
               helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
              [tensor("a", [2])], [tensor("y", [2])])
    with pytest.raises(UnsupportedOpError, match="empty"):
        ziggurat.compile(m)


def test_sequence_into_a_tensor_op_is_refused():
    m = model([helper.make_node("SequenceConstruct", ["a"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
              [tensor("a", [2])], [tensor("y", [2])])
    with pytest.raises(UnsupportedOpError, match="'s' is a sequence"):
        ziggurat.compile(m)


def optional_model():
    """An optional tensor input: its element plus 1 when present, else zeros; and whether it is present."""
    then_body = helper.make_graph([helper.make_node("OptionalGetElement", ["o"], ["e"]),
                                   helper.make_node("Add", ["e", "one"], ["r"])], "then", [], [tensor("r", [2])])
    else_body = helper.make_graph([helper.make_node("Identity", ["zeros"], ["r"])], "else", [], [tensor("r", [2])])
    return model([helper.make_node("OptionalHasElement", ["o"], ["has"]),
                  helper.make_node("If", ["has"], ["y"], then_branch=then_body, else_branch=else_body)],
                 [helper.make_value_info("o", helper.make_optional_type_proto(
                     helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))],
                 [tensor("has", [], TensorProto.BOOL), tensor("y", [2])],
                 [onnx.numpy_helper.from_array(np.float32(1), "one"),
                  onnx.numpy_helper.from_array(np.zeros(2, np.float32), "zeros")])


def test_optional_input_present_or_empty():
    m = optional_model()
    rep = backend.prepare(m)
    ref = ReferenceEvaluator(m)
    for value in (np.float32([3, 4]), None):
        got = rep.run([value])
        want = ref.run(None, {"o": value})
        assert bool(got[0]) == bool(want[0])
        np.testing.assert_array_equal(got[1], want[1])
    assert rep.compiled.compiles == 2


def test_get_element_of_an_empty_optional_is_a_clean_error():
    m = model([helper.make_node("Optional", [], ["o"], type=helper.make_tensor_type_proto(TensorProto.FLOAT, [2])),
               helper.make_node("OptionalGetElement", ["o"], ["y"])], [tensor("a", [2])], [tensor("y", [2])])
    with pytest.raises(ShapeError, match="empty"):
        ziggurat.compile(m)


def test_identity_of_an_empty_optional_then_has_element():
    m = model([helper.make_node("Optional", [], ["o"], type=helper.make_tensor_type_proto(TensorProto.FLOAT, [2])),
               helper.make_node("Identity", ["o"], ["o2"]),
               helper.make_node("OptionalHasElement", ["o2"], ["has"])],
              [tensor("a", [2])], [tensor("has", [], TensorProto.BOOL)])
    assert not bool(ziggurat.compile(m)(np.zeros(2, np.float32))[0])
