"""`ziggurat-opt -t ptx`: PTX for ziggurat's IR at any level, for an NVIDIA GPU.

Lowers the module the rest of the way for a CUDA target (the part of
`pipelines.cuda_pipeline` after the module's level, `cli/mlir_model.py`;
loop-level IR that is already GPU-scheduled goes through it unchanged: the
GPU passes leave bound kernels and matched products alone), translates it
with the CUDA backend (`backends/cuda/translate.py`) and prints the PTX that
LLVM's NVPTX backend makes of it (`backends/cuda/build.py`), after the launch
list as PTX comments, one line per step of `@main`:

    // launch relu_0 grid=(2,1,1) block=(256,1,1) args=(input 0, output 0)
    // copy 96 bytes output 0 -> arena 0

`ziggurat compile MODEL --target 'cuda -arch=sm_90' --emit ptx` prints the same.

Options: `-t 'ptx{arch="sm_90" opt-level=2}'` (default: sm_80, the CUDA
target's default, and O3 for both ziggurat's pipeline and LLVM's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target as XDSLTarget


def format_steps(program: Any, comment: str = "//") -> str:
    """The steps of a `GpuProgram` (runtime/cuda_program.py) as comment lines (`//`: PTX's, `;`: LLVM IR's)."""
    from ziggurat.runtime.cuda_program import Launch

    def ref(r: Any) -> str:
        return f"{r.kind} {r.index}"

    def dims(d: tuple[int, ...]) -> str:
        return "(" + ",".join(str(x) for x in d) + ")"

    lines = [f"{comment} {program.arch}: {len(program.launches)} launch(es), arena {program.arena_bytes} bytes"]
    for s in program.steps:
        if isinstance(s, Launch):
            lines.append(f"{comment} launch {s.kernel} grid={dims(s.grid)} block={dims(s.block)} "
                         f"args=({', '.join(ref(a) for a in s.args)})"
                         + (f" shared={s.shared_bytes}" if s.shared_bytes else ""))
        else:
            lines.append(f"{comment} copy {s.nbytes} bytes {ref(s.src)} -> {ref(s.dst)}")
    return "\n".join(lines)


def cuda_target_of(arch: str) -> Any:
    """The `Target` of `-arch=arch` (`sm_90`; '' for the default), with target.py's checks."""
    from ziggurat.target import Target

    return Target.parse(f"cuda -arch={arch}" if arch else "cuda")


@dataclass(frozen=True)
class ZigguratPTXTarget(XDSLTarget):
    """Lowers the rest of the way for a CUDA GPU and prints the launch list and the PTX."""

    name: ClassVar[str] = "ptx"
    arch: str = ""
    opt_level: int = 3

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str], llvm_ir: bool = False) -> None:
        """Prints the launch list and the PTX (`llvm_ir`: the NVPTX LLVM IR instead of the PTX, what
        `-t 'llvm{target="cuda"}'` prints)."""
        from ziggurat.backends.cuda.build import emit_ptx
        from ziggurat.backends.cuda.translate import translate_gpu_module
        from ziggurat.cli.mlir_model import detect_level, is_planned, remaining_pipeline
        from ziggurat.compiler import run_passes
        from ziggurat.errors import CompileError
        from ziggurat.registry import parse_pipeline

        tgt = cuda_target_of(self.arch)
        if self.opt_level not in (0, 1, 2, 3):
            raise CompileError(f"-t ptx: opt-level={self.opt_level}; one of 0, 1, 2, 3")
        level = detect_level(module)
        if level == "hw":
            raise CompileError("-t ptx: the module holds hw-level IR (hw, x86vec or amx ops), which is CPU vector "
                               "code; a CUDA target has no hw stage: give IR of the graph, te or loop level")
        spec = remaining_pipeline(level, self.opt_level, tgt, planned=is_planned(module))
        run_passes(module, parse_pipeline(spec), verify="stages")
        ir_module, info = translate_gpu_module(module, tgt.llvm_cpu)
        if llvm_ir:
            print(format_steps(info.program, ";"), file=output)
            print(ir_module, file=output)
            return
        ptx = emit_ptx(str(ir_module), tgt.llvm_cpu, self.opt_level)
        print(format_steps(info.program), file=output)
        print(ptx, file=output)
