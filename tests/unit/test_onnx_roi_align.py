"""RoiAlign decomposed onto elementwise ops and one run-time-index gather
(frontends/onnx/convert_roi_align.py), against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import ziggurat
from ziggurat.errors import UnsupportedOpError

ort = pytest.importorskip("onnxruntime")
RTOL, ATOL = 1e-3, 1e-4


def roi_model(r, attrs):
    node = helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 7]),
                                            helper.make_tensor_value_info("rois", TensorProto.FLOAT, [r, 4]),
                                            helper.make_tensor_value_info("b", TensorProto.INT64, [r])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [r, 3, 3, 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)


@pytest.mark.parametrize("attrs", [
    dict(mode="avg", sampling_ratio=2, spatial_scale=0.5, coordinate_transformation_mode="half_pixel"),
    dict(mode="max", sampling_ratio=1, coordinate_transformation_mode="output_half_pixel"),
])
def test_roi_align_matches_onnxruntime(attrs):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8, 7)).astype(np.float32)
    rois = np.array([[0.5, 1.0, 5.0, 6.5], [-2.0, -1.0, 3.0, 9.5], [4.0, 2.0, 4.5, 2.2], [1, 1, 12, 14]], np.float32)
    b = np.array([1, 0, 1, 0], np.int64)
    model = roi_model(4, dict(output_height=3, output_width=2, **attrs))
    feeds = {"x": x, "rois": rois, "b": b}
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    (got,) = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)(**feeds)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_adaptive_sampling_is_refused():
    with pytest.raises(UnsupportedOpError, match="sampling_ratio"):
        ziggurat.compile(roi_model(1, dict(output_height=3, output_width=2, sampling_ratio=0)))
