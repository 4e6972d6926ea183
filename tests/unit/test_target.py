"""The Target is the one source of machine facts (target.py), and the backend generates code for it.

* `CPU_ISA`'s entries agree with the code LLVM emits for each CPU: zmm registers iff avx512f, ymm iff
  avx2, fused multiply-adds iff fma; and the VNNI / BF16 / AMX intrinsics select iff the entry lists them.
* A model compiled for `-mattr=+avx2,+fma` on any host (an AVX-512 one too) has no zmm register and
  matches numpy; so does the default target with `ZIGGURAT_HOST_CPU=haswell`.
* The facts (`vector_width`, `has`) of a few target strings, and how LLVMOptions, the backend and the
  pass pipelines read them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat.backends.llvm import LLVMOptions, translate_module
from ziggurat.backends.llvm.jit import create_target_machine, emit_shared_library, jit_compile
from ziggurat.backends.llvm.translate import PREFER_VECTOR_WIDTH
from ziggurat.errors import CompileError, ZigguratError
from ziggurat.lowering import pipelines
from ziggurat.target import CPU_ISA, HOST_CPU_ENV, Target, host_cpu

AVX2_FMA = "llvm -mattr=+avx2,+fma"

# A <16 x float> multiply-add (legal zmm code with AVX-512, two ymm halves with AVX2, four xmm with SSE)
# and a dot-product loop that LLVM vectorizes at the CPU's width, both with the backend's function
# attributes (prefer-vector-width=512, as translate.py puts on every function).
KERNELS = """
define void @madd16(ptr noalias %x, ptr noalias %y, ptr noalias %out) #0 {
  %a = load <16 x float>, ptr %x, align 4
  %b = load <16 x float>, ptr %y, align 4
  %m = fmul contract <16 x float> %a, %b
  %s = fadd contract <16 x float> %m, %b
  store <16 x float> %s, ptr %out, align 4
  ret void
}

define float @dot(ptr noalias %x, ptr noalias %y, i64 %n) #0 {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]
  %acc = phi float [ 0.0, %entry ], [ %acc1, %loop ]
  %px = getelementptr float, ptr %x, i64 %i
  %py = getelementptr float, ptr %y, i64 %i
  %vx = load float, ptr %px, align 4
  %vy = load float, ptr %py, align 4
  %p = fmul contract reassoc float %vx, %vy
  %acc1 = fadd contract reassoc float %acc, %p
  %i1 = add nuw i64 %i, 1
  %c = icmp ult i64 %i1, %n
  br i1 %c, label %loop, label %exit
exit:
  ret float %acc1
}

attributes #0 = { nounwind PREFER }
""".replace("PREFER", PREFER_VECTOR_WIDTH)


@pytest.fixture
def host_cpu_env(monkeypatch):
    """Sets ZIGGURAT_HOST_CPU for one test (`host_cpu_env("haswell")`); the host facts are re-read after."""
    from ziggurat.backends.llvm.amx_runtime import amx_status

    def set_cpu(name: str) -> None:
        monkeypatch.setenv(HOST_CPU_ENV, name)
        host_cpu.cache_clear()
        amx_status.cache_clear()

    yield set_cpu
    monkeypatch.undo()
    host_cpu.cache_clear()
    amx_status.cache_clear()


# -- (a) CPU_ISA against LLVM -------------------------------------------------------------------


@pytest.mark.parametrize("cpu", sorted(CPU_ISA))
def test_cpu_isa_vector_registers_agree_with_llvm(cpu):
    """Compiled by the backend for `-mcpu=cpu`: zmm iff the entry has avx512f, ymm iff avx2, vfmadd iff fma
    (checked for every entry, the listed haswell, skylake-avx512, x86-64-v3/v4, znver4, cascadelake too)."""
    tgt = Target.parse(f"llvm -mcpu={cpu}")
    asm = jit_compile(KERNELS, LLVMOptions.for_target(tgt, num_threads=1)).assembly()
    isa = set(CPU_ISA[cpu])
    assert ("zmm" in asm) == ("avx512f" in isa), cpu
    assert ("ymm" in asm) == ("avx2" in isa), cpu
    assert (re.search(r"\bvfmadd", asm) is not None) == ("fma" in isa), cpu
    assert tgt.vector_width == (16 if "avx512f" in isa else 8 if "avx2" in isa else 4)


# One intrinsic per instruction set; LLVM aborts ("LLVM ERROR: Cannot select ...") where the CPU lacks it, so each is
# compiled in a child process of its own, with llvmlite alone.
_INTRINSICS = {
    "avx512vnni": ("<16 x i32> @llvm.x86.avx512.vpdpbusd.512(<16 x i32>, <16 x i32>, <16 x i32>)",
                   "<16 x i32> %a, <16 x i32> %a, <16 x i32> %a", "<16 x i32>", "vpdpbusd"),
    "avx512bf16": ("<16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>, <32 x bfloat>, <32 x bfloat>)",
                   "<16 x float> %f, <32 x bfloat> %h, <32 x bfloat> %h", "<16 x float>", "vdpbf16ps"),
    "amx-tile": ("void @llvm.x86.tilezero(i8)", "i8 0", "void", "tilezero"),
}
_CHILD = """
import sys
import llvmlite.binding as llvm
llvm.initialize_native_target(); llvm.initialize_native_asmprinter()
tm = llvm.Target.from_default_triple().create_target_machine(cpu=sys.argv[1], features="")
print(sys.argv[2] in tm.emit_assembly(llvm.parse_assembly(sys.stdin.read())))
"""


@pytest.mark.parametrize("cpu", ["haswell", "alderlake", "x86-64-v4", "skylake-avx512", "cascadelake", "cooperlake",
                                 "icelake-server", "sapphirerapids", "znver4"])
def test_cpu_isa_instruction_sets_agree_with_llvm(cpu):
    for feature, (decl, args, ret, insn) in _INTRINSICS.items():
        call = f"call {decl.split(' ', 1)[0]} {decl.split(' ', 1)[1].split('(')[0]}({args})"
        body = ("  call void @llvm.x86.tilezero(i8 0)\n  ret void" if ret == "void"
                else f"  %r = {call}\n  ret {ret} %r")
        text = (f"declare {decl}\n"
                f"define {ret} @f(<16 x i32> %a, <16 x float> %f, <32 x bfloat> %h) #0 {{\n{body}\n}}\n"
                f"attributes #0 = {{ nounwind {PREFER_VECTOR_WIDTH} }}\n")
        done = subprocess.run([sys.executable, "-c", _CHILD, cpu, insn], input=text, capture_output=True, text=True,
                              timeout=120)
        selects = done.returncode == 0 and done.stdout.strip() == "True"
        assert done.returncode == 0 or "LLVM ERROR" in done.stderr, done.stderr[-500:]  # refused, not crashed otherwise
        assert selects == (feature in CPU_ISA[cpu]), (cpu, feature)


# -- (b) a model compiled for AVX2 on this host ---------------------------------------------------


def _matmul_relu(m: int = 8, k: int = 64, n: int = 48):
    w = np.random.default_rng(3).standard_normal((k, n)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    g = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                          [numpy_helper.from_array(w, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, w


def _compile_and_check(target):
    """Compiles matmul + relu for `target`, checks it against numpy; returns the model's assembly."""
    model, w = _matmul_relu()
    cm = ziggurat.compile(model, target=target)
    x = np.random.default_rng(4).standard_normal((8, 64)).astype(np.float32)
    (got,) = cm(x)
    np.testing.assert_allclose(got, np.maximum(x.astype(np.float64) @ w, 0), rtol=1e-4, atol=1e-4)
    opts = cm.info["llvm_options"]
    tgt = Target.parse(target)
    assert (opts.cpu, opts.features) == (tgt.llvm_cpu, tgt.llvm_features)
    return jit_compile(cm.info["llvm_ir"], opts).assembly()  # the same IR and options as the model's JIT


needs_avx2 = pytest.mark.skipif(not Target.parse("llvm").has("avx2"), reason="this host cannot run AVX2 code")


@needs_avx2
def test_avx2_target_has_no_zmm_on_any_host():
    asm = _compile_and_check(AVX2_FMA)
    assert "zmm" not in asm and "ymm" in asm and "vfmadd" in asm
    assert f"vector-width={Target.parse(AVX2_FMA).vector_width}" in ziggurat.compile(_matmul_relu()[0],
                                                                                      target=AVX2_FMA).info["pipeline"]
    if Target.parse("llvm").has("avx512f"):  # the check can tell: the default target uses zmm here
        assert "zmm" in _compile_and_check("llvm")


@needs_avx2
def test_host_cpu_override_makes_the_default_target_avx2(host_cpu_env):
    host_cpu_env("haswell")
    tgt = Target.parse("llvm")
    assert host_cpu() == ("haswell", "+avx,+avx2,+fma")
    assert (tgt.llvm_cpu, tgt.vector_width, tgt.has("avx512f")) == ("haswell", 8, False)
    asm = _compile_and_check("llvm")
    assert "zmm" not in asm and "ymm" in asm
    assert LLVMOptions().cpu == "haswell"  # the backend's default is the default target


def test_host_cpu_override_must_name_a_known_cpu(host_cpu_env):
    host_cpu_env("pentium-4-extreme")
    with pytest.raises(ZigguratError, match="ZIGGURAT_HOST_CPU='pentium-4-extreme' is not a CPU ziggurat knows"):
        Target.parse("llvm").vector_width


# -- (c) facts and how they are read ---------------------------------------------------------------


@pytest.mark.parametrize("text, width, registers, has, lacks, cpu, features", [
    ("llvm -mcpu=haswell", 8, 16, ("avx", "avx2", "fma"), ("avx512f", "avx512vnni"), "haswell", ""),
    ("llvm -mcpu=skylake-avx512", 16, 32, ("avx2", "fma", "avx512f", "avx512bw"), ("avx512vnni", "avx512bf16"),
     "skylake-avx512", ""),
    ("llvm -mcpu=cascadelake", 16, 32, ("avx512f", "avx512vnni"), ("avx512bf16", "amx-tile"), "cascadelake", ""),
    ("llvm -mattr=+avx2,+fma", 8, 16, ("avx", "avx2", "fma"), ("avx512f", "sse4.2"), "x86-64", "+avx2,+fma"),
    ("llvm -mcpu=x86-64", 4, 16, (), ("avx", "avx2"), "x86-64", ""),
    ("llvm -mcpu=znver4 -mattr=-avx512f", 8, 16, ("avx2", "avx512vnni"), ("avx512f",), "znver4", "-avx512f"),
])
def test_target_facts(text, width, registers, has, lacks, cpu, features):
    tgt = Target.parse(text)
    assert (tgt.vector_width, tgt.vector_registers, tgt.llvm_cpu, tgt.llvm_features) == (width, registers, cpu,
                                                                                         features)
    assert all(tgt.has(f) for f in has) and not any(tgt.has(f) for f in lacks)


def test_llvm_options_always_carry_cpu_and_features():
    """Left out, they are filled in as the Target reads the same strings: the default target, the generic
    CPU plus the features, or the CPU with its own."""
    host = Target.parse("llvm")
    assert (LLVMOptions().cpu, LLVMOptions().features) == (host.llvm_cpu, host.llvm_features)
    assert (LLVMOptions(features="+avx2,+fma").cpu, LLVMOptions(features="+avx2,+fma").features) == ("x86-64",
                                                                                                     "+avx2,+fma")
    assert (LLVMOptions(cpu="haswell").cpu, LLVMOptions(cpu="haswell").features) == ("haswell", "")
    o = LLVMOptions.for_target("llvm -mcpu=cascadelake -num-cores=3", export_all=True)
    assert (o.cpu, o.features, o.num_threads, o.export_all) == ("cascadelake", "", 3, True)
    assert o.target.has("avx512vnni") and not LLVMOptions(cpu="haswell").target.has("avx512f")
    with pytest.raises(CompileError, match="needs an LLVM CPU name and a feature string"):
        create_target_machine(None, None)  # type: ignore[arg-type]


def test_intrinsics_are_checked_against_the_options_target():
    """x86vec.dpbusd needs avx512vnni: the CPU's own features count (-mcpu=cascadelake, no -mattr), a CPU
    without it is one clear CompileError, whatever the host has."""
    from ziggurat.lowering.qgemm import lower_and_schedule, qgemm_module

    def module():
        m = qgemm_module(8, 32, 16)
        lower_and_schedule(m, 8, 2)
        return m

    lm, _ = translate_module(module(), LLVMOptions(export_all=True, cpu="cascadelake", features=""))
    assert "llvm.x86.avx512.vpdpbusd" in str(lm)
    with pytest.raises(CompileError, match="'x86vec.dpbusd' needs the CPU feature 'avx512vnni', which the target "
                                           "CPU 'haswell' does not have"):
        translate_module(module(), LLVMOptions(export_all=True, cpu="haswell"))
    with pytest.raises(CompileError, match="which the target CPU 'x86-64' with -mattr=\\+avx2,\\+fma does not have"):
        translate_module(module(), LLVMOptions.for_target(AVX2_FMA, export_all=True))


def test_pipelines_format_the_target_facts():
    avx2 = pipelines.default_pipeline(3, "llvm -mcpu=haswell -num-cores=3")
    assert "convert-layout{block=8}" in avx2 and "int8-dot=avx2" in avx2
    assert "int8-dot=none" in pipelines.default_pipeline(3, "llvm -mcpu=x86-64 -num-cores=1")  # SSE2 only
    assert "loop-parallelize-outer{vector-width=8 threads=3}" in avx2
    vnni = pipelines.schedule_stage(3, "llvm -mcpu=cascadelake -num-cores=2")
    assert "loop-default-schedule{vector-width=16 int8-dot=vnni}" in vnni
    assert "loop-parallelize-outer{vector-width=16 threads=2}" in vnni


_QGEMM = """
func.func @main(%a: tensor<8x64xui8>, %b: tensor<16x128xi8>) -> tensor<8x32xi32> {
  %c = graph.qgemm %a, %b : tensor<8x64xui8>, tensor<16x128xi8> -> tensor<8x32xi32>
  func.return %c : tensor<8x32xi32>
}
"""


def test_int8_dot_auto_asks_the_default_target(host_cpu_env):
    """By hand (`loop-default-schedule` without int8-dot), the qgemm schedule follows the default target;
    the pipelines say `vnni`, `avx2` or `none` for theirs."""
    from xdsl.parser import Parser

    from ziggurat.compiler import parse_pipeline, run_passes
    from ziggurat.dialects import make_context

    def scheduled(spec: str = "loop-default-schedule", exact: bool = False) -> str:
        m = Parser(make_context(), _QGEMM.replace("%b :", "%b {pairs16} :") if exact else _QGEMM).parse_module()
        run_passes(m, parse_pipeline(f"convert-graph-to-te,convert-te-to-loop,{spec}"))
        return str(m)

    host_cpu_env("haswell")  # the plain qgemm stays scalar (vpmaddubsw would saturate), its pairs16 twin does not
    assert "x86vec.dpbusd" not in scheduled() and 'loop.block "qgemm"' in scheduled()
    assert "x86vec.maddubs_dot" in scheduled(exact=True)
    host_cpu_env("cascadelake")
    assert "x86vec.dpbusd" in scheduled() and 'loop.block "qgemm"' not in scheduled()
    for target, op in (("llvm -mcpu=haswell", "maddubs_dot"), ("llvm -mcpu=znver4", "dpbusd"),
                       ("llvm -mcpu=x86-64", None)):  # whatever the default
        ir = scheduled(pipelines.schedule_stage(2, target), exact=True)
        assert ("x86vec.dpbusd" in ir, "x86vec.maddubs_dot" in ir) == (op == "dpbusd", op == "maddubs_dot")


def test_export_records_the_instruction_sets_of_the_cpu(tmp_path):
    """`-mcpu=haswell` gives LLVM no feature string; the library's metadata still lists what the code may use
    (runtime/load.py refuses a machine without them)."""
    from xdsl.parser import Parser

    from ziggurat.dialects import make_context

    opts = LLVMOptions.for_target("llvm -mcpu=haswell", num_threads=1, export_all=True)
    lm, _ = translate_module(Parser(make_context(), _RELU).parse_module(), opts)
    emit_shared_library(str(lm), tmp_path / "k.so", opts, exports=["relu"])
    meta = json.loads((tmp_path / "k.so.json").read_text())
    assert meta["cpu"] == "haswell" and set(meta["features"].split(",")) == {"+avx", "+avx2", "+fma"}
    opts = LLVMOptions.for_target(AVX2_FMA, num_threads=1, export_all=True)
    emit_shared_library(str(lm), tmp_path / "g.so", opts, exports=["relu"])
    meta = json.loads((tmp_path / "g.so.json").read_text())
    assert meta["cpu"] == "x86-64" and meta["features"] == "+avx2,+fma,+avx"


_RELU = """
func.func @relu(%x: memref<64xf32>, %y: memref<64xf32>) {
  loop.for %j = 0 to 64 vectorized {
    loop.block "relu" [S %vj = %j] {
      %v = loop.load %x[%vj] : memref<64xf32>
      %c = arith.constant 0.000000e+00 : f32
      %r = arith.maximumf %v, %c : f32
      loop.store %r, %y[%vj] : memref<64xf32>
    }
  }
  func.return
}
"""
