"""Tensor intrinsics as data: what an instruction computes, and how to emit it.

A `TensorIntrin` pairs
- a *description*: a small loop-level function (text, parsed on first use)
  whose loop nest and single `loop.block` state what the instruction computes
  on buffers of the sizes it covers, and
- an *implementation*: a Python function that, given for each description
  buffer the target buffer and the indices of its first element, emits the
  hw-level ops (hw.vload, x86vec.dpbusd, amx.tdp, ...) that compute the same.

The `tensorize` schedule primitive (transforms/loop/primitives/tensorize.py) matches
a loop sub-nest of a kernel against a description and replaces it with the
implementation. A researcher adds an instruction by registering an entry, from
any module, without touching the compiler:

```python
from ziggurat.lowering.intrinsics import register_intrin
from ziggurat.lowering.tensor_intrin import TensorIntrin

register_intrin(TensorIntrin(
    name="my_dot4", features=("avx512vnni",),
    description='''func.func @d(%a: memref<4xi8>, %b: memref<4xi8>, %c: memref<1xi32>) { ... }''',
    implement=my_emitter))
```

`lowering/intrinsics.py` is the registry (`register_intrin`, `get_intrin`,
`all_intrins`); `lowering/intrinsics_x86.py` holds the built-in entries
(VNNI, AVX512-BF16), which the registry loads on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.ir import SSAValue

from ziggurat.errors import ScheduleError

# One description buffer in the target: (the target buffer, indices of the element at loop offset 0).
Access = tuple[SSAValue, list[SSAValue]]
Emitter = Callable[[Builder, dict[str, Access]], None]


@dataclass
class TensorIntrin:
    """One tensor intrinsic: `description` (loop-level text) and `implement` (emitter).

    `features` lists the LLVM target features the implementation needs; the
    buffers of the description are named by its function's argument names.
    """

    name: str
    description: str
    implement: Emitter
    features: tuple[str, ...] = ()
    doc: str = ""
    _parsed: func.FuncOp | None = field(default=None, repr=False, compare=False)

    def desc_func(self) -> func.FuncOp:
        """The description, parsed and verified once."""
        if self._parsed is None:
            from xdsl.dialects.builtin import ModuleOp
            from xdsl.parser import Parser

            from ziggurat.dialects import make_context

            try:
                module = Parser(make_context(), self.description, f"<intrinsic {self.name}>").parse_module()
                module.verify()
            except Exception as e:  # noqa: BLE001 - any parse/verify failure is the entry's fault
                raise ScheduleError(f"tensor intrinsic '{self.name}': its description does not parse: {e}") from None
            assert isinstance(module, ModuleOp)
            fns = [op for op in module.ops if isinstance(op, func.FuncOp)]
            if len(fns) != 1:
                raise ScheduleError(f"tensor intrinsic '{self.name}': the description must hold exactly one func.func")
            fns[0].detach()
            self._parsed = fns[0]
        return self._parsed

    def buffer_names(self) -> list[str]:
        """The description's buffer names, in argument order."""
        fn = self.desc_func()
        return [a.name_hint or f"arg{i}" for i, a in enumerate(fn.body.block.args)]
