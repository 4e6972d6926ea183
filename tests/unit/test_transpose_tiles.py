"""Elementwise kernels that read their input transposed get cache-line tiles
(transforms/schedule/transpose_tiles.py) and still compute what numpy does."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import ziggurat
from ziggurat.dialects import loop


def rows_to_nchw(hw: tuple[int, int], c: int):
    """x [h w, c] -> Transpose -> Reshape [1, c, h, w] -> Sigmoid: a GEMM's rows back to NCHW."""
    h, w = hw
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Reshape", ["t", "shape"], ["r"]),
             helper.make_node("Sigmoid", ["r"], ["y"])]
    shape = helper.make_tensor("shape", TensorProto.INT64, [4], [1, c, h, w])
    g = helper.make_graph(nodes, "rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [h * w, c])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, h, w])], [shape])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def _compile(model):
    loops: list[str] = []

    def after(p, module, seconds):
        if p.name == "loop-default-schedule":
            loops.extend(f.iv.name_hint or "" for f in module.walk() if isinstance(f, loop.ForOp))

    return ziggurat.compile(model, target="llvm -num-cores=1", after_pass=after), loops


def test_transposed_read_is_tiled_by_cache_lines():
    m, loops = _compile(rows_to_nchw((16, 32), 64))
    assert any(n.endswith("_o") for n in loops) and any(n.endswith("_i") for n in loops), loops
    x = np.random.default_rng(0).standard_normal((512, 64)).astype(np.float32)
    want = 1 / (1 + np.exp(-x.T.reshape(1, 64, 16, 32)))
    np.testing.assert_allclose(m(x)[0], want, rtol=1e-5, atol=1e-6)


@settings(max_examples=6, deadline=None)
@given(h=st.integers(1, 9), w=st.sampled_from([5, 16, 24, 40]), c=st.sampled_from([16, 32, 48, 80]))
def test_any_shape_matches_numpy(h, w, c):
    m, _ = _compile(rows_to_nchw((h, w), c))
    x = np.random.default_rng(h * 1000 + w + c).standard_normal((h * w, c)).astype(np.float32)
    want = 1 / (1 + np.exp(-x.T.reshape(1, c, h, w)))
    np.testing.assert_allclose(m(x)[0], want, rtol=1e-5, atol=1e-6)


def concat_of_transposes(c1: int, c2: int, hw: int):
    """a [c1, hw], b [c2, hw] -> Transpose each -> Concat along channels -> Sigmoid: [hw, c1 + c2],
    the second input's lanes (channels) starting above 0 (a concatenation's range)."""
    nodes = [helper.make_node("Transpose", ["a"], ["ta"], perm=[1, 0]),
             helper.make_node("Transpose", ["b"], ["tb"], perm=[1, 0]),
             helper.make_node("Concat", ["ta", "tb"], ["c"], axis=1),
             helper.make_node("Sigmoid", ["c"], ["y"])]
    g = helper.make_graph(nodes, "cat", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [c1, hw]),
                                         helper.make_tensor_value_info("b", TensorProto.FLOAT, [c2, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [hw, c1 + c2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


@settings(max_examples=6, deadline=None)
@given(c1=st.sampled_from([16, 32, 48]), c2=st.sampled_from([16, 48, 64]), hw=st.sampled_from([32, 64, 80]),
       target=st.sampled_from(["llvm -num-cores=1", "llvm -mcpu=haswell -num-cores=1"]))
def test_concatenated_transposes_match_numpy(c1, c2, hw, target):
    """Lane loops of several vectors (from any start) are split so that the line strip runs inside each vector."""
    m = ziggurat.compile(concat_of_transposes(c1, c2, hw), target=target)
    rng = np.random.default_rng(c1 + c2 + hw)
    a = rng.standard_normal((c1, hw)).astype(np.float32)
    b = rng.standard_normal((c2, hw)).astype(np.float32)
    want = 1 / (1 + np.exp(-np.concatenate([a.T, b.T], axis=1)))
    np.testing.assert_allclose(m(a, b)[0], want, rtol=1e-5, atol=1e-6)


def transposed_cast(c: int, hw: int, dtype: int):
    """x [c, hw] (ints) -> Transpose -> Cast to float32 -> Mul 0.5: [hw, c], read transposed."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Cast", ["t"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["f", "half"], ["y"])]
    half = helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])
    g = helper.make_graph(nodes, "tc", [helper.make_tensor_value_info("x", dtype, [c, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [hw, c])], [half])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


@settings(max_examples=8, deadline=None)
@given(c=st.sampled_from([16, 32, 64]), hw=st.sampled_from([128, 192]),
       dtype=st.sampled_from([TensorProto.INT32, TensorProto.INT16, TensorProto.UINT8]),
       target=st.sampled_from(["llvm -num-cores=1", "llvm -mcpu=haswell -num-cores=1"]))
def test_transposed_reads_become_row_loads_and_a_register_transpose(c, hw, dtype, target):
    """A transposed read whose last dim is whole vectors (and at least two cache lines, which
    transpose_tiles.py asks) is gathered as rows (`hw.vgather {rows}`):
    in the unrolled strip the rows are loaded once and transposed in registers, so the kernel has
    no scalar element inserts; the values are numpy's, for 32-, 16- and 8-bit elements."""
    gathers: list = []

    def after(p, module, seconds):
        if p.name == "convert-loop-to-hw":
            gathers.extend(op for op in module.walk() if op.name == "hw.vgather")

    m = ziggurat.compile(transposed_cast(c, hw, dtype), target=target, cache=False, after_pass=after)
    assert gathers and all("rows" in g.attributes for g in gathers)
    if "haswell" in target:
        asm = m._keepalive.assembly()
        assert "vinsertps" not in asm and "vpinsrd" not in asm and "vpinsrw" not in asm and "vpinsrb" not in asm
    np_t = {TensorProto.INT32: np.int32, TensorProto.INT16: np.int16, TensorProto.UINT8: np.uint8}[dtype]
    x = np.random.default_rng(c + hw).integers(0, 100, (c, hw)).astype(np_t)
    np.testing.assert_array_equal(m(x)[0], x.T.astype(np.float32) * 0.5)
