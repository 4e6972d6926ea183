"""Generic convolutions (issue 22): one compile of a CNN over symbolic height and width runs any
map, narrow ones (fewer columns than a register block has rows) included, against onnxruntime,
with 16 and 8 lanes. The generic conv reads a zero-padded copy of its input
(transforms/schedule/pad_dynamic.py) and blocks map columns by output channel blocks
(transforms/schedule/dynamic_block.py); the bound it pads by is checked on its own."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from ziggurat.compiler import compile_symbolic
from ziggurat.symbolic import Sym
from ziggurat.transforms.schedule.pad_dynamic import upper_bound

RNG = np.random.default_rng(11)


def _weight(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
    return numpy_helper.from_array((RNG.standard_normal(shape) * 0.2).astype(np.float32), name)


def block_model() -> onnx.ModelProto:
    """conv 3x3 (3 -> 64 channels: four blocks of 16), ReLU, a strided conv 3x3 (64 -> 48: three
    blocks), a residual 1x1 conv and an add, over [batch, 3, height, width]."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["r1", "w3"], ["c3"], strides=[2, 2]),
        helper.make_node("Add", ["c2", "c3"], ["y"]),
    ]
    inits = [_weight("w1", (64, 3, 3, 3)), _weight("b1", (64,)), _weight("w2", (48, 64, 3, 3)),
             _weight("w3", (48, 64, 1, 1))]
    g = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 48, "oh", "ow"])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def reference():
    m = block_model()
    return m, ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module", params=["llvm -num-cores=1", "llvm -mcpu=haswell -num-cores=2"])
def compiled(request, reference):
    return compile_symbolic(reference[0], target=request.param)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 2), st.integers(1, 23), st.integers(1, 23))
def test_generic_convs_match_onnxruntime_at_any_map(compiled, reference, b: int, h: int, w: int):
    x = RNG.standard_normal((b, 3, h, w)).astype(np.float32)
    np.testing.assert_allclose(compiled(x)[0], reference[1].run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("h,w", [(1, 1), (7, 7), (8, 9), (14, 14)])
def test_generic_convs_at_the_block_edges(compiled, reference, h: int, w: int):
    """Maps of 1 and 7 columns (no 6-column block, or one and a leftover), 9 and 14 (blocks of 6, 2 and 1)."""
    x = RNG.standard_normal((1, 3, h, w)).astype(np.float32)
    np.testing.assert_allclose(compiled(x)[0], reference[1].run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_upper_bound_of_a_pad():
    w = Sym.parse("w")
    half = Sym.parse("{1 + w}//2")
    assert upper_bound(w + 1 - w) == 1
    assert upper_bound(2 * half - w) == 1  # 2 * floor((1 + w) / 2) <= 1 + w
    assert upper_bound(w - 2 * half) == 0  # -2 * floor((1 + w) / 2) <= -w
    assert upper_bound(w) is None  # grows with w: no constant bound
    for v in range(1, 50):
        assert (2 * ((1 + v) // 2) - v) <= 1 and (v - 2 * ((1 + v) // 2)) <= 0
