"""WebAssembly modules: LLVM's WebAssembly backend emits an object, `wasm-ld` links it into a `.wasm`.

`emit_wasm_module(ir, "model.wasm", options, exports=["ziggurat_entry"])`, for options whose
triple is `wasm32-*` (`Target.parse("llvm -mtriple=wasm32-wasi -mattr=+simd128")`), writes a
self-contained module and `model.wasm.json` (the same target record as `emit_shared_library`):

* the object comes from a non-PIC (`reloc=static`) wasm32 target machine: PIC wasm is
  emscripten's dynamic linking, which needs a loader of its own;
* `wasm-ld --no-entry --export=<entry> --export=aligned_alloc --export-memory`: the module
  exports the entry function, its linear memory (named `memory`) and wasi-libc's
  `aligned_alloc`, and nothing else (every other function is internal before optimization,
  so `--gc-sections` drops what the entry does not reach). The host takes its buffers
  (weights, arena, IO, the argument array) from `aligned_alloc`, not from an allocator of its
  own: kernels allocate scratch above 16 KiB with `aligned_alloc` too, and wasi-libc's malloc
  takes every byte from `__heap_base` to the memory's current end as its heap on its first
  call, so pages a host allocator had grown for itself would be handed out again (measured:
  NaNs in vgg_small_bn and efficientnet_b0). One allocator, which grows the memory
  (`memory.grow`) when it needs to, serves both;
* the math functions the code calls (expf, logf, tanhf, powf, erff, ...), `memcpy`/`memset`
  and `aligned_alloc`/`free` (scratch above 16 KiB in kernels) come from wasi-libc's static
  `libc.a` (Debian: `apt-get install wasi-libc`, `/usr/lib/wasm32-wasi`), so the module
  imports nothing for them. No `--allow-undefined`: a symbol neither the module nor libc
  defines is a link error here, not a trap at run time. wasi-libc's `abort` path may import
  `wasi_snapshot_preview1.proc_exit`; the host gives it (runtime/wasm.py defines WASI);
* the shadow stack (LLVM's stack for allocas, up to 16 KiB per kernel buffer) is
  `STACK_BYTES`, placed first in memory (`--stack-first`): an overflow traps at address 0
  instead of overwriting data. The memory has no maximum: `aligned_alloc` grows it for the
  weights, arena and IO (runtime/wasm.py);
* no threads: a wasm32 `Target` has one thread, so the translator emits no `GOMP_*` call;
  a module that still references OpenMP is refused.

`wasm_linker()` finds `wasm-ld` (or Debian's `wasm-ld-19`, from `lld-19`), `wasi_libdir()`
the wasi-libc folder (`ZIGGURAT_WASI_SYSROOT=DIR` names another sysroot, e.g. a wasi-sdk's).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import llvmlite.binding as llvm
from llvmlite import ir

from ziggurat.backends.llvm.options import LLVMOptions
from ziggurat.errors import CompileError

STACK_BYTES = 1 << 20
HOST_ALLOC = "aligned_alloc"  # exported for the host: its buffers come from the module's own allocator
WASM_LD_NAMES = ("wasm-ld", "wasm-ld-22", "wasm-ld-21", "wasm-ld-20", "wasm-ld-19", "wasm-ld-18", "wasm-ld-17")
SYSROOT_ENV = "ZIGGURAT_WASI_SYSROOT"
_LIBDIRS = ("/usr/lib/wasm32-wasi", "/usr/share/wasi-sysroot/lib/wasm32-wasi",
            "/opt/wasi-sdk/share/wasi-sysroot/lib/wasm32-wasi")
_INSTALL = "on Debian/Ubuntu: apt-get install lld-19 wasi-libc (docs/targets.md)"


def is_wasm(triple: str | None) -> bool:
    """Whether `triple` is a WebAssembly one (`wasm32-wasi`, `wasm32-unknown-unknown`)."""
    return triple is not None and triple.lower().startswith("wasm")


def wasm_linker() -> str:
    """The path of `wasm-ld` (any of `WASM_LD_NAMES`); CompileError naming the package when none is installed."""
    for name in WASM_LD_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise CompileError(f"llvm backend: linking a WebAssembly module needs wasm-ld, which is not installed; {_INSTALL}")


def wasi_libdir() -> str:
    """The folder holding wasi-libc's `libc.a` for wasm32 (`$ZIGGURAT_WASI_SYSROOT/lib/wasm32-wasi` first)."""
    root = os.environ.get(SYSROOT_ENV)
    dirs = ((str(Path(root) / "lib" / "wasm32-wasi"), str(Path(root) / "lib")) if root else ()) + _LIBDIRS
    for d in dirs:
        if (Path(d) / "libc.a").is_file():
            return d
    raise CompileError("llvm backend: a WebAssembly module needs wasi-libc's libc.a (expf, logf, memcpy, ...), "
                       f"found in none of {', '.join(dirs)}; {_INSTALL}, or set {SYSROOT_ENV} to a WASI sysroot")


def wasm_object(source: ir.Module | str, options: LLVMOptions, exports: list[str]) -> bytes:
    """The optimized wasm32 object of `source` with only `exports` external."""
    from ziggurat.backends.llvm.jit import _parse, create_target_machine, keep_exports, optimize

    o = options
    tm = create_target_machine(o.cpu, o.features, o.opt_level, triple=o.triple)
    mod, _ = _parse(source, tm)
    keep_exports(mod, exports)
    optimize(mod, tm, o.opt_level)
    gomp = [f.name for f in mod.functions if f.is_declaration and f.name.startswith(("GOMP_", "omp_"))]
    if gomp:
        raise CompileError(f"llvm backend: WebAssembly code runs on one thread, but this module calls {gomp}; "
                           "compile it with num_threads=1 (a wasm32 Target always has one thread)")
    return tm.emit_object(mod)


def emit_wasm_module(source: ir.Module | str, path: str | os.PathLike, options: LLVMOptions,
                     exports: list[str] | None = None) -> Path:
    """Compile and link a WebAssembly module at `path`, with `<path>.json` recording the target (see the
    module docstring); `exports` defaults to `<prefix>_entry`."""
    o = options
    if not is_wasm(o.triple):
        raise CompileError(f"llvm backend: a .wasm module needs a WebAssembly target (-mtriple=wasm32-wasi), "
                           f"these options are for '{o.triple or 'the host'}'")
    exports = list(exports or [f"{o.prefix}_entry"])
    ld, libdir = wasm_linker(), wasi_libdir()
    obj_bytes = wasm_object(source, o, exports)
    out = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        obj = Path(tmp) / "module.o"
        obj.write_bytes(obj_bytes)
        cmd = [ld, str(obj), "-o", str(out), "--no-entry", "--export-memory", *(f"--export={e}" for e in exports),
               f"--export={HOST_ALLOC}",
               "-z", f"stack-size={STACK_BYTES}", "--stack-first", "--gc-sections", "--strip-debug",
               "-L", libdir, "-lc"]
        done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise CompileError(f"llvm backend: linking {out} failed: {' '.join(cmd)}\n{done.stderr.strip()}")
    meta = {
        "cpu": o.cpu,
        "features": ",".join(f for f in (o.features or "").split(",") if f),
        "triple": o.triple,
        "exports": exports,
        "needs_libgomp": False,
        "llvm_version": ".".join(map(str, llvm.llvm_version_info)),
        "stack_bytes": STACK_BYTES,
        "linker": Path(ld).name,
    }
    Path(str(out) + ".json").write_text(json.dumps(meta, indent=2) + "\n")
    return out
