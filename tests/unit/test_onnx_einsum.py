"""Einsum decomposed onto transpose/reshape/slice/reduce/batched matmul
(frontends/onnx/convert_einsum.py), against onnxruntime and numpy."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ziggurat
from ziggurat.errors import ShapeError

ort = pytest.importorskip("onnxruntime")
RTOL, ATOL = 1e-3, 1e-4


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def einsum_model(equation, shapes, out_rank):
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in zip(names, shapes)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [f"d{i}" for i in range(out_rank)])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,i", [(5,), (5,)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,kj", [(3, 4), (5, 4)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 3, 4, 2)]),
    ("ijk,ik->j", [(2, 3, 4), (2, 4)]),
    ("bij , bkj -> bik", [(2, 3, 4), (2, 5, 4)]),
    ("ij,kl->", [(2, 3), (4, 5)]),
]


@pytest.mark.parametrize("equation,shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_onnxruntime(equation, shapes):
    feeds = {f"x{i}": rand(*s, seed=i) for i, s in enumerate(shapes)}
    want_rank = np.einsum(equation.replace(" ", ""), *feeds.values()).ndim
    model = einsum_model(equation, shapes, want_rank)
    onnx.checker.check_model(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, feeds)
    (got,) = ziggurat.compile(model, target="llvm -num-cores=1")(**feeds)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_einsum_label_size_mismatch_is_a_shape_error():
    with pytest.raises(ShapeError, match="label 'j'"):
        ziggurat.compile(einsum_model("ij,jk->ik", [(3, 4), (5, 2)], 2))
