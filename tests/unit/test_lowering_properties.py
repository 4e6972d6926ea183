"""Property tests: random shapes, lowered through every level and JIT-compiled,
match numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import graph_model, run_graph, tensor
from ziggurat.dialects import graph
from ziggurat.dialects.graph import broadcast_shapes

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
dims = st.integers(min_value=1, max_value=40)


def rand(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@SETTINGS
@given(m=dims, k=dims, n=dims, batch=st.integers(1, 3), transpose_b=st.booleans(), threads=st.sampled_from([1, 2]))
def test_matmul_matches_numpy(m, k, n, batch, transpose_b, threads):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a_shape, b_shape = (batch, m, k), ((n, k) if transpose_b else (k, n))
    out_shape = (batch, m, n)
    model = graph_model(
        [a_shape, b_shape],
        lambda b, x: b.insert(graph.MatmulOp(x[0], x[1], tensor(out_shape), transpose_b=transpose_b)).result,
    )
    a, w = rand(rng, a_shape), rand(rng, b_shape)
    got = run_graph(model, [a, w], threads)
    want = a.astype(np.float64) @ (w.T if transpose_b else w).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@st.composite
def conv_cases(draw):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cin = groups * draw(st.integers(1, 3))
    cout = groups * draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = [draw(st.integers(0, 2)) for _ in range(4)]
    h = draw(st.integers(dh * (kh - 1) + 1, 20))
    w = draw(st.integers(dw * (kw - 1) + 1, 20))
    return groups, cin, cout, (kh, kw), (sh, sw), (dh, dw), pads, (h, w)


def np_conv(x, w, strides, pads, dil, groups):
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, wd = x.shape
    co, cg, kh, kw = w.shape
    oh = (h - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd - dil[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((n, co, oh, ow))
    per = co // groups
    for o in range(co):
        g = o // per
        for dy in range(kh):
            for dx in range(kw):
                ys, xs = dy * dil[0], dx * dil[1]
                patch = x[:, g * cg : (g + 1) * cg, ys : ys + strides[0] * oh : strides[0], xs : xs + strides[1] * ow : strides[1]]
                out[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, dy, dx])
    return out


@SETTINGS
@given(case=conv_cases(), threads=st.sampled_from([1, 2]))
def test_conv2d_matches_numpy(case, threads):
    groups, cin, cout, k, s, d, pads, (h, w) = case
    rng = np.random.default_rng(cin * 100 + cout + h)
    x_shape, w_shape = (1, cin, h, w), (cout, cin // groups, *k)
    x, wt = rand(rng, x_shape), rand(rng, w_shape)
    want = np_conv(x, wt, s, pads, d, groups)
    model = graph_model(
        [x_shape, w_shape],
        lambda b, v: b.insert(graph.Conv2dOp(v[0], v[1], tensor(want.shape), s, pads, d, groups)).result,
    )
    got = run_graph(model, [x, wt], threads)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@st.composite
def broadcast_pairs(draw):
    rank = draw(st.integers(1, 4))
    full = [draw(st.integers(1, 17)) for _ in range(rank)]
    a = [d if draw(st.booleans()) else 1 for d in full]
    b = [d if draw(st.booleans()) else 1 for d in full][draw(st.integers(0, rank - 1)) :]
    return a, b


BINARY = {graph.AddOp: np.add, graph.SubOp: np.subtract, graph.MulOp: np.multiply, graph.DivOp: np.divide}


@SETTINGS
@given(shapes=broadcast_pairs(), op=st.sampled_from(sorted(BINARY, key=lambda c: c.name)), threads=st.sampled_from([1, 2]))
def test_broadcast_binary_then_unary_matches_numpy(shapes, op, threads):
    a_shape, b_shape = shapes
    out_shape = broadcast_shapes(a_shape, b_shape)
    rng = np.random.default_rng(len(a_shape) * 7 + sum(b_shape))
    a, c = rand(rng, a_shape), rand(rng, b_shape)
    if op is graph.DivOp:
        c = np.where(np.abs(c) < 0.1, 1.0, c).astype(np.float32)

    def body(b, v):
        z = b.insert(op(v[0], v[1], tensor(out_shape))).result
        return b.insert(graph.TanhOp(b.insert(graph.ReluOp(z)).result)).result

    got = run_graph(graph_model([a_shape, b_shape], body), [a, c], threads)
    want = np.tanh(np.maximum(BINARY[op](a.astype(np.float64), c), 0))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
