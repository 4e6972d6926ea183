"""Copy nests in loop-default-schedule (transforms/schedule/copy_nest.py): conv's boundary layout transforms,
NCHW -> NCHW<b>c with a halo and NCHW<b>c -> NCHW, keep their values with the divided loops strip-mined
and the padding peeled, at 1 and 2 threads, against numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import graph_model, run_with_schedule_ir, tensor
from ziggurat.dialects import graph  # noqa: F401 - graph.py loads graph_layout (import order)
from ziggurat.dialects.graph_layout import LayoutTransformOp


def _blocked(x: np.ndarray, b: int, pads: tuple[int, int, int, int]) -> np.ndarray:
    n, c, h, w = x.shape
    t, l, bo, r = pads
    cp = -(-c // b) * b
    p = np.zeros((n, cp, h + t + bo, w + l + r), x.dtype)
    p[:, :c, t:t + h, l:l + w] = x
    return p.reshape(n, cp // b, b, h + t + bo, w + l + r).transpose(0, 1, 3, 4, 2)


def _schedule_block(ir: str, name: str) -> str:
    start = ir.index(f'loop.block "{name}"')
    return ir[start:ir.index("}", start)]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cb=st.integers(1, 3), b=st.sampled_from([4, 8, 16]), h=st.integers(1, 9), w=st.integers(1, 11),
       pads=st.tuples(*[st.integers(0, 2)] * 4), threads=st.sampled_from([1, 2]))
def test_padded_blocking_matches_numpy(cb, b, h, w, pads, threads):
    c = cb * b
    t, l, bo, r = pads
    out = tensor([1, cb, h + t + bo, w + l + r, b])
    model = graph_model([[1, c, h, w]], lambda bb, a: bb.insert(
        LayoutTransformOp(a[0], "NCHW", f"NCHW{b}c", out, pads=list(pads))).results[0])
    x = np.random.default_rng(c * h + w).standard_normal((1, c, h, w)).astype(np.float32)
    (y,), ir = run_with_schedule_ir(model, [x], f"llvm -num-cores={threads}")
    np.testing.assert_array_equal(y, _blocked(x, b, pads))
    if any(pads):  # the halo is zeroed apart; the copy reads without tests
        assert 'loop.block "layout_transform_pad_zero"' in ir
        assert "arith.select" not in _schedule_block(ir, "layout_transform")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cb=st.integers(1, 4), b=st.sampled_from([4, 8, 16]), h=st.integers(1, 7), w=st.integers(1, 9),
       threads=st.sampled_from([1, 2]))
def test_unblocking_matches_numpy(cb, b, h, w, threads):
    c = cb * b
    model = graph_model([[1, cb, h, w, b]], lambda bb, a: bb.insert(
        LayoutTransformOp(a[0], f"NCHW{b}c", "NCHW", tensor([1, c, h, w]))).results[0])
    x = np.random.default_rng(c * h + w).standard_normal((1, cb, h, w, b)).astype(np.float32)
    (y,), ir = run_with_schedule_ir(model, [x], f"llvm -num-cores={threads}")
    np.testing.assert_array_equal(y, x.transpose(0, 1, 4, 2, 3).reshape(1, c, h, w))
    if cb > 1:  # strip-mined: the channel's block and lane are loop variables, no division is left
        body = _schedule_block(ir, "layout_transform")
        assert "arith.divui" not in body and "arith.remui" not in body
