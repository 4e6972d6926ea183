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
Passes that need values and find no store leave the IR unchanged.
"""

from __future__ import annotations

import os
import weakref

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
