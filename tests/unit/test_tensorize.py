"""The hw level: tensor intrinsics, tensorize, VNNI int8 GEMM and AMX code generation."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.parser import Parser

from ziggurat.backends.llvm import LLVMOptions, compile_module, translate_module
from ziggurat.backends.llvm.amx_runtime import amx_status, require_amx, uses_amx
from ziggurat.backends.llvm.jit import create_target_machine
from ziggurat.dialects import loop, make_context
from ziggurat.errors import CompileError, ScheduleError
from ziggurat.lowering.qgemm import lower_and_schedule, pack_b, padded_shape, qgemm_module
from ziggurat.lowering.intrinsics import all_intrins, get_intrin, register_intrin
from ziggurat.lowering.tensor_intrin import TensorIntrin
from ziggurat.target import Target
from ziggurat.transforms.loop.primitives.api import Schedule

P = ctypes.c_void_p
HOST_FEATURES = Target.parse("llvm").features()  # the default target's (ZIGGURAT_HOST_CPU=haswell: AVX2 only)
needs_vnni = pytest.mark.skipif("avx512vnni" not in HOST_FEATURES, reason="this CPU has no AVX512-VNNI")
needs_bf16 = pytest.mark.skipif("avx512bf16" not in HOST_FEATURES, reason="this CPU has no AVX512-BF16")


def _run_qgemm(a: np.ndarray, b: np.ndarray, mr: int, nv: int, threads: int = 1) -> np.ndarray:
    m, k = a.shape
    n = b.shape[1]
    mp, np_, kp = padded_shape(m, n, k, mr, nv)
    module = qgemm_module(mp, np_, kp)
    sch = lower_and_schedule(module, mr, nv, parallel=threads > 1)
    assert sch.trace[-1]["prim"] == "tensorize"
    jm = compile_module(module, LLVMOptions(export_all=True, num_threads=threads))
    ap = np.zeros((mp, kp), np.uint8)
    ap[:m, :k] = a
    bp = pack_b(b, np_, kp)
    c = np.zeros((mp, np_), np.int32)
    jm.cfunc("qmm", None, P, P, P)(ap.ctypes.data, bp.ctypes.data, c.ctypes.data)
    return c[:m, :n]


def test_registry_entries_parse_and_are_named() -> None:
    intrins = all_intrins()
    assert {"x86_vnni_u8s8_16x4", "x86_bf16_16x2"} <= set(intrins)
    for name, it in intrins.items():
        assert it.name == name and name.isidentifier(), name
        fn = it.desc_func()
        assert any(isinstance(o, loop.BlockOp) for o in fn.walk())
        assert it.buffer_names() == ["a", "b", "c"]


def test_unknown_intrinsic_and_duplicate_registration() -> None:
    with pytest.raises(ScheduleError, match="no tensor intrinsic 'nope'; known: .*x86_vnni_u8s8_16x4"):
        get_intrin("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_intrin(get_intrin("x86_vnni_u8s8_16x4"))


@needs_vnni
def test_vnni_gemm_matches_numpy_and_uses_vpdpbusd() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (16, 64)).astype(np.uint8)
    b = rng.integers(-128, 128, (64, 32)).astype(np.int8)
    np.testing.assert_array_equal(_run_qgemm(a, b, 8, 2), a.astype(np.int32) @ b.astype(np.int32))
    module = qgemm_module(16, 32, 64)
    lower_and_schedule(module, 8, 2)
    llvm_ir, _ = translate_module(module, LLVMOptions(export_all=True))
    assert "llvm.x86.avx512.vpdpbusd.512" in str(llvm_ir)


@needs_vnni
@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 20), n=st.integers(1, 40), k=st.integers(1, 40), tile=st.sampled_from([(8, 2), (4, 1), (2, 3)]),
       threads=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_tensorized_gemm_equals_plain_on_random_shapes(m, n, k, tile, threads, seed) -> None:
    """Shapes that are not multiples of the tile are padded with zeros around the tensorized kernel."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    got = _run_qgemm(a, b, *tile, threads=threads)
    np.testing.assert_array_equal(got, a.astype(np.int32) @ b.astype(np.int32))


def test_trace_replays_tensorize() -> None:
    module = qgemm_module(8, 32, 16)
    sch = lower_and_schedule(module, 8, 2)
    fresh = qgemm_module(8, 32, 16)
    from xdsl.context import Context

    from ziggurat.lowering.convert_te_to_loop import ConvertTeToLoopPass

    ConvertTeToLoopPass().apply(Context(), fresh)
    Schedule(fresh, "qmm").replay(sch.trace)
    assert str(fresh) == str(module)


def _loops_module(text_b_index: str = "%jk") -> tuple[Schedule, list]:
    module = qgemm_module(8, 32, 16)
    from xdsl.context import Context

    from ziggurat.lowering.convert_te_to_loop import ConvertTeToLoopPass

    ConvertTeToLoopPass().apply(Context(), module)
    s = Schedule(module, "qmm")
    s.decompose_reduction("qmm", s.get_loops("qmm")[0])
    return s, s.get_loops("qmm")


def test_tensorize_mismatch_errors_leave_ir_untouched() -> None:
    s, (i, j, ko, ki) = _loops_module()
    before = str(s.func)
    with pytest.raises(ScheduleError, match="must be a serial loop from 0 to 16 step 1"):
        s.tensorize(ko, "x86_vnni_u8s8_16x4")  # ko (4 iterations) is not the 16-lane loop
    assert str(s.func) == before
    jo, jl = s.split(j, 16)
    s.reorder(i, jo, ko, jl, ki)
    with pytest.raises(ScheduleError, match="x86_bf16_16x2.*does not match|loop from 0 to 2"):
        s.tensorize(s.get_loops("qmm")[3], "x86_bf16_16x2")


def test_tensorize_refuses_a_block_with_reduction_axes_swapped() -> None:
    s, (i, j, ko, ki) = _loops_module()
    jo, jl = s.split(j, 16)
    # (ko, ki) -> split ko so a 4-iteration reduction loop sits where the description wants 16 spatial lanes
    s.reorder(i, jo, jl, ko, ki)
    loops = s.get_loops("qmm")
    with pytest.raises(ScheduleError, match="must hold exactly one loop.block|feeds block variables"):
        s.tensorize(loops[2], "x86_vnni_u8s8_16x4")


def test_a_researcher_can_register_an_intrinsic() -> None:
    """A 4-lane int32 add intrinsic declared from a test, used by tensorize, run and checked."""
    from ziggurat.dialects import hw
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import IntegerType, VectorType

    desc = """
func.func @vadd4(%x: memref<4xi32>, %c: memref<4xi32>) {
  loop.for %j = 0 to 4 serial {
    loop.block "d" [S %vj = %j] {
      %v = loop.load %x[%vj] : memref<4xi32>
      %a = loop.load %c[%vj] : memref<4xi32>
      %s = arith.addi %a, %v : i32
      loop.store %s, %c[%vj] : memref<4xi32>
    }
  }
  func.return
}"""

    def emit(b, acc):
        vt = VectorType(IntegerType(32), [4])
        x = b.insert(hw.VLoadOp(*acc["x"], vt)).result
        c = b.insert(hw.VLoadOp(*acc["c"], vt)).result
        b.insert(hw.VStoreOp(b.insert(arith.AddiOp(c, x)).result, *acc["c"]))

    register_intrin(TensorIntrin(name="test_vadd4", description=desc, implement=emit), replace=True)
    text = """
func.func @acc(%x: memref<3x8xi32>, %c: memref<3x8xi32>) {
  loop.for %i = 0 to 3 serial {
    loop.for %j = 0 to 8 serial {
      loop.block "acc" [S %vi = %i, S %vj = %j] {
        %v = loop.load %x[%vi, %vj] : memref<3x8xi32>
        %a = loop.load %c[%vi, %vj] : memref<3x8xi32>
        %s = arith.addi %a, %v : i32
        loop.store %s, %c[%vi, %vj] : memref<3x8xi32>
      }
    }
  }
  func.return
}"""
    module = Parser(make_context(), text).parse_module()
    s = Schedule(module, "acc")
    _, j = s.get_loops("acc")
    _, jl = s.split(j, 4)
    s.tensorize(jl, "test_vadd4")
    assert "hw.vload" in str(module) and "loop.block" not in str(module)
    x = np.arange(24, dtype=np.int32).reshape(3, 8)
    c = np.ones((3, 8), np.int32)
    jm = compile_module(module, LLVMOptions(export_all=True))  # keep the JIT alive while its code runs
    jm.cfunc("acc", None, P, P)(x.ctypes.data, c.ctypes.data)
    np.testing.assert_array_equal(c, x + 1)


AMX_TEXT = """
func.func @tile(%a: memref<16x32xbf16>, %b: memref<16x32xbf16>, %c: memref<16x16xf32>) {
  %z = arith.constant 0 : index
  amx.tile_config array<i64: 16, 64, 16, 64, 16, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>
  amx.tile_load 0, %c[%z, %z] : memref<16x16xf32>
  amx.tile_load 1, %a[%z, %z] : memref<16x32xbf16>
  amx.tile_load 2, %b[%z, %z] : memref<16x32xbf16>
  amx.tdp "bf16ps" 0, 1, 2
  amx.tile_store 0, %c[%z, %z] : memref<16x16xf32>
  amx.tile_release
  func.return
}"""


def test_amx_ops_compile_to_tile_instructions_for_an_amx_target() -> None:
    module = Parser(make_context(), AMX_TEXT).parse_module()
    o = LLVMOptions(export_all=True, cpu="sapphirerapids", features="+amx-tile,+amx-bf16,+amx-int8,+avx512f,+avx512bf16")
    llvm_ir, _ = translate_module(module, o)
    assert uses_amx(str(llvm_ir))
    import llvmlite.binding as llvm

    asm = create_target_machine(o.cpu, o.features, 2).emit_assembly(llvm.parse_assembly(str(llvm_ir)))
    for insn in ("ldtilecfg", "tileloadd", "tdpbf16ps", "tilestored", "tilerelease"):
        assert insn in asm, insn


def test_amx_on_a_cpu_without_it_is_a_clear_error() -> None:
    module = Parser(make_context(), AMX_TEXT).parse_module()
    if "amx-tile" in HOST_FEATURES:
        pytest.skip("this CPU has AMX; the refusal path is for CPUs without it")
    with pytest.raises(CompileError, match="'amx.tile_config' needs the CPU feature 'amx-tile'"):
        translate_module(module, LLVMOptions(export_all=True))
    assert not amx_status()[0]
    with pytest.raises(CompileError, match="uses AMX tile instructions, but the host CPU .* has no AMX"):
        require_amx()


@needs_bf16
def test_bf16_dot_intrinsic_runs() -> None:
    text = """
func.func @dot(%a: memref<2x64xbf16>, %b: memref<2x64xbf16>, %c: memref<2x16xf32>) {
  %z = arith.constant 0 : index
  %a2 = hw.vload %a[%z, %z] : memref<2x64xbf16> -> vector<2xbf16>
  %q = x86vec.bcast_group %a2 : vector<2xbf16> -> vector<32xbf16>
  %bv = hw.vload %b[%z, %z] : memref<2x64xbf16> -> vector<32xbf16>
  %cv = hw.vload %c[%z, %z] : memref<2x16xf32> -> vector<16xf32>
  %r = x86vec.dpbf16ps %cv, %q, %bv : vector<16xf32>, vector<32xbf16>, vector<32xbf16>
  hw.vstore %r, %c[%z, %z] : vector<16xf32>, memref<2x16xf32>
  func.return
}"""
    module = Parser(make_context(), text).parse_module()
    rng = np.random.default_rng(0)
    af = rng.integers(-8, 8, (2, 64)).astype(np.float32)  # exactly representable in bf16
    bf = rng.integers(-8, 8, (2, 64)).astype(np.float32)
    to_bf16 = lambda x: (x.view(np.uint32) >> 16).astype(np.uint16)  # noqa: E731
    a, b = to_bf16(af), to_bf16(bf)
    c = np.zeros((2, 16), np.float32)
    jm = compile_module(module, LLVMOptions(export_all=True))
    jm.cfunc("dot", None, P, P, P)(a.ctypes.data, b.ctypes.data, c.ctypes.data)
    want = af[0, 0] * bf[0, 0:32:2] + af[0, 1] * bf[0, 1:32:2]
    np.testing.assert_array_equal(c[0], want)
