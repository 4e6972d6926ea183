"""Compilation targets, written as TVM-style strings: the one source of machine facts.

`Target.parse("llvm -mcpu=haswell -num-cores=2")` gives the backend kind and
its options. Every pass, the cost oracle and the backend read the machine
facts from a `Target`: its LLVM CPU and feature string, the f32 lanes of one
vector register, the vector registers, the thread count and the instruction
sets (VNNI, BF16, AMX). The host is asked only to fill in what the target
string leaves out:

* neither `-mcpu` nor `-mattr`: the host CPU and its features;
* `-mcpu=NAME`: that CPU and the features LLVM gives it (our facts about it
  come from `CPU_ISA`, which a test checks against LLVM);
* `-mattr=+a,+b` alone: LLVM's generic `x86-64` CPU with exactly those
  features, so `-mattr=+avx2,+fma` on an AVX-512 host gives AVX2 code.

The thread count comes from `-num-cores`, else the `ZIGGURAT_NUM_THREADS`
environment variable, else the number of CPUs.

`host_cpu()` is the only place that asks the machine (LLVM's host CPU name and
feature string), and only the default target reads it. The environment
variable `ZIGGURAT_HOST_CPU=NAME` (a `CPU_ISA` name) replaces the host there:
the default target becomes that CPU with exactly `CPU_ISA`'s features, so
`ZIGGURAT_HOST_CPU=haswell pytest ...` runs the whole suite as if on an AVX2
host, on an AVX-512 one (the machine must still execute the code: choose a
CPU whose features the host has). `host_cpu` is cached: a test that changes
the variable calls `host_cpu.cache_clear()`.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from dataclasses import dataclass
from functools import cache

from ziggurat.errors import ZigguratError

KINDS = ("llvm",)

GENERIC_CPU = "x86-64"

# LLVM x86 CPU names -> the instruction sets ziggurat reads from them (a target given by
# -mcpu alone). tests/unit/test_target.py checks each entry against the code LLVM emits.
_V3 = ("avx", "avx2", "fma")
_V4 = _V3 + ("avx512f", "avx512bw", "avx512vl", "avx512dq")
CPU_ISA: dict[str, tuple[str, ...]] = {
    "x86-64": (),
    "x86-64-v2": (),
    "x86-64-v3": _V3,
    "x86-64-v4": _V4,
    "haswell": _V3,
    "broadwell": _V3,
    "skylake": _V3,
    "alderlake": _V3 + ("avxvnni",),
    "znver1": _V3,
    "znver2": _V3,
    "znver3": _V3,
    "skylake-avx512": _V4,
    "cascadelake": _V4 + ("avx512vnni",),
    "cooperlake": _V4 + ("avx512vnni", "avx512bf16"),
    "icelake-server": _V4 + ("avx512vnni",),
    "tigerlake": _V4 + ("avx512vnni",),
    "sapphirerapids": _V4 + ("avx512vnni", "avx512bf16", "amx-tile", "amx-int8", "amx-bf16"),
    "znver4": _V4 + ("avx512vnni", "avx512bf16"),
    "znver5": _V4 + ("avx512vnni", "avx512bf16"),
}


HOST_CPU_ENV = "ZIGGURAT_HOST_CPU"


@cache
def host_cpu() -> tuple[str, str]:
    """The host CPU name and LLVM feature string (only the default target asks).

    With `ZIGGURAT_HOST_CPU=NAME` set, NAME and the features `CPU_ISA` gives it.
    """
    override = os.environ.get(HOST_CPU_ENV, "").strip()
    if override:
        if override not in CPU_ISA:
            raise ZigguratError(f"{HOST_CPU_ENV}='{override}' is not a CPU ziggurat knows; "
                                f"use one of {', '.join(sorted(CPU_ISA))} (or unset it for the host CPU)")
        return override, ",".join(f"+{f}" for f in CPU_ISA[override])
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    return llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()


@dataclass(frozen=True)
class Target:
    """A code-generation target."""

    kind: str = "llvm"
    mcpu: str | None = None
    mattr: str | None = None
    num_cores: int | None = None

    @classmethod
    def parse(cls, text: str | Target) -> Target:
        if isinstance(text, Target):
            return text
        words = shlex.split(text)
        if not words or words[0] not in KINDS:
            raise ZigguratError(f"unknown target '{text}': the supported target kinds are {', '.join(KINDS)} (e.g. 'llvm -num-cores=2')")
        fields: dict[str, object] = {"kind": words[0]}
        for word in words[1:]:
            key, eq, value = word.lstrip("-").partition("=")
            if not eq:
                raise ZigguratError(f"target option '{word}' needs a value, e.g. -num-cores=2")
            if key == "mcpu":
                fields["mcpu"] = None if value == "native" else value
            elif key == "mattr":
                fields["mattr"] = value
            elif key == "num-cores":
                if not value.isdigit() or int(value) < 1:
                    raise ZigguratError(f"-num-cores must be a positive integer, got '{value}'")
                fields["num_cores"] = int(value)
            else:
                raise ZigguratError(f"unknown target option '-{key}'; known: -mcpu, -mattr, -num-cores")
        tgt = cls(**fields)  # type: ignore[arg-type]
        if tgt.mcpu is not None and tgt.mattr is None and tgt.mcpu not in CPU_ISA:
            raise ZigguratError(f"unknown CPU '-mcpu={tgt.mcpu}': ziggurat knows {', '.join(sorted(CPU_ISA))}; "
                                "for another CPU also give its features, e.g. -mattr=+avx2,+fma")
        return tgt

    @classmethod
    def for_width(cls, vector_width: int, num_threads: int | None = None) -> Target:
        """A target with `vector_width` f32 lanes (16: AVX-512, 8: AVX2, 4: SSE) and no host facts."""
        cpu = {16: "x86-64-v4", 8: "x86-64-v3", 4: "x86-64"}.get(vector_width)
        if cpu is None:
            raise ZigguratError(f"no x86 target has {vector_width} f32 lanes; use 4, 8 or 16")
        return cls(mcpu=cpu, num_cores=num_threads)

    def with_threads(self, num_threads: int) -> Target:
        return dataclasses.replace(self, num_cores=num_threads)

    def resolved(self) -> Target:
        """This target with its thread count spelled out (`llvm` on a 2-core machine is
        `llvm -num-cores=2`): what tuning records are filed under and candidates built for."""
        return self.with_threads(self.num_threads)

    @property
    def num_threads(self) -> int:
        if self.num_cores is not None:
            return self.num_cores
        env = os.environ.get("ZIGGURAT_NUM_THREADS")
        if env:
            if not env.isdigit() or int(env) < 1:
                raise ZigguratError(f"ZIGGURAT_NUM_THREADS must be a positive integer, got '{env}'")
            return int(env)
        return os.cpu_count() or 1

    @property
    def llvm_cpu(self) -> str:
        """The CPU LLVM generates code for."""
        if self.mcpu is not None:
            return self.mcpu
        return GENERIC_CPU if self.mattr is not None else host_cpu()[0]

    @property
    def llvm_features(self) -> str:
        """The feature string LLVM is given on top of `llvm_cpu`'s own."""
        if self.mattr is not None:
            return self.mattr
        return "" if self.mcpu is not None else host_cpu()[1]

    def features(self) -> frozenset[str]:
        """Every instruction-set feature the target has (without the '+')."""
        return _features(self.llvm_cpu, self.llvm_features)

    def has(self, feature: str) -> bool:
        """`has("avx512vnni")`: the target executes that instruction set."""
        return feature in self.features()

    @property
    def vector_width(self) -> int:
        """f32 lanes in one vector register of this target."""
        if self.has("avx512f"):
            return 16
        if self.has("avx"):
            return 8
        return 4

    @property
    def vector_registers(self) -> int:
        return 32 if self.has("avx512f") else 16

    def __str__(self) -> str:
        parts = [self.kind]
        if self.mcpu:
            parts.append(f"-mcpu={self.mcpu}")
        if self.mattr:
            parts.append(f"-mattr={self.mattr}")
        if self.num_cores:
            parts.append(f"-num-cores={self.num_cores}")
        return " ".join(parts)


@cache
def _features(cpu: str, feature_string: str) -> frozenset[str]:
    on: set[str] = set(CPU_ISA.get(cpu, ()))
    for f in feature_string.split(","):
        if f.startswith("+"):
            on.add(f[1:])
        elif f.startswith("-"):
            on.discard(f[1:])
    if "avx512f" in on or "avx2" in on:
        on.add("avx")
    return frozenset(on)
