"""te inlining through padded reads (lowering/te_inline.py): a producer read with a pad by a
te.compute (a layout transform with a halo, a Pad) is inlined, a window's padded read is not; the
results match numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import ziggurat


def _transpose_pad(shape: tuple[int, int, int], pads: list[int]):
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Pad", ["t", "p"], ["y"], mode="constant")]
    n, a, b = shape
    out = [n + pads[0] + pads[3], b + pads[1] + pads[4], a + pads[2] + pads[5]]
    graph = helper.make_graph(nodes, "transpose_pad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
                              [helper.make_tensor("p", TensorProto.INT64, [6], pads)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.tuples(st.integers(1, 2), st.integers(1, 20), st.integers(1, 40)),
       pads=st.lists(st.integers(0, 2), min_size=6, max_size=6))
def test_a_transpose_inlined_into_a_pad_matches_numpy(shape, pads) -> None:
    model = _transpose_pad(shape, pads)
    kernels: list[str] = []
    m = ziggurat.compile(model, after_pass=lambda p, mod, s: kernels.append(str(mod))
                         if p.name == "convert-graph-to-te" else None)
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    want = np.pad(x.transpose(0, 2, 1), [(pads[0], pads[3]), (pads[1], pads[4]), (pads[2], pads[5])])
    np.testing.assert_array_equal(m(x)[0], want)
    if any(pads):  # one te.compute: the transpose's body moved into the padded read's place
        te_ir = kernels[0]
        assert te_ir.count("te.compute") == 1 and " pad " not in te_ir, te_ir


def test_a_producer_read_twice_at_one_point_is_inlined() -> None:
    """`t * t` and `t == t ? t : 0` read `t` twice at the same indices: the reads become one
    (merge_equal_reads), so `t` inlines and the kernel is one te.compute; the result matches numpy."""
    nodes = [helper.make_node("Add", ["x", "one"], ["t"]),
             helper.make_node("Mul", ["t", "t"], ["sq"]),
             helper.make_node("Equal", ["sq", "sq"], ["same"]),
             helper.make_node("Where", ["same", "sq", "zero"], ["y"])]
    graph = helper.make_graph(nodes, "read_twice", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 37])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 37])],
                              [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
                               helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    kernels: list[str] = []
    m = ziggurat.compile(model, after_pass=lambda p, mod, s: kernels.append(str(mod))
                         if p.name == "convert-graph-to-te" else None)
    x = np.random.default_rng(0).standard_normal((3, 37)).astype(np.float32)
    x[0, 0] = np.nan
    want = (x + 1) * (x + 1)
    want = np.where(want == want, want, 0).astype(np.float32)
    np.testing.assert_array_equal(m(x)[0], want)
    te_ir = kernels[0]
    assert te_ir.count("te.compute") == 1, te_ir
