"""Exporting a compiled model as a shared library, and loading it back.

`CompiledModel.export(path)` writes three files:

* `path` (say `model.so`): the model's native code, linked by the system C
  compiler from LLVM's object code (`backends/llvm/jit.py`
  `emit_shared_library`); only the entry function `<prefix>_entry(void **)`
  is exported; it needs libm, and libgomp when the model runs threads;
* `path.json`: the target (CPU, features, triple, LLVM version) and the
  model's signature (signature.py: inputs, outputs and index checks), the entry
  symbol, the arena size and the constants' count;
* `path.weights.npz`: the constant buffers (weights), in argument order;
* `path.abi`: the same ABI as plain text, for the C runner
  (runtime/runner/runner.c) that runs the library without Python, e.g. on an
  AArch64 board or under qemu-aarch64 (docs/targets.md):

      ziggurat-abi 1
      entry ziggurat_entry
      arena 4096
      input <f4 3136 4 1 1 28 28        (dtype, bytes, rank, dims)
      output <f4 40 2 1 10
      check <i8 16 1 2                  (an index check's output, runtime/signature.py)
      const 1234 1000                   (offset of its data in path.weights.npz, bytes)

  `np.savez` stores each `.npy` member uncompressed, so each constant is one
  byte range of the `.npz`: the runner reads it from there (no second copy of
  the weights).

A model compiled for a foreign target (`ziggurat.compile` with
`-mtriple=aarch64-linux-gnu`, cross.py) exports the same files, its library
linked by the target's cross compiler (backends/llvm/jit.py).

A model compiled for WebAssembly (`-mtriple=wasm32-wasi -mattr=+simd128`)
exports `model.wasm` instead of the library (backends/llvm/wasm_link.py:
`wasm-ld` with wasi-libc's libm; the module exports `memory`, the entry and
`aligned_alloc`, from which the host takes its buffers),
with the same `.json` (format `ziggurat-wasm-module-1`), `.weights.npz` and
`.abi` beside it; the target decides, and a `.wasm` name for another target's
code is refused. `ziggurat.runtime.wasm.load(path)` runs it through wasmtime
(runtime/wasm.py); docs/targets.md has the ABI (pointers are 32-bit there).

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
WASM_FORMAT = "ziggurat-wasm-module-1"
ABI_FORMAT = "ziggurat-abi 1"

def export_model(model: Any, path: str | os.PathLike) -> Path:
    """Writes `model` (a `CompiledModel`) as a shared library at `path`, with `path.json` and
    `path.weights.npz` beside it (see the module docstring); returns `path`."""
    from ziggurat.backends.llvm.jit import emit_shared_library

    if model.info.get("c_source") is not None:  # the portable C target (cross.py c_compile, backends/c)
        return _export_c(model, Path(path))
    ir, options, entry = (model.info.get(k) for k in ("llvm_ir", "llvm_options", "entry_symbol"))
    if ir is None or options is None or entry is None:
        raise CompileError("export: this model was not compiled by ziggurat.compile in this process "
                           "(it has no LLVM IR to export); compile it, then export")
    out = Path(path)
    if out.parent and not out.parent.is_dir():
        raise CompileError(f"export: folder '{out.parent}' does not exist; create it first")
    wasm = _is_wasm_export(options, out)
    if wasm:
        from ziggurat.backends.llvm.wasm_link import emit_wasm_module

        emit_wasm_module(ir, out, options, exports=[entry])
    else:
        emit_shared_library(ir, out, options, exports=[entry])
    return _write_sidecars(model, out, entry, wasm)


def _export_c(model: Any, out: Path) -> Path:
    """The C target's library (built at compile time, `info["c_library"]`) and the same side files."""
    from ziggurat.backends.c import write_library

    if out.parent and not out.parent.is_dir():
        raise CompileError(f"export: folder '{out.parent}' does not exist; create it first")
    if out.suffix == ".wasm":
        raise CompileError(f"export: '{out.name}' names a WebAssembly module, but the model was compiled for the "
                           "C target (a shared library); export to a .so")
    info = model.info
    write_library(info["c_library"], out, info["c_options"], info["entry_symbol"], info.get("uses_openmp", False))
    return _write_sidecars(model, out, info["entry_symbol"], False)


def _write_sidecars(model: Any, out: Path, entry: str, wasm: bool) -> Path:
    """Completes `out.json` and writes `out.weights.npz` and `out.abi`."""
    meta_path = Path(str(out) + ".json")
    meta = json.loads(meta_path.read_text())
    meta.update({
        "format": WASM_FORMAT if wasm else FORMAT,
        "entry": entry,
        "inputs": [s.to_json() for s in model.inputs],
        "outputs": [s.to_json() for s in model.outputs + model.checks],
        "arena_bytes": int(model.arena_bytes),
        "constants": len(model.constants),
        "target": model.info.get("target", ""),
        "num_threads": model.info.get("num_threads"),
        "uses_amx": _uses_amx(model.info.get("llvm_ir")),
    })
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    weights = Path(str(out) + ".weights.npz")
    np.savez(weights, **{f"c{i}": c for i, c in enumerate(model.constants)})
    write_abi(Path(str(out) + ".abi"), meta, weights)
    return out


def _uses_amx(llvm_ir: Any) -> bool:
    """Whether the library runs AMX tile code (its loader must ask Linux for the tile state first)."""
    from ziggurat.backends.llvm.amx_runtime import uses_amx

    return bool(llvm_ir) and uses_amx(str(llvm_ir))


def _is_wasm_export(options: Any, out: Path) -> bool:
    """Whether the export is a WebAssembly module: the target decides (a wasm32 triple); a `.wasm` name
    for code of another target is refused, since it would not be one."""
    wasm = str(getattr(options, "triple", None) or "").lower().startswith("wasm")
    if out.suffix == ".wasm" and not wasm:
        raise CompileError(f"export: '{out.name}' names a WebAssembly module, but the model was compiled for "
                           f"'{getattr(options, 'triple', None) or 'the host'}'; compile it with "
                           "target='llvm -mtriple=wasm32-wasi -mattr=+simd128', or export to a .so")
    return wasm


def _spec_line(kind: str, spec: dict[str, Any]) -> str:
    from ziggurat.signature import dtype_from_name

    dtype, shape = dtype_from_name(spec["dtype"]), spec["shape"]
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return " ".join([kind, dtype.str, str(nbytes), str(len(shape)), *map(str, shape)])


def constant_ranges(weights: Path, count: int) -> list[tuple[int, int]]:
    """(offset, bytes) of the data of constants c0..c{count-1} inside the `.npz` written by `np.savez`
    (stored members: each array's data is one byte range of the file)."""
    import zipfile

    out = []
    with zipfile.ZipFile(weights) as zf, open(weights, "rb") as f:
        for i in range(count):
            info = zf.getinfo(f"c{i}.npy")
            if info.compress_type != zipfile.ZIP_STORED:
                raise CompileError(f"export: '{weights}' member c{i}.npy is compressed; the runner needs it stored")
            f.seek(info.header_offset)
            local = f.read(30)
            f.seek(info.header_offset + 30 + int.from_bytes(local[26:28], "little")
                   + int.from_bytes(local[28:30], "little"))
            version = np.lib.format.read_magic(f)
            shape, fortran, dtype = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                                     else np.lib.format.read_array_header_2_0(f))
            if fortran and len(shape) > 1:
                raise CompileError(f"export: constant c{i} was written in Fortran order")
            out.append((f.tell(), int(np.prod(shape, dtype=np.int64)) * dtype.itemsize))
    return out


def write_abi(path: Path, meta: dict[str, Any], weights: Path) -> None:
    """Writes the plain-text ABI manifest of the module docstring."""
    lines = [ABI_FORMAT, f"entry {meta['entry']}", f"arena {int(meta['arena_bytes'])}"]
    lines += [_spec_line("input", s) for s in meta["inputs"]]
    lines += [_spec_line("check" if "check" in s else "output", s) for s in meta["outputs"]]
    lines += [f"const {off} {n}" for off, n in constant_ranges(weights, int(meta["constants"]))]
    path.write_text("\n".join(lines) + "\n")

