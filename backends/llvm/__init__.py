"""Native code through llvmlite: translate loop-level IR to LLVM IR, then JIT or export.

```python
from ziggurat.backends.llvm import LLVMOptions, translate_module, jit_compile
llvm_module, info = translate_module(module, LLVMOptions(num_threads=2))
jm = jit_compile(llvm_module, LLVMOptions(num_threads=2), info)
```
"""

import importlib

# What each public name is imported from, on first use (PEP 562): the codegen workers
# (codegen_pool.py) import jit.py without translate.py and xDSL.
_FROM = {
    "JITModule": "jit", "compile_module": "jit", "create_target_machine": "jit",
    "emit_shared_library": "jit", "jit_compile": "jit", "load_libgomp": "jit", "optimize": "jit",
    "LLVMOptions": "options", "ModuleInfo": "options", "translate_module": "translate",
}


def __getattr__(name: str):
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_FROM[name]}"), name)


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
