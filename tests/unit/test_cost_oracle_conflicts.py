"""The roofline's L1 set-conflict term: `count_work(...).conflict_lines` and its bound."""

from __future__ import annotations

from math import gcd

import pytest
from tests.helpers import tensor
from ziggurat.transforms.costs.cost_oracle import (
    CONFLICT_LINE_S,
    L1_SETS,
    DefaultCostOracle,
    Peaks,
    count_work,
)
from ziggurat.dialects import graph
from ziggurat.transforms.costs.kernels import kernel_of_ops, lower_kernel

FIXED = Peaks(gflops=100.0, bandwidth_gbs=20.0)


def _matmul(m: int, k: int, n: int, width: int, transpose_b: bool = False):
    a = graph.ConstantOp("a", tensor([m, k]))
    b = graph.ConstantOp("b", tensor([n, k] if transpose_b else [k, n]))
    mm = graph.MatmulOp(a.results[0], b.results[0], tensor([m, n]), transpose_b=transpose_b)
    module, _ = lower_kernel(kernel_of_ops([mm]), width)
    return module


@pytest.mark.parametrize(("m", "k", "n", "sets"), [(128, 128, 1024, 1), (32, 128, 1024, 1), (128, 64, 2048, 1),
                                                  (128, 128, 512, 2), (128, 128, 1536, 2), (128, 128, 768, 4)])
def test_a_column_walk_over_few_sets_conflicts(m: int, k: int, n: int, sets: int) -> None:
    """With 8 lanes and k <= 256 unpacked, the register block (4 rows x 2 vectors) reads one
    64-byte line of B per reduction trip; B's rows are n * 4 bytes apart, so the walk's lines
    fall into `sets` L1 sets, fewer than its k trips fill: every line misses L1, each priced
    CONFLICT_LINE_S / sets, (m / 4 row blocks) x (n / 16 column blocks) x k lines."""
    assert L1_SETS // gcd(n * 4 // 64, L1_SETS) == sets
    work = count_work(_matmul(m, k, n, 8), "kernel")
    assert work.conflict_lines == (m // 4) * (n // 16) * k / sets
    bound = FIXED.time(work.flops, work.bytes, work.scalar_flops, work.scalar_index_ops, work.conflict_lines)
    assert bound == pytest.approx(max(work.conflict_lines * CONFLICT_LINE_S, FIXED.time(work.flops, work.bytes)))
    if sets == 1:
        assert bound > 2 * FIXED.time(work.flops, work.bytes)  # the conflict bound dominates


@pytest.mark.parametrize(("k", "n", "width"), [(128, 384, 8), (128, 128, 8), (256, 1024, 8), (1024, 256, 8),
                                               (128, 1040, 8)])
def test_no_conflict_over_enough_sets_or_with_a_packed_panel(k: int, n: int, width: int) -> None:
    """Rows of 384 or 128 floats spread a 128-trip walk over 8 sets: it still misses, but
    priced at 1/8 per line it stays below the flops; rows of 1040 floats spread it over all
    64 sets, which hold it; with k >= 256 the 8-lane schedule packs B into contiguous panels."""
    work = count_work(_matmul(128, k, n, width), "kernel")
    assert work.conflict_lines * CONFLICT_LINE_S <= FIXED.time(work.flops, work.bytes)
    if n == 1040 or k >= 256:
        assert work.conflict_lines == 0


def test_the_transposed_weight_is_priced_cheaper_only_where_the_walk_conflicts_or_b_is_packed() -> None:
    """At 8 and 16 lanes 128x256 by 256x1024 packs B into panels on every call (the 2-D block of
    two vectors, k = 256 in one packed block): no conflicts, but a copy phase (B read and the panels
    written) that adds its traffic time."""
    oracle = DefaultCostOracle(peaks=FIXED)
    assert count_work(_matmul(128, 256, 1024, 8), "kernel").copy_bytes == 2 * 256 * 1024 * 4
    assert count_work(_matmul(128, 256, 1024, 16), "kernel").copy_bytes == 2 * 256 * 1024 * 4
    for width, (m, k, n), cheaper in ((8, (128, 128, 1024), True), (8, (128, 256, 1024), True),
                                      (16, (128, 256, 1024), True), (8, (128, 128, 512), True),
                                      (8, (32, 128, 384), False), (16, (128, 128, 512), False)):
        plain = oracle.cost(_matmul(m, k, n, width), "kernel").time
        transposed = oracle.cost(_matmul(m, k, n, width, transpose_b=True), "kernel")
        assert count_work(_matmul(m, k, n, width, transpose_b=True), "kernel").conflict_lines == 0
        assert count_work(_matmul(m, k, n, width, transpose_b=True), "kernel").copy_bytes == 0
        assert (transposed.time < 0.98 * plain) == cheaper, (width, m, k, n)
        assert transposed.time == pytest.approx(FIXED.time(transposed.flops, transposed.bytes))


@pytest.mark.parametrize(("rows", "cols", "lines"), [(64, 1024, 64 * 1024 * 4 // 64), (64, 512, 64 * 512 * 4 // 64 / 2),
                                                     (64, 1040, 0), (8, 1024, 0)])
def test_a_column_reduction_with_a_4kib_row_stride_conflicts_too(rows: int, cols: int, lines: int) -> None:
    """The term looks at loads, not op names: a sum over the rows of a tensor whose rows are
    4 KiB (2 KiB) apart walks each vector of columns down the rows in its reduction loop
    over 1 (2) L1 sets, and every line it reads is fetched past L1; rows of 1040 floats
    spread over all 64 sets, and a walk of 8 rows fits in the 8 ways of one set."""
    x = graph.ConstantOp("x", tensor([rows, cols]))
    red = graph.ReduceOp(x.results[0], "sum", [0], False, tensor([cols]))
    module, _ = lower_kernel(kernel_of_ops([red]), 8)
    assert count_work(module, "kernel").conflict_lines == lines


_WIDE = """
func.func @main(%x: tensor<128x256xf32>) -> tensor<128x1024xf32> {
  %w = graph.constant "w" : tensor<256x1024xf32>
  %y = graph.matmul %x, %w : tensor<128x256xf32>, tensor<256x1024xf32> -> tensor<128x1024xf32>
  func.return %y : tensor<128x1024xf32>
}
"""


def _fused_with(width: int) -> str:
    import numpy as np
    from xdsl.parser import Parser

    from ziggurat.dialects import make_context
    from ziggurat.weights import WeightStore
    from ziggurat.transforms.graph.fuse_ops import FuseOpsPass
    from ziggurat.transforms.graph.weight_binding import bind_weights

    ctx = make_context()
    module = Parser(ctx, _WIDE).parse_module()
    bind_weights(module, WeightStore({"w": np.ones((256, 1024), np.float32)}))
    FuseOpsPass(cost_guided=True, peak_gflops=100, bandwidth_gbs=20, vector_width=width).apply(ctx, module)
    return str(module)


def test_cost_guided_fusion_prices_at_the_host_vector_width_by_default() -> None:
    """128x256 by 256x1024 is stored in panels of the width it is priced at (16 or 8 lanes):
    the default (vector-width=0) decides as the host's width does, as the loop stage schedules."""
    from ziggurat.target import Target
    from ziggurat.transforms.graph.fuse_ops import FuseOpsPass

    assert FuseOpsPass().vector_width == 0
    assert "tensor<64x256x16xf32>" in _fused_with(16) and "tensor<128x256x8xf32>" in _fused_with(8)
    assert _fused_with(0) == _fused_with(Target().vector_width)
