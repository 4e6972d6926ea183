"""AMX at run time: the per-process permission Linux requires before tile code runs.

Linux keeps the AMX tile state (XTILEDATA) off until a process asks for it
with `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`; the first tile
instruction of a process that did not ask dies with SIGILL. `require_amx()` is
called by `jit_compile` for every module whose code uses AMX intrinsics, so
a kernel that needs AMX either gets the permission or fails to load with a
clear `CompileError`, never SIGILL.
"""

from __future__ import annotations

import ctypes
import platform
import re
from functools import cache

from ziggurat.errors import CompileError

SYS_ARCH_PRCTL = 158  # x86-64
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18

_AMX_INTRINSIC = re.compile(r'@"?llvm\.x86\.(ldtilecfg|tile|tdp)')


def uses_amx(llvm_ir: str) -> bool:
    """Whether LLVM IR text calls AMX intrinsics."""
    return _AMX_INTRINSIC.search(llvm_ir) is not None


@cache
def amx_status() -> tuple[bool, str]:
    """(usable, reason): whether this process may run AMX tile instructions.

    JIT code runs on this machine, so this asks the default target (target.py: the host, or
    the CPU `ZIGGURAT_HOST_CPU` names), then the kernel.
    """
    from ziggurat.target import Target

    host = Target.parse("llvm")
    if not host.has("amx-tile"):
        return False, f"the host CPU ({host.llvm_cpu}) has no AMX tiles (no amx-tile feature)"
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False, "AMX permission can only be requested on Linux x86-64"
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)
    if rc != 0:
        return False, f"the kernel refused the AMX permission request (arch_prctl errno {ctypes.get_errno()})"
    return True, "granted"


def require_amx() -> None:
    """Get the AMX permission for this process, or raise a clear CompileError."""
    ok, reason = amx_status()
    if not ok:
        raise CompileError(
            f"this kernel uses AMX tile instructions, but {reason}; compile it with the default "
            "precision (fp32) or for this CPU's features instead")
