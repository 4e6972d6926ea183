"""AArch64 as a target (docs/targets.md): the target's facts, the pipeline options they give, the NEON
code LLVM's AArch64 backend makes, and cross-compiled models run under qemu-aarch64 by the C runner
(runtime/runner/runner.c) against onnxruntime on the host.

The qemu tests need `aarch64-linux-gnu-gcc` (with the AArch64 libgomp) and `qemu-aarch64`; they skip
with the reason when either is missing (.ci/run installs them where it can)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import ziggurat
from ziggurat.errors import CompileError, ModelLoadError, ZigguratError
from ziggurat.target import Target

A64 = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon"
RUNNER_C = Path(ziggurat.__file__).parent / "runtime" / "runner" / "runner.c"
SYSROOT = "/usr/aarch64-linux-gnu"
CROSS_CC, QEMU = shutil.which("aarch64-linux-gnu-gcc"), shutil.which("qemu-aarch64")
needs_cross = pytest.mark.skipif(CROSS_CC is None or QEMU is None,
                                 reason="needs aarch64-linux-gnu-gcc and qemu-aarch64 (apt-get install "
                                        "gcc-aarch64-linux-gnu libgomp1-arm64-cross qemu-user)")


from tests.target_models import cnn, mlp, norm_block as _norm_block


def norm_block():
    return _norm_block(tanh=False)


# --- the target's facts -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, cpu, features", [
    (A64, "generic", {"neon"}),
    ("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", "cortex-a72", {"neon"}),
    ("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1", "neoverse-n1", {"neon", "dotprod", "fullfp16"}),
    ("llvm -mtriple=aarch64-unknown-linux-gnu", "generic", {"neon"}),
])
def test_parse_aarch64(text, cpu, features):
    t = Target.parse(text)
    assert (t.arch, t.llvm_cpu, t.vector_width, t.vector_registers) == ("aarch64", cpu, 4, 32)
    assert features <= t.features() and not t.is_native
    assert not (t.has("avx") or t.has("avx512vnni") or t.has("amx-tile") or t.has("avxvnni"))
    assert Target.parse(str(t)) == t
    assert t.num_threads == 1 and Target.parse(text + " -num-cores=4").num_threads == 4


def test_parse_refuses_unknown_arch_and_cpu():
    with pytest.raises(ZigguratError, match="x86_64 and aarch64"):
        Target.parse("llvm -mtriple=riscv64-linux-gnu")
    with pytest.raises(ZigguratError, match="did you mean .*'cortex-a73'"):
        Target.parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a27")
    with pytest.raises(ZigguratError, match="unknown AArch64 CPU"):
        Target.parse("llvm -mtriple=aarch64-linux-gnu -mcpu=haswell -mattr=+neon")


def test_x86_targets_unchanged():
    for text, width, regs in (("llvm -mcpu=haswell", 8, 16), ("llvm -mcpu=x86-64-v4", 16, 32), ("llvm -mcpu=x86-64", 4, 16)):
        t = Target.parse(text)
        assert (t.arch, t.vector_width, t.vector_registers, t.is_native, str(t)) == ("x86_64", width, regs, True, text)


def test_pipeline_and_register_budget():
    from ziggurat.lowering.pipelines import default_pipeline
    from ziggurat.transforms.schedule.plan import MAX_ACC, MAX_ACC_WIDE, ROWS, ROWS_WIDE, register_budget

    spec = default_pipeline(3, A64)
    assert "loop-default-schedule{vector-width=4 vector-registers=32 int8-dot=none}" in spec
    assert "convert-loop-to-hw{vector-width=4}" in spec and "vnni" not in spec
    for x86 in ("llvm -mcpu=haswell", "llvm -mcpu=x86-64-v4", "llvm -mcpu=x86-64"):
        assert "vector-registers" not in default_pipeline(3, x86)
    assert register_budget(4, 32) == register_budget(16) == (MAX_ACC_WIDE, ROWS_WIDE)
    assert register_budget(4) == register_budget(8) == register_budget(4, 16) == (MAX_ACC, ROWS)


# --- cross-compiling (llvmlite alone) ------------------------------------------------------------------

@pytest.fixture(scope="module")
def mlp_a64():
    return ziggurat.compile(mlp(), target=A64 + " -num-cores=2")


def test_foreign_model_refuses_to_run(mlp_a64):
    assert type(mlp_a64).__name__ == "CrossCompiledModel" and mlp_a64.input_names == ["x"]
    with pytest.raises(CompileError, match="cannot run on this machine; export it"):
        mlp_a64(np.zeros((16, 64), np.float32))
    from ziggurat.backends.llvm.jit import jit_compile

    with pytest.raises(CompileError, match="not JIT-compiled"):
        jit_compile(mlp_a64.info["llvm_ir"], mlp_a64.info["llvm_options"])


def test_matmul_uses_neon_fmla(mlp_a64):
    from ziggurat.backends.llvm.jit import emit_assembly

    asm = emit_assembly(mlp_a64.info["llvm_ir"], mlp_a64.info["llvm_options"])
    fmla = re.findall(r"\bfmla\s+v(\d+)\.4s", asm)
    assert len(fmla) >= 8, asm[:2000]
    assert max(int(r) for r in fmla) >= 16  # the 32-register budget: accumulators beyond v15
    assert not re.search(r"\b(ymm|zmm|xmm)\d", asm)


# --- running under qemu --------------------------------------------------------------------------------

def _build_runner(cc: str, out: Path) -> Path:
    subprocess.run([cc, "-O2", "-std=c99", "-Wall", "-Werror", str(RUNNER_C), "-ldl", "-o", str(out)], check=True)
    return out


@pytest.fixture(scope="session")
def a64_runner(tmp_path_factory):
    if CROSS_CC is None or QEMU is None:
        pytest.skip("needs aarch64-linux-gnu-gcc and qemu-aarch64")
    return _build_runner(CROSS_CC, tmp_path_factory.mktemp("runner") / "runner-aarch64")


def run_exported(runner: Path, lib: Path, inputs: list[np.ndarray], tmp: Path, qemu: bool = True) -> list[np.ndarray]:
    paths = []
    for i, x in enumerate(inputs):
        paths.append(tmp / f"in{i}.npy")
        np.save(paths[-1], x)
    outdir = tmp / "out"
    outdir.mkdir(exist_ok=True)
    cmd = ([QEMU, "-L", SYSROOT] if qemu else []) + [str(runner), str(lib), str(outdir), *map(str, paths)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [np.load(p) for p in sorted(outdir.glob("out*.npy"), key=lambda p: int(p.stem[3:]))]


def _reference(model, inputs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), inputs)})


@needs_cross
@pytest.mark.parametrize("build, shape, threads", [(mlp, (16, 64), 2), (cnn, (2, 3, 8, 8), 1), (norm_block, (2, 8, 32), 2)],
                         ids=["mlp", "cnn", "layernorm_softmax"])
def test_cross_compiled_model_matches_onnxruntime(build, shape, threads, a64_runner, tmp_path):
    model = build()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    lib = ziggurat.compile(model, target=f"{A64} -num-cores={threads}").export(tmp_path / "model.so")
    meta = (tmp_path / "model.so.json").read_text()
    assert '"triple": "aarch64' in meta and (tmp_path / "model.so.abi").is_file()
    if threads > 1 and shutil.which("readelf"):  # parallel loops through the target's libgomp
        assert "libgomp.so.1" in subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
    got = run_exported(a64_runner, lib, [x], tmp_path)
    for g, r in zip(got, _reference(model, [x]), strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)


@needs_cross
def test_loader_refuses_foreign_library(mlp_a64, tmp_path):
    from ziggurat.runtime import load

    lib = mlp_a64.export(tmp_path / "mlp.so")
    with pytest.raises(ModelLoadError, match="built for 'aarch64"):
        load(lib)


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a host C compiler")
def test_runner_on_host_library(tmp_path):
    """The same runner built for the host runs the host's export like the in-process model."""
    model = cnn()
    x = np.random.default_rng(4).standard_normal((2, 3, 8, 8)).astype(np.float32)
    compiled = ziggurat.compile(model, target="llvm -num-cores=2")
    lib = compiled.export(tmp_path / "cnn.so")
    runner = _build_runner(shutil.which("cc"), tmp_path / "runner")
    (got,) = run_exported(runner, lib, [x], tmp_path, qemu=False)
    np.testing.assert_array_equal(got, compiled(x)[0])
