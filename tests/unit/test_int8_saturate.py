"""`-int8=saturate`: AVX2's int8 GEMM on `vpmaddubsw` for full-range weights, pairs of products
saturating int16 as onnxruntime's AVX2 kernels do, in the operand order that keeps the
activations' typical values in range (lowering/qgemm.py `saturating_form`). The results are
checked against a numpy model of the instruction (pairs summed, clipped to int16, then summed
in int32), and against onnxruntime's literal QDQ result where no pair saturates."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st
from onnx import numpy_helper as nh
from tests.unit.test_int8_qdq import check, literal, qdq_matmul

import ziggurat
from ziggurat.dialects.graph_quant import QGemmOp
from ziggurat.errors import ZigguratError
from ziggurat.frontends.onnx import import_onnx
from ziggurat.lowering.qgemm import PARALLEL_MACS, TYPICAL_STEPS, pairs_at, saturating_form
from ziggurat.target import Target

AVX2 = Target.parse("llvm").has("avx2")
SATURATE = "llvm -mcpu=haswell -num-cores=1 -int8=saturate"


def saturating_products(a: np.ndarray, w: np.ndarray, swap: bool) -> np.ndarray:
    """`vpmaddubsw` + `vpmaddwd` + `vpaddd` over u8 `a` (M x K) and s8 `w` (K x N), in numpy:
    (swap: (a - 128) x (w + 128), corrected back) pairs of consecutive k clipped to int16."""
    k = a.shape[1] + a.shape[1] % 2
    a32 = np.zeros((a.shape[0], k), np.int64)
    w32 = np.zeros((k, w.shape[1]), np.int64)
    a32[:, :a.shape[1]], w32[:w.shape[0]] = a, w
    if swap:
        a32[:, :a.shape[1]] -= 128
        w32[:w.shape[0]] += 128
    pairs = a32[:, 0::2, None] * w32[None, 0::2] + a32[:, 1::2, None] * w32[None, 1::2]
    acc = np.clip(pairs, -32768, 32767).sum(1)
    if swap:  # sum (a' + 128) (w' - 128) = sum a'w' - 128 rowsum(a') + 128 colsum(w') - 128^2 K
        acc += -128 * a32.sum(1, keepdims=True) + 128 * w32.sum(0, keepdims=True) - 128 * 128 * a.shape[1]
    return acc


def reference(model, x: np.ndarray, form: str) -> np.ndarray:
    """The QDQ MatMul of `qdq_matmul` (x's zero point 128, w's 0) with the GEMM of `form`: the
    saturating 'pairs16' or 'swap16', or the exact 'wide16'."""
    init = {t.name: nh.to_array(t) for t in model.graph.initializer}
    xs, ws, ys, yz = init["xs"], init["ws"], init["ys"], init["yz"].astype(np.int64)
    a = np.clip(np.rint(x / xs) + 128, 0, 255).astype(np.int64)
    w = init["wq"].astype(np.int64)
    acc = (a @ w if form == "wide16" else saturating_products(a, w, form == "swap16")) - 128 * w.sum(0)
    y = acc.astype(np.float32) * (np.float32(xs) * ws.astype(np.float32))
    return ((np.clip(np.rint(y / ys) + yz, 0, 255) - yz) * ys).astype(np.float32)


@settings(max_examples=40, deadline=None)
@given(w=st.lists(st.integers(-128, 127), min_size=2, max_size=10), v=st.integers(0, 255), swap=st.booleans())
def test_pairs_at_counts_the_pairs_vpmaddubsw_saturates(w, v, swap):
    """pairs_at against the products themselves: a pair saturates where its unclipped sum leaves
    int16, and where none does the instruction's sum is the exact one."""
    b = np.array(w, np.int8).reshape(-1, 1)
    k = len(w) + len(w) % 2
    a = np.zeros(k, np.int64)
    a[:len(w)] = (v - 128) if swap else v
    wp = np.zeros(k, np.int64)
    wp[:len(w)] = np.array(w) + (128 if swap else 0)
    sums = a[0::2] * wp[0::2] + a[1::2] * wp[1::2]
    expected = int(np.count_nonzero((sums > 32767) | (sums < -32768)))
    assert pairs_at(b, [v], swap) == expected
    if expected == 0:
        got = saturating_products(np.full((1, len(w)), v, np.int64), b.astype(np.int64), swap)
        assert got[0, 0] == v * int(np.sum(w))


def test_saturating_form_follows_the_activations_zero_point():
    """Weights of one column each reaching 127: u8 activations near 0 keep the plain form's pairs
    in range, activations near 128 the swapped one's; weights whose pairs leave int16 both ways
    stay on the exact wide form ('')."""
    rng = np.random.default_rng(0)
    w = np.clip(rng.normal(0, 20, (256, 64)), -127, 127).astype(np.int8)
    w[rng.integers(0, 256, 64), np.arange(64)] = 127
    assert saturating_form(w, 0) == "pairs16"
    assert saturating_form(w, 128) == "swap16"
    assert saturating_form(np.full((8, 16), 127, np.int8), 128 + TYPICAL_STEPS) == ""


def test_the_swapped_form_is_graph_qgemm_of_signed_activations_and_unsigned_weights():
    """-int8=saturate on AVX2 (activations at zero point 128): graph.qgemm {pairs16} of i8 a and
    ui8 b, vpmaddubsw in the assembly and no int16 operands; the exact default keeps the wide form."""
    model = qdq_matmul(64, 128, 64)
    exact = [op for op in import_onnx(model, int8_dot="avx2").module.walk() if isinstance(op, QGemmOp)]
    fast = [op for op in import_onnx(model, int8_dot="avx2", int8_pairs="saturate").module.walk()
            if isinstance(op, QGemmOp)]
    assert [op.group for op in exact] == [2]
    assert [(str(op.a.type.element_type), str(op.b.type.element_type), op.pairs16 is not None) for op in fast] \
        == [("i8", "ui8", True)]
    c = ziggurat.compile(model, target=SATURATE, cache=False)
    asm = c._keepalive.assembly()
    assert "vpmaddubsw" in asm and "vpmaddwd" in asm  # vpmaddwd with ones after each vpmaddubsw
    if AVX2:
        x = (np.random.default_rng(1).standard_normal((64, 128)) * 3).astype(np.float32)
        check(c(x)[0], reference(model, x, "swap16"))
        two = ziggurat.compile(model, target=SATURATE.replace("-num-cores=1", "-num-cores=2"), cache=False)
        np.testing.assert_array_equal(two(x)[0], c(x)[0])  # the column panels in parallel: the same sums


@pytest.mark.skipif(not AVX2, reason="runs AVX2 code: the host has no AVX2")
@settings(max_examples=5, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@example(m=16, k=64, n=16, spread=3.0, seed=0)  # below PARALLEL_MACS: the exact wide form
@given(m=st.integers(16, 80), k=st.integers(64, 300), n=st.integers(16, 90), spread=st.sampled_from([0.3, 3.0]),
       seed=st.integers(0, 3))
def test_saturating_gemms_match_the_instruction_and_the_exact_result_where_nothing_saturates(m, k, n, spread,
                                                                                            seed):
    """Any shape: the saturating build equals the numpy model of its instruction (to one output step
    at a rounding tie). With activations near the zero point (spread 0.3) no pair saturates and it
    is the literal QDQ result too; with spread 3.0 the activations reach 0 and 255."""
    model = qdq_matmul(m, k, n, seed)
    (op,) = [op for op in import_onnx(model, int8_dot="avx2", int8_pairs="saturate").module.walk()
             if isinstance(op, QGemmOp)]
    form = "wide16" if op.group == 2 else ("swap16" if str(op.a.type.element_type) == "i8" else "pairs16")
    assert (form == "wide16") == (m * k * n < PARALLEL_MACS)  # small GEMMs stay exact; uniform weights: no plain form
    c = ziggurat.compile(model, target=SATURATE, cache=False)
    x = (np.random.default_rng(seed).standard_normal((m, k)) * spread).astype(np.float32)
    got = c(x)[0]
    check(got, reference(model, x, form))
    if spread < 1:
        check(got, literal(model, x))


def test_small_gemms_and_other_targets_stay_exact():
    """Below PARALLEL_MACS the saturating forms are not worth their error; VNNI's vpdpbusd is exact."""
    for model, dot in ((qdq_matmul(4, 32, 16), "avx2"), (qdq_matmul(64, 128, 64), "vnni")):
        gemms = [op for op in import_onnx(model, int8_dot=dot, int8_pairs="saturate").module.walk()
                 if isinstance(op, QGemmOp)]
        assert [(op.group, op.pairs16) for op in gemms] == [(2 if dot == "avx2" else 4, None)]


def test_the_int8_target_option():
    assert Target.parse("llvm -int8=saturate").int8_pairs == "saturate"
    assert Target.parse("llvm").int8_pairs == "exact"
    assert str(Target.parse("llvm -num-cores=2 -int8=saturate")) == "llvm -num-cores=2 -int8=saturate"
    with pytest.raises(ZigguratError, match="-int8 must be exact or saturate"):
        Target.parse("llvm -int8=fast")


def test_a_signed_activation_needs_pairs16_and_an_unsigned_weight():
    from xdsl.dialects.builtin import IntegerType, Signedness, TensorType
    from xdsl.utils.exceptions import VerifyException
    from xdsl.utils.test_value import create_ssa_value

    a = create_ssa_value(TensorType(IntegerType(8), [8, 64]))
    b = create_ssa_value(TensorType(IntegerType(8, Signedness.UNSIGNED), [16, 128]))
    QGemmOp(a, b, TensorType(IntegerType(32), [8, 32]), pairs16=True).verify()
    with pytest.raises(VerifyException, match="a must hold ui8"):
        QGemmOp(a, b, TensorType(IntegerType(32), [8, 32])).verify()
