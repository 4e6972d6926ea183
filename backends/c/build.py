"""The C target's compiler driver: C source -> shared library, with the LLVM backend's numerics.

`cc_command(options, src, out)` is the command line: the system `cc` (GCC or
Clang) with `-std=gnu99 -O3 -shared -fPIC -fvisibility=hidden`, `-march=native`
for the host (or `-march=<cpu>` / `-m<feature>` for `c -mcpu=...` / `-mattr=...`),
`-fopenmp` when the code has parallel loops, and the floating-point flags
that mean what the LLVM options' fast-math flags mean (`LLVMOptions.fast_math`,
default `contract, reassoc`):

    contract -> -ffp-contract=fast   (a * b + c may become one FMA; GCC's -std=c99 would turn it off)
    reassoc  -> -fassociative-math -fno-signed-zeros -fno-trapping-math (GCC needs all three to
                reassociate, e.g. to vectorize a float reduction; LLVM's reassoc alone does not imply nsz)
    fast     -> -ffast-math
    always   -> -fno-math-errno      (LLVM's math intrinsics never set errno)

No -ffast-math by default: NaN and infinities keep their IEEE meaning, as in
the LLVM backend (`maximumf` propagates NaN, index checks compare floats).
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from ziggurat.backends.c.emit import COptions
from ziggurat.errors import CompileError


def find_cc() -> str | None:
    """The C compiler driver: $CC, else cc, gcc or clang on the PATH."""
    env = os.environ.get("CC")
    if env and shutil.which(env):
        return shutil.which(env)
    return shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def arch_flags(options: COptions) -> list[str]:
    if options.cpu is None and not options.features:
        return ["-march=native"]
    flags = [f"-march={options.cpu or 'x86-64'}"]
    for f in options.features.split(","):
        f = f.strip()
        if f.startswith("+"):
            flags.append(f"-m{f[1:]}")
        elif f.startswith("-"):
            flags.append(f"-mno-{f[1:]}")
    return flags


def float_flags(fast_math: tuple[str, ...]) -> list[str]:
    fm = set(fast_math)
    if "fast" in fm:
        return ["-ffast-math"]
    flags = ["-fno-math-errno", "-ffp-contract=fast" if "contract" in fm else "-ffp-contract=off"]
    if "reassoc" in fm:
        flags += ["-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math"]
    if "afn" in fm:
        flags.append("-funsafe-math-optimizations")
    return flags


def cc_command(options: COptions, src: Path, out: Path, cc: str | None = None, openmp: bool = False) -> list[str]:
    cmd = [cc or find_cc() or "cc", "-std=gnu99", "-O3", "-shared", "-fPIC", "-fvisibility=hidden",
           "-Werror=implicit-function-declaration",
           *arch_flags(options), *float_flags(options.fast_math)]
    if options.vector_width >= 16 and platform.machine().lower() in ("x86_64", "amd64"):
        cmd.append("-mprefer-vector-width=512")  # LLVM's prefer-vector-width=512 (GCC prefers 256 by default)
    if openmp:
        cmd.append("-fopenmp")
    return cmd + ["-o", str(out), str(src), "-lm", "-Wl,--no-undefined"]


def build_library(source: str, options: COptions, openmp: bool, out: Path | None = None) -> bytes:
    """Compiles `source` to a shared library and returns its bytes (also written to `out` if given)."""
    cc = find_cc()
    if cc is None:
        raise CompileError("c backend: no C compiler found (set CC, or install gcc or clang) to build the C target; "
                           "or compile with target 'llvm'")
    with tempfile.TemporaryDirectory(prefix="ziggurat-c-") as tmp:
        src, so = Path(tmp) / "model.c", Path(tmp) / "model.so"
        src.write_text(source)
        cmd = cc_command(options, src, so, cc, openmp)
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            keep = Path(tempfile.gettempdir()) / f"ziggurat-c-failed-{os.getpid()}.c"
            keep.write_text(source)
            raise CompileError(f"c backend: the C compiler failed ({' '.join(cmd[:-5])} ...); source kept at "
                               f"{keep}:\n{done.stderr.strip()[:4000]}")
        data = so.read_bytes()
    if out is not None:
        Path(out).write_bytes(data)
    return data


def load_library(data: bytes) -> ctypes.CDLL:
    """dlopen()s library bytes (from a private temporary file, removed once mapped)."""
    fd, name = tempfile.mkstemp(prefix="ziggurat-c-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return ctypes.CDLL(name, mode=os.RTLD_LOCAL)
    finally:
        os.unlink(name)


def write_library(data: bytes, out: Path, options: COptions, entry: str, openmp: bool) -> None:
    """Writes the library and the `.json` target record that `runtime/export.py` completes."""
    from ziggurat.target import Target

    out.write_bytes(data)
    tgt = Target(mcpu=options.cpu, mattr=options.features or None)
    given = [f for f in (options.features or "").split(",") if f]
    implied = [f"+{f}" for f in sorted(tgt.features()) if f"+{f}" not in given]
    meta = {"cpu": tgt.llvm_cpu, "features": ",".join(given + implied),
            "triple": f"{platform.machine().lower()}-unknown-linux-gnu", "exports": [entry],
            "needs_libgomp": openmp, "c_compiler": find_cc(), "c_flags": cc_command(options, Path("model.c"),
                                                                                      out, "cc", openmp)[1:-5]}
    Path(str(out) + ".json").write_text(json.dumps(meta, indent=2) + "\n")
