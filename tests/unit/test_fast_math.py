"""The inline vector exp/tanh/erf of the LLVM backend against float64 numpy."""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.parser import Parser

from ziggurat.backends.llvm import LLVMOptions, jit_compile, translate_module
from ziggurat.dialects import make_context

N = 256
REFERENCE = {"exp": np.exp, "tanh": np.tanh, "erf": np.vectorize(math.erf)}
_KERNELS: dict[str, object] = {}


def kernel(op: str):
    if op not in _KERNELS:
        src = f"""
func.func @k(%x: memref<{N}xf32>, %y: memref<{N}xf32>) {{
  loop.for %i = 0 to {N} step 16 serial {{
    %v = hw.vload %x[%i] : memref<{N}xf32> -> vector<16xf32>
    %r = math.{op} %v : vector<16xf32>
    hw.vstore %r, %y[%i] : vector<16xf32>, memref<{N}xf32>
  }}
  func.return
}}"""
        opts = LLVMOptions(export_all=True)
        llvm_module, info = translate_module(Parser(make_context(), src).parse_module(), opts)
        jm = jit_compile(llvm_module, opts, info)
        _KERNELS[op] = (jm, ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(jm.address("k")))
    return _KERNELS[op][1]


@settings(max_examples=30, deadline=None)
@given(op=st.sampled_from(sorted(REFERENCE)), scale=st.sampled_from([1e-6, 0.3, 1.0, 4.0, 30.0, 87.0]),
       seed=st.integers(0, 1000))
def test_vector_math_matches_numpy(op, scale, seed):
    x = (np.random.default_rng(seed).uniform(-1, 1, N) * scale).astype(np.float32)
    y = np.zeros_like(x)
    kernel(op)(x.ctypes.data, y.ctypes.data)
    ref = REFERENCE[op](x.astype(np.float64))
    np.testing.assert_allclose(y, ref, rtol=5e-7, atol=3e-7 if op != "exp" else 0)


@pytest.mark.parametrize("op,special", [("exp", [-np.inf, np.inf, -110.0, 100.0]), ("tanh", [-np.inf, np.inf, 0.0]),
                                        ("erf", [-np.inf, np.inf, 0.0, np.nan, -4.5, 4.0])])
def test_vector_math_limits(op, special):
    x = np.zeros(N, np.float32)
    x[: len(special)] = special
    y = np.zeros_like(x)
    kernel(op)(x.ctypes.data, y.ctypes.data)
    with np.errstate(over="ignore"):
        want = REFERENCE[op](x[: len(special)].astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(y[: len(special)], want)


@pytest.mark.parametrize("op", ["Sigmoid", "Exp", "Tanh", "Erf"])
@pytest.mark.parametrize("target", ["llvm -num-cores=1", "llvm -mcpu=haswell -num-cores=1", "c -num-cores=1"])
def test_nan_stays_nan_through_the_vector_polynomials(op, target):
    """The clamps of the vector exp and tanh turned NaN into ~0 / +-1 (Sigmoid(NaN) = 1); numpy keeps NaN."""
    import shutil

    import onnx
    from onnx import TensorProto, helper

    import ziggurat

    if target.startswith("c") and not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler for the c target")
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    x = np.linspace(-5, 5, 64).astype(np.float32)
    x[[3, 40]] = np.nan
    y = ziggurat.compile(model, target=target, cache=False)(x)[0]
    assert np.isnan(y[[3, 40]]).all() and np.isfinite(np.delete(y, [3, 40])).all()


@pytest.mark.parametrize("op", ["Max", "Min", "Clip", "Relu"])
@pytest.mark.parametrize("target", ["llvm -num-cores=1", "llvm -mcpu=haswell -num-cores=1"])
def test_max_and_min_propagate_nan_and_order_values(op, target):
    """`maximumf`/`minimumf` carry `nsz` (x86: `vmaxps` and a NaN blend, no signed-zero sorting): NaN from
    either side still wins, infinities and ordinary values order as numpy's; only the sign of a zero
    result may differ (numerically equal)."""
    from onnx import TensorProto, helper
    from onnx import numpy_helper as nh

    import ziggurat

    n = 64
    inits, inputs = [], ["x"]
    if op in ("Max", "Min"):
        inputs.append("b")
    elif op == "Clip":
        inits = [nh.from_array(np.array(-1.5, np.float32), "lo"), nh.from_array(np.array(2.5, np.float32), "hi")]
        inputs += ["lo", "hi"]
    g = helper.make_graph([helper.make_node(op, inputs, ["y"])], "g",
                          [helper.make_tensor_value_info(v, TensorProto.FLOAT, [n]) for v in inputs if v in ("x", "b")],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    x[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, np.nan]
    feeds = {"x": x}
    if "b" in inputs:
        b = (rng.standard_normal(n) * 3).astype(np.float32)
        b[:6] = [1.0, np.nan, 2.0, -0.0, 0.0, np.nan]
        b[10] = np.nan  # NaN only on the other side
        feeds["b"] = b
    y = ziggurat.compile(model, target=target, cache=False)(**feeds)[0]
    want = {"Max": lambda: np.maximum(x, feeds.get("b")), "Min": lambda: np.minimum(x, feeds.get("b")),
            "Clip": lambda: np.minimum(np.maximum(x, np.float32(-1.5)), np.float32(2.5)),
            "Relu": lambda: np.maximum(x, np.float32(0))}[op]()
    np.testing.assert_array_equal(y, want)  # NaN positions equal, -0 == +0
