"""How a graph pass reaches the weights behind `graph.constant`.

The weight store travels *beside* the module, not in it (IR never spells a
tensor out). The compiler binds the store to the module object it runs the
pipeline on: `bind_weights(module, store)`; a pass asks `weights_of(module)`.
The binding is a weak side table keyed by the module object, so it dies with
the module and needs no global names.

Outside the compiler (ziggurat-opt on a text file), a module may name an
`.npz` file in its `graph.weights_file` attribute (what `ziggurat import
--weights FILE -o M.mlir` writes, relative to the folder of M.mlir);
`ziggurat-opt` binds it relative to its input file (`bind_weights_file`),
else `weights_of` loads it, relative to the working directory, on first use.
Passes that need values and find no store leave the IR unchanged; ziggurat-opt
calls `require_weights` before each pass, so that a pass of `NEEDS_VALUES` on
a module with constants and no store is one clear error instead.
`constant_refs` lists the weights a module names (graph and loop level), so a
tool can save what it needs (`ziggurat-opt --weights-out`) or say what is
missing.
"""

from __future__ import annotations

import os
import weakref

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr

from ziggurat.errors import CompileError
from ziggurat.weights import WeightStore

WEIGHTS_FILE_ATTR = "graph.weights_file"

_BOUND: weakref.WeakKeyDictionary[ModuleOp, WeightStore] = weakref.WeakKeyDictionary()


def bind_weights(module: ModuleOp, store: WeightStore) -> None:
    """Makes `store` the weight store of `module` for the passes that run on it."""
    _BOUND[module] = store


def unbind_weights(module: ModuleOp) -> None:
    """Forgets `module`'s store now, not when the module is collected: IR has parent links, so
    a module dropped by the compiler lives until the cycle collector runs, and its store (the
    weights the graph passes replaced among them) with it."""
    _BOUND.pop(module, None)


def bind_weights_file(module: ModuleOp, folder: str | os.PathLike) -> None:
    """Binds the store named by `module`'s `graph.weights_file`, a relative path read from `folder`
    (the folder of the .mlir file the module came from). Nothing to do without the attribute."""
    attr = module.attributes.get(WEIGHTS_FILE_ATTR)
    if isinstance(attr, StringAttr) and module not in _BOUND:
        _BOUND[module] = _load(os.path.join(folder, attr.data), attr.data)


def _load(path: str, named: str) -> WeightStore:
    try:
        return WeightStore.load(path)
    except OSError as err:
        raise CompileError(f"cannot read the weights file '{named}' named by {WEIGHTS_FILE_ATTR} "
                           f"(looked for {path}): {err.strerror or err}") from None


def weights_of(module: ModuleOp) -> WeightStore | None:
    """The store bound to `module`, else the one its `graph.weights_file` names, else None."""
    store = _BOUND.get(module)
    if store is not None:
        return store
    attr = module.attributes.get(WEIGHTS_FILE_ATTR)
    if not isinstance(attr, StringAttr):
        return None
    store = _load(attr.data, attr.data)
    _BOUND[module] = store
    return store


def bodies_with_weights(module: ModuleOp) -> list[tuple[func.FuncOp, WeightStore]]:
    """(function, the bound weight store) for each function of `module` with a body; none without a store."""
    store = weights_of(module)
    if store is None:
        return []
    return [(f, store) for f in module.ops if isinstance(f, func.FuncOp) and f.body.blocks]


# Passes that read the values of constants and, without a store, would silently do nothing or less
# (a plugin pass says so with a class attribute `needs_weights = True`).
NEEDS_VALUES = frozenset({"fold-constants", "simplify-graph", "winograd-conv", "quantized-lookup", "pack-weight-panels"})


def needs_values(pass_: object) -> bool:
    """Whether `pass_` (a ModulePass) reads weight values (`NEEDS_VALUES`, or `needs_weights = True`)."""
    return bool(getattr(pass_, "needs_weights", False)) or getattr(pass_, "name", None) in NEEDS_VALUES


def constant_refs(module: ModuleOp) -> list[str]:
    """The weight names `module`'s constants refer to (`graph.constant`, `loop.const_buffer`), in order."""
    from ziggurat.dialects import graph, loop

    refs: dict[str, None] = {}
    for op in module.walk():
        if isinstance(op, graph.ConstantOp | loop.ConstBufferOp):
            refs[op.ref.data] = None
    return list(refs)


def require_weights(module: ModuleOp, pass_: object) -> None:
    """Raises one CompileError when `pass_` needs weight values (`needs_values`), `module` has
    constants and no store is bound to it or named by its `graph.weights_file`."""
    if not needs_values(pass_) or weights_of(module) is not None:
        return
    refs = constant_refs(module)
    if refs:
        name = getattr(pass_, "name", type(pass_).__name__)
        raise CompileError(f"pass '{name}' needs the values of the weights, but none are bound (graph.constant "
                           f"'{refs[0]}'{f' and {len(refs) - 1} more' if len(refs) > 1 else ''}): pass --weights "
                           f"W.npz, or import the model with `ziggurat import MODEL --weights W.npz -o M.mlir` "
                           f"(the module then names its weights in {WEIGHTS_FILE_ATTR})")
