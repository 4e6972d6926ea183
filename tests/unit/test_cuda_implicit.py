"""Convolutions as implicit GEMMs (transforms/gpu/implicit_gemm.py, backends/cuda/implicit.py), checked
on the CPU: the `gpu.igemm` spec that gpu-gemm finds for a convolution, and the GEMM template's addressing
of it (`Affine`, JIT-compiled here for x86), must gather exactly the convolution: A (M x K) and B
(K x N) read through `Affine.a` / `Affine.b`, multiplied, and scattered through `Affine.c`, equal
onnxruntime's Conv. The template around the addressing is the one the plain GEMMs use (checked on a GPU
by benchmarks/gpu_gemm.py); on the GPU, gpu_check.sh runs the models through it."""

from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llvmlite import ir
from onnx import TensorProto, helper, numpy_helper

from ziggurat.backends.cuda.implicit import Affine
from ziggurat.registry import make_context
from ziggurat.transforms.gpu.implicit_gemm import IGEMM_ATTR, read_igemm

I64 = ir.IntType(64)


def conv_model(n, ci, co, hw, k, stride, pad, dil, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((co, ci, k, k)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[stride] * 2, pads=[pad] * 4, dilations=[dil] * 2)
    out = (hw + 2 * pad - dil * (k - 1) - 1) // stride + 1
    g = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, ci, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, co, out, out])],
                          [numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), w


def igemm_spec(model) -> dict | None:
    """The `gpu.igemm` spec of the model's convolution: the CUDA pipeline up to gpu-gemm, without
    gpu-rfactor (which takes small convolutions away from the template) and at any size (min-blocks=1)."""
    from ziggurat.compiler import CompileStats, _import_model
    from ziggurat.lowering.pipelines import cuda_pipeline
    from ziggurat.registry import parse_pipeline
    from ziggurat.transforms.graph.weight_binding import bind_weights

    spec = cuda_pipeline(3, "cuda -arch=sm_80").replace("gpu-rfactor,", "").replace(
        "gpu-gemm,", "gpu-gemm{min-blocks=1},")
    work, _, _ = _import_model(model.SerializeToString(), None, None, True, CompileStats())
    bind_weights(work.module, work.weights)
    ctx = make_context()
    for p in parse_pipeline(spec):
        p.apply(ctx, work.module)
        if p.name == "gpu-gemm":
            break
    found = [read_igemm(o.attributes[IGEMM_ATTR]) for f in work.module.ops if f.body.blocks
             for o in f.body.block.ops if IGEMM_ATTR in o.attributes]
    return found[0] if found else None


def jit_addressing(addr: Affine):
    """x86 functions a(g1, g2, out), b(...), c(...) writing [offset, in range] for one element."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod = ir.Module("addr")
    for name in "abc":
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I64, I64, I64.as_pointer()]), name)
        b = ir.IRBuilder(fn.append_basic_block())
        off, ok = getattr(addr, name)(b, fn.args[0], fn.args[1])
        b.store(off, fn.args[2])
        b.store(b.zext(ok, I64), b.gep(fn.args[2], [ir.Constant(I64, 1)]))
        b.ret_void()
    target = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(mod)), target)
    engine.finalize_object()
    proto = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64))
    fns = {n: proto(engine.get_function_address(n)) for n in "abc"}

    def call(name, g1, g2):
        out = (ctypes.c_int64 * 2)()
        fns[name](g1, g2, out)
        return out[0], bool(out[1])

    return call, engine


def gathered_conv(spec: dict, x: np.ndarray, w: np.ndarray, out_size: int) -> np.ndarray:
    addr = Affine(spec)
    call, _engine = jit_addressing(addr)
    extent = lambda o: int(np.prod([d[1] for d in addr.dims[o]]))  # noqa: E731
    # the operands by size, or where the image and the weights have one size (1x1x6x6, 4x1x3x3: a
    # lookup by size took the weights for both) by which is read along the rows of C (the weights)
    sources = [x.reshape(-1), w.reshape(-1)]
    if x.size == w.size:
        a_src, b_src = (sources[1], sources[0]) if addr.m == w.shape[0] else (sources[0], sources[1])
    else:
        by_size = {x.size: sources[0], w.size: sources[1]}
        a_src, b_src = by_size[extent("a")], by_size[extent("b")]
    a = np.zeros((addr.m, addr.k), np.float64)
    b = np.zeros((addr.k, addr.n), np.float64)
    for i in range(addr.m):
        for kk in range(addr.k):
            off, ok = call("a", i, kk)
            a[i, kk] = a_src[off] if ok else 0.0
    for kk in range(addr.k):
        for j in range(addr.n):
            off, ok = call("b", kk, j)
            b[kk, j] = b_src[off] if ok else 0.0
    c = a @ b
    out = np.full(out_size, np.nan)
    for i in range(addr.m):
        for j in range(addr.n):
            off, ok = call("c", i, j)
            assert ok
            out[off] = c[i, j]
    return out


@settings(max_examples=6, deadline=None)
@given(n=st.integers(1, 2), ci=st.integers(1, 5), co=st.integers(1, 6), hw=st.integers(5, 9),
       k=st.sampled_from([1, 3]), stride=st.integers(1, 2), pad=st.integers(0, 1), dil=st.integers(1, 2))
def test_implicit_gemm_addressing_is_the_convolution(n, ci, co, hw, k, stride, pad, dil):
    if hw + 2 * pad < dil * (k - 1) + 1:
        return
    model, w = conv_model(n, ci, co, hw, k, stride, pad, dil)
    spec = igemm_spec(model)
    assert spec is not None, "gpu-gemm did not see the convolution as an implicit GEMM"
    x = np.random.default_rng(1).standard_normal((n, ci, hw, hw)).astype(np.float32)
    (ref,) = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    got = gathered_conv(spec, x, w, ref.size)
    assert not np.isnan(got).any(), "an output element was never addressed"
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-4, atol=1e-4)


def test_grouped_convolution_is_not_an_implicit_gemm():
    model, _ = conv_model(1, 4, 4, 6, 3, 1, 1, 1)
    conv = model.graph.node[0]
    conv.attribute.append(helper.make_attribute("group", 2))
    w = numpy_helper.to_array(model.graph.initializer[0])[:, :2]
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.ascontiguousarray(w), "w"))
    onnx.checker.check_model(model)
    assert igemm_spec(model) is None


if __name__ == "__main__":
    pytest.main([__file__])
