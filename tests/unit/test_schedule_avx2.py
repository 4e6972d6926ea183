"""The 8-lane (AVX2, 16 ymm) register blocks of loop-default-schedule against numpy / onnxruntime.

The target is pinned to AVX2 features (`-mattr`), so these run the 8-lane
schedule on AVX-512 hosts too: rows x 2 vectors (transforms/schedule/plan.py)
and the zero-padded conv input (transforms/schedule/pad.py), with sizes the
blocks do not divide.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from tests.helpers import graph_model, run_with_schedule_ir, tensor
from tests.unit.test_lowering_properties import np_conv, rand
from tests.unit.test_schedule import kernel_name, lowered
from ziggurat.backends.llvm import LLVMOptions, jit_compile, translate_module
from ziggurat.compiler import parse_pipeline, run_passes
from ziggurat.dialects import graph
from ziggurat.lowering import pipelines
from ziggurat.target import Target

AVX2 = "+avx,+avx2,+fma,+f16c,+sse4.2"
pytestmark = pytest.mark.skipif(not Target.parse("llvm").has("avx2"), reason="this host cannot run AVX2 code")
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run8(model, inputs, threads):
    """Runs `model` for an 8-lane target; also returns the IR after loop-default-schedule."""
    target = Target.parse(f"llvm -mattr={AVX2} -num-cores={threads}")
    assert target.vector_width == 8
    return run_with_schedule_ir(model, inputs, target)


@SETTINGS
@given(m=st.one_of(st.integers(1, 26), st.sampled_from([12, 24, 36, 64])), n=st.one_of(st.integers(8, 70), st.sampled_from([16, 32, 48, 64])),
       k=st.sampled_from([1, 7, 256, 300, 512, 768, 1536]), threads=st.sampled_from([1, 2]))
def test_avx2_matmul_block_matches_numpy(m, n, k, threads):
    """Rows (6, 4, 3 or 2, dividing m) x 2 vectors when 16 divides n, else one vector; packed as one block
    for k = 512 and 768 (<= plan.ONE_BLOCK: no reload, the accumulators start at zero), k-blocked by
    256 and packed beyond (1536), or k = 256 as one packed block with >= 32 rows; otherwise the one-vector
    schedule (k-blocked from 768)."""
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    model = graph_model([(m, k), (k, n)], lambda b, x: b.insert(graph.MatmulOp(x[0], x[1], tensor((m, n)))).result)
    a, w = rand(rng, (m, k)), rand(rng, (k, n))
    (got,), ir = run8(model, [a, w], threads)
    assert '"matmul_store"' in ir
    two_vectors = n % 16 == 0 and any(m % u == 0 for u in (6, 4, 3, 2))
    assert (f"%i1p = 0 to {n // 8} step 2 serial" in ir) == two_vectors
    blocked = (k == 768 and not two_vectors) or k == 1536
    assert ('"matmul_load"' in ir) == blocked
    if two_vectors and k in (512, 768, 1536):
        assert '"matmul_pack"' in ir
    # k = 256 with >= 32 rows: one packed block, so no k-block loop, no init nest and no reload
    if k == 256:
        assert ('"matmul_pack"' in ir) == (two_vectors and m >= 32)
    np.testing.assert_allclose(got, a.astype(np.float64) @ w.astype(np.float64), rtol=1e-4, atol=1e-3)


@SETTINGS
@given(m=st.one_of(st.integers(2, 26), st.sampled_from([12, 36, 64])), n=st.one_of(st.integers(8, 70), st.sampled_from([16, 48])),
       k=st.sampled_from([1, 7, 256, 300, 512]), threads=st.sampled_from([1, 2]))
def test_avx2_matmul_with_a_slivers_matches_numpy(m, n, k, threads):
    """With `loop-default-schedule{pack-a=true}` (the A-sliver option of the default block) every matmul
    with a 2-D register block copies its rows x k-block of A into a local [depth, rows] sliver; other
    nests (m prime: no row block; n not a multiple of 16: the one-vector schedule) are left as they were."""
    rng = np.random.default_rng(m * 1000 + n * 10 + k + 1)
    model = graph_model([(m, k), (k, n)], lambda b, x: b.insert(graph.MatmulOp(x[0], x[1], tensor((m, n)))).result)
    a, w = rand(rng, (m, k)), rand(rng, (k, n))
    target = Target.parse(f"llvm -mattr={AVX2} -num-cores={threads}")
    mod = lowered(model)
    stage = pipelines.schedule_stage(3, target, options={"loop-default-schedule": {"pack-a": True}})
    assert "pack-a=true" in stage
    seen: dict[str, str] = {}
    run_passes(mod, parse_pipeline(stage),
               after_pass=lambda p, module, _: seen.setdefault("ir", str(module)) if p.name == "loop-default-schedule" else None)
    ir = seen["ir"]
    run_passes(mod, parse_pipeline(pipelines.hw_stage(3, target)))
    opts = LLVMOptions(num_threads=threads, cpu=target.llvm_cpu, features=target.llvm_features, export_all=True)
    llvm_module, info = translate_module(mod, opts)
    jm = jit_compile(llvm_module, opts, info)
    got = np.full((m, n), np.nan, np.float32)
    fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 3)(jm.address(kernel_name(mod)))
    fn(a.ctypes.data, w.ctypes.data, got.ctypes.data)
    rows = next((u for u in (6, 4, 3, 2) if m % u == 0), 0)
    assert ('"matmul_pack_a"' in ir) == (rows > 0 and n % 16 == 0)  # the 2-D block (plan_narrow) only
    if rows and n % 16 == 0:
        assert f"memref<{k}x{rows}xf32>" in ir  # k <= ONE_BLOCK: one block, the sliver is k deep
    np.testing.assert_allclose(got, a.astype(np.float64) @ w.astype(np.float64), rtol=1e-4, atol=1e-3)


@SETTINGS
@given(c=st.sampled_from([1, 3, 8, 16]), cout=st.sampled_from([2, 8, 16, 24]), h=st.integers(3, 13), w=st.integers(8, 35),
       k=st.sampled_from([1, 3, 5]), s=st.sampled_from([1, 2]), pads=st.lists(st.integers(0, 2), min_size=4, max_size=4),
       threads=st.sampled_from([1, 2]))
def test_avx2_conv_block_matches_onnxruntime(c, cout, h, w, k, s, pads, threads):
    """ONNX conv (O3: NCHW8c when the channels allow) with asymmetric padding: a padded layout transform
    (blocked) or the padded-copy input (NCHW)."""
    import onnxruntime as ort

    if h + pads[0] + pads[2] < k or w + pads[1] + pads[3] < k:
        return
    ho, wo = (h + pads[0] + pads[2] - k) // s + 1, (w + pads[1] + pads[3] - k) // s + 1
    model, x = _conv_model(c, cout, (h, w), k, 1, np.random.default_rng(c * 7 + cout * 11 + h * 13 + w), s, pads)
    (got,), ir = run8(model, [x], threads)
    # whether some read falls in the padding (a bottom or right pad a strided window never reaches
    # leaves every read in bounds: loop-simplify-index drops the clamps and nothing is copied)
    reached = pads[0] > 0 or pads[1] > 0 or (ho - 1) * s + k - 1 - pads[0] > h - 1 or (wo - 1) * s + k - 1 - pads[1] > w - 1
    if reached and k > 1:
        # blocked (NCHW8c): the transform into the region pads, the conv reads that as is (no copy);
        # NCHW: the conv kernel pads a copy of its input
        assert ("_pad_copy" in ir) != ("conv2d_nchwc" in ir)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@SETTINGS
@given(groups=st.sampled_from([1, 2]), cin=st.integers(1, 3), cout=st.integers(1, 5), k=st.integers(1, 3),
       s=st.integers(1, 2), p=st.integers(0, 2), h=st.integers(3, 9), w=st.integers(16, 40))
def test_avx2_nchw_conv_matches_numpy(groups, cin, cout, k, s, p, h, w):
    """Graph-level NCHW conv (L = output columns): 2 vectors along the columns when 16 divides them."""
    cin, cout = cin * groups, cout * groups
    if h + 2 * p < k:
        return
    rng = np.random.default_rng(cin * 100 + cout * 7 + h * 3 + w)
    x_shape, w_shape = (1, cin, h, w), (cout, cin // groups, k, k)
    x, wt = rand(rng, x_shape), rand(rng, w_shape)
    want = np_conv(x, wt, (s, s), [p] * 4, (1, 1), groups)
    model = graph_model(
        [x_shape, w_shape],
        lambda b, v: b.insert(graph.Conv2dOp(v[0], v[1], tensor(want.shape), (s, s), [p] * 4, (1, 1), groups)).result,
    )
    (got,), _ = run8(model, [x, wt], 1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_avx2_plans():
    """The planned blocks: 1024^3 matmul 4 rows x 2 vectors, B packed as one 1024-deep block (no k-block
    loop); the NCHW8c conv of 64 channels 4 rows x 2 output-channel blocks (the direct plan, which
    O3 gives it: winograd-conv takes 256 channels and up; skipped here all the same)."""
    from ziggurat.benchmarks.workloads import BUILDERS
    from ziggurat.lowering import pipelines

    for key, rows, block in (("matmul_1024", "0 to 1024 step 4 parallel", "memref<4x1032xf32>"),
                             ("conv3x3", "0 to 56 step 4 serial", "memref<8x16xf32>")):
        _, model, inputs, _ = BUILDERS[key]()
        seen = {}

        def grab(p, module, seconds):
            if p.name == "loop-parallelize-outer":
                seen["ir"] = str(module)

        direct = pipelines.graph_stage(3, f"llvm -mattr={AVX2}", skip=("winograd-conv",)) if key == "conv3x3" else None
        ziggurat.compile(model, target=f"llvm -mattr={AVX2} -num-cores=2", after_pass=grab, pipeline=direct)
        assert rows in seen["ir"] and block in seen["ir"], key
        if key == "matmul_1024":
            assert "memref<128x1024x8xf32>" in seen["ir"] and "%r0o" not in seen["ir"]


@SETTINGS
@given(m=st.integers(1, 13), n=st.integers(1, 13), k=st.sampled_from([8, 40, 100]), threads=st.sampled_from([1, 2]))
@example(m=4, n=2, k=100, threads=1).via("the full 4 x 2 tile")
@example(m=13, n=13, k=40, threads=1).via("nothing to block by: one accumulator")
def test_avx2_dot_tile_matches_numpy(m, n, k, threads):
    """Dense with a transposed weight: the dot-product tile keeps at most 4 x 2 accumulators on 8 lanes,
    and there is a tile (more than one accumulator) whenever an output dimension has a factor 2, 3 or 4
    to block it by."""
    rng = np.random.default_rng(m * 100 + n * 10 + k)
    model = graph_model([(m, k), (n, k)],
                        lambda b, x: b.insert(graph.MatmulOp(x[0], x[1], tensor((m, n)), transpose_b=True)).result)
    a, w = rand(rng, (m, k)), rand(rng, (n, k))
    (got,), ir = run8(model, [a, w], threads)
    accumulators = ir.count('loop.block "matmul" [')
    assert 1 <= accumulators <= 8
    blockable = any(d % u == 0 for d in (m, n) for u in (2, 3))
    assert (accumulators > 1) == blockable, (m, n, accumulators)
    if (m, n) == (4, 2):
        assert accumulators == 8  # the whole 4 x 2 tile
    np.testing.assert_allclose(got, a.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4)


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data())
def test_pad_halo_boxes_cover_the_border_once(shape, data):
    """schedule_pad zeroes only the halo: its boxes cover every padded point outside the interior exactly once."""
    from ziggurat.transforms.schedule.pad import halo_boxes

    dims = data.draw(st.sets(st.integers(0, len(shape) - 1)))
    pads = {d: (data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for d in dims}
    padded = [s + sum(pads.get(d, (0, 0))) for d, s in enumerate(shape)]
    count = np.zeros(padded, np.int64)
    for box in halo_boxes(shape, pads):
        count[tuple(slice(lb, ub) for lb, ub in box)] += 1
    interior = tuple(slice(pads.get(d, (0, 0))[0], pads.get(d, (0, 0))[0] + s) for d, s in enumerate(shape))
    count[interior] += 1
    assert (count == 1).all()


def _conv_model(c: int, cout: int, hw: tuple[int, int], k: int, group: int, rng, s: int = 1,
                pads: list[int] | None = None) -> tuple:
    """An ONNX Conv of a random (cout, c / group, k, k) weight over a (1, c, h, w) input (stride `s`, `pads`
    or 'same'), and a random input for it."""
    (h, w), pads = hw, pads if pads is not None else [k // 2] * 4
    ho, wo = (h + pads[0] + pads[2] - k) // s + 1, (w + pads[1] + pads[3] - k) // s + 1
    wt = rand(rng, (cout, c // group, k, k))
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=pads, kernel_shape=[k, k], strides=[s, s], group=group)
    g = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, c, h, w))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, cout, ho, wo))],
                          [numpy_helper.from_array(wt, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, rand(rng, (1, c, h, w))


def _default_tile(model, kind: str) -> tuple[list, int]:
    """(tile, nvec) of the 8-lane default plan of the one kernel of `model` whose name holds `kind`
    (`template.default_knobs`: what the default schedule and the tuner's default point build)."""
    from ziggurat.autotune.space import SearchSpace
    from ziggurat.autotune.template import default_knobs
    from ziggurat.autotune.tuner import extract_tasks

    found = [(n, t) for n, t, _ in extract_tasks(model, target=f"llvm -mattr={AVX2} -num-cores=1") if kind in n]
    assert len(found) == 1
    name, text = found[0]
    (knobs,) = default_knobs(next(iter(SearchSpace(text, name).module.ops)), 8)
    return [list(t) for t in knobs["tile"]], knobs["nvec"]


@pytest.mark.parametrize("c,cout,hw,k,group,tile", [
    (64, 64, 14, 1, 1, [[3, 7]]),           # 2 rows x 2 channel blocks would be 4 accumulators: 7 columns
    (64, 64, 10, 1, 1, [[3, 10]]),          # the same on a 10x10 map: 10 columns
    (64, 64, 14, 3, 8, [[3, 7]]),           # the same for a grouped conv
    (64, 24, 56, 1, 1, [[1, 3], [3, 4]]),   # 3 channel blocks (odd) x 4 columns
    (64, 40, 28, 1, 1, [[1, 5], [3, 2]]),   # 5 channel blocks x 2 columns
    (64, 104, 56, 1, 1, [[3, 8]]),          # 13 blocks (prime): the one-vector block along the columns
    (64, 64, 7, 5, 64, [[3, 7]]),           # depthwise over a 7x7 map: 7 columns (none before)
    (64, 64, 56, 1, 1, [[1, 2], [3, 4]]),   # 2 channel blocks x 4 columns (not 4 rows)
])
def test_avx2_conv_plans(c, cout, hw, k, group, tile):
    """The 8-lane plans of NCHW8c convs (`plan.default_plan` through the template's `default_knobs`, as
    the default schedule and the tuner's default point see them), each from what whole-model tuning of
    regnet_y_small and mobilenetv3_large found on a Zen 3 core; the numbers match onnxruntime."""
    import onnxruntime as ort

    model, x = _conv_model(c, cout, (hw, hw), k, group, np.random.default_rng(c + cout + hw))
    assert _default_tile(model, "conv2d_nchwc") == (tile, 1)
    (got,), _ = run8(model, [x], 1)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_avx2_batched_matmul_blocks_rows_not_heads():
    """Attention's Q K^T (heads x 20 x 16 by heads x 16 x 20: 20 columns, one vector wide): both operands
    walk the heads, so 2 heads x 4 rows (the conv's channel-block pairing) shares no broadcast; the plan
    is 10 rows of one vector instead (whisper's 500 x 500 products 2.0x faster so on Zen 3)."""
    rng = np.random.default_rng(7)
    a, b = rand(rng, (1, 4, 20, 16)), rand(rng, (1, 4, 16, 20))
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    g = helper.make_graph([node], "qk", [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape),
                                         helper.make_tensor_value_info("b", TensorProto.FLOAT, b.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 4, 20, 20))])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    assert _default_tile(model, "matmul") == ([[2, 10]], 1)
    (got,), _ = run8(model, [a, b], 1)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
