"""The LLVM backend: translate loop-level IR, JIT it, call it with numpy arrays."""

from __future__ import annotations

import ctypes
import json
import math
import platform

import numpy as np
import pytest
from xdsl.parser import Parser

from ziggurat.backends.llvm import LLVMOptions, compile_module, emit_shared_library, jit_compile, translate_module
from ziggurat.dialects import make_context
from ziggurat.errors import CompileError

P = ctypes.c_void_p
RNG = np.random.default_rng(0)


def parse(text: str, allow_unregistered: bool = False):
    return Parser(make_context(allow_unregistered), text).parse_module()


def kernel(text: str, name: str, nargs: int, **opts):
    """JIT `text` with every function exported; a ctypes callable for `name` and the module."""
    jm = compile_module(parse(text), LLVMOptions(export_all=True, **opts))
    return jm.cfunc(name, None, *[P] * nargs), jm


def ptrs(*arrays: np.ndarray) -> list[int]:
    return [a.ctypes.data for a in arrays]


def rand(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


RELU = """
func.func @relu(%x: memref<4x37xf32>, %y: memref<4x37xf32>) {
  loop.for %i = 0 to 4 serial {
    loop.for %j = 0 to 37 vectorized {
      loop.block "relu" [S %vi = %i, S %vj = %j] {
        %v = loop.load %x[%vi, %vj] : memref<4x37xf32>
        %c = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %c : f32
        loop.store %r, %y[%vi, %vj] : memref<4x37xf32>
      }
    }
  }
  func.return
}
"""


def test_relu_elementwise():
    f, _ = kernel(RELU, "relu", 2)
    x, y = rand(4, 37), np.zeros((4, 37), np.float32)
    f(*ptrs(x, y))
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_module_attributes_and_alignment():
    lm, info = translate_module(parse(RELU), LLVMOptions(export_all=True))
    text = str(lm)
    assert '"prefer-vector-width"="512"' in text
    assert "noalias" in text
    assert "call contract nsz reassoc float @\"llvm.maximum.f32\"" in text  # NaN-propagating, any zero sign
    assert info.exported == ["relu"] and info.entry_symbol is None
    assert "!llvm.loop" in text and "llvm.loop.vectorize.enable" in text
    lm, _ = translate_module(parse(RELU), LLVMOptions(export_all=True, fast_math=("contract",)))
    assert "reassoc" not in str(lm)


MATMUL = """
func.func @matmul(%a: memref<8x16xf32>, %b: memref<16x12xf32>, %c: memref<8x12xf32>) {
  loop.for %i = 0 to 8 serial {
    loop.for %j = 0 to 12 serial {
      loop.block "init" [S %vi = %i, S %vj = %j] {
        %z = arith.constant 0.0 : f32
        loop.store %z, %c[%vi, %vj] : memref<8x12xf32>
      }
      loop.for %k = 0 to 16 serial {
        loop.block "update" [S %vi = %i, S %vj = %j, R %vk = %k] {
          %x = loop.load %a[%vi, %vk] : memref<8x16xf32>
          %y = loop.load %b[%vk, %vj] : memref<16x12xf32>
          %p = arith.mulf %x, %y : f32
          %o = loop.load %c[%vi, %vj] : memref<8x12xf32>
          %s = arith.addf %o, %p : f32
          loop.store %s, %c[%vi, %vj] : memref<8x12xf32>
        }
      }
    }
  }
  func.return
}
"""


@pytest.mark.parametrize("k_kind", ["serial", "unrolled", "vectorized"])
def test_naive_matmul_with_reduction_block(k_kind: str):
    f, jm = kernel(MATMUL.replace("to 16 serial", f"to 16 {k_kind}"), "matmul", 3)
    assert ("llvm.loop.unroll.full" in jm.llvm_ir) == (k_kind == "unrolled")
    a, b, c = rand(8, 16), rand(16, 12), np.full((8, 12), 7.0, np.float32)
    f(*ptrs(a, b, c))
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


# y = 2.5 * x + 1 with 16-lane vectors and a scalar tail; s[0] = sum(x), max[0] = max(x)
VECTOR = """
func.func @axpb(%x: memref<37xf32>, %y: memref<37xf32>, %s: memref<1xf32>, %m: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant -1.0e+30 : f32
  loop.store %zero, %s[%c0] : memref<1xf32>
  loop.store %ninf, %m[%c0] : memref<1xf32>
  %alpha = arith.constant 2.5 : f32
  %va = hw.vbroadcast %alpha : f32 -> vector<16xf32>
  %vb = arith.constant dense<1.0> : vector<16xf32>
  loop.for %j = 0 to 32 step 16 serial {
    %v = hw.vload %x[%j] : memref<37xf32> -> vector<16xf32>
    %r = hw.vfma %v, %va, %vb : vector<16xf32>
    hw.vstore %r, %y[%j] : vector<16xf32>, memref<37xf32>
    %part = hw.vreduce "add" %v : vector<16xf32> -> f32
    %acc = loop.load %s[%c0] : memref<1xf32>
    %acc2 = arith.addf %acc, %part : f32
    loop.store %acc2, %s[%c0] : memref<1xf32>
    %pm = hw.vreduce "max" %v : vector<16xf32> -> f32
    %mo = loop.load %m[%c0] : memref<1xf32>
    %mn = arith.maximumf %mo, %pm : f32
    loop.store %mn, %m[%c0] : memref<1xf32>
  }
  loop.for %j = 32 to 37 serial {
    %v = loop.load %x[%j] : memref<37xf32>
    %p = arith.mulf %v, %alpha : f32
    %one = arith.constant 1.0 : f32
    %r = arith.addf %p, %one : f32
    loop.store %r, %y[%j] : memref<37xf32>
    %acc = loop.load %s[%c0] : memref<1xf32>
    %acc2 = arith.addf %acc, %v : f32
    loop.store %acc2, %s[%c0] : memref<1xf32>
    %mo = loop.load %m[%c0] : memref<1xf32>
    %mn = arith.maximumf %mo, %v : f32
    loop.store %mn, %m[%c0] : memref<1xf32>
  }
  func.return
}
"""


def _check_vector_kernel(x: np.ndarray) -> None:
    f, jm = kernel(VECTOR, "axpb", 4)
    y, s, m = np.zeros(37, np.float32), np.zeros(1, np.float32), np.zeros(1, np.float32)
    f(*ptrs(x, y, s, m))
    np.testing.assert_allclose(y, 2.5 * x + 1, rtol=1e-6, atol=1e-6)  # fma: one rounding
    np.testing.assert_allclose(s[0], x.sum(dtype=np.float64), rtol=1e-5, atol=1e-5)
    assert m[0] == x.max()
    ir_text = jm.llvm_ir
    assert "llvm.fma.v16f32" in ir_text and "llvm.vector.reduce.fadd.v16f32" in ir_text
    assert "shufflevector" in ir_text
    # vector accesses are aligned to the element, never to the vector
    for line in ir_text.splitlines():
        if "<16 x float>, <16 x float>*" in line or "store <16 x float>" in line:
            assert line.rstrip().endswith("align 4"), line


def test_vector_kernel_with_scalar_tail():
    _check_vector_kernel(rand(37))


def test_vector_loads_on_unaligned_view():
    base = rand(38 + 16)
    x = base[1:38]  # 4 bytes past numpy's (at most 16-byte) alignment
    assert x.ctypes.data % 16 == 4
    _check_vector_kernel(x)


PARALLEL = """
func.func @scale(%x: memref<7x33xf32>, %y: memref<7x33xf32>) {
  %k = arith.constant 3.0 : f32
  loop.for %i = 0 to 7 parallel {
    %fi = arith.index_cast %i : index to i64
    %ff = arith.sitofp %fi : i64 to f32
    loop.for %j = 0 to 33 serial {
      %v = loop.load %x[%i, %j] : memref<7x33xf32>
      %a = arith.mulf %v, %k : f32
      %b = arith.addf %a, %ff : f32
      loop.store %b, %y[%i, %j] : memref<7x33xf32>
    }
  }
  func.return
}
"""


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_parallel_loop(threads: int):
    lm, info = translate_module(parse(PARALLEL), LLVMOptions(export_all=True, num_threads=threads))
    text = str(lm)
    if threads == 1:
        assert "GOMP" not in text and "omp_" not in text and not info.uses_openmp
    else:
        assert "GOMP_parallel" in text and info.uses_openmp
    f, _ = kernel(PARALLEL, "scale", 2, num_threads=threads)
    x, y = rand(7, 33), np.zeros((7, 33), np.float32)
    f(*ptrs(x, y))
    np.testing.assert_allclose(y, 3 * x + np.arange(7, dtype=np.float32)[:, None], rtol=1e-5, atol=1e-6)


# a parallel loop inside a serial one: captures the outer index, a scalar and a vector
NESTED = """
func.func @rows(%x: memref<5x48xf32>, %y: memref<5x48xf32>) {
  %w = arith.constant 0.5 : f32
  %c1 = arith.constant 1.0 : f32
  %s = arith.addf %w, %c1 : f32
  %vs = hw.vbroadcast %s : f32 -> vector<16xf32>
  loop.for %i = 0 to 5 serial {
    %ii = arith.index_cast %i : index to i64
    %fi = arith.sitofp %ii : i64 to f32
    loop.for %j = 0 to 48 step 16 parallel {
      %v = hw.vload %x[%i, %j] : memref<5x48xf32> -> vector<16xf32>
      %vi = hw.vbroadcast %fi : f32 -> vector<16xf32>
      %r = hw.vfma %v, %vs, %vi : vector<16xf32>
      hw.vstore %r, %y[%i, %j] : vector<16xf32>, memref<5x48xf32>
    }
  }
  func.return
}
"""


def test_parallel_loop_captures_outer_values():
    f, jm = kernel(NESTED, "rows", 2, num_threads=2)
    assert "GOMP_parallel" in jm.llvm_ir
    x, y = rand(5, 48), np.zeros((5, 48), np.float32)
    f(*ptrs(x, y))
    np.testing.assert_allclose(y, 1.5 * x + np.arange(5, dtype=np.float32)[:, None], rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="names an x86-64 baseline CPU")
def test_target_override_baseline_cpu():
    f, jm = kernel(VECTOR, "axpb", 4, cpu="x86-64", features="")
    assert "zmm" not in jm.assembly() and "ymm" not in jm.assembly()
    x = rand(37)
    y, s, m = np.zeros(37, np.float32), np.zeros(1, np.float32), np.zeros(1, np.float32)
    f(*ptrs(x, y, s, m))
    np.testing.assert_allclose(y, 2.5 * x + 1, rtol=1e-6, atol=1e-6)


ENTRY = """
func.func @mul(%x: memref<64xf32>, %w: memref<64xf32>, %y: memref<64xf32>) {
  loop.for %i = 0 to 64 parallel {
    %a = loop.load %x[%i] : memref<64xf32>
    %b = loop.load %w[%i] : memref<64xf32>
    %c = arith.mulf %a, %b : f32
    loop.store %c, %y[%i] : memref<64xf32>
  }
  func.return
}
func.func @add_bias(%x: memref<64xf32>, %b: memref<64xf32>, %y: memref<64xf32>) {
  loop.for %i = 0 to 64 serial {
    %a = loop.load %x[%i] : memref<64xf32>
    %c = loop.load %b[%i] : memref<64xf32>
    %d = arith.addf %a, %c : f32
    loop.store %d, %y[%i] : memref<64xf32>
  }
  func.return
}
func.func @main(%in: memref<64xf32>, %out: memref<64xf32>) {
  %w = loop.const_buffer "fc.weight" : memref<64xf32>
  %b = loop.const_buffer "fc.bias" : memref<64xf32>
  %t = loop.alloc "global" : memref<64xf32>
  %u = loop.alloc "global" : memref<8x8xf32>
  func.call @mul(%in, %w, %t) : (memref<64xf32>, memref<64xf32>, memref<64xf32>) -> ()
  loop.for %i = 0 to 8 parallel {
    loop.for %j = 0 to 8 serial {
      %c8 = arith.constant 8 : index
      %r = arith.muli %i, %c8 : index
      %k = arith.addi %r, %j : index
      %v = loop.load %t[%k] : memref<64xf32>
      %two = arith.constant 2.0 : f32
      %v2 = arith.mulf %v, %two : f32
      loop.store %v2, %u[%i, %j] : memref<8x8xf32>
    }
  }
  loop.copy %u, %t : memref<8x8xf32>, memref<64xf32>
  func.call @add_bias(%t, %b, %out) : (memref<64xf32>, memref<64xf32>, memref<64xf32>) -> ()
  func.return
}
"""


def _run_entry(call_entry, info, threads):
    x, w, b = rand(64), rand(64), rand(64)
    out = np.zeros(64, np.float32)
    arena = np.zeros(info.arena_size // 4 + 16, np.float32)
    weights = {"fc.weight": w, "fc.bias": b}
    slots = ptrs(x, out) + [weights[n].ctypes.data for n in info.const_names] + [arena.ctypes.data]
    assert len(slots) == info.num_slots
    packed = (ctypes.c_void_p * len(slots))(*slots)
    call_entry(packed)
    np.testing.assert_allclose(out, 2 * x * w + b, rtol=1e-6)


@pytest.mark.parametrize("threads", [1, 2])
def test_entry_abi_with_arena_and_const_buffers(threads: int):
    o = LLVMOptions(num_threads=threads)
    lm, info = translate_module(parse(ENTRY), o)
    assert info.entry_symbol == "ziggurat_entry" and info.num_args == 2
    assert info.const_names == ["fc.weight", "fc.bias"]
    assert info.arena_offsets == [0, 256] and info.arena_size == 512
    text = str(lm)
    assert 'define internal void @"mul"' in text and 'define void @"ziggurat_entry"' in text
    jm = jit_compile(lm, o, info)
    _run_entry(jm.cfunc("ziggurat_entry", None, ctypes.c_void_p), info, threads)


def test_arena_offset_attribute_and_prefix():
    text = ENTRY.replace('loop.alloc "global" : memref<8x8xf32>',
                         'loop.alloc "global" {arena_offset = 1024 : i64} : memref<8x8xf32>')
    o = LLVMOptions(prefix="mymodel")
    jm = compile_module(parse(text), o)
    assert jm.info.arena_offsets == [0, 1024] and jm.info.arena_size == 1280
    _run_entry(jm.cfunc("mymodel_entry", None, ctypes.c_void_p), jm.info, 1)


def test_shared_library_export(tmp_path):
    o = LLVMOptions(num_threads=2)
    lm, info = translate_module(parse(ENTRY), o)
    so = emit_shared_library(str(lm), tmp_path / "model.so", o)
    meta = json.loads((tmp_path / "model.so.json").read_text())
    assert meta["exports"] == ["ziggurat_entry"] and meta["needs_libgomp"] and meta["cpu"]
    lib = ctypes.CDLL(str(so))
    assert not hasattr(lib, "mul")  # kernels are internal
    entry = lib.ziggurat_entry
    entry.argtypes, entry.restype = [ctypes.c_void_p], None
    _run_entry(entry, info, 2)


SCRATCH = """
func.func @twice(%x: memref<N1xf32>, %y: memref<N1xf32>) {
  %t = loop.alloc "local" : memref<N1xf32>
  loop.for %i = 0 to N serial {
    %a = loop.load %x[%i] : memref<N1xf32>
    %b = arith.addf %a, %a : f32
    loop.store %b, %t[%i] : memref<N1xf32>
  }
  loop.copy %t, %y : memref<N1xf32>, memref<N1xf32>
  func.return
}
"""


@pytest.mark.parametrize("n", [100, 10000])
def test_kernel_scratch_alloc(n: int):
    text = SCRATCH.replace("N1", f"{n}").replace("to N ", f"to {n} ")
    f, jm = kernel(text, "twice", 2)
    assert ("aligned_alloc" in jm.llvm_ir) == (n * 4 > 16384)
    x, y = rand(n), np.zeros(n, np.float32)
    f(*ptrs(x, y))
    np.testing.assert_array_equal(y, 2 * x)


UNARY_REFS = {
    "exp": np.exp,
    "tanh": np.tanh,
    "erf": np.vectorize(math.erf),
    "sqrt": np.sqrt,
    "log": np.log,
    "log1p": np.log1p,
    "absf": np.abs,
    "floor": np.floor,
    "ceil": np.ceil,
    "sin": np.sin,
    "rsqrt": lambda v: 1 / np.sqrt(v),
}

MATH = """
func.func @scalar(%x: memref<16xf32>, %y: memref<16xf32>) {
  loop.for %i = 0 to 16 serial {
    %a = loop.load %x[%i] : memref<16xf32>
    %b = math.OP %a : f32
    loop.store %b, %y[%i] : memref<16xf32>
  }
  func.return
}
func.func @vector(%x: memref<16xf32>, %y: memref<16xf32>) {
  loop.for %i = 0 to 16 step 8 serial {
    %a = hw.vload %x[%i] : memref<16xf32> -> vector<8xf32>
    %b = math.OP %a : vector<8xf32>
    hw.vstore %b, %y[%i] : vector<8xf32>, memref<16xf32>
  }
  func.return
}
"""


@pytest.mark.parametrize("op", sorted(UNARY_REFS))
def test_math_unary_scalar_and_vector(op: str):
    jm = compile_module(parse(MATH.replace("OP", op)), LLVMOptions(export_all=True))
    positive = op in ("sqrt", "log", "log1p", "rsqrt")
    x = rand(16, lo=0.1 if positive else -3.0, hi=3.0)
    want = UNARY_REFS[op](x.astype(np.float64))
    for name in ("scalar", "vector"):
        y = np.zeros(16, np.float32)
        jm.cfunc(name, None, P, P)(*ptrs(x, y))
        np.testing.assert_allclose(y, want, rtol=2e-6, atol=2e-6, err_msg=f"{op} ({name})")


BINARY = """
func.func @k(%x: memref<8xf32>, %z: memref<8xf32>, %y: memref<4x8xf32>) {
  loop.for %i = 0 to 8 serial {
    %a = loop.load %x[%i] : memref<8xf32>
    %b = loop.load %z[%i] : memref<8xf32>
    %p = math.powf %a, %b : f32
    %f = math.fma %a, %b, %a : f32
    %c = arith.cmpf olt, %a, %b : f32
    %s = arith.select %c, %a, %b : f32
    %n = arith.negf %a : f32
    %m = arith.minnumf %n, %b : f32
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    loop.store %p, %y[%c0, %i] : memref<4x8xf32>
    loop.store %f, %y[%c1, %i] : memref<4x8xf32>
    loop.store %s, %y[%c2, %i] : memref<4x8xf32>
    loop.store %m, %y[%c3, %i] : memref<4x8xf32>
  }
  func.return
}
"""


def test_math_binary_and_compare():
    f, _ = kernel(BINARY, "k", 3)
    x, z, y = rand(8, lo=0.5, hi=2.0), rand(8), np.zeros((4, 8), np.float32)
    f(*ptrs(x, z, y))
    np.testing.assert_allclose(y[0], np.power(x, z), rtol=1e-5)
    np.testing.assert_allclose(y[1], x * z + x, rtol=1e-6)
    np.testing.assert_array_equal(y[2], np.where(x < z, x, z))
    np.testing.assert_array_equal(y[3], np.minimum(-x, z))


INTOPS = """
func.func @ints(%a: memref<16xi32>, %b: memref<16xi32>, %o: memref<6x16xi32>) {
  loop.for %i = 0 to 16 serial {
    %x = loop.load %a[%i] : memref<16xi32>
    %y = loop.load %b[%i] : memref<16xi32>
    %r0 = arith.floordivsi %x, %y : i32
    %r1 = arith.ceildivsi %x, %y : i32
    %r2 = arith.remsi %x, %y : i32
    %r3 = arith.maxsi %x, %y : i32
    %c2 = arith.constant 2 : i32
    %r4 = arith.shli %x, %c2 : i32
    %xi = arith.index_cast %x : i32 to index
    %ii = arith.addi %xi, %i : index
    %r5 = arith.index_cast %ii : index to i32
    %k0 = arith.constant 0 : index
    %k1 = arith.constant 1 : index
    %k2 = arith.constant 2 : index
    %k3 = arith.constant 3 : index
    %k4 = arith.constant 4 : index
    %k5 = arith.constant 5 : index
    loop.store %r0, %o[%k0, %i] : memref<6x16xi32>
    loop.store %r1, %o[%k1, %i] : memref<6x16xi32>
    loop.store %r2, %o[%k2, %i] : memref<6x16xi32>
    loop.store %r3, %o[%k3, %i] : memref<6x16xi32>
    loop.store %r4, %o[%k4, %i] : memref<6x16xi32>
    loop.store %r5, %o[%k5, %i] : memref<6x16xi32>
  }
  func.return
}
"""


def test_integer_ops():
    f, _ = kernel(INTOPS, "ints", 3)
    a = RNG.integers(-50, 50, 16).astype(np.int32)
    b = RNG.choice([-7, -3, -1, 1, 2, 5], 16).astype(np.int32)
    o = np.zeros((6, 16), np.int32)
    f(*ptrs(a, b, o))
    np.testing.assert_array_equal(o[0], a // b)
    np.testing.assert_array_equal(o[1], -(-a // b))
    np.testing.assert_array_equal(o[2], np.fmod(a, b))
    np.testing.assert_array_equal(o[3], np.maximum(a, b))
    np.testing.assert_array_equal(o[4], a << 2)
    np.testing.assert_array_equal(o[5], a + np.arange(16))


def test_unsupported_op_is_a_compile_error():
    text = """
    func.func @k(%x: memref<4xf32>) {
      %c0 = arith.constant 0 : index
      %a = loop.load %x[%c0] : memref<4xf32>
      %b = "foo.frobnicate"(%a) : (f32) -> f32
      loop.store %b, %x[%c0] : memref<4xf32>
      func.return
    }
    """
    with pytest.raises(CompileError, match="foo.frobnicate"):
        translate_module(parse(text, allow_unregistered=True), LLVMOptions(export_all=True))


def test_const_buffer_in_kernel_is_a_compile_error():
    text = """
    func.func @k(%x: memref<4xf32>) {
      %w = loop.const_buffer "w" : memref<4xf32>
      loop.copy %w, %x : memref<4xf32>, memref<4xf32>
      func.return
    }
    """
    with pytest.raises(CompileError, match="const_buffer"):
        translate_module(parse(text), LLVMOptions(export_all=True))


def test_missing_entry_is_a_compile_error():
    with pytest.raises(CompileError, match="@main"):
        translate_module(parse(RELU), LLVMOptions())


def test_unresolved_external_is_a_compile_error():
    text = """
    func.func private @no_such_symbol_xyz(memref<4xf32>) -> ()
    func.func @k(%x: memref<4xf32>) {
      func.call @no_such_symbol_xyz(%x) : (memref<4xf32>) -> ()
      func.return
    }
    """
    with pytest.raises(CompileError, match="no_such_symbol_xyz"):
        compile_module(parse(text), LLVMOptions(export_all=True))
