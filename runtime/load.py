"""Loading an exported model (`runtime/export.py` writes it) back into a `CompiledModel`.

`load(path)` (also `ziggurat.runtime.load`) reads `path`, `path.json` and
`path.weights.npz` with numpy and ctypes alone: no xDSL, no llvmlite, no
compile. It refuses, with one clear error, files that are missing or
malformed, and a library built for CPU features this machine lacks (which
would otherwise die of SIGILL). Loading runs the library's code, so load only
files you exported yourself; the weights load with `allow_pickle=False`.
"""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ziggurat.errors import ModelLoadError
from ziggurat.runtime.executor import CompiledModel, aligned
from ziggurat.signature import TensorSpec
from ziggurat.runtime.export import FORMAT

# LLVM target features whose absence on the CPU means illegal instructions, and their /proc/cpuinfo flags.
_CPUINFO_FLAG = {"+avx": "avx", "+avx2": "avx2", "+fma": "fma", "+f16c": "f16c", "+avx512f": "avx512f",
                 "+avx512bw": "avx512bw", "+avx512dq": "avx512dq", "+avx512vl": "avx512vl",
                 "+avx512vnni": "avx512_vnni", "+avx512bf16": "avx512_bf16", "+amx-tile": "amx_tile",
                 "+amx-bf16": "amx_bf16", "+amx-int8": "amx_int8"}



def load(path: str | os.PathLike, cast_inputs: bool = False) -> CompiledModel:
    """The `CompiledModel` of a library written by `CompiledModel.export(path)` (`cast_inputs`: see
    `CompiledModel`)."""
    so = Path(path)
    meta_path, weights_path = Path(str(so) + ".json"), Path(str(so) + ".weights.npz")
    for p in (so, meta_path, weights_path):
        if not p.is_file():
            raise ModelLoadError(f"cannot load exported model '{so}': '{p}' is missing. "
                                 "Export writes the library, its .json and its .weights.npz; keep the three together.")
    try:
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != FORMAT:
            raise ValueError(f"format is {meta.get('format')!r}, expected {FORMAT!r}")
        inputs = [TensorSpec.from_json(s) for s in meta["inputs"]]
        outputs = [TensorSpec.from_json(s) for s in meta["outputs"]]
        entry, arena, n_const = str(meta["entry"]), int(meta["arena_bytes"]), int(meta["constants"])
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ModelLoadError(f"cannot load exported model '{so}': '{meta_path}' is malformed ({err}); "
                             "export the model again") from None
    _check_arch(so, str(meta.get("triple", "")))
    _check_cpu(so, meta.get("features", ""))
    if meta.get("uses_amx"):  # AMX tile code: the per-process permission first, else SIGILL at the first call
        from ziggurat.backends.llvm.amx_runtime import amx_status

        ok, reason = amx_status()
        if not ok:
            raise ModelLoadError(f"cannot load exported model '{so}': it runs AMX tile instructions, but {reason}; "
                                 "export it again for this CPU (e.g. --target 'llvm -mcpu=icelake-server')")
    try:
        with np.load(weights_path, allow_pickle=False) as f:
            constants = [aligned(f[f"c{i}"]) for i in range(n_const)]  # one unaligned copy alive at a time
    except (OSError, ValueError, KeyError) as err:
        raise ModelLoadError(f"cannot load exported model '{so}': '{weights_path}' is unreadable ({err}); "
                             "export the model again") from None
    try:
        lib = ctypes.CDLL(str(so.resolve()), mode=os.RTLD_LOCAL)
        address = ctypes.cast(getattr(lib, entry), ctypes.c_void_p).value
    except (OSError, AttributeError) as err:
        raise ModelLoadError(f"cannot load exported model '{so}': {err}") from None
    info = {"target": meta.get("target", ""), "num_threads": meta.get("num_threads"), "exported": str(so)}
    return CompiledModel(address, inputs, outputs, constants, arena, keepalive=lib, info=info,
                         cast_inputs=cast_inputs)  # type: ignore[arg-type]


def _check_arch(so: Path, triple: str) -> None:
    """Refuses a library built for another architecture (cross-compiled: docs/targets.md)."""
    import platform

    alias = {"arm64": "aarch64", "amd64": "x86_64"}
    arch = triple.split("-", 1)[0].lower()
    here = platform.machine().lower()
    if arch and alias.get(arch, arch) != alias.get(here, here):
        raise ModelLoadError(f"cannot load exported model '{so}': it was built for '{triple}', this machine is "
                             f"{here}; run it on the target (runtime/runner/runner.c, docs/targets.md)")


def _check_cpu(so: Path, features: str) -> None:
    """Refuses a library that needs CPU features /proc/cpuinfo does not list (Linux only)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    if not flags:
        return
    missing = [f for f in features.split(",") if f in _CPUINFO_FLAG and _CPUINFO_FLAG[f] not in flags]
    if missing:
        raise ModelLoadError(f"cannot load exported model '{so}': it was built for CPU features {missing} that this "
                             "CPU lacks; export it again on this machine, or with a target this CPU has "
                             "(e.g. --target 'llvm -mcpu=x86-64-v3')")
