"""Features of scheduled loop-level kernels, checked against closed-form counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.parser import Parser

from ziggurat.autotune import FEATURE_NAMES, FeatureExtractor, LoopFeatures, extract_features
from ziggurat.transforms.costs.features import L1_BYTES, L2_BYTES
from ziggurat.compiler import parse_pipeline, run_passes
from ziggurat.dialects import make_context
from ziggurat.errors import TuningError


def tiled_matmul(m: int, n: int, k: int, tile: int, outer: str = "serial", j_kind: str = "serial") -> str:
    """C = A @ B with the i loop split by `tile` (i = io * tile + ii) and an init block."""
    mt = f"memref<{m}x{k}xf32>, %b: memref<{k}x{n}xf32>, %c: memref<{m}x{n}xf32>"
    return f"""
func.func @mm_0(%a: {mt}) {{
  loop.for %io = 0 to {m // tile} {outer} {{
    loop.for %ii = 0 to {tile} serial {{
      %t = arith.constant {tile} : index
      %base = arith.muli %io, %t : index
      %i = arith.addi %base, %ii : index
      loop.for %j = 0 to {n} {j_kind} {{
        loop.block "init" [S %vi = %i, S %vj = %j] {{
          %z = arith.constant 0.0 : f32
          loop.store %z, %c[%vi, %vj] : memref<{m}x{n}xf32>
        }}
        loop.for %kk = 0 to {k} serial {{
          loop.block "update" [S %vi = %i, S %vj = %j, R %vk = %kk] {{
            %x = loop.load %a[%vi, %vk] : memref<{m}x{k}xf32>
            %y = loop.load %b[%vk, %vj] : memref<{k}x{n}xf32>
            %p = arith.mulf %x, %y : f32
            %o = loop.load %c[%vi, %vj] : memref<{m}x{n}xf32>
            %s = arith.addf %o, %p : f32
            loop.store %s, %c[%vi, %vj] : memref<{m}x{n}xf32>
          }}
        }}
      }}
    }}
  }}
  func.return
}}
"""


def features(text: str, pipeline: str = "") -> dict[str, float]:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    run_passes(module, parse_pipeline(pipeline))
    return dict(zip(FEATURE_NAMES, extract_features(module, "mm_0")))


def lg(x: float) -> float:
    return math.log2(1 + x)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 48), st.integers(1, 48), st.integers(1, 48), st.sampled_from([1, 2, 4]))
def test_matmul_counts_match_closed_forms(mi, n, k, tile):
    m = mi * tile
    f = features(tiled_matmul(m, n, k, tile))
    work, out = m * n * k, m * n
    assert f["log_flops"] == pytest.approx(lg(2 * work))
    assert f["log_iterations"] == pytest.approx(lg(work + out))
    assert f["log_loads"] == pytest.approx(lg(3 * work))
    assert f["log_stores"] == pytest.approx(lg(work + out))
    unique = 4 * (m * k + k * n + m * n)  # affine bindings through the split: every element once
    assert f["log_bytes_unique"] == pytest.approx(lg(unique))
    assert f["log_reuse"] == pytest.approx(math.log2(4 * (4 * work + out) / unique))
    assert f["log_ws_over_l1"] == pytest.approx(math.log2(unique / L1_BYTES))
    assert f["log_ws_over_l2"] == pytest.approx(math.log2(unique / L2_BYTES))
    total = 4 * work + out  # trip-weighted accesses; innermost loop is k for the update, j for the init
    b_stride_one = n == 1
    assert f["stride0_frac"] == pytest.approx(2 * work / total)
    assert f["stride1_frac"] == pytest.approx((work * (1 + b_stride_one) + out) / total)
    assert f["strideN_frac"] == pytest.approx(work * (not b_stride_one) / total)
    assert f["innermost_reduction"] == 1.0 and f["innermost_serial"] == 1.0
    assert f["log_innermost_extent"] == pytest.approx(lg(k))
    assert 0 <= f["l1_fit_loops"] <= f["l2_fit_loops"] <= f["max_depth"] == 4
    assert (f["n_blocks"], f["n_reduction_blocks"], f["n_buffers"]) == (2, 1, 3)


def test_loop_kinds_and_cache_fit():
    m, n, k, tile = 256, 256, 256, 8
    base = features(tiled_matmul(m, n, k, tile))
    par = features(tiled_matmul(m, n, k, tile, outer="parallel"))
    assert base["n_serial"] == 4 and par["n_serial"] == 3 and par["n_parallel"] == 1
    assert par["outer_parallel"] == 1 and par["log_parallel_extent"] == pytest.approx(math.log2(m // tile))
    # whole working set 768 KiB: over L1, within L2; the innermost k loop alone touches about 1 KiB
    assert base["log_ws_over_l1"] > 0 > base["log_ws_over_l2"]
    assert base["l2_fit_loops"] == 4 and 1 <= base["l1_fit_loops"] < 4
    same = ["log_flops", "log_bytes_unique", "log_loads", "stride0_frac"]
    assert [base[x] for x in same] == [par[x] for x in same]


def test_hw_level_vector_widths():
    """After convert-loop-to-hw the vectorized loop steps by 16 with 16-lane loads and stores."""
    vec = """
func.func @mm_0(%x: memref<4x64xf32>, %y: memref<4x64xf32>) {
  loop.for %i = 0 to 4 serial {
    loop.for %j = 0 to 64 vectorized {
      loop.block "relu" [S %vi = %i, S %vj = %j] {
        %v = loop.load %x[%vi, %vj] : memref<4x64xf32>
        %c = arith.constant 0.0 : f32
        %r = arith.maximumf %v, %c : f32
        loop.store %r, %y[%vi, %vj] : memref<4x64xf32>
      }
    }
  }
  func.return
}
"""
    lo, hi = features(vec), features(vec, "convert-loop-to-hw{vector-width=16}")
    assert lo["max_vector_width"] == 1 and hi["max_vector_width"] == 16
    assert lo["n_vectorized"] == hi["n_vectorized"] == 1
    assert hi["vector_op_frac"] > 0.9 and lo["vector_op_frac"] == 0
    for key in ("log_flops", "log_loads", "log_stores", "log_bytes_unique", "stride1_frac"):
        assert hi[key] == pytest.approx(lo[key]), key  # same work, counted in lanes
    assert hi["log_innermost_extent"] == pytest.approx(lg(64 // 16))


def test_extraction_is_deterministic_and_fixed_length():
    module = Parser(make_context(), tiled_matmul(512, 512, 512, 16, outer="parallel")).parse_module()
    text = str(module)
    extractor = LoopFeatures()
    assert isinstance(extractor, FeatureExtractor)
    vec = extractor.extract(module)
    assert vec.shape == (len(FEATURE_NAMES),) and np.isfinite(vec).all()
    assert len(set(FEATURE_NAMES)) == len(FEATURE_NAMES)
    for _ in range(3):  # the same numbers every time, and the module is left as it was
        np.testing.assert_array_equal(extractor.extract(module), vec)
    assert str(module) == text
    np.testing.assert_array_equal(extractor.extract(Parser(make_context(), text).parse_module()), vec)
    many = extractor.extract_many([module, module])
    assert many.shape == (2, len(FEATURE_NAMES))
    np.testing.assert_array_equal(many, np.stack([vec, vec]))
    # a differently tiled kernel is told apart
    other = Parser(make_context(), tiled_matmul(512, 512, 512, 4, outer="parallel")).parse_module()
    assert not np.array_equal(extractor.extract(other), vec)


def test_missing_kernel_is_a_clear_error():
    module = Parser(make_context(), tiled_matmul(4, 4, 4, 1)).parse_module()
    with pytest.raises(TuningError, match="no kernel function @conv_0"):
        extract_features(module, "conv_0")
