"""The AMX int8 GEMM (lowering/qgemm_amx.py): tile plans, generated code, and exact results on AMX hosts."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.parser import Parser

from ziggurat.backends.llvm import LLVMOptions, compile_module, translate_module
from ziggurat.backends.llvm.amx_runtime import amx_status
from ziggurat.backends.llvm.jit import create_target_machine
from ziggurat.dialects import amx, make_context
from ziggurat.errors import ScheduleError
from ziggurat.lowering.convert_te_to_loop import ConvertTeToLoopPass
from ziggurat.lowering.qgemm import pack_b, qgemm_te
from ziggurat.lowering.qgemm_amx import amx_plan, schedule_qgemm_amx
from ziggurat.target import Target

P = ctypes.c_void_p
needs_amx = pytest.mark.skipif(not amx_status()[0], reason=f"no AMX here: {amx_status()[1]}")
SPR = LLVMOptions(export_all=True, cpu="sapphirerapids", features="+amx-tile,+amx-int8,+avx512f,+avx512vnni")


def _batched_te(batch: int, m: int, n: int, k: int, shared_b: bool) -> str:
    """qgemm_te with a leading batch dim on A and C (and on B unless `shared_b`)."""
    text = qgemm_te(m, n, k)
    if batch == 0:
        return text
    kq = k // 4
    text = text.replace(f"tensor<{m}x{k}xi8>", f"tensor<{batch}x{m}x{k}xi8>")
    text = text.replace(f"tensor<{m}x{n}xi32>", f"tensor<{batch}x{m}x{n}xi32>")
    text = text.replace("(%i, %j)", "(%bt, %i, %j)").replace("te.read %a[%i, %k]", "te.read %a[%bt, %i, %k]")
    if not shared_b:
        text = text.replace(f"tensor<{kq}x{4 * n}xi8>", f"tensor<{batch}x{kq}x{4 * n}xi8>")
        text = text.replace("te.read %b[%ko, %jk]", "te.read %b[%bt, %ko, %jk]")
    return text


def _module(batch: int, m: int, n: int, k: int, shared_b: bool = True, parallel: bool = False):
    module = Parser(make_context(), _batched_te(batch, m, n, k, shared_b)).parse_module()
    ConvertTeToLoopPass().apply(Context(), module)
    fn = next(iter(module.ops))
    plan = schedule_qgemm_amx(fn, "qmm", parallel_macs=1 if parallel else 1 << 62)
    return module, plan


@given(st.integers(1, 300), st.integers(1, 12), st.integers(1, 40))
def test_plans_fit_the_eight_tiles(m: int, n16: int, k4: int) -> None:
    k = 4 * k4
    p = amx_plan(m, 16 * n16, k)
    full, rem = divmod(k, 64)
    tiles = p.mt * p.nt + (p.mt + p.nt) * ((full > 0) + (rem > 0))
    assert tiles <= amx.NUM_TILES
    assert p.mt == (2 if m >= 32 else 1) and (16 * n16) % (16 * p.nt) == 0


def test_plan_refuses_unpadded_shapes() -> None:
    with pytest.raises(ScheduleError, match="N = 20 must be a multiple of 16"):
        amx_plan(16, 20, 64)


def test_generated_code_uses_the_tile_instructions() -> None:
    """On any host: the kernel compiles for an AMX CPU to ldtilecfg, tileloadd, tdpbusd, tilestored."""
    module, plan = _module(2, 40, 48, 100, shared_b=False, parallel=True)
    assert (plan.mt, plan.nt, plan.parallel) == (2, 1, True)
    text = str(module)
    assert "loop.block" not in text and "parallel {" in text  # init and update nests replaced; batch on threads
    llvm_ir, _ = translate_module(module, SPR)
    import llvmlite.binding as llvm

    asm = create_target_machine(SPR.cpu, SPR.features, 2).emit_assembly(llvm.parse_assembly(str(llvm_ir)))
    for insn in ("ldtilecfg", "tilezero", "tileloadd", "tdpbusd", "tilestored", "tilerelease"):
        assert insn in asm, insn


def test_sapphire_rapids_targets_take_amx() -> None:
    assert Target.parse("llvm -mcpu=sapphirerapids").int8_dot == "amx"
    assert Target.parse("llvm -mcpu=icelake-server").int8_dot == "vnni"


@needs_amx
@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2), st.integers(1, 70), st.integers(1, 5), st.integers(1, 50), st.booleans(), st.booleans())
def test_amx_gemm_is_exact(batch: int, m: int, n16: int, k4: int, shared_b: bool, parallel: bool) -> None:
    """Any M (row remainders), N (1 or 2 tiles a block), K (64-byte steps and a remainder), batch dims,
    a shared or batched B, serial or threaded: the i32 result equals numpy's."""
    n, k = 16 * n16, 4 * k4
    module, _ = _module(batch, m, n, k, shared_b, parallel)
    jm = compile_module(module, LLVMOptions(export_all=True, num_threads=2 if parallel else 1))
    rng = np.random.default_rng(m * 1000 + n + k)
    lead = (batch,) if batch else ()
    a = rng.integers(0, 256, (*lead, m, k)).astype(np.uint8)
    b = rng.integers(-128, 128, (*((batch,) if batch and not shared_b else ()), k, n)).astype(np.int8)
    bp = np.stack([pack_b(x) for x in b]) if b.ndim == 3 else pack_b(b)
    c = np.full((*lead, m, n), 7, np.int32)
    jm.cfunc("qmm", None, P, P, P)(a.ctypes.data, bp.ctypes.data, c.ctypes.data)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


@needs_amx
def test_exported_amx_model_asks_for_the_tile_state_when_loaded(tmp_path) -> None:
    """A fresh process that loads the library gets the AMX permission before the first call (else SIGILL),
    and the QDQ model's output is onnxruntime's literal one to a quantization step."""
    import json
    import subprocess
    import sys

    import ziggurat
    from tests.unit.test_int8_qdq import check, literal, qdq_matmul

    model = qdq_matmul(50, 200, 48)
    compiled = ziggurat.compile(model, target="llvm -num-cores=1", cache=False)
    assert "llvm.x86.tdpbusd" in compiled.info["llvm_ir"]
    path = compiled.export(tmp_path / "qdq.so")
    assert json.loads((tmp_path / "qdq.so.json").read_text())["uses_amx"] is True
    x = (np.random.default_rng(2).standard_normal((50, 200)) * 3).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    code = (f"import numpy as np; from ziggurat.runtime import load; m = load({str(path)!r}); "
            f"np.save({str(tmp_path / 'y.npy')!r}, m(np.load({str(tmp_path / 'x.npy')!r}))[0])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    check(np.load(tmp_path / "y.npy"), literal(model, x))


def _attention_matmul(m: int, k: int, n: int, signed: bool, batch: int = 2):
    """Two run-time activations, each quantized and dequantized (per-tensor), multiplied, requantized:
    attention's Q K^T as onnxruntime's quantize_static leaves it."""
    from onnx import TensorProto, helper
    from onnx import numpy_helper as nh

    zt = np.int8 if signed else np.uint8
    inits = [nh.from_array(np.array(0.05, np.float32), "sa"), nh.from_array(np.array(3 if signed else 130, zt), "za"),
             nh.from_array(np.array(0.04, np.float32), "sb"), nh.from_array(np.array(-2 if signed else 120, zt), "zb"),
             nh.from_array(np.array(0.5, np.float32), "sy"), nh.from_array(np.array(128, np.uint8), "zy")]
    nodes = [helper.make_node("QuantizeLinear", ["a", "sa", "za"], ["aq"]),
             helper.make_node("DequantizeLinear", ["aq", "sa", "za"], ["ad"]),
             helper.make_node("QuantizeLinear", ["b", "sb", "zb"], ["bq"]),
             helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"]),
             helper.make_node("MatMul", ["ad", "bd"], ["y"]),
             helper.make_node("QuantizeLinear", ["y", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["out"])]
    shapes = {"a": [batch, m, k], "b": [batch, k, n]}
    g = helper.make_graph(nodes, "attn", [helper.make_tensor_value_info(x, TensorProto.FLOAT, s) for x, s in shapes.items()],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [batch, m, n])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]), shapes


@needs_amx
@settings(max_examples=6, deadline=None)
@given(st.integers(1, 40), st.integers(1, 80), st.integers(1, 40), st.booleans())
def test_activation_times_activation_is_an_amx_gemm(m: int, k: int, n: int, signed: bool) -> None:
    """With AMX both run-time operands of a QDQ MatMul go through the int8 GEMM (B packed at run time,
    zero points from run-time row and column sums); the result is onnxruntime's literal QDQ one to a
    quantization step."""
    import onnxruntime as ort

    import ziggurat

    model, shapes = _attention_matmul(m, k, n, signed)
    rng = np.random.default_rng(m * 7 + k)
    feeds = {x: (rng.standard_normal(s) * 2).astype(np.float32) for x, s in shapes.items()}
    compiled = ziggurat.compile(model, target="llvm -num-cores=1", cache=False)
    assert "llvm.x86.tdpbusd" in compiled.info["llvm_ir"]
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    ref = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = compiled(**feeds)[0]
    step = np.abs(got - ref)
    assert step.max() <= 0.5 * 1.0001 and (step > 0).mean() <= 0.02
