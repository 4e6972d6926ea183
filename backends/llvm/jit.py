"""Compile LLVM IR to native code: in-process JIT (MCJIT) or a shared library.

* `create_target_machine` builds a machine for the LLVM CPU name and feature
  string it is given (`LLVMOptions.cpu` / `.features`, which a `Target`
  fills in); the backend asks the host nothing (target.py does, for the
  default target only).
* `optimize` runs the new pass manager's O1-O3 pipeline, with loop and SLP
  vectorization on (llvmlite leaves SLP off by default).
* `jit_compile` parses, optimizes and JIT-compiles a module. MCJIT does not
  report unresolved symbols (calling one crashes), so every declared external
  function is resolved first, and libgomp is loaded `RTLD_GLOBAL` when the
  module uses OpenMP, after its wait policy is set (`apply_omp_wait_policy`:
  the user's OMP_WAIT_POLICY/GOMP_SPINCOUNT, else ZIGGURAT_OMP_WAIT, else
  OMP_WAIT_DEFAULT).
* `jit_compile` keeps the object code MCJIT generated (`JITModule.objects`)
  and the external symbols it calls; `load_objects` links such objects into
  a new engine without optimizing or generating code again (the persistent
  compile cache, `cache.py`, stores and reloads it; Numba caches the same way).
* `emit_shared_library` builds a separate PIC machine, keeps only the entry
  points external and links with `cc -shared ... -Wl,--no-undefined`; the
  options' CPU and features are recorded in `<path>.json` (the features
  with the ones the CPU implies, `-mcpu=haswell` -> `+avx,+avx2,+fma`, so
  that the loader can refuse a machine without them).
* A foreign triple (`LLVMOptions.triple`, e.g. `aarch64-linux-gnu` on an x86
  host, docs/targets.md) gets that target's machine (LLVM's AArch64 backend
  is in llvmlite) and is linked by the cross compiler
  (`aarch64-linux-gnu-gcc`, `cross_linker`) against the target's libm and
  libgomp; `jit_compile` refuses it.

```python
llvm_module, info = translate_module(module, options)
jm = jit_compile(llvm_module, options)
entry = jm.cfunc(info.entry_symbol, None, ctypes.c_void_p)
```
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import llvmlite.binding as llvm
from llvmlite import ir

from ziggurat.backends.llvm.options import LLVMOptions, ModuleInfo
from ziggurat.backends.llvm.amx_runtime import require_amx, uses_amx
from ziggurat.errors import CompileError

GOMP_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libgomp.so.1",
    "/usr/lib64/libgomp.so.1",
    "/usr/lib/libgomp.so.1",
    "/usr/lib/aarch64-linux-gnu/libgomp.so.1",
)
_OPENMP_PREFIXES = ("GOMP_", "omp_")
_gomp: tuple[str, ctypes.CDLL] | None = None
# libgomp's own policy stays the default (docs/benchmarks.md, "OpenMP wait
# policy"): `passive` stops the 30-380 ms stalls on a loaded 2-core machine
# but is ~2x slower at 2 threads on a quiet one; spin=1k-100k was worse than
# both. ZIGGURAT_OMP_WAIT=passive is the switch for shared machines.
OMP_WAIT_DEFAULT = "libgomp"


@cache
def _init_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()


@cache
def _init_all_targets() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def is_foreign(triple: str | None) -> bool:
    """Whether code for `triple` cannot run in this process (another architecture)."""
    from ziggurat.target import Target

    return triple is not None and not Target(mtriple=triple).is_native


def create_target_machine(cpu: str, features: str, opt_level: int = 3, *, pic: bool = False,
                          triple: str | None = None) -> llvm.TargetMachine:
    """A target machine for LLVM CPU `cpu` with the feature string `features` on top of its own
    (`Target.llvm_cpu` / `Target.llvm_features`, e.g. "x86-64" and "+avx2,+fma").

    `pic=False` gives a JIT machine (large code model); `pic=True` a machine for
    objects that go into a shared library (PIC, small code model). MCJIT takes
    ownership of the machine it is given, so build one per engine. `triple`: another
    target's (None: the host's); LLVM's backends for every architecture are registered on demand.
    """
    if not cpu or features is None:
        raise CompileError(f"llvm backend: a target machine needs an LLVM CPU name and a feature string, got "
                           f"cpu={cpu!r}, features={features!r}; take them from a Target (llvm_cpu, llvm_features)")
    _init_llvm()
    if triple is None:
        target = llvm.Target.from_default_triple()
    else:
        _init_all_targets()
        try:
            target = llvm.Target.from_triple(triple)
        except RuntimeError as err:
            raise CompileError(f"llvm backend: LLVM has no target for triple '{triple}': {err}") from None
    kw = {"reloc": "pic", "codemodel": "default"} if pic else {"codemodel": "jitdefault", "jit": True}
    if triple is not None and triple.lower().startswith("wasm"):
        kw = {"reloc": "static", "codemodel": "default"}  # a wasm object for wasm-ld (PIC is emscripten's dynamic linking)
    return target.create_target_machine(cpu=cpu, features=features, opt=opt_level, **kw)


def optimize(mod: llvm.ModuleRef, tm: llvm.TargetMachine, level: int = 3) -> None:
    """Run the default O`level` module pipeline in place (nothing at level 0).

    LLVM's own loop unrolling is off: the schedules already unroll what pays (register blocks in
    the IR; `unrolled` loops, such as a conv's innermost window loop, carry `llvm.loop.unroll.full`,
    which LLVM still obeys). Its heuristics had doubled LLVM's time on the CNNs (efficientnet_b0:
    4.1 -> 2.1 s of optimization and code generation) for 1-2% of run time (docs/benchmarks.md,
    "Compile time")."""
    if level <= 0:
        return
    pto = llvm.create_pipeline_tuning_options(level)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = False
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


def omp_wait_env(policy: str) -> dict[str, str]:
    """The libgomp environment for a wait policy: passive, active, spin=N or libgomp.

    `spin=N`: idle workers spin N iterations (GOMP_SPINCOUNT) before sleeping;
    `libgomp`: leave libgomp's own default (spin ~300k, several ms per region).
    """
    kind, eq, count = policy.strip().partition("=")
    if kind in ("passive", "active") and not eq:
        return {"OMP_WAIT_POLICY": kind}
    if kind == "libgomp" and not eq:
        return {}
    if kind == "spin" and eq and count.isdigit():
        return {"GOMP_SPINCOUNT": count}
    raise CompileError(f"unknown OpenMP wait policy '{policy}' (from ZIGGURAT_OMP_WAIT); "
                       "use passive, active, spin=N (e.g. spin=10000) or libgomp")


def apply_omp_wait_policy(environ=os.environ) -> dict[str, str]:
    """Set libgomp's wait policy in `environ` before libgomp is loaded; what was set.

    libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, when it is loaded, so
    this must run first. A user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT always
    wins (nothing is set); else ZIGGURAT_OMP_WAIT, else OMP_WAIT_DEFAULT.
    """
    if any(environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")):
        return {}
    env = omp_wait_env(environ.get("ZIGGURAT_OMP_WAIT") or OMP_WAIT_DEFAULT)
    environ.update(env)
    return env


def load_libgomp() -> str:
    """Load GNU OpenMP globally so that JIT code can call GOMP_parallel; its path.

    The wait policy (apply_omp_wait_policy) is set in the environment first.
    """
    global _gomp
    if _gomp is not None:
        return _gomp[0]
    _init_llvm()
    apply_omp_wait_policy()
    found = ctypes.util.find_library("gomp")
    candidates = ([found] if found else []) + [p for p in GOMP_CANDIDATES if os.path.exists(p)]
    for path in candidates:
        try:
            handle = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            llvm.load_library_permanently(path)
        except (OSError, RuntimeError):
            continue
        _gomp = (path, handle)
        return path
    raise CompileError(
        "llvm backend: this module runs parallel loops through GNU OpenMP, but libgomp was not found; "
        "install libgomp1 (apt-get install libgomp1) or compile with LLVMOptions(num_threads=1)")


@cache
def _c_libraries() -> tuple[ctypes.CDLL, ...]:
    libs = [ctypes.CDLL(None)]
    libm = ctypes.util.find_library("m")
    if libm:
        libs.append(ctypes.CDLL(libm))
    return tuple(libs)


def external_names(mod: llvm.ModuleRef) -> list[str]:
    """The external functions `mod` calls (LLVM intrinsics aside)."""
    return [f.name for f in mod.functions if f.is_declaration and not f.name.startswith("llvm.")]


def _resolve_externals(names: list[str]) -> bool:
    """Make sure MCJIT can resolve every called external; whether OpenMP is used."""
    uses_openmp = any(n.startswith(_OPENMP_PREFIXES) for n in names)
    if uses_openmp:
        load_libgomp()
    libs = _c_libraries() + ((_gomp[1],) if _gomp else ())
    for name in names:
        if llvm.address_of_symbol(name):
            continue
        for lib in libs:
            try:
                addr = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
            except AttributeError:
                continue
            llvm.add_symbol(name, addr)
            break
        else:
            raise CompileError(f"llvm backend: external function '{name}' cannot be resolved in this process")
    return uses_openmp


class JITModule:
    """A JIT-compiled module. Keep this object alive while calling its code."""

    def __init__(self, engine: llvm.ExecutionEngine, module: llvm.ModuleRef, tm: llvm.TargetMachine,
                 llvm_ir: str, info: ModuleInfo | None, uses_openmp: bool, opt_level: int = 3):
        self.engine = engine
        self.opt_level = opt_level  # what `_whole` optimizes linked code's `llvm_ir` with again
        self.module = module  # empty when the code was linked from objects (`objects`)
        self.target_machine = tm
        self.llvm_ir = llvm_ir
        self.info = info
        self.uses_openmp = uses_openmp
        self.externals: list[str] = []  # the external functions the code calls
        self.objects: tuple[bytes, ...] = ()  # the object code (load_objects links it again)
        self.linked = False  # whether `module` is empty (the code came from `objects`)
        self._asm: str | None = None

    def address(self, name: str) -> int:
        """Address of a compiled function; CompileError if it does not exist."""
        addr = self.engine.get_function_address(name)
        if not addr:
            raise CompileError(f"llvm backend: no function '{name}' in the compiled module")
        return addr

    def cfunc(self, name: str, restype, *argtypes):
        """A ctypes callable for the function `name`."""
        return ctypes.CFUNCTYPE(restype, *argtypes)(self.address(name))

    def _whole(self) -> llvm.ModuleRef:
        """The optimized module (for linked code: `llvm_ir` optimized again, in one piece)."""
        if not self.linked:
            return self.module
        mod, _ = _parse(self.llvm_ir, self.target_machine)
        optimize(mod, self.target_machine, self.opt_level)
        return mod

    @property
    def optimized_ir(self) -> str:
        """The module's IR after the optimization pipeline."""
        return str(self._whole())

    def assembly(self) -> str:
        """Native assembly of the module (computed on first use)."""
        if self._asm is None:
            self._asm = self.target_machine.emit_assembly(self._whole())
        return self._asm


def _parse(source: ir.Module | str, tm: llvm.TargetMachine) -> tuple[llvm.ModuleRef, str]:
    text = source if isinstance(source, str) else str(source)
    try:
        mod = llvm.parse_assembly(text)
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        mod.verify()
    except RuntimeError as e:
        raise CompileError(f"llvm backend: invalid LLVM IR: {e}") from e
    return mod, text


def jit_compile(source: ir.Module | str, options: LLVMOptions | None = None,
                info: ModuleInfo | None = None, jobs: int = 1) -> JITModule:
    """Optimize and JIT-compile an `llvmlite.ir.Module` (or its text).

    `jobs` > 1 splits a module of at least `codegen_pool.MIN_SPLIT_CHARS` characters into that many
    parts (split.py) and compiles all but the first in codegen worker processes while this one
    compiles the first; MCJIT links the objects. The code is the same function for function."""
    o = options or LLVMOptions()
    _refuse_foreign(o)
    _init_llvm()
    text = source if isinstance(source, str) else str(source)
    if jobs > 1:
        from ziggurat.backends.llvm import codegen_pool
        from ziggurat.backends.llvm.split import split_module

        parts = split_module(text, jobs) if len(text) >= codegen_pool.MIN_SPLIT_CHARS else None
        if parts is not None:
            objects = codegen_pool.compile_parts(parts, o, emit_jit_object)
            return load_objects(objects, text, o, declared_externals(text), info)
    tm = create_target_machine(o.cpu, o.features, o.opt_level)
    mod, text = _parse(text, tm)
    if uses_amx(text):
        require_amx()  # the permission first: a tile instruction without it is SIGILL
    optimize(mod, tm, o.opt_level)
    names = external_names(mod)
    uses_openmp = _resolve_externals(names)
    engine = llvm.create_mcjit_compiler(mod, tm)
    objects: list[bytes] = []
    engine.set_object_cache(lambda _module, buffer: objects.append(buffer))
    engine.finalize_object()
    jm = JITModule(engine, mod, tm, text, info, uses_openmp, o.opt_level)
    jm.externals = names
    jm.objects = tuple(objects)
    return jm


def emit_jit_object(text: str, cpu: str, features: str, opt_level: int) -> bytes:
    """LLVM IR text optimized and compiled to an object for a JIT engine of that CPU (what MCJIT
    would generate for it; a codegen worker's job, `codegen_worker.py`)."""
    tm = create_target_machine(cpu, features, opt_level)
    mod, _ = _parse(text, tm)
    optimize(mod, tm, opt_level)
    return tm.emit_object(mod)


_DECLARE = re.compile(r'^declare [^@]*@("(?:[^"\\]|\\.)*"|[-a-zA-Z$._][-a-zA-Z$._0-9]*)', re.M)


def declared_externals(text: str) -> list[str]:
    """The external functions LLVM IR text declares (LLVM intrinsics aside), without parsing it."""
    names = (m.group(1).strip('"') for m in _DECLARE.finditer(text))
    return [n for n in names if not n.startswith("llvm.")]


def _refuse_foreign(o: LLVMOptions) -> None:
    if is_foreign(o.triple):
        raise CompileError(f"llvm backend: code for '{o.triple}' cannot run on this machine, so it is not "
                           "JIT-compiled; export it as a shared library instead (emit_shared_library, "
                           "`ziggurat compile ... --export model.so`; docs/targets.md)")


def load_objects(objects: Sequence[bytes], llvm_ir: str, options: LLVMOptions, externals: list[str],
                 info: ModuleInfo | None = None) -> JITModule:
    """A `JITModule` of object code generated for `options` (a `JITModule`'s `objects` and
    `externals`, or the parts `jit_compile` had compiled in parallel), linked into a new engine: no
    optimization, no code generation; the objects resolve each other's symbols.

    `llvm_ir` is the text it was compiled from (`JITModule.llvm_ir`; AMX code gets its permission
    first). The result's `module` is empty; `optimized_ir` and `assembly()` optimize `llvm_ir`
    again. Raises CompileError when an external cannot be resolved in this process (before
    linking: MCJIT would abort the process).
    """
    _refuse_foreign(options)
    _init_llvm()
    tm = create_target_machine(options.cpu, options.features, options.opt_level)
    if uses_amx(llvm_ir):
        require_amx()
    uses_openmp = _resolve_externals(list(externals))
    mod = llvm.parse_assembly("")
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    engine = llvm.create_mcjit_compiler(mod, tm)
    for obj in objects:
        engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(obj)))
    engine.finalize_object()
    jm = JITModule(engine, mod, tm, llvm_ir, info, uses_openmp, options.opt_level)
    jm.externals, jm.objects, jm.linked = list(externals), tuple(bytes(o) for o in objects), True
    return jm


def compile_module(module, options: LLVMOptions | None = None) -> JITModule:
    """Translate a loop-level xDSL module and JIT-compile it; `.info` holds its ABI."""
    from ziggurat.backends.llvm.translate import translate_module

    o = options or LLVMOptions()
    llvm_module, info = translate_module(module, o)
    return jit_compile(llvm_module, o, info)


def emit_assembly(source: ir.Module | str, options: LLVMOptions | None = None) -> str:
    """The optimized module's assembly for the options' target (any triple: a foreign one too), as
    the shared library of `emit_shared_library` would hold it."""
    o = options or LLVMOptions()
    tm = create_target_machine(o.cpu, o.features, o.opt_level, pic=True, triple=o.triple)
    mod, _ = _parse(source, tm)
    optimize(mod, tm, o.opt_level)
    return tm.emit_assembly(mod)


def cross_linker(triple: str) -> str:
    """The C compiler driver that links shared libraries for the foreign `triple`
    (`aarch64-linux-gnu-gcc` for `aarch64-linux-gnu` or `aarch64-unknown-linux-gnu`)."""
    parts = triple.split("-")
    arch = {"arm64": "aarch64"}.get(parts[0], parts[0])
    rest = [p for p in parts[1:] if p not in ("unknown", "pc", "none")] or ["linux", "gnu"]
    name = "-".join([arch] + rest) + "-gcc"
    found = shutil.which(name)
    if found is None:
        raise CompileError(f"llvm backend: linking code for '{triple}' needs the cross compiler '{name}', which is "
                           "not installed; on Debian/Ubuntu: apt-get install gcc-aarch64-linux-gnu "
                           "libgomp1-arm64-cross (docs/targets.md)")
    return found


def keep_exports(mod: "llvm.ModuleRef", exports: list[str]) -> None:
    """Makes every defined function of the parsed module `mod` but `exports` internal (so the
    optimizer may inline and drop it); refuses exports the module does not define."""
    defined = [f for f in mod.functions if not f.is_declaration]
    missing = set(exports) - {f.name for f in defined}
    if missing:
        raise CompileError(f"llvm backend: cannot export undefined functions {sorted(missing)}")
    for f in defined:
        if f.name not in exports:
            f.linkage = llvm.Linkage.internal


def emit_shared_library(source: ir.Module | str, path: str | os.PathLike, options: LLVMOptions | None = None,
                        exports: list[str] | None = None) -> Path:
    """Compile to a shared library at `path`, with `<path>.json` recording the target.

    Only `exports` stay external (default: `<prefix>_entry`, or every defined
    function with `export_all`); every other function becomes internal so it
    cannot be interposed.
    """
    o = options or LLVMOptions()
    _init_llvm()
    cc = cross_linker(o.triple) if is_foreign(o.triple) else (shutil.which("cc") or shutil.which("gcc")
                                                               or shutil.which("clang"))
    if cc is None:
        raise CompileError("llvm backend: no C compiler driver (cc) found to link the shared library")
    tm = create_target_machine(o.cpu, o.features, o.opt_level, pic=True, triple=o.triple)
    mod, _ = _parse(source, tm)
    defined = [f for f in mod.functions if not f.is_declaration]
    if exports is None:
        if o.export_all:
            exports = [f.name for f in defined if f.linkage != llvm.Linkage.internal]
        else:
            exports = [f"{o.prefix}_entry"]
    keep_exports(mod, exports)
    optimize(mod, tm, o.opt_level)
    uses_openmp = any(f.is_declaration and f.name.startswith(_OPENMP_PREFIXES) for f in mod.functions)
    out = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        obj = Path(tmp) / "module.o"
        obj.write_bytes(tm.emit_object(mod))
        cmd = [cc, "-shared", "-o", str(out), str(obj), "-lm"]
        if uses_openmp:
            cmd.append("-lgomp")
        cmd.append("-Wl,--no-undefined")
        done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise CompileError(f"llvm backend: linking {out} failed: {' '.join(cmd)}\n{done.stderr.strip()}")
    given = [f for f in (o.features or "").split(",") if f]
    implied = [f"+{f}" for f in sorted(o.target.features()) if f"+{f}" not in given]  # the CPU's own (CPU_ISA)
    meta = {
        "cpu": o.cpu,
        "features": ",".join(given + implied),  # every instruction set the code may use (runtime/load.py checks)
        "triple": tm.triple,
        "exports": list(exports),
        "needs_libgomp": uses_openmp,
        "llvm_version": ".".join(map(str, llvm.llvm_version_info)),
    }
    Path(str(out) + ".json").write_text(json.dumps(meta, indent=2) + "\n")
    return out
