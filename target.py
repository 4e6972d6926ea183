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

`-mtriple=aarch64-linux-gnu` makes it a foreign target (docs/targets.md):
64-bit Arm with NEON, 4 f32 lanes and 32 vector registers, LLVM's `generic`
AArch64 CPU with `+neon` unless `-mcpu` (an `AARCH64_CPU_ISA` name, e.g.
`cortex-a72`, `neoverse-n1`) or `-mattr` say otherwise. The host is never
asked for a foreign target's facts; `is_native` tells the two apart (code for
a foreign target is exported and cross-linked, never JIT-compiled here).

`-mtriple=wasm32-wasi` is WebAssembly (docs/targets.md): LLVM's `generic`
WebAssembly CPU, 4 f32 lanes with `-mattr=+simd128` (1, scalar code, without),
16 "vector registers" for the schedules (wasm has no register file; see
`WASM_VECTOR_REGISTERS`), one thread always (`-num-cores` above 1 is refused:
no OpenMP in a wasm module), no x86 or Arm feature. The module is linked by
`wasm-ld` and run by a WebAssembly engine (runtime/wasm.py: wasmtime).

`cuda -arch=sm_90` is an NVIDIA GPU (docs/targets.md): the kind `cuda`, whose
only option is `-arch`, the compute capability (`CUDA_ARCHES`: sm_70 to
sm_90; `sm_80` without it), kept as the LLVM CPU of the `nvptx64-nvidia-cuda`
triple. `-mtriple`, `-mattr` and `-num-cores` above 1 are refused. Such a
target is never native (cross.py `cuda_compile` builds PTX, run through the
CUDA driver by runtime/cuda.py); a GPU thread's code is scalar (1 f32 lane),
the host thread count is 1 (the kernels' grid is the parallelism), and no x86
or Arm feature is set.

The thread count comes from `-num-cores`, else the `ZIGGURAT_NUM_THREADS`
environment variable, else the number of CPUs (1 for a foreign target: this
machine's CPU count says nothing about the board's; give `-num-cores=4`).

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
import platform
import shlex
from dataclasses import dataclass
from functools import cache

from ziggurat.errors import ZigguratError

# c: portable C printed by backends/c and built by the system cc; cuda: PTX for an NVIDIA GPU through LLVM's
# NVPTX backend, run through the CUDA driver (backends/cuda, runtime/cuda.py; docs/targets.md)
KINDS = ("llvm", "c", "cuda")
# CUDA compute capabilities ziggurat emits PTX for (`cuda -arch=sm_90`); the default is sm_80 (Ampere).
CUDA_ARCHES = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90")
CUDA_DEFAULT_ARCH = "sm_80"
CUDA_TRIPLE = "nvptx64-nvidia-cuda"

GENERIC_CPU = "x86-64"

# The architectures ziggurat generates code for (the first part of an LLVM triple).
ARCHES = ("x86_64", "aarch64", "wasm32")
_ARCH_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64", "wasm32": "wasm32"}
AARCH64_GENERIC_CPU = "generic"

# WebAssembly (wasm32): LLVM's WebAssembly CPUs. `generic` (LLVM 22: bulk-memory, multivalue,
# mutable-globals, nontrapping-fptoint, reference-types, sign-ext) without SIMD unless `-mattr=+simd128`.
WASM_GENERIC_CPU = "generic"
WASM_CPUS = frozenset({"generic", "mvp", "lime1", "bleeding-edge"})
# wasm has no register file: values live in locals that the engine (wasmtime's Cranelift, V8's TurboFan
# or Liftoff) maps to the machine's registers. 16 is what an x86-64 machine without AVX-512 has (xmm0-15),
# the common case for a browser or wasmtime; AArch64 hosts have 32, so 16 never asks for more than any
# host has and the default schedule's register tiles (4-lane accumulators) do not spill there.
WASM_VECTOR_REGISTERS = 16

# AArch64 CPU names -> the features ziggurat records for them (all have NEON: 4 f32 lanes, 32 registers;
# the vector code uses NEON only, SVE included). Each name is one LLVM 22 knows.
_A_DOT = ("neon", "fullfp16", "dotprod")
_A_V9 = _A_DOT + ("sve", "sve2", "bf16", "i8mm")
AARCH64_CPU_ISA: dict[str, tuple[str, ...]] = {
    "generic": ("neon",),
    "cortex-a53": ("neon",),
    "cortex-a55": _A_DOT,
    "cortex-a57": ("neon",),
    "cortex-a72": ("neon",),
    "cortex-a73": ("neon",),
    "cortex-a76": _A_DOT,
    "cortex-a78": _A_DOT,
    "cortex-x1": _A_DOT,
    "cortex-a710": _A_V9,
    "neoverse-n1": _A_DOT,
    "neoverse-v1": _A_DOT + ("sve", "bf16", "i8mm"),
    "neoverse-n2": _A_V9,
    "neoverse-v2": _A_V9,
    "apple-m1": _A_DOT,
    "apple-m2": _A_DOT + ("bf16", "i8mm"),
    "a64fx": ("neon", "fullfp16", "sve"),
}
# Further AArch64 CPU names LLVM 22 knows (accepted with -mattr, as for x86).
LLVM_AARCH64_CPUS = frozenset(AARCH64_CPU_ISA) | frozenset("""
    cortex-a35 cortex-a65 cortex-a75 cortex-a77 cortex-a510 cortex-a520 cortex-a715 cortex-a720 cortex-x2
    cortex-x3 cortex-x4 neoverse-n3 neoverse-v3 neoverse-e1 apple-a14 apple-m3 apple-m4 ampere1 ampere1a
    ampere1b carmel thunderx2t99 thunderx3t110 tsv110 kryo exynos-m3 falkor saphira oryon-1 grace
""".split())


def triple_arch(triple: str) -> str:
    """The architecture of an LLVM triple (`aarch64-linux-gnu` -> `aarch64`); ZigguratError for one
    ziggurat does not generate code for."""
    arch = _ARCH_ALIASES.get(triple.split("-", 1)[0].lower())
    if arch is None:
        raise ZigguratError(f"unsupported target triple '-mtriple={triple}': ziggurat generates code for "
                            "x86_64 and aarch64 (e.g. -mtriple=aarch64-linux-gnu) and for WebAssembly "
                            "(-mtriple=wasm32-wasi); wasm64 and a C target are not done yet as -mtriple values: the "
                            "portable C target is the kind 'c' (target 'c', built by the system cc; docs/targets.md)")
    return arch


def host_arch() -> str:
    """This machine's architecture, as `triple_arch` names it."""
    return _ARCH_ALIASES.get(platform.machine().lower(), platform.machine().lower())

# Vector ops one table read costs (`Target.lookup_cost`): on Intel hosts (quantized-lookup's own default
# `min-cost`) and on AMD Zen cores.
LOOKUP_COST = 16
ZEN_LOOKUP_COST = 28

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
    "icelake-client": _V4 + ("avx512vnni",),
    # what LLVM's host detection names some virtual Xeons (the CPUID model hidden; seen 2026-11-28)
    "rocketlake": _V4 + ("avx512vnni",),
    "tigerlake": _V4 + ("avx512vnni",),
    "sapphirerapids": _V4 + ("avx512vnni", "avx512bf16", "amx-tile", "amx-int8", "amx-bf16"),
    # what LLVM's host detection names another virtual Xeon with AMX (seen 2026-12-01); Granite Rapids alike
    "emeraldrapids": _V4 + ("avx512vnni", "avx512bf16", "amx-tile", "amx-int8", "amx-bf16"),
    "graniterapids": _V4 + ("avx512vnni", "avx512bf16", "amx-tile", "amx-int8", "amx-bf16"),
    "znver4": _V4 + ("avx512vnni", "avx512bf16"),
    "znver5": _V4 + ("avx512vnni", "avx512bf16"),
}


# The 64-bit x86 CPU names LLVM 22 (llvmlite 0.50) knows, checked before LLVM sees one: an unknown name
# makes LLVM print a warning for every target machine it builds, and a 32-bit CPU (i686, pentium4, ...)
# aborts the process ("64-bit code requested on a subtarget that doesn't support it").
# tests/unit/test_first_hour_cli.py checks each against LLVM.
LLVM_X86_64_CPUS = frozenset("""
    x86-64 x86-64-v2 x86-64-v3 x86-64-v4 generic nocona core2 penryn bonnell atom silvermont slm goldmont
    goldmont-plus tremont nehalem corei7 westmere sandybridge corei7-avx ivybridge core-avx-i haswell
    core-avx2 broadwell skylake skylake-avx512 skx cascadelake cooperlake cannonlake icelake-client
    rocketlake icelake-server tigerlake sapphirerapids alderlake raptorlake meteorlake arrowlake arrowlake-s
    lunarlake gracemont pantherlake wildcatlake sierraforest grandridge graniterapids graniterapids-d
    emeraldrapids clearwaterforest diamondrapids novalake knl knm k8 athlon64 athlon-fx opteron k8-sse3
    athlon64-sse3 opteron-sse3 amdfam10 barcelona btver1 btver2 bdver1 bdver2 bdver3 bdver4 znver1 znver2
    znver3 znver4 znver5
""".split())


def _check_cpu(cpu: str | None, mattr: str | None, arch: str = "x86_64") -> None:
    """Refuses a `-mcpu` that ziggurat has no facts for (without `-mattr`) or that LLVM does not know."""
    import difflib

    if arch == "wasm32":
        if cpu is not None and cpu not in WASM_CPUS:
            close = difflib.get_close_matches(cpu, sorted(WASM_CPUS), n=3)
            hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
            raise ZigguratError(f"unknown WebAssembly CPU '-mcpu={cpu}'{hint}: LLVM knows "
                                f"{', '.join(sorted(WASM_CPUS))}; SIMD is a feature: -mattr=+simd128")
        return
    if arch == "aarch64":
        _check_aarch64_cpu(cpu, mattr)
        return
    if cpu is None or cpu in CPU_ISA:
        return
    if mattr is None:
        close = difflib.get_close_matches(cpu, list(CPU_ISA), n=3)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        raise ZigguratError(f"unknown CPU '-mcpu={cpu}'{hint}: ziggurat knows {', '.join(sorted(CPU_ISA))}; "
                            "for another CPU also give its features, e.g. -mattr=+avx2,+fma")
    if cpu not in LLVM_X86_64_CPUS and cpu != _llvm_host_cpu():
        close = difflib.get_close_matches(cpu, sorted(LLVM_X86_64_CPUS), n=3)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        raise ZigguratError(f"unknown CPU '-mcpu={cpu}'{hint}: LLVM knows no 64-bit x86 CPU of that name; "
                            f"known: {', '.join(sorted(LLVM_X86_64_CPUS))}")


def _check_aarch64_cpu(cpu: str | None, mattr: str | None) -> None:
    import difflib

    if cpu is None or cpu in AARCH64_CPU_ISA or (mattr is not None and cpu in LLVM_AARCH64_CPUS):
        return
    known = AARCH64_CPU_ISA if mattr is None else LLVM_AARCH64_CPUS
    close = difflib.get_close_matches(cpu, sorted(known), n=3)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    more = "; for another CPU also give its features, e.g. -mattr=+neon" if mattr is None else ""
    raise ZigguratError(f"unknown AArch64 CPU '-mcpu={cpu}'{hint}: known: {', '.join(sorted(known))}{more}")


@cache
def _llvm_host_cpu() -> str:
    """LLVM's name for the host CPU (a CPU newer than LLVM_X86_64_CPUS is still accepted when it is the host)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    return llvm.get_host_cpu_name()


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
    mtriple: str | None = None  # None: the host's triple
    denormals: str | None = None  # -denormals=keep|flush; None: flush (flush_denormals)
    int8: str | None = None  # -int8=exact|saturate; None: exact (int8_pairs)

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
            elif key == "mtriple":
                triple_arch(value)
                fields["mtriple"] = value
            elif key == "arch" and words[0] == "cuda":
                if value not in CUDA_ARCHES:
                    raise ZigguratError(f"-arch={value}: ziggurat emits PTX for {', '.join(CUDA_ARCHES)}")
                fields["mcpu"] = value
            elif key == "denormals":
                if value not in ("flush", "keep"):
                    raise ZigguratError(f"-denormals must be flush or keep, got '{value}'")
                fields["denormals"] = value
            elif key == "int8":
                if value not in ("exact", "saturate"):
                    raise ZigguratError(f"-int8 must be exact or saturate, got '{value}'")
                fields["int8"] = value
            elif key == "num-cores":
                if not value.isdigit() or int(value) < 1:
                    raise ZigguratError(f"-num-cores must be a positive integer, got '{value}'")
                fields["num_cores"] = int(value)
            else:
                raise ZigguratError(f"unknown target option '-{key}'; known: -mtriple, -mcpu, -mattr, -num-cores, -denormals, -int8"
                                    + (", -arch (cuda)" if words[0] == "cuda" else ""))
        tgt = cls(**fields)  # type: ignore[arg-type]
        if tgt.kind == "cuda":
            if tgt.mtriple is not None or tgt.mattr is not None or (tgt.num_cores or 1) > 1:
                raise ZigguratError(f"target '{text}': a CUDA target takes -arch=sm_NN only (the GPU's compute "
                                    "capability); -mtriple, -mattr and -num-cores are for CPU targets")
            if tgt.mcpu is not None and tgt.mcpu not in CUDA_ARCHES:
                raise ZigguratError(f"target '{text}': give the GPU as -arch=sm_NN, one of {', '.join(CUDA_ARCHES)}")
            return tgt
        if tgt.kind == "c" and tgt.mtriple is not None:
            raise ZigguratError(f"target '{text}': the C target builds for this machine with the system cc "
                                "(-march=native, or -mcpu=/-mattr=); it takes no -mtriple")
        _check_cpu(tgt.mcpu, tgt.mattr, tgt.arch)
        if tgt.arch == "wasm32" and (tgt.num_cores or 1) > 1:
            raise ZigguratError(f"-num-cores={tgt.num_cores}: WebAssembly code runs on one thread (ziggurat does not "
                                "use wasi-threads or Web Workers); leave -num-cores out or give -num-cores=1")
        return tgt

    @classmethod
    def for_width(cls, vector_width: int, num_threads: int | None = None) -> Target:
        """A target with `vector_width` f32 lanes (16: AVX-512, 8: AVX2, 4: SSE; 1: scalar code, WebAssembly
        without simd128, the one such target) and no host facts."""
        if vector_width == 1:
            return cls(mtriple="wasm32-wasi")  # one thread whatever num_threads says
        cpu = {16: "x86-64-v4", 8: "x86-64-v3", 4: "x86-64"}.get(vector_width)
        if cpu is None:
            raise ZigguratError(f"no x86 target has {vector_width} f32 lanes; use 4, 8 or 16 (or 1: scalar)")
        return cls(mcpu=cpu, num_cores=num_threads)

    def with_threads(self, num_threads: int) -> Target:
        return dataclasses.replace(self, num_cores=num_threads)

    def resolved(self) -> Target:
        """This target with its thread count spelled out (`llvm` on a 2-core machine is
        `llvm -num-cores=2`): what tuning records are filed under and candidates built for."""
        return self.with_threads(self.num_threads)

    @property
    def num_threads(self) -> int:
        if self.arch in ("wasm32", "nvptx64"):  # a GPU's threads are the kernels' grid, not host threads
            return 1  # single-threaded: no OpenMP in a wasm module (parse refuses -num-cores > 1)
        if self.num_cores is not None:
            return self.num_cores
        env = os.environ.get("ZIGGURAT_NUM_THREADS")
        if env:
            if not env.isdigit() or int(env) < 1:
                raise ZigguratError(f"ZIGGURAT_NUM_THREADS must be a positive integer, got '{env}'")
            return int(env)
        return (os.cpu_count() or 1) if self.is_native else 1

    @property
    def arch(self) -> str:
        """`x86_64`, `aarch64`, `wasm32` or `nvptx64` (cuda): the triple's architecture (the host's without
        `-mtriple`)."""
        if self.kind == "cuda":
            return "nvptx64"
        return host_arch() if self.mtriple is None else triple_arch(self.mtriple)

    @property
    def is_native(self) -> bool:
        """Whether this machine can run the target's code (its architecture is the host's): code for a
        foreign target is exported and linked by a cross compiler, never JIT-compiled."""
        return self.kind != "cuda" and (self.mtriple is None or self.arch == host_arch())

    @property
    def llvm_triple(self) -> str | None:
        """The LLVM triple to generate code for; None for the host's (LLVM's default triple)."""
        return CUDA_TRIPLE if self.kind == "cuda" else self.mtriple

    @property
    def llvm_cpu(self) -> str:
        """The CPU LLVM generates code for."""
        if self.mcpu is not None:
            return self.mcpu
        if self.kind == "cuda":
            return CUDA_DEFAULT_ARCH
        if self.arch == "wasm32":
            return WASM_GENERIC_CPU
        if self.arch == "aarch64" and (self.mattr is not None or not self.is_native):
            return AARCH64_GENERIC_CPU
        return GENERIC_CPU if self.mattr is not None else host_cpu()[0]

    @property
    def llvm_features(self) -> str:
        """The feature string LLVM is given on top of `llvm_cpu`'s own."""
        if self.mattr is not None:
            return self.mattr
        if self.mcpu is not None or self.arch in ("wasm32", "nvptx64"):
            return ""  # wasm32 without -mattr: scalar code (give -mattr=+simd128 for 4 lanes)
        return "+neon" if not self.is_native else host_cpu()[1]

    def features(self) -> frozenset[str]:
        """Every instruction-set feature the target has (without the '+')."""
        return _features(self.llvm_cpu, self.llvm_features, self.arch)

    def has(self, feature: str) -> bool:
        """`has("avx512vnni")`: the target executes that instruction set."""
        return feature in self.features()

    @property
    def flush_denormals(self) -> bool:
        """Whether compiled models run with denormal floats flushed to zero (x86 MXCSR FTZ and DAZ, set
        around each call: LLVMOptions.flush_denormals), as TensorFlow and oneDNN run by default: a float
        result below 2^-126 (1.2e-38) becomes 0 instead of a denormal, each of which costs a ~100-cycle
        microcode assist (an int8 distilbert's attention produced enough to take 14% of its time).
        `-denormals=keep` keeps IEEE denormals; other architectures keep them."""
        return self.kind == "llvm" and self.arch == "x86_64" and self.denormals != "keep"

    @property
    def int8_dot(self) -> str:
        """The target's int8 dot product: 'amx' (AMX-INT8 tiles, `tdpbusd`: lowering/qgemm_amx.py),
        'vnni' (AVX512-VNNI `vpdpbusd`), 'avx2' (`vpmaddubsw` + `vpmaddwd`) or 'none'
        (lowering/qgemm.py schedules the int8 GEMMs by it)."""
        if self.has("amx-int8") and self.has("amx-tile") and self.kind == "llvm":  # the C backend has no tile form
            return "amx"
        return "vnni" if self.has("avx512vnni") else ("avx2" if self.has("avx2") else "none")

    @property
    def int8_pairs(self) -> str:
        """How AVX2's int8 GEMMs treat weights whose pairs of products could leave int16 in
        `vpmaddubsw` (`-int8=`): 'exact' (default) runs them on int16 operands (`vpmaddwd`), as the
        QDQ semantics ask; 'saturate' lets `vpmaddubsw` saturate them as onnxruntime's AVX2
        kernels do, in whichever operand order keeps typical activations in range
        (lowering/qgemm.py `saturating_form`), about 1.2x faster. Only AVX2 targets without
        AVX512-VNNI have a choice: `vpdpbusd` and AMX are exact."""
        return self.int8 or "exact"

    @property
    def lookup_cost(self) -> int:
        """What one vector of table reads (`graph.lookup`: a gather) costs, counted in vector ops: the
        `min-cost` of quantized-lookup (lowering/pipelines.py), below which an elementwise chain of a
        quantized value stays arithmetic. AMD's Zen cores run gathers as microcode: on a Zen 5 host
        (2026-12-02), int8 MobileNetV3 and RegNet ran 1.13-1.15x faster with chains up to 28 ops kept
        arithmetic than with the 16 measured on Intel AVX-512 hosts, bit for bit the same outputs."""
        return ZEN_LOOKUP_COST if self.llvm_cpu.startswith("znver") else LOOKUP_COST

    @property
    def vector_width(self) -> int:
        """f32 lanes in one vector register of this target (AArch64: NEON's 128 bits; wasm32: simd128's
        128 bits, else 1: scalar code)."""
        if self.arch == "wasm32":
            return 4 if self.has("simd128") else 1
        if self.arch == "nvptx64":
            return 1  # scalar code per GPU thread: the warp is the vector
        if self.arch == "aarch64":
            return 4
        if self.has("avx512f"):
            return 16
        if self.has("avx"):
            return 8
        return 4

    @property
    def vector_registers(self) -> int:
        """Vector registers of this target: 32 (AVX-512 zmm, AArch64 v0-v31) or 16 (AVX2/SSE)."""
        if self.arch == "aarch64":
            return 32
        if self.arch == "wasm32":
            return WASM_VECTOR_REGISTERS  # see its comment: wasm has none, the engine's host has 16 or 32
        return 32 if self.has("avx512f") else 16

    def __str__(self) -> str:
        parts = [self.kind]
        if self.mtriple:
            parts.append(f"-mtriple={self.mtriple}")
        if self.mcpu:
            parts.append(f"-arch={self.mcpu}" if self.kind == "cuda" else f"-mcpu={self.mcpu}")
        if self.mattr:
            parts.append(f"-mattr={self.mattr}")
        if self.num_cores:
            parts.append(f"-num-cores={self.num_cores}")
        if self.denormals:
            parts.append(f"-denormals={self.denormals}")
        if self.int8:
            parts.append(f"-int8={self.int8}")
        return " ".join(parts)


@cache
def _features(cpu: str, feature_string: str, arch: str = "x86_64") -> frozenset[str]:
    on: set[str] = set((AARCH64_CPU_ISA if arch == "aarch64" else CPU_ISA).get(cpu, ()))
    for f in feature_string.split(","):
        if f.startswith("+"):
            on.add(f[1:])
        elif f.startswith("-"):
            on.discard(f[1:])
    if arch in ("wasm32", "nvptx64"):
        return frozenset(on)  # only what -mattr says (simd128, relaxed-simd, ...); no x86 or Arm feature
    if arch == "aarch64":
        return frozenset(on | {"neon"})  # every AArch64 Linux CPU has it (Armv8-A's Advanced SIMD)
    if "avx512f" in on or "avx2" in on:
        on.add("avx")
    return frozenset(on)
