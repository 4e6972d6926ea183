"""Cross-compilation: a model compiled for another architecture, to export and run there.

`ziggurat.compile(model, target="llvm -mtriple=aarch64-linux-gnu -mattr=+neon")`
(any target whose `Target.is_native` is false) comes here: the same import,
pipeline (with the target's facts: 4 f32 lanes, 32 vector registers) and
translation to LLVM IR as a native compile, then no JIT. The result, a
`CrossCompiledModel`, has the compiled model's signature, constants, arena
size and `info` (the LLVM IR, options, stats), so `export(path)` writes the
usual files (runtime/export.py: `model.so` from LLVM's AArch64 backend,
linked by `aarch64-linux-gnu-gcc`, `model.so.json`, `model.so.weights.npz`
and the plain-text `model.so.abi` the C runner reads), but calling it raises
`CompileError`: this machine cannot execute the code. docs/targets.md tells
how to run it on a board or under qemu-aarch64 with runtime/runner/runner.c.

A WebAssembly target (`-mtriple=wasm32-wasi -mattr=+simd128`: 4 lanes, one
thread) comes here too; its `export("model.wasm")` writes a wasm module
(backends/llvm/wasm_link.py, linked by `wasm-ld`) with the same `.json`,
`.weights.npz` and `.abi`, and `ziggurat.runtime.wasm.load` runs it through
wasmtime (runtime/wasm.py).

`c_compile` builds the portable C target (`target="c"`: backends/c, the system
`cc`) into a library loaded here, and `cuda_compile` a CUDA target
(`target="cuda -arch=sm_90"`): the CUDA pipeline (`pipelines.cuda_pipeline`),
NVPTX kernels and a launch list (backends/cuda), PTX from LLVM, returned as a
`runtime.cuda.CudaModel` that opens the GPU at its first run (compiling needs
no GPU; docs/targets.md).

There is no compile cache for foreign targets, C or CUDA (every call builds).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ziggurat.errors import CompileError
from ziggurat.runtime.executor import ModelSignature
from ziggurat.target import Target


class CrossCompiledModel(ModelSignature):
    """A model compiled for a foreign target: exportable (`export`), not callable here."""

    def __init__(self, inputs: list[Any], outputs: list[Any], constants: tuple[np.ndarray, ...], arena_bytes: int,
                 info: dict[str, Any]):
        super().__init__(inputs, outputs, info)
        self.constants = list(constants)
        self.arena_bytes = arena_bytes

    @property
    def target(self) -> Target:
        return Target.parse(self.info["target"])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.target.arch == "wasm32":
            raise CompileError(f"this model was compiled for '{self.info['target']}' (WebAssembly), which is not "
                               "called in this process; export it (model.export('model.wasm')) and run it with "
                               "ziggurat.runtime.wasm.load('model.wasm') or any WebAssembly engine (docs/targets.md)")
        raise CompileError(f"this model was compiled for '{self.info['target']}', which cannot run on this machine; "
                           "export it (model.export('model.so') or `ziggurat compile ... --export model.so`) and "
                           "run it on the target, e.g. with runtime/runner/runner.c (docs/targets.md)")

    def __repr__(self) -> str:
        return (f"CrossCompiledModel(target='{self.info['target']}', inputs={self.input_names}, "
                f"outputs={self.output_names})")


def cross_compile(model: Any, target: str | Target, opt_level: int = 3, pipeline: str | None = None,
                  after_pass: Any = None, tuning_db: Any = None, bind: dict[str, Any] | None = None,
                  memory_limit: int | str | None = None, check_indices: bool = True) -> CrossCompiledModel:
    """Compiles an ONNX model for the foreign `target` (see the module docstring); the arguments are
    `ziggurat.compile`'s."""
    from ziggurat.backends.llvm.options import LLVMOptions
    from ziggurat.compiler import CompileStats, _import_model, _lower, check_arena
    from ziggurat.lowering import pipelines

    tgt = Target.parse(target)
    spec = pipelines.default_pipeline(opt_level, tgt, graph=pipeline,
                                      tuning_db=None if tuning_db is None else str(tuning_db))
    options = LLVMOptions.for_target(tgt)
    stats = CompileStats()
    work, inputs, outputs = _import_model(model, bind, memory_limit, check_indices, stats)
    model = None
    low = _lower(work, spec, options, stats, after_pass)
    stats.kernels, stats.kernel_calls = low.kernels, low.kernel_calls
    stats.tuned_kernels = list(low.tuned_kernels)
    stats.arena_bytes, stats.unplanned_bytes = low.arena_bytes, low.unplanned_bytes
    check_arena(low.info.arena_size, memory_limit)
    info = {"stats": stats, "target": str(tgt), "num_threads": tgt.num_threads, "pipeline": spec,
            "llvm_ir": low.llvm_ir, "llvm_options": options, "entry_symbol": low.info.entry_symbol}
    return CrossCompiledModel(inputs, outputs, low.constants, low.info.arena_size, info)


def c_compile(model: Any, target: str | Target, opt_level: int = 3, pipeline: str | None = None,
              after_pass: Any = None, tuning_db: Any = None, bind: dict[str, Any] | None = None,
              memory_limit: int | str | None = None, check_indices: bool = True, cast_inputs: bool = False) -> Any:
    """Compiles an ONNX model for the portable C target (`target="c"`, `"c -mcpu=..."`): the same import and
    pipeline as `llvm` (the target's vector width and threads), then the hw-level module printed as C
    (backends/c) and built by the system `cc` into a shared library, loaded here. The result is a
    `CompiledModel`; `export(path)` writes that library with the usual `.json`, `.weights.npz` and `.abi`
    (runtime/export.py), which `ziggurat.runtime.load` runs. No compile cache (every call builds)."""
    import time

    from ziggurat.backends.c import build_library, emit_module, load_library, options_for_target
    from ziggurat.compiler import CompileStats, _import_model, _lower, check_arena
    from ziggurat.lowering import pipelines
    from ziggurat.runtime.executor import CompiledModel

    tgt = Target.parse(target)
    spec = pipelines.default_pipeline(opt_level, tgt, graph=pipeline,
                                      tuning_db=None if tuning_db is None else str(tuning_db))
    options = options_for_target(tgt)
    stats = CompileStats()
    work, inputs, outputs = _import_model(model, bind, memory_limit, check_indices, stats)
    model = None
    low = _lower(work, spec, options, stats, after_pass, translate=emit_module)
    stats.kernels, stats.kernel_calls = low.kernels, low.kernel_calls
    stats.tuned_kernels = list(low.tuned_kernels)
    stats.arena_bytes, stats.unplanned_bytes = low.arena_bytes, low.unplanned_bytes
    check_arena(low.info.arena_size, memory_limit)
    stats.seconds["translate"] += stats.seconds.pop("llvm", 0.0)  # str() of the C source: printing, no LLVM
    t0 = time.perf_counter()
    data = build_library(low.llvm_ir, options, openmp=low.info.uses_openmp)
    lib = load_library(data)
    stats.seconds["cc"] = time.perf_counter() - t0
    entry = low.info.entry_symbol
    address = ctypes_address(lib, entry)
    info = {"stats": stats, "target": str(tgt), "num_threads": tgt.num_threads, "pipeline": spec,
            "c_source": low.llvm_ir, "c_options": options, "c_library": data, "uses_openmp": low.info.uses_openmp,
            "entry_symbol": entry}
    return CompiledModel(address, inputs, outputs, low.constants, low.info.arena_size, keepalive=lib,
                         cast_inputs=cast_inputs, info=info)


def ctypes_address(lib: Any, symbol: str) -> int:
    import ctypes

    return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value  # type: ignore[return-value]


def cuda_compile(model: Any, target: str | Target, opt_level: int = 3, pipeline: str | None = None,
                 after_pass: Any = None, bind: dict[str, Any] | None = None,
                 memory_limit: int | str | None = None, check_indices: bool = True, cast_inputs: bool = False,
                 pass_options: dict[str, dict[str, object]] | None = None) -> Any:
    """Compiles an ONNX model for a CUDA target; returns a `CudaModel` (see the module docstring).
    No compile cache and no tuning records yet (every call builds; the default GPU schedule).
    `pass_options` overrides GPU pass options (`{"gpu-gemm": {"convolutions": False, "deep-k": False}}`: the paths before the defaults)."""
    import time

    from ziggurat.backends.cuda.build import emit_ptx
    from ziggurat.backends.cuda.translate import translate_gpu_module
    from ziggurat.compiler import CompileStats, _import_model, _lower
    from ziggurat.lowering import pipelines
    from ziggurat.runtime.cuda import CudaModel

    tgt = Target.parse(target)
    spec = pipelines.cuda_pipeline(opt_level, tgt, graph=pipeline, options=pass_options)
    stats = CompileStats()
    work, inputs, outputs = _import_model(model, bind, memory_limit, check_indices, stats, int8_dot="none")
    model = None
    arch = tgt.llvm_cpu
    low = _lower(work, spec, None, stats, after_pass, translate=lambda m, _opts: translate_gpu_module(m, arch))
    stats.kernels, stats.kernel_calls = low.kernels, low.kernel_calls
    stats.arena_bytes, stats.unplanned_bytes = low.arena_bytes, low.unplanned_bytes
    t0 = time.perf_counter()
    program = low.info.program
    program.ptx = emit_ptx(low.llvm_ir, arch)
    stats.seconds["llvm"] += time.perf_counter() - t0
    info = {"stats": stats, "target": str(tgt), "pipeline": spec, "llvm_ir": low.llvm_ir}
    return CudaModel(program, inputs, outputs, low.constants, info=info, cast_inputs=cast_inputs)


def cuda_emulate(model: Any, target: str | Target = "cuda", opt_level: int = 3, bind: dict[str, Any] | None = None) -> Any:
    """The CUDA pipeline's GPU-scheduled loops run on this CPU (a `CompiledModel`): every `blockIdx.x` and
    `threadIdx.x` loop runs each block and thread in turn, with its `gpu.limit` tail guard, and a
    `gpu.gemm` nest runs as the loops it describes. It checks what the GPU passes do to a model
    (gpu-rfactor, gpu-split-stages, gpu-fold-casts, gpu-default-schedule) without a GPU; the GPU code
    itself (backends/cuda) is not exercised."""
    from ziggurat.backends.llvm.translate import LLVMOptions
    from ziggurat.compiler import CompileStats, _build, _import_model
    from ziggurat.lowering import pipelines
    from ziggurat.runtime.executor import CompiledModel

    spec = pipelines.cuda_pipeline(opt_level, Target.parse(target))
    stats = CompileStats()
    work, inputs, outputs = _import_model(model, bind, None, True, stats)
    built = _build(work, spec, LLVMOptions.for_target(Target.parse("llvm -num-cores=1")), stats, None)
    return CompiledModel(built.jit.address(built.entry_symbol), inputs, outputs, built.constants, built.arena_size,
                         keepalive=built.jit, info={"stats": stats, "pipeline": spec})
