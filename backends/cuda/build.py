"""PTX from NVPTX LLVM IR: LLVM's O3 module pipeline and the NVPTX target machine.

`cross.cuda_compile(model, "cuda -arch=sm_90")` (what `ziggurat.compile` calls
for a CUDA target) imports the model, runs `pipelines.cuda_pipeline`,
translates the loops (translate.py) and calls `emit_ptx`. The result is a
`runtime.cuda.CudaModel`: it opens the GPU at its first call, so compiling
(and `save`) needs no GPU and no CUDA toolkit.

```python
m = ziggurat.compile("model.onnx", target="cuda -arch=sm_90")
print(m.program.ptx[:200])     # .version 7.8 / .target sm_90 / .entry ...
y = m(x)                       # on the GPU (runtime/cuda.py)
```
"""

from __future__ import annotations

import llvmlite.binding as llvm

from ziggurat.errors import CompileError
from ziggurat.target import CUDA_TRIPLE


def emit_ptx(llvm_ir: str, arch: str, opt_level: int = 3) -> str:
    """PTX for the NVPTX LLVM IR text `llvm_ir` on compute capability `arch` (`sm_90`), optimized at
    `opt_level` (LLVM's default module pipeline)."""
    from ziggurat.backends.llvm.jit import _init_all_targets, optimize

    _init_all_targets()
    target = llvm.Target.from_triple(CUDA_TRIPLE)
    tm = target.create_target_machine(cpu=arch, features="", opt=opt_level)
    try:
        mod = llvm.parse_assembly(llvm_ir)
        mod.verify()
    except RuntimeError as err:
        raise CompileError(f"cuda backend: LLVM rejected the kernels' IR: {err}") from None
    optimize(mod, tm, opt_level)
    return tm.emit_assembly(mod)
