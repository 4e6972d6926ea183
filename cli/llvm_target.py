"""`ziggurat-opt -t llvm`: LLVM IR for ziggurat's IR at any level.

xDSL's own `llvm` target translates a module of the `llvm` dialect only and
fails on `func.func`. `ziggurat-opt` registers this target under the same
name instead: it lowers the module the rest of the way (the part of the
default pipeline after the module's level, `cli/mlir_model.py`) and
translates it with ziggurat's backend, printing the LLVM IR before LLVM's
optimizations (what `ziggurat compile --emit llvm` prints). A module made of
`llvm` dialect ops only still goes to xDSL's translation.

Options: `-t 'llvm{target="llvm -mcpu=haswell" opt-level=2}'` (default: the
host, O3). A CUDA target (`target="cuda -arch=sm_90"`) prints the NVPTX LLVM IR
of its kernels (cli/ptx_target.py; `-t ptx` prints their PTX).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target as XDSLTarget


@dataclass(frozen=True)
class ZigguratLLVMTarget(XDSLTarget):
    """Lowers the rest of the way and prints the LLVM IR ziggurat's backend generates."""

    name: ClassVar[str] = "llvm"
    target: str = "llvm"
    opt_level: int = 3

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from ziggurat.backends.llvm.translate import LLVMOptions, translate_module
        from ziggurat.cli.mlir_model import detect_level, is_planned, remaining_pipeline
        from ziggurat.compiler import run_passes
        from ziggurat.registry import parse_pipeline
        from ziggurat.target import Target

        if _llvm_dialect_only(module):
            from xdsl.backend.llvm.convert import LLVMTarget

            LLVMTarget().emit(ctx, module, output)
            return
        tgt = Target.parse(self.target)
        if tgt.kind == "cuda":  # the NVPTX LLVM IR of the kernels (`-t ptx` prints the PTX made of it)
            from ziggurat.cli.ptx_target import ZigguratPTXTarget

            ZigguratPTXTarget(tgt.llvm_cpu, self.opt_level).emit(ctx, module, output, llvm_ir=True)
            return
        spec = remaining_pipeline(detect_level(module), self.opt_level, tgt, planned=is_planned(module))
        run_passes(module, parse_pipeline(spec), verify="stages")
        ir_module, _ = translate_module(module, LLVMOptions.for_target(tgt))
        print(ir_module, file=output)


def _llvm_dialect_only(module: ModuleOp) -> bool:
    ops = [op for op in module.walk() if op is not module]
    return bool(ops) and all(op.name.startswith("llvm.") for op in ops)
