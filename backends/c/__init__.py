"""Portable C: print the hw-level module as C99 with vector extensions, build it with the system `cc`.

```python
from ziggurat.backends.c import COptions, emit_module, build_library
source, info = emit_module(module, COptions(num_threads=1))   # what translate_module receives
data = build_library(source, options, openmp=info.uses_openmp)  # the shared library's bytes
```

`ziggurat.compile(model, target="c")` does both (cross.py `c_compile`); docs/targets.md, "Portable C".
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from ziggurat.backends.c.arith_ops import ARITH_HANDLERS
from ziggurat.backends.c.build import build_library, cc_command, find_cc, load_library, write_library
from ziggurat.backends.c.emit import STRUCTURE_HANDLERS, COptions, CSource, Emitter
from ziggurat.backends.c.hw_ops import HW_HANDLERS, MATH_HANDLERS
from ziggurat.backends.c.x86_ops import X86_HANDLERS
from ziggurat.backends.llvm.options import ModuleInfo

HANDLERS = {**STRUCTURE_HANDLERS, **ARITH_HANDLERS, **MATH_HANDLERS, **HW_HANDLERS, **X86_HANDLERS}
"""Op name -> C printer (tests/unit/test_target_c.py checks every name is a registered op)."""


def emit_module(module: ModuleOp, options: COptions | None = None) -> tuple[CSource, ModuleInfo]:
    """The module as one C translation unit, and its ABI facts (as `translate_module` gives them)."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        return Emitter(options or COptions(), HANDLERS).run(module)
    finally:
        if was:
            gc.enable()


def options_for_target(target, fast_math: tuple[str, ...] | None = None) -> COptions:
    """COptions for a `c` target: its threads, vector width, CPU and features, the LLVM default fast-math flags."""
    from ziggurat.backends.llvm.options import LLVMOptions

    fm = tuple(LLVMOptions().fast_math) if fast_math is None else fast_math
    return COptions(num_threads=target.num_threads, fast_math=fm, vector_width=target.vector_width,
                    cpu=target.mcpu, features=target.mattr or "")


__all__ = ["COptions", "CSource", "HANDLERS", "build_library", "cc_command", "emit_module", "find_cc",
           "load_library", "options_for_target", "write_library"]
