"""Property tests: integer Div/Mod/BitShift and Cast on random shapes and
values (extremes included) match numpy's definition of the ONNX semantics."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper

import ziggurat

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ONNX_TYPE = {np.dtype(np.int8): T.INT8, np.dtype(np.int16): T.INT16, np.dtype(np.int32): T.INT32,
             np.dtype(np.int64): T.INT64, np.dtype(np.uint8): T.UINT8, np.dtype(np.uint16): T.UINT16,
             np.dtype(np.uint32): T.UINT32, np.dtype(np.uint64): T.UINT64, np.dtype(np.float32): T.FLOAT,
             np.dtype(np.float64): T.DOUBLE, np.dtype(np.bool_): T.BOOL}
INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
shapes = st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple)


def _values(draw, dtype, shape, nonzero=False):
    info = np.iinfo(dtype)
    elements = st.one_of(st.integers(info.min, info.max), st.sampled_from([info.min, info.max, 0, 1]))
    if nonzero:
        elements = elements.filter(lambda v: v != 0)
    flat = draw(st.lists(elements, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    return np.array(flat, dtype=dtype).reshape(shape)


def _run(op, inputs, out_dtype, **attrs):
    names = list(inputs)
    shape = np.broadcast_shapes(*(a.shape for a in inputs.values()))
    node = helper.make_node(op, names, ["y"], **attrs)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info(n, ONNX_TYPE[a.dtype], a.shape) for n, a in inputs.items()],
                          [helper.make_tensor_value_info("y", ONNX_TYPE[np.dtype(out_dtype)], shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    return ziggurat.compile(m, target="llvm -num-cores=1")(**inputs)[0]


def _trunc_div(a, b):
    """ONNX integer Div: the quotient rounded toward zero; our kernels define x / 0 = 0 and wrap MIN / -1."""
    a64, b64 = a.astype(object), b.astype(object)
    out = np.empty(np.broadcast_shapes(a.shape, b.shape), dtype=object)
    for idx in np.ndindex(out.shape):
        x, y = a64[idx], b64[idx]
        out[idx] = 0 if y == 0 else (abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1)
    info = np.iinfo(a.dtype)
    return np.array([(v - info.min) % (info.max - info.min + 1) + info.min for v in out.ravel()],
                    dtype=a.dtype).reshape(out.shape)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(INT_TYPES), shape=shapes)
def test_integer_div_truncates_toward_zero(data, dtype, shape):
    a = _values(data.draw, dtype, shape)
    b = _values(data.draw, dtype, shape)
    np.testing.assert_array_equal(_run("Div", {"a": a, "b": b}, dtype), _trunc_div(a, b))


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(INT_TYPES), shape=shapes, fmod=st.sampled_from([0, 1]))
def test_integer_mod(data, dtype, shape, fmod):
    a = _values(data.draw, dtype, shape)
    b = _values(data.draw, dtype, shape, nonzero=True)
    with np.errstate(all="ignore"):
        want = np.fmod(a, b) if fmod else np.mod(a, b)
    np.testing.assert_array_equal(_run("Mod", {"a": a, "b": b}, dtype, fmod=fmod), want)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from([np.uint8, np.uint16, np.uint32, np.uint64]), shape=shapes,
       left=st.booleans())
def test_bitshift(data, dtype, shape, left):
    bits = np.iinfo(dtype).bits
    a = _values(data.draw, dtype, shape)
    n = np.array(data.draw(st.lists(st.integers(0, bits + 3), min_size=a.size, max_size=a.size)),
                 dtype=dtype).reshape(shape)
    wide = [int(x) << int(k) if left else int(x) >> int(k) for x, k in zip(a.ravel(), n.ravel())]
    want = np.array([w % (1 << bits) if k < bits else 0 for w, k in zip(wide, n.ravel())], dtype=dtype).reshape(shape)
    got = _run("BitShift", {"a": a, "n": n}, dtype, direction="LEFT" if left else "RIGHT")
    np.testing.assert_array_equal(got, want)


CAST_TYPES = [*INT_TYPES, np.float32, np.float64, np.bool_]


@SETTINGS
@given(data=st.data(), src=st.sampled_from(CAST_TYPES), dst=st.sampled_from(CAST_TYPES), shape=shapes)
def test_cast_matches_numpy_in_range(data, src, dst, shape):
    """Cast between every pair, on values the destination can hold (out-of-range
    float -> int is undefined in ONNX; integer -> integer wraps as in numpy)."""
    n = int(np.prod(shape))
    if np.dtype(src) == np.bool_:
        x = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=src)
    elif np.dtype(src).kind == "f":
        lo, hi = (-120.0, 120.0) if np.dtype(dst).kind not in "u" else (0.0, 250.0)
        # no subnormals: the default x86 target flushes them to zero (-denormals=flush, docs/targets.md;
        # tests/unit/test_denormals.py checks both modes)
        floats = st.floats(lo, hi, allow_nan=False, allow_subnormal=False, width=32)
        x = np.array(data.draw(st.lists(floats, min_size=n, max_size=n)), dtype=src)
    else:
        x = _values(data.draw, src, (n,))
    x = x.reshape(shape)
    got = _run("Cast", {"x": x}, dst, to=ONNX_TYPE[np.dtype(dst)])
    with np.errstate(all="ignore"):
        want = x.astype(dst)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 40), k=st.integers(1, 70), n=st.integers(1, 40), batch=st.sampled_from([(), (2,), (3, 1)]),
       opt_level=st.sampled_from([0, 3]))
def test_float64_matmul_computes_in_float64(m, k, n, batch, opt_level):
    """MatMul on float64 is native (not float32 with casts): the error against
    numpy stays at float64 rounding, far below float32's ~1e-6."""
    rng = np.random.default_rng(m * 10007 + k * 101 + n)
    a, b = rng.standard_normal((*batch, m, k)), rng.standard_normal((k, n))
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", T.DOUBLE, a.shape),
                           helper.make_tensor_value_info("b", T.DOUBLE, b.shape)],
                          [helper.make_tensor_value_info("y", T.DOUBLE, (*batch, m, n))])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    (y,) = ziggurat.compile(model, target="llvm -num-cores=1", opt_level=opt_level)(a=a, b=b)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, a @ b, rtol=1e-12, atol=1e-12)
