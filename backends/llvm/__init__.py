"""Native code through llvmlite: translate loop-level IR to LLVM IR, then JIT or export.

```python
from ziggurat.backends.llvm import LLVMOptions, translate_module, jit_compile
llvm_module, info = translate_module(module, LLVMOptions(num_threads=2))
jm = jit_compile(llvm_module, LLVMOptions(num_threads=2), info)
```
"""

from ziggurat.backends.llvm.jit import (
    JITModule,
    compile_module,
    create_target_machine,
    emit_shared_library,
    jit_compile,
    load_libgomp,
    optimize,
)
from ziggurat.backends.llvm.options import LLVMOptions, ModuleInfo
from ziggurat.backends.llvm.translate import translate_module

__all__ = [
    "JITModule",
    "LLVMOptions",
    "ModuleInfo",
    "compile_module",
    "create_target_machine",
    "emit_shared_library",
    "jit_compile",
    "load_libgomp",
    "optimize",
    "translate_module",
]
