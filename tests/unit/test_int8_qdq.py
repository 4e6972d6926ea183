"""QDQ (QuantizeLinear / DequantizeLinear) models, as onnxruntime's quantize_static writes them:
the weights' dequantization folds at compile time, the activations' quantize-dequantize
epilogues are vector code (hw.vconvert), at 8 lanes and at the host's width, and with VNNI a
QDQ MatMul is an int8 GEMM; results match onnxruntime's literal QDQ semantics (graph
optimizations off) to one quantization step."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx import numpy_helper as nh

import ziggurat
from ziggurat.target import Target

HOST2 = f"llvm -mcpu={Target.parse('llvm').llvm_cpu} -num-cores=2"  # the host's CPU, 2 threads
TARGETS = sorted({"llvm -mcpu=haswell -num-cores=1", HOST2})
if Target.parse("llvm").int8_dot != Target.parse(f"llvm -mcpu={Target.parse('llvm').llvm_cpu}").int8_dot:
    # the host's features are not its -mcpu's (an AMX Xeon whose hidden CPUID model LLVM takes for rocketlake)
    TARGETS.append("llvm -num-cores=2")
Y_SCALE = 0.05


def qdq_matmul(m: int, k: int, n: int, seed: int = 0):
    """x (f32) -> Q/DQ (uint8, zero point 128) -> MatMul with a per-column int8 weight -> Q/DQ."""
    rng = np.random.default_rng(seed)
    inits = [nh.from_array(rng.integers(-127, 128, (k, n)).astype(np.int8), "wq"),
             nh.from_array((rng.random(n) * 0.01 + 0.001).astype(np.float32), "ws"),
             nh.from_array(np.zeros(n, np.int8), "wz"), nh.from_array(np.array(0.05, np.float32), "xs"),
             nh.from_array(np.array(128, np.uint8), "xz"), nh.from_array(np.array(Y_SCALE, np.float32), "ys"),
             nh.from_array(np.array(120, np.uint8), "yz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["y"], name="mm"),
             helper.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["out"])]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [m, n])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def literal(model, x: np.ndarray) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def check(got: np.ndarray, ref: np.ndarray) -> None:
    """Equal but for a few elements one quantization step apart (a sum rounded at a tie)."""
    step = np.abs(got - ref)
    assert step.max() <= Y_SCALE * 1.0001
    assert (step > 0).mean() <= 0.01


@pytest.mark.parametrize("target", TARGETS)
def test_qdq_matmul_is_vectorized_and_matches_onnxruntime(target):
    model = qdq_matmul(32, 64, 48)
    seen: list[str] = []

    def after(p, module, seconds):
        if p.name == "convert-loop-to-hw":
            seen.extend(str(a) for op in module.walk() if (a := op.attributes.get("hw.not_vectorized")) is not None)

    m = ziggurat.compile(model, target=target, after_pass=after)
    assert seen == []  # every vectorized loop stayed vector code, the Q/DQ epilogues included
    ir = m.info["llvm_ir"]
    assert "llvm.roundeven.v" in ir and "llvm.roundeven.f32" not in ir  # the Q/DQ epilogues are vector code
    # with AMX the MatMul is an int8 GEMM on tdpbusd, with VNNI on vpdpbusd (convert_qdq_matmul.py), else a float one
    dot = Target.parse(target).int8_dot
    assert ("llvm.x86.avx512.vpdpbusd" in ir) == (dot == "vnni")
    assert ("llvm.x86.tdpbusd" in ir) == (dot == "amx")
    x = (np.random.default_rng(1).standard_normal((32, 64)) * 3).astype(np.float32)
    check(m(x)[0], literal(model, x))


def seven_bit(model):
    """`model` with its int8 weight halved into [-64, 63] (onnxruntime's reduce_range)."""
    w = nh.to_array(model.graph.initializer[0])
    model.graph.initializer[0].CopyFrom(nh.from_array((w // 2).astype(np.int8), "wq"))
    return model


@pytest.mark.parametrize("cpu,instruction", [("haswell", "vpmaddubsw"), ("cascadelake", "vpdpbusd")])
def test_int8_gemm_instructions_in_the_assembly(cpu, instruction):
    """AVX2: vpmaddubsw + vpmaddwd for weights that cannot saturate int16 pairs; VNNI: vpdpbusd.
    Run where the host executes the target's instructions."""
    model = seven_bit(qdq_matmul(32, 64, 48))
    target = f"llvm -mcpu={cpu} -num-cores=1"
    m = ziggurat.compile(model, target=target, cache=False)
    asm = m._keepalive.assembly()
    assert instruction in asm and ("vpmaddwd" in asm) == (cpu == "haswell")
    if Target.parse("llvm").has("avx512vnni" if cpu == "cascadelake" else "avx2"):
        x = (np.random.default_rng(1).standard_normal((32, 64)) * 3).astype(np.float32)
        check(m(x)[0], literal(model, x))


def test_int8_gemm_runs_in_parallel_with_its_accumulators_in_registers():
    """At 2 threads the qgemm's column panels run in an outlined OpenMP function whose loads and stores
    carry alias scopes (without them every k step went through memory: 3.7x slower than 1 thread)."""
    model = seven_bit(qdq_matmul(64, 256, 512))  # 7-bit: an int8 GEMM on AVX2 hosts too
    m = ziggurat.compile(model, target=HOST2, cache=False)
    ir = m.info["llvm_ir"]
    assert "qgemm_0.omp" in ir
    assert "!alias.scope" in ir and "!noalias" in ir
    x = (np.random.default_rng(4).standard_normal((64, 256)) * 3).astype(np.float32)
    check(m(x)[0], literal(model, x))


@pytest.mark.parametrize("m,k,n", [(16, 32, 16), (5, 70, 33), (64, 384, 96)])
def test_avx2_runs_full_range_weights_on_vpmaddwd_exactly(m, k, n):
    """Full-range int8 weights could saturate vpmaddubsw's int16 pairs (where onnxruntime's AVX2
    kernels do): on AVX2 the MatMul is the wide int8 GEMM instead, both operands widened to int16,
    `vpmaddwd` and no `vpmaddubsw`, exact (the literal QDQ result but for ties); the weight's
    int16 panel folds to a constant (it was once repacked on every call)."""
    from ziggurat.dialects.graph_quant import QGemmOp
    from ziggurat.frontends.onnx import import_onnx

    model = qdq_matmul(m, k, n)
    gemms = [op for op in import_onnx(model, int8_dot="avx2").module.walk() if isinstance(op, QGemmOp)]
    assert [op.group for op in gemms] == [2]  # graph.qgemm's wide form
    row_lines = gemms[0].b.type.get_shape()[-1] * 2 // 64  # int16 lanes, in 64-byte lines
    assert row_lines % 2 == 1  # an odd number: the k steps of a column panel do not share one L1 set
    packed: list[str] = []

    def after(p, module, seconds):
        if p.name == "fold-constants":
            packed[:] = [op.operands[1].owner.name for op in module.walk() if isinstance(op, QGemmOp)]

    c = ziggurat.compile(model, target="llvm -mcpu=haswell -num-cores=1", cache=False, after_pass=after)
    assert packed == ["graph.constant"]  # the int16 weight panel is packed once, at compile time
    asm = c._keepalive.assembly()
    assert "vpmaddwd" in asm and "vpmaddubsw" not in asm
    if Target.parse("llvm").has("avx2"):
        x = (np.random.default_rng(3).standard_normal((m, k)) * 3).astype(np.float32)
        check(c(x)[0], literal(model, x))


@pytest.mark.parametrize("zero_point", [0, 5])
def test_wide_gemm_takes_int8_activations_unshifted(zero_point):
    """The wide form holds int8 activations in int16 as they are: no shift to uint8 and no
    zero-point correction it would bring, so an int8 activation costs the same graph as a uint8 one;
    the result is the literal QDQ one."""
    from ziggurat.frontends.onnx import import_onnx

    unsigned, signed = qdq_matmul(16, 64, 32), qdq_matmul(16, 64, 32)
    signed.graph.initializer[4].CopyFrom(nh.from_array(np.array(zero_point, np.int8), "xz"))
    ops = [sum(1 for _ in import_onnx(mdl, int8_dot="avx2").module.walk()) for mdl in (unsigned, signed)]
    assert ops[1] <= ops[0]
    if Target.parse("llvm").has("avx2"):
        c = ziggurat.compile(signed, target="llvm -mcpu=haswell -num-cores=1", cache=False)
        x = (np.random.default_rng(5).standard_normal((16, 64)) * 3).astype(np.float32)
        check(c(x)[0], literal(signed, x))


@settings(max_examples=60, deadline=None)
@given(steps=st.integers(1, 2000), step_bytes=st.sampled_from([64, 128]), blocks=st.integers(1, 3000),
       block_bytes=st.integers(64, 8192))
def test_k_blocks_and_row_parts_divide_and_fit(steps, step_bytes, blocks, block_bytes):
    """A k block divides the k groups and its B panel fits `B_PANEL_BYTES` (none where the whole
    panel fits); a part of A divides the row blocks and fits `A_PART_BYTES` (none for A under
    `A_PART_MIN_BYTES`, or where one part would be all of A)."""
    from ziggurat.lowering import qgemm as qg

    kc = qg._k_block(steps, step_bytes)
    if steps * step_bytes <= qg.B_PANEL_BYTES:
        assert kc == 0
    else:
        assert 0 < kc < steps and steps % kc == 0
        assert kc * step_bytes <= qg.B_PANEL_BYTES or kc == 1
    part = qg._row_part(blocks, block_bytes)
    if blocks * block_bytes < qg.A_PART_MIN_BYTES:
        assert part == 0
    elif part:
        assert blocks % part == 0 and part < blocks
        assert part * block_bytes <= qg.A_PART_BYTES or part == 1


@pytest.mark.parametrize("threads", [1, 2])
def test_large_int8_gemms_run_in_k_blocks_and_parts_of_a(monkeypatch, threads):
    """A GEMM whose B panel outgrows L1 runs its k groups in blocks, one whose A outgrows L2 in
    parts of rows that each cross all column panels (thresholds shrunk here so that a small GEMM
    takes both); the k blocks stay serial and the result is the literal QDQ one."""
    from ziggurat.dialects import loop
    from ziggurat.lowering import qgemm as qg

    monkeypatch.setattr(qg, "B_PANEL_BYTES", 1024)  # 16 k groups of one 64-byte panel step
    monkeypatch.setattr(qg, "A_PART_MIN_BYTES", 8 << 10)
    monkeypatch.setattr(qg, "A_PART_BYTES", 2 << 10)
    model = qdq_matmul(64, 96, 48)
    nests: list[list[tuple[int, str]]] = []

    def after(p, module, seconds):
        if p.name == "loop-default-schedule":
            for dot in module.walk():
                if dot.name == "x86vec.maddwd_dot":  # the tensorized step of the wide int8 GEMM
                    loops, op = [], dot.parent_op()
                    while op is not None and isinstance(op, loop.ForOp):
                        loops.insert(0, (op.trip_count, op.kind.data))
                        op = op.parent_op()
                    nests.append(loops)

    c = ziggurat.compile(model, target=f"llvm -mcpu=haswell -num-cores={threads}", cache=False, after_pass=after)
    assert len(nests) == 1
    trips = [t for t, _ in nests[0]]
    # the parts of A (8 of 2 row blocks: 1.5 of 2 KB), the column panels (48 / 16), the k blocks
    # (48 pairs / 16), the row blocks of the part (2 of 4 rows), the k groups of the block, then
    # the register block
    assert trips[:5] == [8, 3, 3, 2, 16], nests[0]
    assert nests[0][2][1] == "serial"  # the k blocks: a reduction
    assert nests[0][0][1] == "parallel"  # the parts of A (one thread runs it serially)
    if Target.parse("llvm").has("avx2"):
        x = (np.random.default_rng(5).standard_normal((64, 96)) * 3).astype(np.float32)
        check(c(x)[0], literal(model, x))


@settings(max_examples=40, deadline=None)
@given(w=st.lists(st.integers(-128, 127), min_size=2, max_size=12))
def test_no_pair_saturates_is_exactly_when_vpmaddubsw_is_exact(w):
    """Against uint8 activations: the worst pair sums (255 where the weight has the sign sought)
    fit int16 exactly when `no_pair_saturates` says so."""
    from ziggurat.lowering.qgemm import no_pair_saturates

    b = np.array(w + [0] * (len(w) % 2), np.int64).reshape(-1, 2)
    worst = np.concatenate([(255 * np.maximum(b, 0)).sum(1), (255 * np.minimum(b, 0)).sum(1)])
    fits = bool(np.all((worst >= -32768) & (worst <= 32767)))
    assert no_pair_saturates(np.array(w, np.int8).reshape(-1, 1)) == fits


@settings(max_examples=6, deadline=None)
@given(m=st.integers(1, 40), k=st.integers(1, 70), n=st.integers(1, 70), seed=st.integers(0, 3))
def test_random_qdq_matmuls_match_onnxruntime(m, k, n, seed):
    model = qdq_matmul(m, k, n, seed)
    if seed % 2:
        model = seven_bit(model)  # the AVX2 int8 GEMM at 8 lanes
    x = (np.random.default_rng(seed).standard_normal((m, k)) * 3).astype(np.float32)
    for target in TARGETS:
        check(ziggurat.compile(model, target=target)(x)[0], literal(model, x))


def test_an_activation_times_activation_matmul_stays_float():
    """Both operands dequantized at run time (attention's Q K^T): not the weight pattern, a float MatMul."""
    model = qdq_matmul(16, 16, 16)
    g = model.graph
    g.node[2].input[0] = "xq"  # w := DQ(xq): a run-time tensor
    g.node[2].input[1], g.node[2].input[2] = "xs", "xz"
    g.node[3].input[1] = "wd"
    del g.node[2].attribute[:]
    x = (np.random.default_rng(0).standard_normal((16, 16)) * 3).astype(np.float32)
    m = ziggurat.compile(model, target=HOST2)
    assert "vpdpbusd" not in m.info["llvm_ir"]
    check(m(x)[0], literal(model, x))


def qdq_conv_bn(c: int = 16, hw: int = 10):
    """x -> Q/DQ -> Conv (per-output-channel int8 weight) -> Q/DQ -> BatchNorm (parameters
    dequantized, as quantize_static leaves them) -> Relu -> Q/DQ: BatchNorm cannot fold into
    the conv behind the Q/DQ pair."""
    rng = np.random.default_rng(0)
    params = [nh.from_array((rng.random(c) + 0.5).astype(np.float32), n) for n in ("bn_s", "bn_b", "bn_m", "bn_v")]
    inits = [nh.from_array(rng.integers(-127, 128, (c, c, 3, 3)).astype(np.int8), "wq"),
             nh.from_array((rng.random(c) * 0.01 + 0.001).astype(np.float32), "ws"),
             nh.from_array(np.zeros(c, np.int8), "wz"), nh.from_array(np.array(0.05, np.float32), "xs"),
             nh.from_array(np.array(128, np.uint8), "xz"), nh.from_array(np.array(Y_SCALE, np.float32), "ys"),
             nh.from_array(np.array(120, np.uint8), "yz"), *params]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("Conv", ["xd", "wd"], ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["yd"]),
             helper.make_node("BatchNormalization", ["yd", "bn_s", "bn_b", "bn_m", "bn_v"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["rq"]),
             helper.make_node("DequantizeLinear", ["rq", "ys", "yz"], ["out"])]
    g = helper.make_graph(nodes, "qdq_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, c, hw, hw])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("target", TARGETS)
def test_qdq_conv_stays_in_the_blocked_layout_and_matches_onnxruntime(target):
    """The Q/DQ casts (compare/where once simplify-graph removes an exact cast pair) and the
    BatchNorm (a per-channel multiply-add) stay in convert-layout's blocked region: the only
    layout transforms are the model's boundaries."""
    model = qdq_conv_bn()
    transforms: list[int] = []

    def after(p, module, seconds):
        if p.name == "convert-layout":
            transforms.append(sum(op.name == "graph.layout_transform" for op in module.walk()))

    m = ziggurat.compile(model, target=target, after_pass=after)
    assert transforms == [2]
    x = (np.random.default_rng(2).standard_normal((1, 16, 10, 10)) * 3).astype(np.float32)
    x[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    got, ref = m(x)[0], literal(model, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    check(np.nan_to_num(got), np.nan_to_num(ref))


@pytest.mark.parametrize("mover, scale2, pairs", [("Transpose", 0.05, 1), ("Transpose", 0.07, 2), ("Relu", 0.05, 2)])
def test_a_requantized_data_movement_drops_its_qdq_pair(mover, scale2, pairs):
    """Q/DQ -> Transpose -> Q/DQ with the same per-tensor parameters: the values stay on the grid, so
    the second pair goes (as onnxruntime's QDQ optimizer drops it); another scale, or an op that
    computes (Relu), keeps it. The result matches onnxruntime's literal semantics either way."""
    from ziggurat.frontends.onnx import import_onnx

    inits = [nh.from_array(np.array(0.05, np.float32), "s1"), nh.from_array(np.array(scale2, np.float32), "s2"),
             nh.from_array(np.array(128, np.uint8), "z")]
    extra = {"perm": [1, 0]} if mover == "Transpose" else {}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s1", "z"], ["q1"]),
             helper.make_node("DequantizeLinear", ["q1", "s1", "z"], ["d1"]),
             helper.make_node(mover, ["d1"], ["m"], **extra),
             helper.make_node("QuantizeLinear", ["m", "s2", "z"], ["q2"]),
             helper.make_node("DequantizeLinear", ["q2", "s2", "z"], ["out"])]
    shape = [6, 6]
    g = helper.make_graph(nodes, "grid", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, shape)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    assert sum(op.name == "graph.round" for op in import_onnx(model).module.walk()) == pairs
    x = (np.random.default_rng(0).standard_normal(shape) * 5).astype(np.float32)
    np.testing.assert_array_equal(ziggurat.compile(model)(x)[0], literal(model, x))


def qdq_pointwise_conv(n: int, ci: int, co: int, hw: int, seed: int = 0, seven: bool = False):
    """x (f32) -> Q/DQ (uint8) -> 1x1 Conv with a per-output-channel int8 weight and a float bias -> Q/DQ."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, (co, ci, 1, 1))
    inits = [nh.from_array((w // 2 if seven else w).astype(np.int8), "wq"),
             nh.from_array((rng.random(co) * 0.01 + 0.001).astype(np.float32), "ws"),
             nh.from_array(np.zeros(co, np.int8), "wz"), nh.from_array(np.array(0.05, np.float32), "xs"),
             nh.from_array(np.array(128, np.uint8), "xz"), nh.from_array(np.array(Y_SCALE, np.float32), "ys"),
             nh.from_array(np.array(120, np.uint8), "yz"), nh.from_array(rng.standard_normal(co).astype(np.float32), "b")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("Conv", ["xd", "wd", "b"], ["y"], kernel_shape=[1, 1]),
             helper.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["out"])]
    g = helper.make_graph(nodes, "qdq_pw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, ci, hw, hw])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [n, co, hw, hw])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


@settings(max_examples=6, deadline=None)
@given(n=st.integers(1, 2), ci=st.integers(1, 90), co=st.integers(1, 90), hw=st.integers(1, 6), seed=st.integers(0, 3))
@example(n=1, ci=80, co=72, hw=3, seed=0)
@example(n=2, ci=64, co=90, hw=2, seed=1)
def test_qdq_pointwise_conv_is_an_int8_gemm_and_matches_onnxruntime(n, ci, co, hw, seed):
    """A 1x1 QDQ Conv with 64 or more channels on each side runs as the int8 GEMM on the activations laid
    out as rows (per-channel weight scales per column), on VNNI and on AVX2 (7-bit weights on
    vpmaddubsw, full-range ones on the wide int8 GEMM); results match the literal QDQ semantics."""
    from ziggurat.frontends.onnx.convert_qdq_matmul import MIN_POINTWISE_CHANNELS
    from ziggurat.lowering.qgemm import no_pair_saturates

    model = qdq_pointwise_conv(n, ci, co, hw, seed, seven=bool(seed % 2))
    x = (np.random.default_rng(seed).standard_normal((n, ci, hw, hw)) * 3).astype(np.float32)
    ref = literal(model, x)
    wt = nh.to_array(model.graph.initializer[0]).reshape(co, ci).T
    for target in TARGETS:
        m = ziggurat.compile(model, target=target)
        dot = Target.parse(target).int8_dot
        int8 = min(ci, co) >= MIN_POINTWISE_CHANNELS and dot in ("amx", "vnni", "avx2")
        assert ("qgemm" in m.info["llvm_ir"]) == int8, target
        if int8 and dot == "avx2":  # the 8-bit form where no pair saturates, else the wide (int16) one
            assert ("pmadd.ub.sw" in m.info["llvm_ir"]) == no_pair_saturates(wt), target
        check(m(x)[0], ref)


def qdq_gemm(m: int, k: int, n: int, trans_b: bool, seed: int = 0, seven: bool = False):
    """x (f32) -> Q/DQ (uint8) -> Gemm with a per-output-column int8 weight (stored [N, K] with
    transB, as a classifier head, else [K, N]) and a dequantized int32 bias -> Q/DQ."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, (n, k) if trans_b else (k, n))
    ws = (rng.random(n) * 0.01 + 0.001).astype(np.float32)
    inits = [nh.from_array((w // 2 if seven else w).astype(np.int8), "wq"), nh.from_array(ws, "ws"),
             nh.from_array(np.zeros(n, np.int8), "wz"), nh.from_array(np.array(0.05, np.float32), "xs"),
             nh.from_array(np.array(128, np.uint8), "xz"), nh.from_array(np.array(Y_SCALE, np.float32), "ys"),
             nh.from_array(np.array(120, np.uint8), "yz"),
             nh.from_array(rng.integers(-2000, 2000, n).astype(np.int32), "bq"),
             nh.from_array(ws * np.float32(0.05), "bs"), nh.from_array(np.zeros(n, np.int32), "bz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0 if trans_b else 1),
             helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["b"], axis=0),
             helper.make_node("Gemm", ["xd", "wd", "b"], ["y"], transB=int(trans_b)),
             helper.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["out"])]
    g = helper.make_graph(nodes, "qdq_gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [m, n])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


@settings(max_examples=6, deadline=None)
@given(m=st.integers(1, 9), k=st.integers(1, 200), n=st.integers(1, 70), trans_b=st.booleans(),
       seed=st.integers(0, 3))
@example(m=1, k=160, n=50, trans_b=True, seed=0)
@example(m=3, k=64, n=33, trans_b=False, seed=1)
def test_qdq_gemm_is_an_int8_gemm_and_matches_onnxruntime(m, k, n, trans_b, seed):
    """A QDQ Gemm (a classifier head: batch rows, transB, a dequantized int32 bias) runs as the int8 GEMM
    on VNNI and AMX and on AVX2 (7-bit weights: vpmaddubsw, full-range: the wide form on vpmaddwd);
    results match the literal QDQ semantics."""
    from ziggurat.lowering.qgemm import no_pair_saturates

    model = qdq_gemm(m, k, n, trans_b, seed, seven=bool(seed % 2))
    x = (np.random.default_rng(seed).standard_normal((m, k)) * 3).astype(np.float32)
    ref = literal(model, x)
    w = nh.to_array(model.graph.initializer[0])
    for target in TARGETS:
        compiled = ziggurat.compile(model, target=target)
        dot = Target.parse(target).int8_dot
        assert "qgemm" in compiled.info["llvm_ir"], target  # AVX2: vpmaddubsw (7-bit) or vpmaddwd
        if dot == "avx2":
            assert ("pmadd.ub.sw" in compiled.info["llvm_ir"]) == no_pair_saturates(w.T if trans_b else w), target
        check(compiled(x)[0], ref)
