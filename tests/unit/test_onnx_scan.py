"""Scan unrolled at import time (frontends/onnx/convert_scan.py), against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ziggurat
from ziggurat.errors import UnsupportedOpError

ort = pytest.importorskip("onnxruntime")
RTOL, ATOL = 1e-3, 1e-4


def scan_model(in_dir=0, in_axis=0, out_dir=0, out_axis=0, opset=16):
    """state s [2]; scan input x of [3, 2] (or [2, 3] with in_axis 1); body:
    s' = s * 0.5 + x_t, y_t = tanh(s') scanned out."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["s_in", "half"], ["h"]), helper.make_node("Add", ["h", "x_t"], ["s_out"]),
         helper.make_node("Tanh", ["s_out"], ["y_t"])],
        "body", [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2]),
                 helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [2])],
        [helper.make_tensor("half", TensorProto.FLOAT, [1], [0.5])])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1,
                            scan_input_directions=[in_dir], scan_input_axes=[in_axis],
                            scan_output_directions=[out_dir], scan_output_axes=[out_axis])
    x_shape = [3, 2] if in_axis == 0 else [2, 3]
    y_shape = [3, 2] if out_axis == 0 else [2, 3]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2]),
                                            helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2]),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("in_dir,in_axis,out_dir,out_axis", [(0, 0, 0, 0), (1, 1, 0, 1), (0, 1, 1, 0)])
def test_scan_matches_onnxruntime(in_dir, in_axis, out_dir, out_axis):
    model = scan_model(in_dir, in_axis, out_dir, out_axis)
    rng = np.random.default_rng(0)
    feeds = {"s0": rng.standard_normal(2).astype(np.float32),
             "x": rng.standard_normal((3, 2) if in_axis == 0 else (2, 3)).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)(**feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


def scan8_model(sequence_lens=None):
    """Opset-8 Scan over a batch of 2: s' = s + x_t, scanned out."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y_t"])],
        "body", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("s_in", "x_t")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("s_out", "y_t")])
    node = helper.make_node("Scan", ["lens" if sequence_lens is not None else "", "s0", "x"], ["s", "y"], body=body,
                            num_scan_inputs=1, directions=[1])
    inits = [] if sequence_lens is None else [onnx.numpy_helper.from_array(np.array(sequence_lens, np.int64), "lens")]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2, 2]),
                                            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 2])],
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 2]),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 2])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)], ir_version=8)


def test_opset8_scan_matches_onnxruntime():
    model = scan8_model(sequence_lens=[3, 3])
    rng = np.random.default_rng(0)
    feeds = {"s0": rng.standard_normal((2, 2)).astype(np.float32),
             "x": rng.standard_normal((2, 3, 2)).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)(**feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


def test_opset8_scan_with_short_sequences_is_refused():
    with pytest.raises(UnsupportedOpError, match="sequence_lens"):
        ziggurat.compile(scan8_model(sequence_lens=[3, 2]))
