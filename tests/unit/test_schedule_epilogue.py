"""Epilogue fusion (transforms/schedule_epilogue.py): matmul + bias + activation + residual groups, with
the elementwise stages moved into the 8-lane register block's store blocks, match onnxruntime."""

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
pytestmark = pytest.mark.skipif("+avx2" not in Target.parse("llvm").features(), reason="needs an AVX2 host")


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

    c = ziggurat.compile(model, target=f"llvm -mattr={AVX2} -num-cores={threads}", after_pass=grab)
    (got,) = c(*[feeds[name] for name in c.input_names])
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # the whole group is one nest: the register block, with its stages in the store blocks
    kernel = seen["ir"].split("func.func @fused_matmul")[1].split("func.func")[0]
    assert 'loop.block "matmul_store"' in kernel
    for stage in ("add", "relu", "div", "erf", "mul"):
        assert f'loop.block "{stage}"' not in kernel, stage
