"""Kernels over symbolic extents (issue 22): `Sym` arithmetic, `#sym.dims` types, `loop.for`
with run-time bounds, and the LLVM backend's strides, allocations and copies computed from a
function's symbol arguments, run at many sizes from one compile against numpy."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import f32
from xdsl.parser import Parser

from ziggurat.backends.llvm import LLVMOptions, compile_module, jit_compile, translate_module
from ziggurat.dialects import make_context
from ziggurat.dialects.loop import DynamicLoopError, ForOp
from ziggurat.dialects.sym import memref_of_shape, shape_of, tensor_of
from ziggurat.errors import CompileError
from ziggurat.symbolic import Sym, SymbolicError, prod

P = ctypes.c_void_p
I = ctypes.c_int64
RNG = np.random.default_rng(7)


def parse(text: str):
    return Parser(make_context(), text).parse_module()


# -- Sym ---------------------------------------------------------------------------------------


@given(st.integers(1, 50), st.integers(1, 50), st.integers(-9, 9), st.integers(1, 9))
def test_sym_arithmetic_matches_ints(b: int, s: int, c: int, k: int):
    B, S = Sym.of("batch"), Sym.of("sequence")
    env = {"batch": b, "sequence": s}
    for expr, want in [(B * S * k + c, b * s * k + c), ((B + c) * (S - k), (b + c) * (s - k)),
                       (B * S * k // k, b * s), (B * S * k // S, b * k), (c - B, c - b)]:
        value = expr.evaluate(env) if isinstance(expr, Sym) else expr
        assert value == want
        if isinstance(expr, Sym):
            assert Sym.parse(str(expr)) == expr


@given(st.integers(1, 400), st.integers(1, 7), st.integers(-9, 9), st.integers(1, 3))
def test_floor_division_derives_a_symbol(h: int, k: int, c: int, s: int):
    H = Sym.of("height")
    q = (H * s + c) // k  # a conv's output extent: (h + 2p - kernel) // stride + 1
    assert Sym.lift(q).evaluate({"height": h}) == (h * s + c) // k
    assert Sym.lift((q + 1) // 2).evaluate({"height": h}) == ((h * s + c) // k + 1) // 2
    if isinstance(q, Sym):
        assert Sym.parse(str(q)) == q and q.base_symbols <= {"height"}


def test_sym_needs_a_value_where_the_answer_depends_on_it():
    n = Sym.of("n")
    with pytest.raises(SymbolicError, match="no value at compile time"):
        int(n)
    with pytest.raises(SymbolicError, match="needs its value"):
        n < 4  # noqa: B015
    with pytest.raises(SymbolicError, match="divisible"):
        (n * 4).exact_div(3)
    with pytest.raises(SymbolicError):
        [1, 2][n]  # type: ignore[index]
    assert n * 0 == 0 and n - n == 0 and n != 4 and prod([n, 3, n]) == Sym.parse("3*n*n")


def test_sym_dims_types_round_trip():
    shape = (Sym.of("batch"), Sym.parse("2*sequence + 1"), 768)
    assert shape_of(tensor_of(f32, shape)) == shape and shape_of(tensor_of(f32, (2, 3))) == (2, 3)
    m = memref_of_shape(f32, shape)
    text = 'memref<?x?x768xf32, #sym.dims<"batch", "1 + 2*sequence">>'
    module = parse(f"func.func @f(%x: {text}) {{ func.return }}")
    assert module.ops.first.body.block.args[0].type == m and text in str(module)
    with pytest.raises(Exception, match="cannot read"):
        parse('func.func @f(%x: memref<?xf32, #sym.dims<"2*+n">>) { func.return }')


# -- loop.for with run-time bounds ---------------------------------------------------------------


def test_dynamic_loop_refuses_static_questions():
    m = parse("""func.func @f(%n: index) {
      loop.for %i = 0 to %n step 4 serial { "test.op"(%i) : (index) -> () }
      func.return }""".replace('"test.op"(%i) : (index) -> ()', ""))
    f = next(o for o in m.walk() if isinstance(o, ForOp))
    assert f.is_dynamic and f.lower == 0 and f.upper is m.ops.first.body.block.args[0]
    with pytest.raises(DynamicLoopError, match="run-time bound"):
        f.trip_count
    assert "loop.for %i = 0 to %n step 4 serial" in str(m)


# -- the backend ----------------------------------------------------------------------------------

# y[i, j] = x[i, j] * 2 + b[j] over a [n*m, 7] buffer, through a local [n*m, 7] scratch buffer and a
# copy; the row loop is parallel (split at run time over the threads), the column loop starts at a
# run-time bound (0) to exercise dynamic lower bounds.
SCALE = """
func.func @scale(%x: memref<?x7xf32, #sym.dims<"m*n">>, %b: memref<7xf32>, %y: memref<?x7xf32, #sym.dims<"m*n">>,
                 %m: index, %n: index) attributes {sym.symbols = ["m", "n"]} {
  %rows = arith.muli %m, %n : index
  %zero = arith.constant 0 : index
  %t = loop.alloc "local" : memref<?x7xf32, #sym.dims<"m*n">>
  loop.for %i = 0 to %rows parallel {
    loop.for %j = %zero to 7 serial {
      loop.block "scale" [S %vi = %i, S %vj = %j] {
        %v = loop.load %x[%vi, %vj] : memref<?x7xf32, #sym.dims<"m*n">>
        %c = arith.constant 2.000000e+00 : f32
        %w = loop.load %b[%vj] : memref<7xf32>
        %p = arith.mulf %v, %c : f32
        %r = arith.addf %p, %w : f32
        loop.store %r, %t[%vi, %vj] : memref<?x7xf32, #sym.dims<"m*n">>
      }
    }
  }
  loop.copy %t, %y : memref<?x7xf32, #sym.dims<"m*n">>, memref<?x7xf32, #sym.dims<"m*n">>
  func.return
}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_symbolic_kernel_runs_every_size_from_one_compile(threads: int):
    jm = compile_module(parse(SCALE), LLVMOptions(export_all=True, num_threads=threads))
    f = jm.cfunc("scale", None, P, P, P, I, I)
    b = RNG.standard_normal(7).astype(np.float32)
    for m, n in [(1, 1), (3, 5), (1, 0), (17, 33), (2, 1000)]:
        x = RNG.standard_normal((m * n, 7)).astype(np.float32)
        y = np.full_like(x, np.nan)
        f(x.ctypes.data, b.ctypes.data, y.ctypes.data, m, n)
        np.testing.assert_allclose(y, x * 2 + b, rtol=1e-6)


# The entry ABI: a symbol's value travels in its slot of the packed array; the global buffers of
# symbolic size share an arena the caller sizes from ModuleInfo.dynamic_buffers and passes last.
ENTRY = """
func.func @double(%x: memref<?xf32, #sym.dims<"n">>, %y: memref<?xf32, #sym.dims<"n">>, %n: index)
    attributes {sym.symbols = ["n"]} {
  loop.for %i = 0 to %n serial {
    loop.block "double" [S %vi = %i] {
      %v = loop.load %x[%vi] : memref<?xf32, #sym.dims<"n">>
      %r = arith.addf %v, %v : f32
      loop.store %r, %y[%vi] : memref<?xf32, #sym.dims<"n">>
    }
  }
  func.return
}
func.func @main(%x: memref<?x3xf32, #sym.dims<"n">>, %y: memref<?x3xf32, #sym.dims<"n">>, %n: index)
    attributes {sym.symbols = ["n"]} {
  %rows = arith.constant 3 : index
  %n3 = arith.muli %n, %rows : index
  %t = loop.alloc "global" : memref<?xf32, #sym.dims<"3*n">>
  loop.copy %x, %t : memref<?x3xf32, #sym.dims<"n">>, memref<?xf32, #sym.dims<"3*n">>
  %u = loop.alloc "global" : memref<?xf32, #sym.dims<"3*n">>
  func.call @double(%t, %u, %n3) : (memref<?xf32, #sym.dims<"3*n">>, memref<?xf32, #sym.dims<"3*n">>, index) -> ()
  loop.copy %u, %y : memref<?xf32, #sym.dims<"3*n">>, memref<?x3xf32, #sym.dims<"n">>
  func.return
}
"""


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 300))
def test_entry_takes_symbols_in_packed_slots(n: int):
    jm = _ENTRY_JIT.get("jm")
    if jm is None:
        o = LLVMOptions()
        lm, info = translate_module(parse(ENTRY), o)
        assert info.num_args == 3 and info.arena_size == 0 and info.num_slots == 4
        assert [b[0] for b in info.dynamic_buffers] == ["12*n", "12*n"]  # no live ranges: plan-memory did not run
        jm = _ENTRY_JIT["jm"] = jit_compile(lm, o, info)
    call = jm.cfunc("ziggurat_entry", None, P)
    x = RNG.standard_normal((n, 3)).astype(np.float32)
    y = np.full_like(x, np.nan)
    size = -(-12 * n // 64) * 64
    arena = np.full(64 // 4 + 2 * size // 4 + 16, np.nan, np.float32)
    arena[:4].view(np.int64)[:] = [64, 64 + size]  # the offsets table the executor writes
    packed = (P * 4)(x.ctypes.data, y.ctypes.data, n, arena.ctypes.data)
    call(packed)
    np.testing.assert_array_equal(y, x + x)


_ENTRY_JIT: dict = {}


def test_missing_symbol_is_a_compile_error():
    text = SCALE.replace('attributes {sym.symbols = ["m", "n"]}', 'attributes {sym.symbols = ["n"]}')
    with pytest.raises(CompileError, match="needs symbol 'm'"):
        translate_module(parse(text), LLVMOptions(export_all=True))
    bad = SCALE.replace("%m: index, %n: index) attributes", "%m: index, %n: f32) attributes")
    bad = bad.replace("arith.muli %m, %n", "arith.muli %m, %m")
    with pytest.raises(CompileError, match="index arguments"):
        translate_module(parse(bad), LLVMOptions(export_all=True))


# -- te -> loop -> loop-dynamic-schedule -> hw -> LLVM ---------------------------------------------

# A matmul whose rows (m) and depth (n) are symbols, and a row maximum over the symbolic row length.
TE = """
func.func @k(%x: tensor<?x?xf32, #sym.dims<"m", "n">>, %w: tensor<?x24xf32, #sym.dims<"n">>)
    -> (tensor<?x24xf32, #sym.dims<"m">>, tensor<?xf32, #sym.dims<"m">>) {
  %y = te.reduce "mm" add init 0.0 : f32 (%i, %j) reduce (%k : "n") : tensor<?x24xf32, #sym.dims<"m">> {
    %a = te.read %x[%i, %k] : tensor<?x?xf32, #sym.dims<"m", "n">>
    %c = te.read %w[%k, %j] : tensor<?x24xf32, #sym.dims<"n">>
    %p = arith.mulf %a, %c : f32
    te.yield %p : f32
  }
  %z = te.reduce "rowmax" max init -3.4e38 : f32 (%i) reduce (%k : "n") : tensor<?xf32, #sym.dims<"m">> {
    %a = te.read %x[%i, %k] : tensor<?x?xf32, #sym.dims<"m", "n">>
    %s = te.sym "n" : index
    %si = arith.index_cast %s : index to i32
    %sf = arith.sitofp %si : i32 to f32
    %q = arith.addf %a, %sf : f32
    te.yield %q : f32
  }
  func.return %y, %z : tensor<?x24xf32, #sym.dims<"m">>, tensor<?xf32, #sym.dims<"m">>
}
"""


def _lowered(width: int, threads: int):
    from ziggurat.compiler import run_passes
    from ziggurat.registry import make_context as registry_context
    from xdsl.passes import PassPipeline
    from ziggurat.transforms import get_all_passes

    module = parse(TE)
    spec = f"convert-te-to-loop,loop-dynamic-schedule,convert-loop-to-hw{{vector-width={width}}}"
    passes = list(PassPipeline.parse_spec(get_all_passes(), spec).passes)
    run_passes(module, passes, registry_context())
    text = str(module)
    assert "hw.vfma" in text and "hw.vreduce" in text and "parallel" in text  # the schedule took effect
    return compile_module(module, LLVMOptions(export_all=True, num_threads=threads))


_TE_JIT: dict = {}


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 40), st.integers(1, 100), st.sampled_from([(16, 1), (8, 2)]))
def test_symbolic_te_kernel_matches_numpy(m: int, n: int, config: tuple[int, int]):
    jm = _TE_JIT.get(config)
    if jm is None:
        jm = _TE_JIT[config] = _lowered(*config)
    f = jm.cfunc("k", None, P, P, P, P, I, I)
    x = RNG.standard_normal((m, n)).astype(np.float32)
    w = RNG.standard_normal((n, 24)).astype(np.float32)
    y, z = np.full((m, 24), np.nan, np.float32), np.full(m, np.nan, np.float32)
    f(x.ctypes.data, w.ctypes.data, y.ctypes.data, z.ctypes.data, m, n)
    np.testing.assert_allclose(y, x @ w, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(z, (x + np.float32(n)).max(axis=1) if n else np.full(m, -3.4e38, np.float32))


def test_parallel_loops_over_symbols_fork_only_with_enough_work():
    """loop-dynamic-schedule writes a parallel loop's work as an expression of the symbols
    (`dyn.work`); at 2 threads the backend forks only where its value reaches MIN_WORK (the
    hypothesis test above runs both sides of that test: m, n from 0 up)."""
    from ziggurat.dialects.loop import MIN_WORK

    jm = _TE_JIT.get((8, 2)) or _TE_JIT.setdefault((8, 2), _lowered(8, 2))
    import re

    assert len(re.findall(rf"icmp sge i64 %\S+, {MIN_WORK}\b", jm.llvm_ir)) == 2  # one test per parallel loop
    f = jm.cfunc("k", None, P, P, P, P, I, I)
    for m, n in [(1, 1), (2, 3), (200, 100)]:  # below and above the threshold
        x = RNG.standard_normal((m, n)).astype(np.float32)
        w = RNG.standard_normal((n, 24)).astype(np.float32)
        y, z = np.full((m, 24), np.nan, np.float32), np.full(m, np.nan, np.float32)
        f(x.ctypes.data, w.ctypes.data, y.ctypes.data, z.ctypes.data, m, n)
        np.testing.assert_allclose(y, x @ w, rtol=1e-4, atol=1e-4)
