"""Exporting a compiled model as a shared library, and loading it back.

`CompiledModel.export(path)` writes three files:

* `path` (say `model.so`): the model's native code, linked by the system C
  compiler from LLVM's object code (`backends/llvm/jit.py`
  `emit_shared_library`); only the entry function `<prefix>_entry(void **)`
  is exported; it needs libm, and libgomp when the model runs threads;
* `path.json`: the target (CPU, features, triple, LLVM version) and the
  model's signature (signature.py: inputs, outputs and index checks), the entry
  symbol, the arena size and the constants' count;
* `path.weights.npz`: the constant buffers (weights), in argument order.

`runtime/load.py` `load(path)` (also `ziggurat.runtime.load`) maps them back into a
`CompiledModel`, with numpy and ctypes alone: no xDSL, no llvmlite, no
compile. It refuses, with one clear error, files that are missing or
malformed, and a library built for CPU features this machine lacks (which
would otherwise die of SIGILL). Loading runs the library's code, so load only
files you exported yourself; the weights load with `allow_pickle=False`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ziggurat.errors import CompileError

FORMAT = "ziggurat-shared-library-1"

def export_model(model: Any, path: str | os.PathLike) -> Path:
    """Writes `model` (a `CompiledModel`) as a shared library at `path`, with `path.json` and
    `path.weights.npz` beside it (see the module docstring); returns `path`."""
    from ziggurat.backends.llvm.jit import emit_shared_library

    ir, options, entry = (model.info.get(k) for k in ("llvm_ir", "llvm_options", "entry_symbol"))
    if ir is None or options is None or entry is None:
        raise CompileError("export: this model was not compiled by ziggurat.compile in this process "
                           "(it has no LLVM IR to export); compile it, then export")
    out = Path(path)
    if out.parent and not out.parent.is_dir():
        raise CompileError(f"export: folder '{out.parent}' does not exist; create it first")
    emit_shared_library(ir, out, options, exports=[entry])
    meta_path = Path(str(out) + ".json")
    meta = json.loads(meta_path.read_text())
    meta.update({
        "format": FORMAT,
        "entry": entry,
        "inputs": [s.to_json() for s in model.inputs],
        "outputs": [s.to_json() for s in model.outputs + model.checks],
        "arena_bytes": int(model.arena_bytes),
        "constants": len(model.constants),
        "target": model.info.get("target", ""),
        "num_threads": model.info.get("num_threads"),
    })
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    np.savez(str(out) + ".weights.npz", **{f"c{i}": c for i, c in enumerate(model.constants)})
    return out

