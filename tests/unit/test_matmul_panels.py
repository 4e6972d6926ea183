"""graph.matmul_panels: a matmul whose constant weight is stored in the column panels the
loop-level schedule would otherwise pack on every call (cost-guided fuse-ops makes it)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from tests.helpers import graph_model, run_with_schedule_ir, tensor
from xdsl.utils.exceptions import VerifyException

import ziggurat
from ziggurat.dialects import graph
from ziggurat.dialects.graph_layout import MatmulPanelsOp, pack_panels
from ziggurat.target import Target

WIDTH = Target().vector_width
GUIDED = ("simplify-graph,fold-constants,cse,dce,"
          "fuse-ops{cost-guided=true peak-gflops=100 bandwidth-gbs=20 vector-width=%d}")


def _panels_model(x_shape, w: np.ndarray, lanes: int):
    k, n = w.shape

    def body(b, args):
        c = b.insert(graph.ConstantOp("wp", tensor([n // lanes, k, lanes]))).results[0]
        return b.insert(MatmulPanelsOp(args[0], c, tensor([*x_shape[:-1], n]))).results[0]

    return graph_model([x_shape], body, {"wp": pack_panels(w, lanes)})


def test_pack_panels_puts_column_j_in_panel_j_div_lanes() -> None:
    w = np.arange(6 * 32, dtype=np.float32).reshape(6, 32)
    p = pack_panels(w, 8)
    assert p.shape == (4, 6, 8)
    for k in range(6):
        for j in range(32):
            assert p[j // 8, k, j % 8] == w[k, j]


def test_the_verifier_names_a_contracting_mismatch() -> None:
    x = graph.ConstantOp("x", tensor([4, 16]))
    wp = graph.ConstantOp("wp", tensor([2, 12, 8]))
    op = MatmulPanelsOp(x.results[0], wp.results[0], tensor([4, 16]))
    with pytest.raises(VerifyException, match="contracting dims differ: 16 vs 12"):
        op.verify()


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 40), k=st.integers(1, 70), panels=st.integers(1, 6), batch=st.sampled_from([(), (2,)]),
       threads=st.sampled_from([1, 2]))
def test_matmul_panels_matches_numpy(m: int, k: int, panels: int, batch: tuple, threads: int) -> None:
    rng = np.random.default_rng(m * 1000 + k)
    w = rng.standard_normal((k, panels * WIDTH)).astype(np.float32)
    x = rng.standard_normal((*batch, m, k)).astype(np.float32)
    model = _panels_model(x.shape, w, WIDTH)
    (got,) = ziggurat.compile(model, target=f"llvm -num-cores={threads}")(x)
    np.testing.assert_allclose(got, x @ w, rtol=1e-4, atol=1e-4)


def test_the_schedule_reads_the_panels_without_a_pack_nest() -> None:
    """B in panels of the schedule's width: the register-blocked kernel loads the panels
    directly (no `_pack` nest, no local panel buffer) and matches numpy."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 8 * WIDTH)).astype(np.float32)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    (got,), ir = run_with_schedule_ir(_panels_model(x.shape, w, WIDTH), [x], "llvm -num-cores=1")
    np.testing.assert_allclose(got, x @ w, rtol=1e-4, atol=1e-4)
    assert "matmul_pack" not in ir
    assert "loop.block \"matmul\"" in ir and "divui" not in ir.split("matmul_store")[0].split("loop.for")[-1]


def test_panels_of_another_width_still_compute_the_product() -> None:
    """Panels the schedule does not read directly (another lane count) fall back to the
    general path: slower, still right."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((32, 4 * WIDTH)).astype(np.float32)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    (got,) = ziggurat.compile(_panels_model(x.shape, w, 2 * WIDTH), target="llvm -num-cores=1")(x)
    np.testing.assert_allclose(got, x @ w, rtol=1e-4, atol=1e-4)


def _onnx_matmul_bias(m: int, k: int, n: int):
    rng = np.random.default_rng(2)
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])],
                          "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, w, b


@pytest.mark.parametrize(("rows", "decision"), [(1, "transposed"), (2, "packed"), (8, "packed")])
def test_one_row_takes_the_transposed_weight_more_rows_the_panels(rows: int, decision: str) -> None:
    """A matrix-vector product (one row) keeps several accumulators only in the dot-product
    kernel of a transposed weight, so that layout takes the tie there; from two rows on the
    register-blocked panel kernel does. Both compute the product."""
    from ziggurat.transforms.graph.annotate_costs import fusion_decisions

    model, w, b = _onnx_matmul_bias(rows, 784, 512)
    x = np.random.default_rng(4).standard_normal((rows, 784)).astype(np.float32)
    seen = {}

    def grab(p, module, seconds):
        if p.name == "fuse-ops":
            seen["rows"] = fusion_decisions(module)

    compiled = ziggurat.compile(model, target="llvm -num-cores=1", pipeline=GUIDED % WIDTH, after_pass=grab)
    np.testing.assert_allclose(compiled(x)[0], x @ w + b, rtol=1e-4, atol=1e-4)
    assert [r["decision"] for r in seen["rows"]] == [decision]


@pytest.mark.parametrize(("rows", "decision"), [(1, None), (8, "packed")])
def test_a_gemm_weight_stored_transposed_goes_to_panels_from_two_rows(rows: int, decision: str | None) -> None:
    """`Gemm(transB=1)` imports as `graph.matmul {transpose_b}`: its weight `[N, K]` is put
    into panels of `B = W^T` the same way, except for one row, where the dot kernel stays."""
    from ziggurat.transforms.graph.annotate_costs import fusion_decisions

    rng = np.random.default_rng(6)
    w = rng.standard_normal((96, 40)).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], "gemm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 40])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, 96])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = rng.standard_normal((rows, 40)).astype(np.float32)
    seen = {}

    def grab(p, module, seconds):
        if p.name == "fuse-ops":
            seen["rows"] = fusion_decisions(module)

    compiled = ziggurat.compile(model, target="llvm -num-cores=1", pipeline=GUIDED % WIDTH, after_pass=grab)
    np.testing.assert_allclose(compiled(x)[0], x @ w.T + b, rtol=1e-4, atol=1e-4)
    assert [r["decision"] for r in seen["rows"]] == ([decision] if decision else [])


@pytest.mark.parametrize("threads", [1, 2])
def test_cost_guided_fusion_packs_a_weight_the_schedule_would_pack_per_call(threads: int) -> None:
    """128x256 by 256x512: the default schedule packs B on every call, a copy phase the roofline
    prices; cost-guided fuse-ops stores B in panels at compile time and the model still matches."""
    from ziggurat.transforms.graph.annotate_costs import fusion_decisions

    model, w, b = _onnx_matmul_bias(128, 256, 512)
    x = np.random.default_rng(3).standard_normal((128, 256)).astype(np.float32)
    seen = {}

    def grab(p, module, seconds):
        if p.name == "fuse-ops":
            seen["rows"] = fusion_decisions(module)

    compiled = ziggurat.compile(model, target=f"llvm -num-cores={threads}", pipeline=GUIDED % WIDTH, after_pass=grab)
    np.testing.assert_allclose(compiled(x)[0], x @ w + b, rtol=1e-4, atol=1e-4)
    assert [r["decision"] for r in seen["rows"]] == ["packed"]
    assert seen["rows"][0]["ops"] == "matmul_panels add"


@pytest.mark.parametrize(("lanes", "k"), [(8, 128), (8, 512), (16, 128), (16, 512)])
def test_both_widths_schedule_panels_as_their_own_packed_copy(lanes: int, k: int) -> None:
    """At 8 lanes (2-D register block) and 16 (one vector per row), with and without a
    k-block: the scheduled kernel loads `wp[panel, k, lane]` directly, with no index
    division left and no pack nest, and every innermost loop vectorizes."""
    from ziggurat.transforms.costs.kernels import kernel_of_ops, lower_kernel

    a = graph.ConstantOp("a", tensor([64, k]))
    wp = graph.ConstantOp("wp", tensor([256 // lanes, k, lanes]))
    module, _ = lower_kernel(kernel_of_ops([MatmulPanelsOp(a.results[0], wp.results[0], tensor([64, 256]))]), lanes)
    text = str(module)
    assert "_pack" not in text and "divui" not in text and "remui" not in text
    assert f"loop.load %in1" in text and "not_vectorized" not in text
