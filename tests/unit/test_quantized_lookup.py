"""quantized-lookup: the elementwise chains of a quantized value (SiLU, GELU with their QDQ steps)
become one table lookup (`graph.lookup`), gathered in vector lanes (`hw.vlookup`), and the model
still matches onnxruntime's literal QDQ semantics; the lookup clamps any index into its table."""

from __future__ import annotations

import re
import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx import numpy_helper as nh
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

import ziggurat
from ziggurat.dialects import graph, make_context
from ziggurat.frontends.onnx import ImportedModel
from ziggurat.target import Target
from ziggurat.transforms.graph.graph_reference import evaluate
from ziggurat.weights import WeightStore

SHAPE = [1, 8, 6, 32]
TARGETS = sorted({"llvm -mcpu=haswell -num-cores=1", f"llvm -mcpu={Target.parse('llvm').llvm_cpu} -num-cores=2"})


def _qdq(name: str, x: str, s: str, z: str) -> list:
    return [helper.make_node("QuantizeLinear", [x, s, z], [f"{name}_q"]),
            helper.make_node("DequantizeLinear", [f"{name}_q", s, z], [name])]


def activation_model(kind: str, scales, zero_points, signed: bool = False):
    """x -> Q/DQ -> SiLU or GELU (erf form), each node's output quantized and dequantized."""
    s0, s1, s2 = scales
    zt = np.int8 if signed else np.uint8
    z0, z1, z2 = (zt(z) for z in zero_points)
    inits = [nh.from_array(np.array(v, np.float32), n) for n, v in
             (("s0", s0), ("s1", s1), ("s2", s2), ("half", 0.5), ("one", 1.0), ("rt2", np.sqrt(2.0)))]
    inits += [nh.from_array(np.array(z0), "z0"), nh.from_array(np.array(z1), "z1"), nh.from_array(np.array(z2), "z2")]
    nodes = _qdq("xd", "x", "s0", "z0")
    if kind == "silu":
        nodes += [helper.make_node("Sigmoid", ["xd"], ["sg"]), *_qdq("sgd", "sg", "s1", "z1"),
                  helper.make_node("Mul", ["xd", "sgd"], ["m"]), *_qdq("y", "m", "s2", "z2")]
    else:
        nodes += [helper.make_node("Div", ["xd", "rt2"], ["dv"]), helper.make_node("Erf", ["dv"], ["ef"]),
                  *_qdq("efd", "ef", "s1", "z1"), helper.make_node("Add", ["efd", "one"], ["ad"]),
                  helper.make_node("Mul", ["xd", "ad"], ["m"]), helper.make_node("Mul", ["m", "half"], ["m2"]),
                  *_qdq("y", "m2", "s2", "z2")]
    g = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model


def literal(model, x: np.ndarray) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def compiled(model, target: str = "llvm -num-cores=1", pipeline: str | None = None):
    found: dict[str, int] = {}

    def after(p, module, seconds):
        if p.name == "quantized-lookup":
            found["lookups"] = sum(isinstance(op, graph.LookupOp) for op in module.walk())
        if p.name == "convert-loop-to-hw":  # loops around a table read that stayed scalar
            found["not_vectorized"] = sum("hw.not_vectorized" in op.attributes for op in module.walk()
                                          if any(o.name == "arith.index_cast" for o in op.walk()))

    m = ziggurat.compile(model, target=target, after_pass=after, pipeline=pipeline)
    return m, found


def within_a_step(got: np.ndarray, ref: np.ndarray, step: float) -> None:
    """Equal but for rare elements one quantization step apart (an activation's last bit at a tie)."""
    diff = np.abs(got - ref)
    assert diff.max() <= step * 1.0001
    assert (diff > 0).mean() <= 0.01


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind,signed", [("silu", False), ("gelu", False), ("gelu", True)])
def test_activation_chain_is_one_vector_lookup(kind, signed, target):
    zps = (0, 0, 0) if signed else (128, 0, 10)
    model = activation_model(kind, (0.05, 1 / 255 if kind == "silu" else 2 / 255, 0.03), zps, signed)
    m, found = compiled(model, target)
    assert found == {"lookups": 1, "not_vectorized": 0}
    assert "llvm.masked.gather" in m.info["llvm_ir"]  # the table is read with one gather per vector
    x = (np.random.default_rng(0).standard_normal(SHAPE) * 4).astype(np.float32)
    within_a_step(m(x)[0], literal(model, x), 0.03)


@pytest.mark.parametrize("signed", [False, True])
def test_the_lookup_reads_before_the_clamp_at_any_value(signed):
    """The lookup of a quantize step reads its value before the clamp and the NaN guard (`unclamped`,
    uint8 only: the guard's 0 is the range's low end; int8's 0 is not, so it keeps them): NaN,
    infinities, huge values and both ends of the range still give onnxruntime's entries."""
    zps = (0, 0, 0) if signed else (128, 0, 10)
    model = activation_model("silu", (0.05, 1 / 255, 0.03), zps, signed)
    m = ziggurat.compile(model, target="llvm -num-cores=1")
    text = m.info["llvm_ir"]
    x = (np.random.default_rng(3).standard_normal(SHAPE) * 4).astype(np.float32)
    special = [np.nan, np.inf, -np.inf, 1e30, -1e30, 6.4, -6.4, 6.35, -6.45, 0.0, -0.0, 1e-30]
    x.reshape(-1)[:len(special)] = special
    got, ref = m(x)[0], literal(model, x)
    np.testing.assert_array_equal(got.reshape(-1)[:len(special)], ref.reshape(-1)[:len(special)])
    within_a_step(got, ref, 0.03)
    assert "llvm.masked.gather" in text


@pytest.mark.parametrize("per_channel", [False, True], ids=["one_table", "per_channel"])
def test_a_table_read_is_one_dword_gather(per_channel):
    """At 16 lanes a lookup is one `vgatherdps` off the table's base with dword indices (a splat of the
    base plus i64 offsets made two `vgatherqps` of 8 lanes each), for one table and per-channel tables
    in the blocked layout alike; checked on the assembly of an AVX-512 target on any host."""
    model = channel_model(True) if per_channel else activation_model("silu", (0.05, 1 / 255, 0.03), (128, 0, 10))
    m = ziggurat.compile(model, target="llvm -mcpu=skylake-avx512 -num-cores=1", cache=False)
    asm = m._keepalive.assembly()
    assert re.search(r"vgatherdps\s+\(%\w+,%zmm\d+,4\), %zmm", asm)  # base + 4 * dword index, 16 lanes
    if not per_channel:  # (the blocked model's layout transform has a strided gather of its own)
        assert "vgatherqps" not in asm
    if Target.parse("llvm").has("avx512f"):
        x = (np.random.default_rng(2).standard_normal(CSHAPE if per_channel else SHAPE) * 3).astype(np.float32)
        within_a_step(m(x)[0], literal(model, x), 1 / 255 if per_channel else 0.03)


@settings(max_examples=8, deadline=None)
@given(kind=st.sampled_from(["silu", "gelu"]), s0=st.floats(0.005, 0.2), s2=st.floats(0.005, 0.2),
       z0=st.integers(0, 255), z2=st.integers(0, 255), seed=st.integers(0, 2**16))
def test_any_scales_match_onnxruntime(kind, s0, s2, z0, z2, seed):
    model = activation_model(kind, (np.float32(s0), 2 / 255, np.float32(s2)), (z0, 128 if kind == "gelu" else 0, z2))
    m, found = compiled(model)
    assert found["lookups"] == 1
    x = (np.random.default_rng(seed).standard_normal(SHAPE) * 200 * s0).astype(np.float32)
    within_a_step(m(x)[0], literal(model, x), float(np.float32(s2)))


def test_lookup_clamps_its_index():
    """Values below, above and between the table's entries, and NaN, read entries inside it."""
    src = ("func.func @main(%a: tensor<4x16xf32>, %t: tensor<8xf32>) -> tensor<4x16xf32> {\n"
           "  %r = graph.lookup %a, %t {offset = -2 : i64} : tensor<4x16xf32>, tensor<8xf32> -> tensor<4x16xf32>\n"
           "  func.return %r : tensor<4x16xf32>\n}")
    module = Parser(make_context(), src).parse_module()
    assert isinstance(module, ModuleOp)
    op = next(o for o in module.walk() if isinstance(o, graph.LookupOp))
    imported = ImportedModel(module=module, weights=WeightStore({}), input_names=["a", "t"], output_names=["r"],
                             input_shapes=[(4, 16), (8,)], output_shapes=[(4, 16)], opset=17)
    a = np.linspace(-40, 40, 64, dtype=np.float32).reshape(4, 16)
    a[0, :4] = [np.nan, np.inf, -np.inf, 2.5]
    t = np.arange(8, dtype=np.float32) * 10
    (got,) = ziggurat.compile(imported, target="llvm -num-cores=1")(a, t)
    want = evaluate(op, [a, t])
    np.testing.assert_array_equal(got, want)
    assert want[0, :4].tolist() == [0.0, 70.0, 0.0, 40.0]  # NaN -> entry 0; 2.5 + 2 truncates to 4


def test_a_table_with_its_entries_before_the_lanes():
    """`entry = 1`: a [C/b, n, b] table (the lanes last) reads `table[cb, x - offset, lane]`, compiled as in
    graph_reference, at 16 and 8 lanes."""
    src = ("func.func @main(%a: tensor<1x2x3x16xf32>, %t: tensor<2x8x16xf32>) -> tensor<1x2x3x16xf32> {\n"
           "  %r = graph.lookup %a, %t {offset = -1 : i64, dims = array<i64: 1, 3>, entry = 1 : i64} : "
           "tensor<1x2x3x16xf32>, tensor<2x8x16xf32> -> tensor<1x2x3x16xf32>\n"
           "  func.return %r : tensor<1x2x3x16xf32>\n}")
    module = Parser(make_context(), src).parse_module()
    assert isinstance(module, ModuleOp)
    module.verify()
    op = next(o for o in module.walk() if isinstance(o, graph.LookupOp))
    assert op.entry_dim == 1
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 10, (1, 2, 3, 16)).astype(np.float32)
    t = rng.standard_normal((2, 8, 16)).astype(np.float32)
    want = evaluate(op, [a, t])
    k = np.clip(a + 1, 0, 7).astype(int)
    cb, lane = np.indices(a.shape)[1], np.indices(a.shape)[3]
    np.testing.assert_array_equal(want, t[cb, k, lane])
    for target in ("llvm -num-cores=1", "llvm -mcpu=haswell -num-cores=1"):
        imported = ImportedModel(module=module.clone(), weights=WeightStore({}), input_names=["a", "t"],
                                 output_names=["r"], input_shapes=[(1, 2, 3, 16), (2, 8, 16)],
                                 output_shapes=[(1, 2, 3, 16)], opset=17)
        (got,) = ziggurat.compile(imported, target=target)(a, t)
        np.testing.assert_array_equal(got, want)


def test_lookup_verifies_its_table():
    src = ("func.func @main(%a: tensor<4xf32>, %t: tensor<2x4xf32>) -> tensor<4xf32> {\n"
           "  %r = graph.lookup %a, %t {offset = 0 : i64} : tensor<4xf32>, tensor<2x4xf32> -> tensor<4xf32>\n"
           "  func.return %r : tensor<4xf32>\n}")
    module = Parser(make_context(), src).parse_module()
    with pytest.raises(Exception, match="the table must have 1 dims"):
        module.verify()


CSHAPE = [1, 40, 4, 16]  # 40 channels: two and a half blocks of 16 in a conv's blocked layout


def channel_model(conv: bool):
    """[conv ->] Q/DQ -> per-channel multiply-add (a BatchNorm a Q/DQ pair kept from its conv) ->
    Q/DQ -> Sigmoid -> Q/DQ: one table per channel."""
    rng = np.random.default_rng(5)
    c = CSHAPE[1]
    inits = [nh.from_array(np.array(v, np.float32), n) for n, v in (("s0", 0.05), ("s1", 0.04), ("s2", 1 / 255))]
    inits += [nh.from_array(np.array(z, np.uint8), n) for n, z in (("z0", 128), ("z1", 120), ("z2", 0))]
    inits += [nh.from_array((rng.random((1, c, 1, 1)) + 0.5).astype(np.float32), "g"),
              nh.from_array(rng.standard_normal((1, c, 1, 1)).astype(np.float32), "b")]
    nodes = []
    src = "x"
    if conv:
        inits.append(nh.from_array((rng.standard_normal((c, c, 1, 1)) * 0.2).astype(np.float32), "w"))
        nodes.append(helper.make_node("Conv", ["x", "w"], ["cv"]))
        src = "cv"
    nodes += [*_qdq("xd", src, "s0", "z0"), helper.make_node("Mul", ["xd", "g"], ["m"]),
              helper.make_node("Add", ["m", "b"], ["a"]), *_qdq("ad", "a", "s1", "z1"),
              helper.make_node("Sigmoid", ["ad"], ["sg"]), *_qdq("y", "sg", "s2", "z2")]
    g = helper.make_graph(nodes, "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, CSHAPE)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, CSHAPE)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("conv", [False, True], ids=["nchw", "blocked"])
def test_per_channel_chain_is_one_lookup(conv, target):
    """With `per-channel`, per-channel constants on the way make one table per channel ([C, 256];
    in a conv's blocked layout [C/b, 256, b], each vector lane reading its channel's column)."""
    model = channel_model(conv)
    graph_passes = "simplify-graph,fold-constants,cse,dce,quantized-lookup{per-channel=true},convert-layout,fuse-ops"
    m, found = compiled(model, target, graph_passes)
    assert found == {"lookups": 1, "not_vectorized": 0}
    x = (np.random.default_rng(1).standard_normal(CSHAPE) * 3).astype(np.float32)
    within_a_step(m(x)[0], literal(model, x), 1 / 255)
