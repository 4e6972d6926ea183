"""Epilogue fusion (transforms/schedule/epilogue.py): matmul + bias + activation + residual groups, with
the elementwise stages moved into the 8-lane register block's store blocks, match onnxruntime.

Everything is compiled for an explicit AVX2 target (`-mattr`), so the same code is tested on any host
that can run AVX2 (an AVX-512 one too)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat.target import Target

AVX2 = "+avx,+avx2,+fma,+f16c,+sse4.2"
AVX2_TARGET = f"llvm -mattr={AVX2}"
pytestmark = pytest.mark.skipif(not Target.parse("llvm").has("avx2"), reason="this host cannot run AVX2 code")


def _model(m: int, k: int, n: int, act: str, residual: bool, seed: int):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, n)) * 0.1).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["u"])]
    last = "u"
    if act == "relu":
        nodes.append(helper.make_node("Relu", [last], ["a"]))
        last = "a"
    elif act == "gelu":  # x * 0.5 * (1 + erf(x / sqrt 2)), as exporters write it
        consts = {"r2": np.float32(np.sqrt(2.0)), "one": np.float32(1.0), "half": np.float32(0.5)}
        nodes += [helper.make_node("Div", [last, "r2"], ["g0"]), helper.make_node("Erf", ["g0"], ["g1"]),
                  helper.make_node("Add", ["g1", "one"], ["g2"]), helper.make_node("Mul", [last, "g2"], ["g3"]),
                  helper.make_node("Mul", ["g3", "half"], ["a"])]
        last = "a"
    else:
        consts = {}
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])]
    if residual:
        nodes.append(helper.make_node("Add", [last, "r"], ["y"]))
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [m, n]))
    else:
        nodes.append(helper.make_node("Identity", [last], ["y"]))
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    if act == "gelu":
        inits += [numpy_helper.from_array(np.array(v, np.float32), name) for name, v in consts.items()]
    g = helper.make_graph(nodes, "epilogue", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.sampled_from([4, 12, 24, 32]), k=st.sampled_from([8, 64, 256]), n=st.sampled_from([16, 32, 48]),
       act=st.sampled_from(["none", "relu", "gelu"]), residual=st.booleans(), threads=st.sampled_from([1, 2]))
def test_fused_epilogues_match_onnxruntime(m, k, n, act, residual, threads):
    model = _model(m, k, n, act, residual, m + k + n)
    rng = np.random.default_rng(k)
    feeds = {"x": rng.standard_normal((m, k)).astype(np.float32)}
    if residual:
        feeds["r"] = rng.standard_normal((m, n)).astype(np.float32)
    seen = {}

    def grab(p, module, seconds):
        if p.name == "loop-default-schedule":
            seen["ir"] = str(module)

    c = ziggurat.compile(model, target=f"{AVX2_TARGET} -num-cores={threads}", after_pass=grab)
    assert c.info["llvm_options"].cpu == "x86-64" and c.info["llvm_options"].features == AVX2
    (got,) = c(*[feeds[name] for name in c.input_names])
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # the whole group is one nest: the register block, with its stages in the store blocks
    kernel = seen["ir"].split("func.func @fused_matmul")[1].split("func.func")[0]
    assert 'loop.block "matmul_store"' in kernel
    for stage in ("add", "relu", "div", "erf", "mul"):
        assert f'loop.block "{stage}"' not in kernel, stage


def _loop_kernel(m: int, k: int, n: int) -> str:
    """matmul + bias + relu as convert-te-to-loop leaves a fused group (local intermediates %t and %u)."""
    return f"""
func.func @kernel(%a: memref<{m}x{k}xf32>, %b: memref<{k}x{n}xf32>, %bias: memref<{n}xf32>, %y: memref<{m}x{n}xf32>) {{
  %t = loop.alloc "local" : memref<{m}x{n}xf32>
  %u = loop.alloc "local" : memref<{m}x{n}xf32>
  loop.for %i0 = 0 to {m} serial {{
    loop.for %i1 = 0 to {n} serial {{
      loop.block "matmul_init" [S %0 = %i0, S %1 = %i1] {{
        %z = arith.constant 0.000000e+00 : f32
        loop.store %z, %t[%0, %1] : memref<{m}x{n}xf32>
      }}
      loop.for %r0 = 0 to {k} serial {{
        loop.block "matmul" [S %2 = %i0, S %3 = %i1, R %4 = %r0] {{
          %x = loop.load %a[%2, %4] : memref<{m}x{k}xf32>
          %w = loop.load %b[%4, %3] : memref<{k}x{n}xf32>
          %p = arith.mulf %x, %w : f32
          %o = loop.load %t[%2, %3] : memref<{m}x{n}xf32>
          %s = arith.addf %o, %p : f32
          loop.store %s, %t[%2, %3] : memref<{m}x{n}xf32>
        }}
      }}
    }}
  }}
  loop.for %j0 = 0 to {m} serial {{
    loop.for %j1 = 0 to {n} serial {{
      loop.block "bias" [S %5 = %j0, S %6 = %j1] {{
        %v = loop.load %t[%5, %6] : memref<{m}x{n}xf32>
        %c = loop.load %bias[%6] : memref<{n}xf32>
        %r = arith.addf %v, %c : f32
        loop.store %r, %u[%5, %6] : memref<{m}x{n}xf32>
      }}
    }}
  }}
  loop.for %k0 = 0 to {m} serial {{
    loop.for %k1 = 0 to {n} serial {{
      loop.block "relu" [S %7 = %k0, S %8 = %k1] {{
        %v2 = loop.load %u[%7, %8] : memref<{m}x{n}xf32>
        %z2 = arith.constant 0.000000e+00 : f32
        %q = arith.maximumf %v2, %z2 : f32
        loop.store %q, %y[%7, %8] : memref<{m}x{n}xf32>
      }}
    }}
  }}
  func.return
}}
"""


@pytest.mark.parametrize("width, m, k, n, fused", [
    (8, 16, 8, 32, True), (8, 12, 300, 48, True), (16, 16, 8, 32, True), (16, 24, 64, 48, True), (16, 9, 20, 32, True),
    (8, 8, 1536, 32, False),  # k-blocked: the block reloads its partial sums from %t, so the stages stay
    (16, 8, 1536, 32, False),
    (16, 8, 768, 32, True),  # 16 lanes, two vectors: k = 768 is one packed block (plan.ONE_BLOCK), no reload
])
def test_fused_epilogues_at_8_and_16_lanes_match_numpy(width, m, k, n, fused):
    """The same group through loop-default-schedule at 8 lanes (AVX2 blocks) and 16 (the AVX-512 schedule,
    which LLVM splits into pairs of 8-lane ops for the AVX2 target): the stages move (unless the reduction
    is k-blocked) and the result is right either way."""
    import ctypes

    from xdsl.parser import Parser

    from ziggurat.backends.llvm import LLVMOptions, jit_compile, translate_module
    from ziggurat.compiler import parse_pipeline, run_passes
    from ziggurat.dialects import make_context

    module = Parser(make_context(), _loop_kernel(m, k, n)).parse_module()
    run_passes(module, parse_pipeline(f"loop-default-schedule{{vector-width={width}}},"
                                      f"loop-vectorize-innermost{{min-extent={width}}},"
                                      f"convert-loop-to-hw{{vector-width={width}}}"))
    ir = str(module)
    assert ('loop.block "bias"' not in ir and 'loop.block "relu"' not in ir) == fused
    opts = LLVMOptions.for_target(AVX2_TARGET, num_threads=1, export_all=True)
    llvm_module, info = translate_module(module, opts)
    jm = jit_compile(llvm_module, opts, info)
    rng = np.random.default_rng(m * k + n)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    y = np.full((m, n), np.nan, np.float32)
    fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4)(jm.address("kernel"))
    fn(a.ctypes.data, b.ctypes.data, bias.ctypes.data, y.ctypes.data)
    np.testing.assert_allclose(y, np.maximum(a.astype(np.float64) @ b + bias, 0), rtol=1e-4, atol=1e-4)
