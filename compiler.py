"""The compiler driver: model -> pipeline -> LLVM -> a callable CompiledModel.

`compile()` is the whole flow in one function, so the stages are visible:

1. import (ONNX -> `graph` IR plus a weight store),
2. the pass pipeline from `lowering/pipelines.py` (graph -> te -> loop -> hw),
3. translation of the hw-level module to LLVM IR and JIT compilation,
4. a `CompiledModel` that runs the entry function in one native call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import VerifyException

from ziggurat.dialects import make_context
from ziggurat.errors import CompileError, ZigguratError
from ziggurat.lowering import pipelines
from ziggurat.target import Target


def available_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """ziggurat's passes plus every upstream xDSL pass (ours win on a clash)."""
    from xdsl.transforms import get_all_passes as upstream

    from ziggurat.transforms import get_all_passes

    return {**upstream(), **get_all_passes()}


def parse_pipeline(spec: str) -> list[ModulePass]:
    """Pass instances for a pipeline string; bad strings raise CompileError."""
    if not spec.strip():
        return []
    try:
        return list(PassPipeline.parse_spec(available_passes(), spec).passes)
    except BaseException as err:  # xDSL's ArgSpecParseError derives from BaseException
        if isinstance(err, KeyboardInterrupt | SystemExit):
            raise
        raise CompileError(f"bad pass pipeline '{spec}': {err}") from None


PassCallback = Callable[[ModulePass, builtin.ModuleOp, float], None]


def run_passes(
    module: builtin.ModuleOp,
    passes: list[ModulePass],
    ctx: Context | None = None,
    verify: bool = True,
    after_pass: PassCallback | None = None,
) -> None:
    """Applies `passes` in order, verifying after each; names the pass on failure."""
    ctx = ctx or make_context()
    for p in passes:
        start = time.perf_counter()
        try:
            p.apply(ctx, module)
            if verify:
                module.verify()
        except ZigguratError:
            raise
        except VerifyException as err:
            raise CompileError(f"the IR is invalid after pass '{p.name}': {str(err).splitlines()[0]}") from None
        if after_pass is not None:
            after_pass(p, module, time.perf_counter() - start)


@dataclass
class CompileStats:
    """Where compile time went, in seconds, plus module sizes."""

    seconds: dict[str, float] = field(default_factory=dict)
    kernels: int = 0

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


def compile(  # noqa: A001 - the public name, as in TVM's relay.build / torch.compile
    model: Any,
    target: str | Target = "llvm",
    opt_level: int = 3,
    pipeline: str | None = None,
    after_pass: PassCallback | None = None,
):
    """Compiles an ONNX model (path, bytes or ModelProto) for `target`.

    `pipeline` replaces the graph-level part of the default pipeline;
    `after_pass(pass, module, seconds)` sees the IR after every pass.
    Returns a `ziggurat.runtime.executor.CompiledModel`.
    """
    from ziggurat.backends.llvm.jit import jit_compile
    from ziggurat.backends.llvm.translate import LLVMOptions, translate_module
    from ziggurat.frontends.onnx import ImportedModel, import_onnx
    from ziggurat.runtime.executor import CompiledModel, TensorSpec

    stats = CompileStats()
    tgt = Target.parse(target)
    t0 = time.perf_counter()
    imported = model if isinstance(model, ImportedModel) else import_onnx(model)
    stats.seconds["import"] = time.perf_counter() - t0

    module = imported.module.clone()
    t0 = time.perf_counter()
    spec = pipelines.default_pipeline(opt_level, tgt.vector_width, graph=pipeline)
    run_passes(module, parse_pipeline(spec), after_pass=after_pass)
    stats.seconds["passes"] = time.perf_counter() - t0
    stats.kernels = sum(1 for f in module.ops if getattr(f, "sym_name", None) and f.sym_name.data != "main")  # type: ignore[attr-defined]

    options = LLVMOptions(num_threads=tgt.num_threads, cpu=tgt.mcpu, features=tgt.mattr)
    t0 = time.perf_counter()
    ir_module, info = translate_module(module, options)
    stats.seconds["translate"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    jit = jit_compile(ir_module, options)
    stats.seconds["llvm"] = time.perf_counter() - t0

    f32 = np.dtype(np.float32)  # the frontend admits float32 inputs and outputs only
    inputs = [TensorSpec(n, tuple(s), f32) for n, s in zip(imported.input_names, imported.input_shapes)]
    outputs = [TensorSpec(n, tuple(s), f32) for n, s in zip(imported.output_names, imported.output_shapes)]
    constants = [imported.weights[name] for name in info.const_names]
    return CompiledModel(
        jit.address(info.entry_symbol),
        inputs,
        outputs,
        constants,
        info.arena_size,
        keepalive=jit,
        info={"stats": stats, "target": str(tgt), "num_threads": tgt.num_threads, "pipeline": spec, "llvm_ir": jit.llvm_ir},
    )

