"""loop-parallelize-outer on 1-D elementwise kernels: the innermost loop chosen for threads is split
into parallel chunks of 64 vectors whose loops are vectorized; results match numpy for any length."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import ziggurat
from ziggurat.target import Target

AVX2 = "llvm -mattr=+avx2,+fma"


def chain_model(n: int):
    """y = relu(sigmoid(x * 1.5 + z) * x - z), a fused six-op chain over 1-D tensors of n floats."""
    c = helper.make_tensor("c", TensorProto.FLOAT, [1], [1.5])
    nodes = [helper.make_node("Mul", ["x", "c"], ["a"]), helper.make_node("Add", ["a", "z"], ["b"]),
             helper.make_node("Sigmoid", ["b"], ["s"]), helper.make_node("Mul", ["s", "x"], ["m"]),
             helper.make_node("Sub", ["m", "z"], ["d"]), helper.make_node("Relu", ["d"], ["y"])]
    vi = [helper.make_tensor_value_info(k, TensorProto.FLOAT, [n]) for k in ("x", "z")]
    g = helper.make_graph(nodes, "chain", vi, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])], [c])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def reference(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    x, z = x.astype(np.float64), z.astype(np.float64)
    s = 1.0 / (1.0 + np.exp(-(x * 1.5 + z)))
    return np.maximum(s * x - z, 0.0)


def loop_ir(model, target: str) -> str:
    seen = {}

    def grab(p, module, seconds):
        if p.name == "loop-vectorize-innermost":
            seen["ir"] = str(module)

    ziggurat.compile(model, target=target, after_pass=grab)
    return seen["ir"]


@pytest.mark.parametrize("target", [AVX2, "llvm"], ids=["8-lanes", "host"])
def test_a_long_1d_chain_runs_in_vectorized_parallel_chunks(target: str) -> None:
    w = Target.parse(target).vector_width
    n = 16 * w * 64
    ir = loop_ir(chain_model(n), f"{target} -num-cores=2")
    assert f"loop.for %i0_o = 0 to 16 parallel" in ir
    assert f"loop.for %i0_i = 0 to {w * 64} vectorized" in ir


@settings(max_examples=12, deadline=None)
@given(n=st.one_of(st.integers(1, 3000), st.sampled_from([1024, 2048, 4096, 8192, 8193, 3 * 1024])),
       threads=st.sampled_from([1, 2]), target=st.sampled_from([AVX2, "llvm"]))
def test_1d_chains_of_any_length_match_numpy(n: int, threads: int, target: str) -> None:
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    z = rng.standard_normal(n).astype(np.float32)
    model = ziggurat.compile(chain_model(n), target=f"{target} -num-cores={threads}")
    np.testing.assert_allclose(model(x=x, z=z)[0], reference(x, z), rtol=1e-4, atol=1e-5)
