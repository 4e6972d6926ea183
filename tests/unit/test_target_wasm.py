"""WebAssembly as a target (docs/targets.md): the target's facts, the pipeline they give, the simd128 code
LLVM's WebAssembly backend makes, and models exported as `.wasm` (wasm-ld + wasi-libc) run through
wasmtime (`ziggurat.runtime.wasm.load`) against onnxruntime on the host.

The run tests need `wasm-ld` (apt-get install lld-19), wasi-libc's libc.a (apt-get install wasi-libc)
and the `wasmtime` package (pip install 'ziggurat[wasm]'); they skip with the reason when one is missing
(.ci/run installs the first two where it can, `dev` brings wasmtime)."""

from __future__ import annotations

import importlib.util
import json
import re

import numpy as np
import onnxruntime as ort
import pytest

import ziggurat
from ziggurat.errors import CompileError, InputError, ModelLoadError, ZigguratError
from ziggurat.target import Target

WASM = "llvm -mtriple=wasm32-wasi -mattr=+simd128"
SCALAR = "llvm -mtriple=wasm32-wasi"


def _missing_tools() -> str | None:
    from ziggurat.backends.llvm.wasm_link import wasi_libdir, wasm_linker

    try:
        wasm_linker(), wasi_libdir()
    except CompileError as err:
        return str(err)
    if importlib.util.find_spec("wasmtime") is None:
        return "needs the wasmtime package (pip install 'ziggurat[wasm]')"
    return None


MISSING = _missing_tools()
needs_wasm = pytest.mark.skipif(MISSING is not None, reason=f"WebAssembly toolchain: {MISSING}")


from tests.target_models import cnn, embedding, mlp, norm_block  # noqa: E402 - after the tool checks


def _reference(model, inputs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), inputs)})


# --- the target's facts -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, lanes, features", [
    (WASM, 4, {"simd128"}), (SCALAR, 1, set()), ("llvm -mtriple=wasm32-unknown-unknown -mcpu=generic -mattr=+simd128", 4,
                                                 {"simd128"}),
])
def test_parse_wasm(text, lanes, features, monkeypatch):
    monkeypatch.setenv("ZIGGURAT_NUM_THREADS", "4")  # never a wasm target's thread count
    t = Target.parse(text)
    assert (t.arch, t.llvm_cpu, t.vector_width, t.vector_registers, t.num_threads) == ("wasm32", "generic", lanes, 16, 1)
    assert t.features() == frozenset(features) and not t.is_native
    assert not any(t.has(f) for f in ("avx", "avx2", "fma", "avx512f", "avx512vnni", "amx-tile", "neon"))
    assert Target.parse(str(t)) == t and Target.parse(text + " -num-cores=1").num_threads == 1


def test_parse_refusals():
    with pytest.raises(ZigguratError, match="WebAssembly code runs on one thread"):
        Target.parse(WASM + " -num-cores=4")
    with pytest.raises(ZigguratError, match="did you mean 'generic'"):
        Target.parse("llvm -mtriple=wasm32-wasi -mcpu=generik")
    with pytest.raises(ZigguratError, match="wasm64 and a C target are not done"):
        Target.parse("llvm -mtriple=wasm64-wasi")


def test_pipeline_options():
    from ziggurat.lowering.pipelines import default_pipeline

    spec = default_pipeline(3, WASM)
    assert "loop-default-schedule{vector-width=4 int8-dot=none}" in spec  # 16 registers: no option
    assert "threads=1" in spec and "convert-loop-to-hw{vector-width=4}" in spec
    assert "convert-loop-to-hw{vector-width=1}" in default_pipeline(3, SCALAR)
    assert Target.for_width(1).arch == "wasm32"


# --- compiling (llvmlite alone) ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mlp_wasm():
    return ziggurat.compile(mlp(), target=WASM)


def test_compiled_model_is_not_called_here(mlp_wasm):
    assert type(mlp_wasm).__name__ == "CrossCompiledModel" and mlp_wasm.info["num_threads"] == 1
    with pytest.raises(CompileError, match=r"runtime\.wasm\.load"):
        mlp_wasm(np.zeros((16, 64), np.float32))
    assert "GOMP_" not in mlp_wasm.info["llvm_ir"] and "omp_get" not in mlp_wasm.info["llvm_ir"]


def test_simd128_assembly(mlp_wasm):
    from ziggurat.backends.llvm.jit import emit_assembly

    asm = emit_assembly(mlp_wasm.info["llvm_ir"], mlp_wasm.info["llvm_options"])
    assert len(re.findall(r"\bf32x4\.mul\b", asm)) >= 8 and len(re.findall(r"\bf32x4\.add\b", asm)) >= 8, asm[:2000]
    assert "fmaf" not in asm  # llvm.fmuladd, not the software fma of llvm.fma
    assert not re.search(r"\b(ymm|zmm|xmm)\d|\bv\d+\.4s", asm)
    scalar = ziggurat.compile(mlp(), target=SCALAR)
    asm1 = emit_assembly(scalar.info["llvm_ir"], scalar.info["llvm_options"])
    assert "f32.mul" in asm1 and not re.search(r"\b(f32x4|v128)\.", asm1)


def test_wasm_name_needs_wasm_target(tmp_path):
    host = ziggurat.compile(mlp(), target="llvm -num-cores=1")
    with pytest.raises(CompileError, match="names a WebAssembly module"):
        host.export(tmp_path / "model.wasm")


# --- exported and run through wasmtime -----------------------------------------------------------------

@needs_wasm
@pytest.mark.parametrize("build, shape", [(mlp, (16, 64)), (cnn, (2, 3, 8, 8)), (norm_block, (2, 8, 32))],
                         ids=["mlp", "cnn", "layernorm_softmax"])
def test_wasm_model_matches_onnxruntime(build, shape, tmp_path):
    from ziggurat.runtime import wasm

    model = build()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    path = ziggurat.compile(model, target=WASM).export(tmp_path / "model.wasm")
    assert path.read_bytes()[:4] == b"\0asm"
    for suffix in (".json", ".weights.npz", ".abi"):
        assert (tmp_path / f"model.wasm{suffix}").is_file()
    meta = json.loads((tmp_path / "model.wasm.json").read_text())
    assert meta["triple"] == "wasm32-wasi" and meta["format"] == "ziggurat-wasm-module-1"
    m = wasm.load(path)
    for g, r in zip(m(x), _reference(model, [x]), strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)


@needs_wasm
def test_module_imports_and_exports(mlp_wasm, tmp_path):
    import wasmtime

    path = mlp_wasm.export(tmp_path / "mlp.wasm")
    module = wasmtime.Module.from_file(wasmtime.Engine(), str(path))
    assert {e.name for e in module.exports} == {"memory", "ziggurat_entry", "aligned_alloc"}
    assert all(i.module.startswith("wasi") for i in module.imports)  # libm is linked in: nothing else
    abi = (tmp_path / "mlp.wasm.abi").read_text().splitlines()
    assert abi[:2] == ["ziggurat-abi 1", "entry ziggurat_entry"] and "input <f4 4096 2 16 64" in abi


@needs_wasm
def test_calling_conventions_and_scalar_target(tmp_path):
    from ziggurat.runtime import wasm

    model = mlp()
    x = np.random.default_rng(5).standard_normal((16, 64)).astype(np.float32)
    m = wasm.load(ziggurat.compile(model, target=SCALAR).export(tmp_path / "scalar.wasm"))
    (ref,) = _reference(model, [x])
    for got in (m(x), m(x=x), m({"x": x})):
        np.testing.assert_allclose(got[0], ref, rtol=1e-4, atol=1e-4)
    assert m.input_names == ["x"] and m.output_names == ["y"]
    with pytest.raises(InputError, match="must be float32, got float64"):
        m(x.astype(np.float64))
    with pytest.raises(InputError, match="must have shape"):
        m(x[:8])
    with pytest.raises(InputError, match="unknown input"):
        m(z=x)
    np.testing.assert_allclose(wasm.load(tmp_path / "scalar.wasm", cast_inputs=True)(x.astype(np.float64))[0], ref,
                               rtol=1e-4, atol=1e-4)


@needs_wasm
def test_index_checks(tmp_path):
    from ziggurat.runtime import wasm

    model = embedding()
    m = wasm.load(ziggurat.compile(model, target=WASM).export(tmp_path / "emb.wasm"))
    ids = np.array([[0, 3, 9, -1, 2]], np.int64)
    np.testing.assert_allclose(m(ids)[0], _reference(model, [ids])[0], rtol=1e-6)
    with pytest.raises(InputError, match="holds the index 10"):
        m(np.array([[0, 10, 1, 2, 3]], np.int64))


@needs_wasm
def test_load_refusals(tmp_path):
    from ziggurat.runtime import wasm

    with pytest.raises(ModelLoadError, match="is missing"):
        wasm.load(tmp_path / "none.wasm")
    host = ziggurat.compile(mlp(), target="llvm -num-cores=1").export(tmp_path / "host.so")
    with pytest.raises(ModelLoadError, match="use ziggurat.runtime.load"):
        wasm.load(host)
