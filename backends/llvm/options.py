"""Options of the LLVM backend and what translation reports about a module.

`LLVMOptions` is what a user (or the autotuner) sets; `ModuleInfo` is what
`translate_module` found out and what a runtime needs to call the result:
the entry symbol, the order of the packed arguments and the arena size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ziggurat.target import Target

FAST_MATH_FLAGS = frozenset({"fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc"})


@dataclass(frozen=True)
class LLVMOptions:
    """How the backend translates and compiles a loop-level module.

    * `num_threads`: threads for `parallel` loops. With 1, parallel loops are
      serial and no OpenMP symbol is referenced, so libgomp is not needed.
    * `entry`: name of the model function that gets the packed entry wrapper.
    * `prefix`: the wrapper is exported as `<prefix>_entry`.
    * `export_all`: every `func.func` is external under its own name, with
      one plain pointer per memref argument (single kernels, tests, tuning).
    * `fast_math`: LLVM fast-math flags put on every float instruction.
    * `opt_level`: 0-3, for the IR pipeline and for code generation.
    * `cpu`, `features`: the LLVM CPU name and feature string to generate
      code for, as a `Target` gives them (`Target.llvm_cpu`,
      `Target.llvm_features`; `LLVMOptions.for_target` copies them). After
      construction both are always set: one left None is filled in as
      `Target(mcpu=cpu, mattr=features)` would (both None: the default target,
      i.e. the host; only `features`: LLVM's generic x86-64 CPU plus those
      features; only `cpu`: that CPU's own features). The backend asks the
      machine nothing.
    * `triple`: the LLVM triple to generate code for (`Target.llvm_triple`);
      None, the default, is the host's. Code for a foreign triple
      (`aarch64-linux-gnu` on an x86 host) is only emitted as a shared
      library (`emit_shared_library`, linked by the cross compiler), never
      JIT-compiled.
    * `profile`: time every kernel call of the entry function (the profiler's
      instrumented build, runtime/profile.py). Each call site `i` gets four
      i64 counters at `[4 i .. 4 i + 3]` of a module global: nanoseconds in
      all, calls, and the CLOCK_MONOTONIC start and end of its last call, in
      nanoseconds; `<prefix>_profile()` returns their address and
      `ModuleInfo.profile_sites` names the callee of each site. The kernel
      calls are `noinline`, so each kernel runs between its two clock reads.
      Off, the generated IR is the same as without the option.
    * `flush_denormals`: True: the entry wrapper, and every thread's part of
      a parallel loop, runs with MXCSR's flush-to-zero and denormals-are-zero
      bits set (saved and restored around the call): float results below
      2^-126 become 0 instead of denormals, whose every production costs the
      CPU a microcode assist of ~100 cycles (`Target.flush_denormals`). False:
      the same places clear both bits (libgomp's worker threads keep the MXCSR
      they were created with, so a model must not inherit another's). None,
      the default: MXCSR is not touched (not x86; single kernels).
    """

    num_threads: int = 1
    entry: str = "main"
    prefix: str = "ziggurat"
    export_all: bool = False
    fast_math: tuple[str, ...] = ("contract", "reassoc")
    opt_level: int = 3
    cpu: str | None = None
    features: str | None = None
    profile: bool = False
    triple: str | None = None
    flush_denormals: bool | None = None

    def __post_init__(self) -> None:
        if self.num_threads < 1:
            raise ValueError(f"num_threads must be at least 1, got {self.num_threads}")
        if not 0 <= self.opt_level <= 3:
            raise ValueError(f"opt_level must be 0..3, got {self.opt_level}")
        bad = set(self.fast_math) - FAST_MATH_FLAGS
        if bad:
            raise ValueError(f"unknown fast-math flags {sorted(bad)}; known: {sorted(FAST_MATH_FLAGS)}")
        if not self.prefix.isidentifier():
            raise ValueError(f"prefix must be a C identifier, got '{self.prefix}'")
        if self.cpu is None or self.features is None:
            tgt = self.target
            object.__setattr__(self, "cpu", tgt.llvm_cpu)
            object.__setattr__(self, "features", tgt.llvm_features)

    @classmethod
    def for_target(cls, target: Target | str, **kw: object) -> LLVMOptions:
        """Options generating code for `target` (its CPU, features and thread count); `kw` sets the rest."""
        tgt = Target.parse(target)
        fields: dict[str, object] = {"num_threads": tgt.num_threads, "cpu": tgt.llvm_cpu, "features": tgt.llvm_features,
                                     "flush_denormals": tgt.flush_denormals if tgt.kind == "llvm" and tgt.arch == "x86_64"
                                     else None}
        if tgt.llvm_triple is not None:
            fields["triple"] = tgt.llvm_triple
        fields.update(kw)
        return cls(**fields)  # type: ignore[arg-type]

    @property
    def target(self) -> Target:
        """The `Target` these options generate code for (its `features()` / `has()` facts)."""
        return Target(mcpu=self.cpu, mattr=self.features, mtriple=self.triple)


@dataclass
class ModuleInfo:
    """What a caller of the translated module needs to know.

    The packed entry ABI is `void <entry_symbol>(void** args)` with
    `args = [entry memref args (num_args)] + [const buffers (const_names order)]
    + [arena pointer, only if arena_size > 0]`. An entry over symbolic extents takes the values
    of `symbols` (dialects/sym.py) as its last `num_args` slots, each a pointer-sized integer.
    """

    entry_symbol: str | None = None
    num_args: int = 0
    const_names: list[str] = field(default_factory=list)
    arena_size: int = 0
    arena_offsets: list[int] = field(default_factory=list)
    exported: list[str] = field(default_factory=list)
    uses_openmp: bool = False
    profile_sites: list[str] = field(default_factory=list)  # with LLVMOptions.profile: the callee of each timed site
    symbols: list[str] = field(default_factory=list)  # the entry's sym.symbols, in slot order
    dynamic_buffers: list = field(default_factory=list)  # [byte size (a Sym expression), live start, end] of
    # each of the entry's buffers of symbolic size, in order: the caller places them in the arena it passes in
    # the slot after the static arena's, whose first 8 bytes per buffer hold their offsets

    @property
    def arena_bytes(self) -> int:
        """Alias of `arena_size`: bytes of the static arena the caller provides."""
        return self.arena_size

    @property
    def num_slots(self) -> int:
        """Length of the packed `void*` argument array of the entry wrapper."""
        return self.num_args + len(self.const_names) + (1 if self.arena_size > 0 else 0) + (1 if self.dynamic_buffers else 0)
