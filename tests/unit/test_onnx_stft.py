"""STFT (frontends/onnx/convert_stft.py) against onnx's reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ziggurat
from ziggurat.errors import ShapeError
from ziggurat.frontends.onnx.importer import import_onnx


def stft_model(length, comps, step, frame_length, window, onesided):
    frames = 1 + (length - frame_length) // step
    bins = frame_length // 2 + 1 if onesided else frame_length
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, length, comps])]
    if window:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [frame_length]))
    node = helper.make_node("STFT", ["x", "step", "w" if window else "", "n"], ["y"], onesided=onesided)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                    [2, frames, bins, 2])],
                              [numpy_helper.from_array(np.array(step, np.int64), "step"),
                               numpy_helper.from_array(np.array(frame_length, np.int64), "n")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("comps,step,n,window,onesided", [(1, 4, 8, False, 1), (1, 3, 10, True, 1),
                                                          (2, 5, 8, True, 0), (1, 6, 6, False, 0)])
def test_stft_matches_reference(comps, step, n, window, onesided):
    model = stft_model(32, comps, step, n, window, onesided)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((2, 32, comps)).astype(np.float32)}
    if window:
        feeds["w"] = np.hanning(n).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)(**feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_stft_frame_longer_than_signal_is_refused():
    model = stft_model(32, 1, 4, 8, False, 1)
    model.graph.initializer[1].CopyFrom(numpy_helper.from_array(np.array(40, np.int64), "n"))
    with pytest.raises(ShapeError, match="frame_length"):
        import_onnx(model)
