"""The portable C target (docs/targets.md, "Portable C"): `c` target strings, the C printer
(backends/c) and models built by the system `cc`, exported and run through `ziggurat.runtime.load`,
against the LLVM target and onnxruntime.

The build tests need a C compiler (cc, gcc or clang; or $CC) and skip with the reason when there is none."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat.backends.c import HANDLERS, COptions, cc_command, emit_module, find_cc
from ziggurat.errors import CompileError, ZigguratError
from ziggurat.runtime import load
from ziggurat.target import Target

needs_cc = pytest.mark.skipif(find_cc() is None, reason="the C target needs a C compiler (cc, gcc or clang, or $CC)")


from tests.target_models import cnn, embedding, mlp  # noqa: F401 - found by name (globals())
from tests.target_models import norm_block as _norm_block


def norm_block():
    """The vector exp (Softmax), tanh and erf polynomials."""
    return _norm_block(tanh=True, erf=True)


def _reference(model, inputs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), inputs)})


# --- the target and the printer (no C compiler needed) --------------------------------------------------

def test_parse_c():
    t = Target.parse("c")
    assert t.kind == "c" and t.is_native and str(t) == "c" and Target.parse(str(t)) == t
    assert t.vector_width == Target.parse("llvm").vector_width  # the host's, as `llvm`
    v3 = Target.parse("c -mcpu=x86-64-v3 -num-cores=2")
    assert (v3.kind, v3.vector_width, v3.num_threads, v3.has("fma")) == ("c", 8, 2, True)
    with pytest.raises(ZigguratError, match="takes no -mtriple"):
        Target.parse("c -mtriple=aarch64-linux-gnu")
    with pytest.raises(ZigguratError, match="supported target kinds are llvm, c, cuda"):
        Target.parse("opencl")


def test_every_printer_names_a_registered_op():
    from ziggurat.registry import make_context

    ctx = make_context()
    missing = [name for name in HANDLERS if ctx.get_optional_op(name) is None]
    assert not missing, f"C printers for ops no dialect defines: {missing}"


def test_float_flags_follow_the_llvm_options():
    from pathlib import Path

    default = cc_command(COptions(), Path("m.c"), Path("m.so"), "cc")
    assert "-ffp-contract=fast" in default and "-fassociative-math" in default and "-ffast-math" not in default
    assert "-march=native" in default and "-fopenmp" not in default
    assert "-ffast-math" in cc_command(COptions(fast_math=("fast",)), Path("m.c"), Path("m.so"), "cc")
    assert "-ffp-contract=off" in cc_command(COptions(fast_math=()), Path("m.c"), Path("m.so"), "cc")
    v3 = cc_command(COptions(cpu="x86-64-v3"), Path("m.c"), Path("m.so"), "cc", openmp=True)
    assert "-march=x86-64-v3" in v3 and "-fopenmp" in v3


def test_an_op_without_c_form_is_one_clear_error():
    from xdsl.dialects import func
    from xdsl.ir import Block, Region

    from ziggurat.dialects.amx import TileReleaseOp

    block = Block()
    block.add_ops([TileReleaseOp(), func.ReturnOp()])
    module = __import__("xdsl.dialects.builtin", fromlist=["ModuleOp"]).ModuleOp(
        [func.FuncOp("main", ([], []), Region(block))])
    with pytest.raises(CompileError, match=r"c backend: op 'amx.tile_release' is not supported \(in @main\)"):
        emit_module(module, COptions())


# --- models built by cc, exported, loaded back ----------------------------------------------------------

def _inputs(name):
    rng = np.random.default_rng(7)
    if name == "mlp":
        return [rng.standard_normal((16, 64)).astype(np.float32)]
    if name == "cnn":
        return [rng.standard_normal((2, 3, 8, 8)).astype(np.float32)]
    if name == "norm_block":
        return [rng.standard_normal((2, 8, 32)).astype(np.float32)]
    return [np.array([[3, 0, 9, 4, 4]], dtype=np.int64)]


@needs_cc
@pytest.mark.parametrize("name, target", [("mlp", "c -num-cores=2"), ("cnn", "c -num-cores=1"),
                                          ("norm_block", "c"), ("embedding", "c"),
                                          ("norm_block", "c -mcpu=x86-64-v3 -num-cores=1")])
def test_model_matches_llvm_and_onnxruntime(name, target, tmp_path):
    if "x86-64-v3" in target and not Target.parse("llvm").has("avx2"):
        pytest.skip("this host has no AVX2")
    onnx_model = globals()[name]()
    inputs = _inputs(name)
    cm = ziggurat.compile(onnx_model, target=target)
    src = cm.info["c_source"]
    if Target.parse(target).vector_width > 1 and name != "embedding":
        assert f"vector_size({4 * Target.parse(target).vector_width})" in src
    if name == "mlp":  # two threads: the outer parallel loops are OpenMP loops (linked with -fopenmp)
        assert "#pragma omp for schedule(static)" in src and cm.info["uses_openmp"]
    path = cm.export(tmp_path / "model.so")
    for suffix in (".json", ".weights.npz", ".abi"):
        assert (tmp_path / f"model.so{suffix}").is_file()
    loaded = load(path)
    got = _outs(loaded(*inputs))
    llvm = _outs(ziggurat.compile(onnx_model, target="llvm -num-cores=1")(*inputs))
    want = _reference(onnx_model, inputs)
    for g, ll, w in zip(got, llvm, want):
        np.testing.assert_allclose(g, ll, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(_outs(cm(*inputs))[0], got[0])  # in process: the same library


def _outs(r):
    return [r] if isinstance(r, np.ndarray) else list(r)


@needs_cc
def test_index_check_raises_through_the_c_build(tmp_path):
    from ziggurat.errors import InputError

    cm = ziggurat.compile(embedding(), target="c")
    with pytest.raises(InputError):
        cm(np.array([[3, 0, 11, 4, 4]], dtype=np.int64))


def mix():
    """Max/Min with NaN and signed zeros, Less+Where, Floor, Exp, int32 Div and Mod (negative operands)."""
    x_ = helper.make_tensor_value_info
    nodes = [helper.make_node("Max", ["x", "y"], ["mx"]), helper.make_node("Min", ["x", "y"], ["mn"]),
             helper.make_node("Less", ["x", "y"], ["lt"]), helper.make_node("Where", ["lt", "mx", "mn"], ["w"]),
             helper.make_node("Floor", ["w"], ["f"]), helper.make_node("Exp", ["x"], ["e"]),
             helper.make_node("Add", ["f", "e"], ["o1"]),
             helper.make_node("Div", ["i", "j"], ["q"]), helper.make_node("Mod", ["i", "j"], ["r"]),
             helper.make_node("Add", ["q", "r"], ["o2"]), helper.make_node("Sigmoid", ["y"], ["o3"])]
    g = helper.make_graph(nodes, "m", [x_("x", TensorProto.FLOAT, [3, 37]), x_("y", TensorProto.FLOAT, [3, 37]),
                                       x_("i", TensorProto.INT32, [19]), x_("j", TensorProto.INT32, [19])],
                          [x_("o1", TensorProto.FLOAT, [3, 37]), x_("o2", TensorProto.INT32, [19]),
                           x_("o3", TensorProto.FLOAT, [3, 37])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@needs_cc
def test_edge_values_match_the_llvm_target():
    """NaN, infinities and signed zeros through maximumf/minimumf, compares and selects, and the integer
    division helpers: the C build gives the LLVM build's bits (exp, in o1 and in the Sigmoid, within
    1 ulp or so: both loops are vector code, and the two compilers contract its polynomial apart)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 37)).astype(np.float32) * 30
    y = rng.standard_normal((3, 37)).astype(np.float32)
    x[0, :4], y[0, :4] = [np.nan, 0.0, -0.0, np.inf], [1.0, -0.0, 0.0, np.nan]
    i = rng.integers(-50, 50, 19).astype(np.int32)
    j = (rng.integers(1, 9, 19) * rng.choice([-1, 1], 19)).astype(np.int32)
    m = mix()
    c = ziggurat.compile(m, target="c -num-cores=1")(x, y, i, j)
    ll = ziggurat.compile(m, target="llvm -num-cores=1")(x, y, i, j)
    np.testing.assert_allclose(c[0], ll[0], rtol=1e-6, atol=0)  # NaN where NaN (equal_nan), inf where inf
    assert np.array_equal(np.signbit(c[0]), np.signbit(ll[0]))
    np.testing.assert_array_equal(c[1], ll[1])
    np.testing.assert_allclose(c[2], ll[2], rtol=1e-6, atol=1e-7)


@needs_cc
def test_int8_matmul_matches_numpy_and_llvm():
    """MatMulInteger (uint8 x int8 -> int32): on a VNNI host the pipeline emits x86vec.bcast_group and
    x86vec.dpbusd, which the C backend prints as portable loops."""
    rng = np.random.default_rng(0)
    w = rng.integers(-128, 127, (64, 48)).astype(np.int8)
    g = helper.make_graph([helper.make_node("MatMulInteger", ["x", "w"], ["y"])], "m",
                          [helper.make_tensor_value_info("x", TensorProto.UINT8, [16, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.INT32, [16, 48])], [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.integers(0, 255, (16, 64)).astype(np.uint8)
    want = x.astype(np.int32) @ w.astype(np.int32)
    c = _outs(ziggurat.compile(m, target="c -num-cores=1")(x))[0]
    np.testing.assert_array_equal(c, want)
    np.testing.assert_array_equal(c, _outs(ziggurat.compile(m, target="llvm -num-cores=1")(x))[0])
