"""dedupe-kernels: identical kernel functions compile once."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import StringAttr, SymbolRefAttr
from xdsl.passes import ModulePass

from ziggurat.dialects import graph
from ziggurat.errors import CompileError
from ziggurat.lowering.locations import SOURCE_NODES, kernel_nodes, set_kernel_nodes


def _without_source_nodes(f: func.FuncOp) -> str:
    """`str(f)` as if `f` had no `graph.source_nodes` (its attributes keep their order)."""
    saved = dict(f.attributes)
    del f.attributes[SOURCE_NODES]
    try:
        return str(f)
    finally:
        f.attributes.clear()
        f.attributes.update(saved)


def structural_hash(f: func.FuncOp) -> str:
    """sha256 of the printed function with its own symbol name normalized, without the
    names of its source nodes (`graph.source_nodes`: two layers' kernels differ in them)."""
    name = f.sym_name.data
    text = str(f) if SOURCE_NODES not in f.attributes else _without_source_nodes(f)
    header = f"func.func @{name}("
    if not text.startswith(header):
        raise CompileError(f"dedupe-kernels: unexpected form of @{name}; expected it to print as '{header}...'")
    return hashlib.sha256(("func.func @_(" + text[len(header) :]).encode()).hexdigest()


@dataclass(frozen=True)
class DedupeKernelsPass(ModulePass):
    """Keeps one copy of each set of structurally identical kernel functions.

    **Input:** a module of kernel functions called by the model function
    (`entry`), at the te level (with `graph.call_kernel`) or the loop level
    (with `func.call`); identical layers, such as the two encoder layers of a
    transformer, give identical kernels. The default pipelines run it at both
    levels: at the te level each distinct kernel is lowered to loops once, and
    at the loop level kernels merge that only became identical as loops.

    **Output:** kernels are keyed by `structural_hash` (the printed function
    with its symbol name normalized); calls to a duplicate call the first
    kernel with that hash, and the duplicates are erased, so every later pass
    and the backend compile each distinct kernel once. A module without
    duplicates is unchanged. Identical kernels have identical names for
    their SSA values, since the lowerings build them the same way.

    **Options:** `entry` (str, default `main`): the model function, never merged.

    Example:
    ```mlir
    func.call @relu_0(%x, %a) : (memref<8xf32>, memref<8xf32>) -> ()
    func.call @relu_1(%a, %y) : (memref<8xf32>, memref<8xf32>) -> ()
    ```
    with `@relu_0` and `@relu_1` equal but for their names becomes
    ```mlir
    func.call @relu_0(%x, %a) : (memref<8xf32>, memref<8xf32>) -> ()
    func.call @relu_0(%a, %y) : (memref<8xf32>, memref<8xf32>) -> ()
    ```
    """

    name = "dedupe-kernels"
    entry: str = "main"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        first: dict[str, str] = {}
        renamed: dict[str, str] = {}
        kept: dict[str, tuple[func.FuncOp, list[str]]] = {}  # kept kernel -> it, the source nodes of all merged
        for f in list(op.ops):
            if not isinstance(f, func.FuncOp) or f.sym_name.data == self.entry or not f.body.blocks:
                continue
            key = structural_hash(f)
            keep = first.setdefault(key, f.sym_name.data)
            if keep != f.sym_name.data:
                renamed[f.sym_name.data] = keep
                kept[keep][1].extend(kernel_nodes(f))
                op.body.block.erase_op(f)
            else:
                kept[keep] = (f, list(kernel_nodes(f)))
        if not renamed:
            return
        for f, nodes in kept.values():  # the kept kernel computes the source nodes of all it stands for
            set_kernel_nodes(f, nodes)
        for call in op.walk():
            if isinstance(call, func.CallOp) and call.callee.string_value() in renamed:
                call.callee = SymbolRefAttr(renamed[call.callee.string_value()])
            elif isinstance(call, graph.CallKernelOp) and call.callee.data in renamed:
                call.callee = StringAttr(renamed[call.callee.data])
