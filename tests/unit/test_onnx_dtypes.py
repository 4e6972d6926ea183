"""Run-time tensors of every supported element type, end to end against
onnxruntime: float64/float16, signed and unsigned integers and bool through
elementwise ops, Cast, comparisons, Where, logic and bitwise ops, Mod,
BitShift, reductions and Gather/GatherElements with run-time indices."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper

import ziggurat
from ziggurat.target import Target
from ziggurat.errors import InputError, UnsupportedOpError

ONNX_TYPE = {np.dtype(k): v for k, v in {
    np.float32: T.FLOAT, np.float64: T.DOUBLE, np.float16: T.FLOAT16, np.int8: T.INT8, np.int16: T.INT16,
    np.int32: T.INT32, np.int64: T.INT64, np.uint8: T.UINT8, np.uint16: T.UINT16, np.uint32: T.UINT32,
    np.uint64: T.UINT64, np.bool_: T.BOOL}.items()}


def model(nodes, inputs: dict[str, np.ndarray], outputs: dict[str, tuple[np.dtype, tuple]], opset=18):
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, ONNX_TYPE[a.dtype], a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, ONNX_TYPE[np.dtype(d)], s) for n, (d, s) in outputs.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def check(nodes, inputs, outputs, opset=18, exact=True):
    m = model(nodes, inputs, outputs, opset)
    expected = reference(m, inputs)
    got = ziggurat.compile(m, target="llvm -num-cores=1")(**inputs)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        if exact:
            np.testing.assert_array_equal(g, e)
        else:
            np.testing.assert_allclose(g, e, rtol=1e-3, atol=1e-3)


def reference(m: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's results; ONNX's reference evaluator where onnxruntime has no kernel for the type."""
    try:
        return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)
    except (ort.capi.onnxruntime_pybind11_state.NotImplemented, ort.capi.onnxruntime_pybind11_state.InvalidGraph):
        from onnx.reference import ReferenceEvaluator

        return [np.asarray(r) for r in ReferenceEvaluator(m).run(None, inputs)]


RNG = np.random.default_rng(0)
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def ints(dtype, shape, lo=None, hi=None):
    info = np.iinfo(dtype)
    lo = max(info.min, -100) if lo is None else lo
    hi = min(info.max, 100) if hi is None else hi
    return RNG.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
def test_integer_arithmetic(op, dtype):
    a, b = ints(dtype, (3, 4)), ints(dtype, (4,), lo=1)
    check([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, {"y": (dtype, (3, 4))})


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.uint32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod(dtype, fmod):
    a, b = ints(dtype, (2, 5)), ints(dtype, (2, 5))
    b[b == 0] = 3
    check([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)], {"a": a, "b": b}, {"y": (dtype, (2, 5))})


def test_float_fmod():
    a, b = RNG.normal(size=(2, 5)).astype(np.float32) * 5, RNG.normal(size=(2, 5)).astype(np.float32)
    check([helper.make_node("Mod", ["a", "b"], ["y"], fmod=1)], {"a": a, "b": b}, {"y": (np.float32, (2, 5))},
          exact=False)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift(dtype, direction):
    a, n = ints(dtype, (6,)), ints(dtype, (6,), lo=0, hi=7)
    check([helper.make_node("BitShift", ["a", "n"], ["y"], direction=direction)], {"a": a, "n": n},
          {"y": (dtype, (6,))})


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", [np.int16, np.uint8, np.int64], ids=lambda d: np.dtype(d).name)
def test_bitwise(op, dtype):
    a, b = ints(dtype, (2, 3)), ints(dtype, (3,))
    check([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, {"y": (dtype, (2, 3))})
    check([helper.make_node("BitwiseNot", ["a"], ["y"])], {"a": a}, {"y": (dtype, (2, 3))})


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_bool_logic(op):
    a, b = RNG.random((3, 4)) > 0.5, RNG.random((4,)) > 0.5
    check([helper.make_node(op, ["a", "b"], ["y"]), helper.make_node("Not", ["y"], ["z"])], {"a": a, "b": b},
          {"z": (np.bool_, (3, 4))})


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int64, np.uint8, np.uint64],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal"])
def test_comparisons_give_bool(op, dtype):
    if np.dtype(dtype).kind == "f":
        a, b = RNG.normal(size=(3, 4)).astype(dtype), RNG.normal(size=(4,)).astype(dtype)
        a[0, :] = b
    else:
        a, b = ints(dtype, (3, 4), hi=5), ints(dtype, (4,), hi=5)
    check([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, {"y": (np.bool_, (3, 4))})


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.uint8, np.bool_], ids=lambda d: np.dtype(d).name)
def test_where_with_bool_condition(dtype):
    c = RNG.random((2, 3)) > 0.5
    a = (RNG.random((2, 3)) * 10).astype(dtype)
    b = (RNG.random((1, 3)) * 10).astype(dtype)
    check([helper.make_node("Where", ["c", "a", "b"], ["y"])], {"c": c, "a": a, "b": b}, {"y": (dtype, (2, 3))})


CAST_TYPES = [np.float32, np.float64, np.float16, np.int8, np.int32, np.int64, np.uint8, np.uint16, np.uint64, np.bool_]


def _cast_input(src):
    if np.dtype(src).kind == "f":
        return (RNG.normal(size=(3, 5)) * 40).astype(src)
    if np.dtype(src) == np.bool_:
        return RNG.random((3, 5)) > 0.5
    return ints(src, (3, 5))


@pytest.mark.parametrize("dst", CAST_TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("src", CAST_TYPES, ids=lambda d: np.dtype(d).name)
def test_cast_every_pair(src, dst):
    x = _cast_input(src)
    if np.dtype(src).kind == "f" and np.dtype(dst).kind == "u":
        x = np.abs(x)  # out-of-range float -> unsigned is undefined in ONNX
    if np.dtype(src).kind == "f" and np.dtype(dst) == np.int8:
        x = np.clip(x, -100, 100)
    check([helper.make_node("Cast", ["x"], ["y"], to=ONNX_TYPE[np.dtype(dst)])], {"x": x}, {"y": (dst, (3, 5))},
          exact=np.dtype(dst) != np.float16)


@pytest.mark.parametrize("dtype", [np.float64, np.float16], ids=lambda d: np.dtype(d).name)
def test_float_types_through_float_ops(dtype):
    x = RNG.normal(size=(2, 6)).astype(dtype)
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Tanh", ["e"], ["t"]),
             helper.make_node("Softmax", ["t"], ["s"], axis=1), helper.make_node("Add", ["s", "x"], ["y"])]
    check(nodes, {"x": x}, {"y": (dtype, (2, 6))}, exact=False)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin"])
def test_reductions(op, dtype):
    x = ints(dtype, (3, 4, 5)) if np.dtype(dtype).kind != "f" else RNG.normal(size=(3, 4, 5)).astype(dtype)
    axes = np.array([1], np.int64)
    nodes = [helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("a", T.INT64, [1], axes)),
             helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)]
    check(nodes, {"x": x}, {"y": (dtype, (3, 5))}, exact=np.dtype(dtype).kind != "f")


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_], ids=lambda d: np.dtype(d).name)
def test_gather_with_runtime_indices(dtype):
    x = _cast_input(dtype if dtype != np.bool_ else np.bool_).astype(dtype)
    idx = np.array([[4, -1], [0, 2]], np.int64)
    check([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], {"x": x, "i": idx}, {"y": (dtype, (3, 2, 2))})
    idx32 = np.array([2, -3, 0], np.int32)
    check([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], {"x": x, "i": idx32}, {"y": (dtype, (3, 5))})


def test_gather_elements_with_runtime_indices():
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    idx = np.array([[0, -1], [3, 1], [2, -4]], np.int64)
    check([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)], {"x": x, "i": idx},
          {"y": (np.float32, (3, 2))})


def test_attention_mask_pattern_with_bool():
    """LessOrEqual -> And -> Not -> Where(-inf): the attention-mask chain on real bools."""
    q = RNG.normal(size=(4, 4)).astype(np.float32)
    pos = np.arange(4, dtype=np.int64)
    nodes = [helper.make_node("Unsqueeze", ["pos", "ax1"], ["col"]),
             helper.make_node("LessOrEqual", ["pos", "col"], ["causal"]),
             helper.make_node("Not", ["causal"], ["masked"]),
             helper.make_node("Where", ["masked", "ninf", "q"], ["y"])]
    init = [helper.make_tensor("ax1", T.INT64, [1], [1]), helper.make_tensor("ninf", T.FLOAT, [], [-np.inf])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("q", T.FLOAT, [4, 4]),
                                       helper.make_tensor_value_info("pos", T.INT64, [4])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [4, 4])], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    expected = reference(m, {"q": q, "pos": pos})
    got = ziggurat.compile(m)(q=q, pos=pos)
    np.testing.assert_array_equal(got[0], expected[0])


def test_input_dtype_is_checked():
    a = ints(np.int32, (2, 3))
    m = model([helper.make_node("Neg", ["a"], ["y"])], {"a": a}, {"y": (np.int32, (2, 3))})
    compiled = ziggurat.compile(m)
    assert compiled.inputs[0].dtype == np.int32 and compiled.outputs[0].dtype == np.int32
    with pytest.raises(InputError, match="input 'a' must be int32"):
        compiled(a.astype(np.float32))


def test_unsupported_dtype_is_a_clean_error():
    x = ints(np.int32, (1, 2, 4, 4))
    w = helper.make_tensor("w", T.INT32, [1, 2, 1, 1], [1, 1])
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.INT32, x.shape)],
                          [helper.make_tensor_value_info("y", T.INT32, [1, 1, 4, 4])], [w])
    with pytest.raises(UnsupportedOpError, match="element type int32"):
        ziggurat.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))


def test_float64_vector_loops_and_integer_scalar_loops():
    """Shapes past the vector width: float64 loops get vector code (half the
    f32 lanes), integer loops stay scalar; both match onnxruntime."""
    x, b = RNG.normal(size=(3, 37, 53)), RNG.normal(size=(53,))
    c = RNG.random((37, 53)) > 0.5
    nodes = [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Softmax", ["s"], ["sm"], axis=2),
             helper.make_node("Exp", ["sm"], ["e"]), helper.make_node("Where", ["c", "e", "x"], ["w"]),
             helper.make_node("ReduceSum", ["w"], ["y"], keepdims=1), helper.make_node("Tanh", ["y"], ["z"])]
    check(nodes, {"x": x, "b": b, "c": c}, {"z": (np.float64, (1, 1, 1))}, exact=False)
    m = model([helper.make_node("Mul", ["x", "b"], ["y"])], {"x": x, "b": b}, {"y": (np.float64, x.shape)})
    compiled = ziggurat.compile(m, target="llvm -num-cores=1")
    lanes = Target.parse("llvm").vector_width // 2  # f64 lanes: 8 with AVX-512, 4 with AVX2
    assert f"<{lanes} x double>" in compiled.info["llvm_ir"]
    np.testing.assert_array_equal(compiled(x=x, b=b)[0], x * b)
    xi = RNG.integers(-1000, 1000, size=(3, 37, 53)).astype(np.int32)
    bi = RNG.integers(1, 50, size=(53,)).astype(np.int32)
    nodes = [helper.make_node("Div", ["x", "b"], ["s"]), helper.make_node("Mod", ["s", "b"], ["y"])]
    check(nodes, {"x": xi, "b": bi}, {"y": (np.int32, (3, 37, 53))})


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint16], ids=lambda d: np.dtype(d).name)
def test_clip_and_pow_on_integers(dtype):
    x = ints(dtype, (2, 5), hi=9)
    lo, hi = np.array(2, dtype), np.array(7, dtype)
    check([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], {"x": x, "lo": lo, "hi": hi}, {"y": (dtype, (2, 5))})
    e = ints(np.int64, (2, 5), lo=0, hi=3)
    check([helper.make_node("Pow", ["x", "e"], ["y"])], {"x": x, "e": e}, {"y": (dtype, (2, 5))})


def test_signed_bitshift_and_bool_reductions():
    a = np.array([-128, -7, 5, 64, 3, -1], np.int8)
    n = np.array([1, 2, 9, 1, 0, 3], np.int8)
    check([helper.make_node("BitShift", ["a", "n"], ["y"], direction="RIGHT")], {"a": a, "n": n},
          {"y": (np.int8, (6,))}, opset=28)
    m = RNG.random((3, 4)) > 0.5
    axes = helper.make_node("Constant", [], ["ax"], value=helper.make_tensor("a", T.INT64, [1], [1]))
    for op in ("ReduceMax", "ReduceMin"):
        check([axes, helper.make_node(op, ["m", "ax"], ["y"], keepdims=0)], {"m": m}, {"y": (np.bool_, (3,))},
              opset=20)


def _ml_dtype(code: int) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(code))


@pytest.mark.parametrize("code", [T.BFLOAT16, T.INT4, T.UINT4, T.INT2, T.UINT2],
                         ids=["bfloat16", "int4", "uint4", "int2", "uint2"])
def test_storage_types_cast_both_ways(code):
    """bfloat16 and the 4-/2-bit integers (one byte per element): Cast from
    float32 (rounding and truncation as ONNX's reference), a Transpose on the
    narrow type, and Cast back to float32 and int8. A float out of an integer
    type's range casts to an undefined value (ONNX's Cast: "fixed point:
    undefined if OOR"; onnx 1.23's reference gives 0 where earlier ones wrapped
    around), so only the in-range elements are compared for those."""
    narrow = _ml_dtype(code)
    if code == T.BFLOAT16:
        x = (RNG.normal(size=(3, 4)) * 9).astype(np.float32)
    else:  # mostly in range (truncated), some out of it
        info = ml_dtypes.iinfo(narrow)
        x = RNG.uniform(int(info.min) - 0.99, int(info.max) + 0.99, size=(3, 4)).astype(np.float32)
    x[0, :3] = [np.nan, np.inf, -9.7] if code == T.BFLOAT16 else [-9.7, 8.2, 100.0]
    nodes = [helper.make_node("Cast", ["x"], ["n"], to=code), helper.make_node("Transpose", ["n"], ["t"]),
             helper.make_node("Cast", ["t"], ["f"], to=T.FLOAT), helper.make_node("Cast", ["t"], ["i"], to=T.INT8)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [3, 4])],
                          [helper.make_tensor_value_info("t", code, [4, 3]),
                           helper.make_tensor_value_info("f", T.FLOAT, [4, 3]),
                           helper.make_tensor_value_info("i", T.INT8, [4, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 25)])
    from onnx.reference import ReferenceEvaluator

    want = ReferenceEvaluator(m).run(None, {"x": x})
    got = ziggurat.compile(m)(x=x)
    assert got[0].dtype == narrow
    if code == T.BFLOAT16:
        np.testing.assert_array_equal(got[0].view(np.uint16), np.ascontiguousarray(want[0]).view(np.uint16))
        np.testing.assert_array_equal(got[1], want[1])  # bfloat16 NaN/inf -> int8 is undefined
        return
    inside = ((np.trunc(x) >= int(info.min)) & (np.trunc(x) <= int(info.max))).T
    assert inside.sum() >= 6
    np.testing.assert_array_equal(got[0].view(np.uint8)[inside], np.ascontiguousarray(want[0]).view(np.uint8)[inside])
    np.testing.assert_array_equal(got[1][inside], want[1][inside])
    np.testing.assert_array_equal(got[2][inside], want[2][inside])


def test_float8_arithmetic_is_refused():
    """float8 is a storage type: arithmetic on it is a clean error (bfloat16
    arithmetic runs in float32, tests/unit/test_onnx_bf16.py)."""
    a = np.ones((2, 3), _ml_dtype(T.FLOAT8E4M3FN))
    g = helper.make_graph([helper.make_node("Add", ["a", "a"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", T.FLOAT8E4M3FN, [2, 3])],
                          [helper.make_tensor_value_info("y", T.FLOAT8E4M3FN, [2, 3])])
    with pytest.raises(UnsupportedOpError, match="element type float8_e4m3fn"):
        ziggurat.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]))
    assert a.dtype.name == "float8_e4m3fn"


@pytest.mark.parametrize("code", [T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ],
                         ids=["e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz"])
def test_float8_casts_match_onnx_bit_for_bit(code):
    """float32 -> float8 (round to nearest even, saturating) -> float32, on
    every float8 value, every tie between neighbours, specials and random
    values of many magnitudes, against ONNX's saturate_cast and ml_dtypes."""
    from onnx import numpy_helper

    fp8 = _ml_dtype(code)
    table = np.arange(256, dtype=np.uint8).view(fp8).astype(np.float32)
    finite = np.unique(table[np.isfinite(table)].astype(np.float64))
    ties = ((finite[:-1] + finite[1:]) / 2).astype(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 448, 449, 464, 240, 57344, 61440, 1e30, -1e-30],
                        np.float32)
    rand = np.concatenate([RNG.normal(size=500).astype(np.float32) * s for s in (1e-4, 1e-2, 1.0, 1e2, 1e4, 1e6)])
    x = np.concatenate([table[np.isfinite(table)], ties, specials, rand])
    nodes = [helper.make_node("Cast", ["x"], ["q"], to=code), helper.make_node("Cast", ["q"], ["y"], to=T.FLOAT)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("q", code, list(x.shape)),
                           helper.make_tensor_value_info("y", T.FLOAT, list(x.shape))])
    q, y = ziggurat.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]))(x=x)
    want = numpy_helper.saturate_cast(x, fp8)
    assert q.dtype == fp8
    np.testing.assert_array_equal(q.view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(y, want.astype(np.float32))


@pytest.mark.parametrize("code", [T.FLOAT8E4M3FN, T.FLOAT8E5M2FNUZ], ids=["e4m3fn", "e5m2fnuz"])
def test_float8_cast_without_saturation(code):
    fp8 = _ml_dtype(code)
    x = np.array([0.5, -3.0, 448, 464, 480, 1e6, -1e6, np.inf, -np.inf, 57344, 61440, -0.0], np.float32)
    g = helper.make_graph([helper.make_node("Cast", ["x"], ["q"], to=code, saturate=0)], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, [12])],
                          [helper.make_tensor_value_info("q", code, [12])])
    (q,) = ziggurat.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]))(x=x)
    np.testing.assert_array_equal(q.view(np.uint8), x.astype(fp8).view(np.uint8))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64, np.float16, np.bool_])
def test_pad_tile_and_depth_to_space_keep_the_element_type(mode, dtype):
    """Data movement on integer, bool and float16 tensors: Pad (the pad value
    takes the input's type; int64 beyond float32's precision stays exact), Tile
    and DepthToSpace."""
    if dtype == np.bool_:
        x = RNG.integers(0, 2, (1, 4, 3, 3)).astype(bool)
    elif dtype == np.float16:
        x = RNG.normal(size=(1, 4, 3, 3)).astype(np.float16)
    else:
        x = ints(dtype, (1, 4, 3, 3))
    if dtype == np.int64:
        x[0, 0, 0, 0] = (1 << 60) + 1
    pads = helper.make_tensor("pads", T.INT64, [8], [0, 0, 1, 2, 0, 0, 2, 1])
    value = helper.make_tensor("v", ONNX_TYPE[np.dtype(dtype)], [], [1 if dtype == np.bool_ else 7])
    reps = helper.make_tensor("reps", T.INT64, [4], [1, 2, 1, 2])
    nodes = [helper.make_node("Pad", ["x", "pads", "v"], ["p"], mode=mode),
             helper.make_node("Tile", ["x", "reps"], ["t"]),
             helper.make_node("DepthToSpace", ["x"], ["d"], blocksize=2)]
    elt = ONNX_TYPE[np.dtype(dtype)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elt, x.shape)],
                          [helper.make_tensor_value_info("p", elt, [1, 4, 6, 6]),
                           helper.make_tensor_value_info("t", elt, [1, 8, 3, 6]),
                           helper.make_tensor_value_info("d", elt, [1, 1, 6, 6])], [pads, value, reps])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    from onnx.reference import ReferenceEvaluator

    want = ReferenceEvaluator(m).run(None, {"x": x})
    got = ziggurat.compile(m, target="llvm -num-cores=1")(x=x)
    for g_, w in zip(got, want):
        assert g_.dtype == w.dtype
        np.testing.assert_array_equal(g_, w)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.uint16])
def test_max_pool_on_small_integers(dtype):
    """8-/16-bit integers are exact in float32: MaxPool runs there and casts back."""
    x = ints(dtype, (1, 2, 5, 5))
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("GlobalMaxPool", ["x"], ["g"])]
    check(nodes, {"x": x}, {"y": (dtype, (1, 2, 3, 3)), "g": (dtype, (1, 2, 1, 1))})


def test_max_pool_on_int32_is_refused():
    x = ints(np.int32, (1, 1, 4, 4))
    m = model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])], {"x": x},
              {"y": (np.int32, (1, 1, 3, 3))})
    with pytest.raises(UnsupportedOpError, match="element type int32"):
        ziggurat.compile(m)
