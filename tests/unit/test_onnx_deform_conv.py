"""DeformConv decomposed onto bilinear run-time-index gathers and a grouped
batched matmul (frontends/onnx/convert_deform_conv.py), against ONNX's
reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ziggurat

RTOL, ATOL = 1e-3, 1e-4


@pytest.mark.parametrize("attrs,with_mask", [
    (dict(group=2, offset_group=2, strides=[2, 1], pads=[1, 0, 1, 1], dilations=[1, 2]), True),
    (dict(pads=[1, 1, 1, 1]), False),
])
def test_deform_conv_matches_reference(attrs, with_mask):
    rng = np.random.default_rng(0)
    n, c, h, w, o, k = 1, 4, 5, 6, 4, 3
    g, og = attrs.get("group", 1), attrs.get("offset_group", 1)
    sh, sw = attrs.get("strides", [1, 1])
    dh, dw = attrs.get("dilations", [1, 1])
    pt, pl, pb, pr = attrs["pads"]
    oh, ow = (h + pt + pb - (k - 1) * dh - 1) // sh + 1, (w + pl + pr - (k - 1) * dw - 1) // sw + 1
    feeds = {"x": rng.standard_normal((n, c, h, w)).astype(np.float32),
             "w": rng.standard_normal((o, c // g, k, k)).astype(np.float32),
             "off": (2 * rng.standard_normal((n, og * k * k * 2, oh, ow))).astype(np.float32),
             "b": rng.standard_normal(o).astype(np.float32)}
    if with_mask:
        feeds["mask"] = rng.uniform(0, 1, (n, og * k * k, oh, ow)).astype(np.float32)
    node = helper.make_node("DeformConv", list(feeds), ["y"], kernel_shape=[k, k], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(name, TensorProto.FLOAT, v.shape)
                                            for name, v in feeds.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, o, oh, ow])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=8)
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    (got,) = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=2)(**feeds)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
