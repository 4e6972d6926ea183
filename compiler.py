"""The compiler driver: model -> pipeline -> LLVM -> a callable CompiledModel.

`compile()` is the whole flow in one function, so the stages are visible:

1. import (ONNX -> `graph` IR plus a weight store),
2. the pass pipeline from `lowering/pipelines.py` (graph -> te -> loop -> hw),
3. translation of the hw-level module to LLVM IR and JIT compilation,
4. a `CompiledModel` that runs the entry function in one native call.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xdsl.dialects import func

from ziggurat import cache as disk_cache
from ziggurat.errors import CompileError, DynamicAxesError, InputError
from ziggurat.lowering import pipelines
from ziggurat import fork_build
from ziggurat.registry import parse_pipeline  # noqa: F401 - re-exported
from ziggurat.target import Target


# the pass-running machinery lives in pass_runner.py; its names stay importable from here
from ziggurat.pass_runner import (  # noqa: E402,F401 - re-exported
    PassCallback, invalid_ir_error, name_pass, pass_text, run_passes, verify_lowered)


@dataclass(frozen=True)
class _Built:
    """What a later compile of the same model (same IR, weights, pipeline and
    target) reuses: the JIT module and what the executor needs besides it."""

    jit: Any
    entry_symbol: str
    arena_size: int
    constants: tuple[np.ndarray, ...]
    kernels: int
    kernel_calls: int
    arena_bytes: int | None
    unplanned_bytes: int | None
    tuned_kernels: tuple[str, ...] = ()
    symbolic: dict | None = None  # a compile for every shape: its symbols, buffers and constraints (JSON)


# Process-level cache of compiled models (the build and the signature), keyed by the digest of
# `cache_key.compile_key` that the disk cache uses too (the model's bytes and everything the generated
# code depends on), looked up before the model is imported; least recently used first out.
_CACHE: OrderedDict[str, tuple[_Built, list[Any], list[Any]]] = OrderedDict()
CACHE_SIZE = 16


def clear_cache() -> None:
    """Forgets every compiled model of this process (the next compile starts cold)."""
    _CACHE.clear()


@dataclass
class CompileStats:
    """Where compile time went, in seconds, plus module sizes."""

    # cache, import, passes, translate, llvm; and `tail` where the function-local passes, the translation
    # and LLVM ran in two processes (fork_build.py): passes, translate and llvm then exclude them
    seconds: dict[str, float] = field(default_factory=dict)
    kernels: int = 0  # distinct kernel functions (after dedupe-kernels)
    kernel_calls: int = 0  # kernel calls in the entry function
    cache_hit: bool = False  # a cache supplied the native code ...
    cache: str | None = None  # ... "memory" (this process's) or "disk" (cache.py)
    arena_bytes: int | None = None  # from plan-memory: the planned arena ...
    unplanned_bytes: int | None = None  # ... and the sum of all intermediates
    tuned_kernels: list[str] = field(default_factory=list)  # kernels scheduled from a tuning database
    forked_child_bytes: int = 0  # private memory of the child that lowered half the kernels (fork_build.py)

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


def compile(  # noqa: A001 - the public name, as in TVM's relay.build / torch.compile
    model: Any,
    target: str | Target = "llvm",
    opt_level: int = 3,
    pipeline: str | None = None,
    after_pass: PassCallback | None = None,
    tuning_db: Any = None,
    bind: dict[str, Any] | None = None,
    profile: bool = False,
    cache: bool | None = None,
    cast_inputs: bool = False,
    memory_limit: int | str | None = None,
    check_indices: bool = True,
    shapes: dict[str, Any] | None = None,
    on_new_shape: str = "generic",
    example_inputs: Any = None,
    dynamic_shapes: Any = None,
):
    """Compiles an ONNX model (path, bytes or ModelProto) for `target`.

    `pipeline` replaces the graph-level part of the default pipeline;
    `after_pass(pass, module, seconds)` sees the IR after every pass.
    Compiling the same model (IR, weights, pipeline, target) again in one
    process reuses the native code of the first compile, unless `after_pass`
    asks to see the passes run. `tuning_db` (a path to a JSON-lines record
    database, see `ziggurat tune`) puts `apply-tuning{database=...}` in front
    of the default schedule: every kernel it holds a record for is scheduled
    by the best record instead (transforms/schedule/apply_tuning.py). `bind`
    maps graph inputs to values that become constants (shape parameters such
    as a reduction's axes; the compiled model no longer takes them; see
    frontends/onnx/specialize.py). `profile` builds the instrumented model that
    `ziggurat profile` runs (`LLVMOptions.profile`: every kernel call is timed;
    `info["profile_sites"]` names the callee of each timed call and
    `info["profile_counters"]` is the address of `i64* <prefix>_profile()`,
    which returns their counters; see runtime/profile.py). `cache` (default:
    on unless `ZIGGURAT_CACHE=0`) looks the model up in the persistent disk
    cache before importing it, and stores the build after a miss (cache.py;
    not with `after_pass` or `profile`); with `cache=False` a compile of the same
    model, target and options in the same process still returns the build it
    keeps in memory (an A/B that patches the compiler passes `after_pass` to get
    a fresh one). `cast_inputs=True` makes the model
    convert arrays of another dtype instead of refusing them (see
    `CompiledModel`). `memory_limit` (bytes, or a size such as '4G'; default:
    `limits.default_memory_limit()`) refuses, before allocating them, external
    data, weights, tensors and an arena larger than it (docs/reliability.md).
    `check_indices=False` leaves out the run-time bounds checks of
    data-dependent indices (an index out of range then reads the nearest
    element instead of raising `InputError`; frontends/onnx/index_checks.py).
    Returns a `ziggurat.runtime.executor.CompiledModel`; for a model whose
    inputs have dynamic axes, a `ziggurat.runtime.dynamic.DynamicModel`: one
    generic compile whose kernels take the axes' symbols at run time (every
    shape, no further compile: `on_new_shape="generic"`), plus static variants
    for the bindings of `shapes` (symbol -> value or list of values); without
    a generic form, or with `on_new_shape="compile"`, other bindings compile a
    variant at the first call that brings them (`"error"`: never). A
    `torch.nn.Module` is exported to ONNX on `example_inputs` (also taken as
    the second positional argument) with torch.export's `dynamic_shapes`, and
    the result is a `frontends.torch.TorchModel` that takes and returns tensors.
    """
    from ziggurat.frontends.torch import is_module

    torch_module = is_module(model)
    if torch_module and example_inputs is None and not isinstance(target, (str, Target)):
        example_inputs, target = target, "llvm"  # ziggurat.compile(module, (x,))
    # the options of a further compile of a model this call derives (an export, a dynamic model's variant)
    same = dict(target=target, opt_level=opt_level, pipeline=pipeline, tuning_db=tuning_db, cache=cache,
                cast_inputs=cast_inputs, memory_limit=memory_limit, check_indices=check_indices)
    if torch_module:  # PyTorch: exported to ONNX first (frontends/torch.py)
        from ziggurat.frontends.torch import compile_module

        if example_inputs is None:
            raise InputError("compiling a torch.nn.Module needs example_inputs (a tensor or a tuple of tensors)")
        return compile_module(model, example_inputs, dynamic_shapes,
                              lambda data: compile(data, **same, shapes=shapes, on_new_shape=on_new_shape))
    from ziggurat.backends.llvm.translate import LLVMOptions
    from ziggurat.runtime.executor import CompiledModel

    stats = CompileStats()
    tgt = Target.parse(target)
    if tgt.kind == "c":  # portable C built by the system cc (cross.py c_compile, backends/c)
        from ziggurat.cross import c_compile

        return c_compile(model, tgt, opt_level, pipeline, after_pass, tuning_db, bind, memory_limit, check_indices,
                         cast_inputs)
    if tgt.kind == "cuda":  # PTX through LLVM's NVPTX backend, run through the CUDA driver (backends/cuda)
        from ziggurat.cross import cuda_compile

        if tuning_db is not None or profile:
            raise InputError(f"target '{tgt}': tuning records and the profiler are not built for GPUs yet; "
                             "compile without tuning_db and profile")
        return cuda_compile(model, tgt, opt_level, pipeline, after_pass, bind, memory_limit, check_indices, cast_inputs)
    if not tgt.is_native:  # another architecture (aarch64 on x86): exported, never run here (cross.py)
        from ziggurat.cross import cross_compile

        return cross_compile(model, tgt, opt_level, pipeline, after_pass, tuning_db, bind, memory_limit, check_indices)
    spec = pipelines.default_pipeline(opt_level, tgt, graph=pipeline,
                                      tuning_db=None if tuning_db is None else str(tuning_db))
    options = LLVMOptions.for_target(tgt, profile=profile)
    stamp = spec + _tuning_stamp(tuning_db, tgt) + ("" if check_indices else "|unchecked-indices")
    t0 = time.perf_counter()
    # One key for both caches, from the model as given: a hit imports nothing.
    key = disk_cache.compile_key(model, bind, stamp, tgt, options, tuning_db) if after_pass is None else None
    disk = (disk_cache.DiskCache.default() if key is not None and not options.profile and disk_cache.enabled(cache)
            else None)
    found = _CACHE.get(key.digest) if key is not None else None
    hit = disk.load(key, options) if found is None and disk is not None else None  # type: ignore[arg-type]
    stats.seconds["cache"] = time.perf_counter() - t0
    if found is not None:
        _CACHE.move_to_end(key.digest)  # type: ignore[union-attr]
        built, inputs, outputs = found
        stats.cache_hit, stats.cache = True, "memory"
    elif hit is not None:
        built, inputs, outputs = _Built(**hit.built), hit.inputs, hit.outputs
        stats.cache_hit, stats.cache = True, "disk"
    else:
        with _fewer_collections():
            try:
                work, inputs, outputs = _import_model(model, bind, memory_limit, check_indices, stats,
                                                      int8_dot=tgt.int8_dot, int8_pairs=tgt.int8_pairs)
            except DynamicAxesError as err:
                if not tgt.is_native or err.model is None:
                    raise
                if after_pass is not None or profile:  # a look at one compile: it needs one shape
                    raise DynamicAxesError(err.subject, "the passes (after_pass, profile, viz) run on one shape: "
                                           "give the command --shapes SYM=N,... or compile "
                                           "ziggurat.frontends.onnx.symbols.fix_shapes(model, {...})") from None
                from ziggurat.runtime.dynamic import DynamicModel

                # the ModelProto the importer loaded (after bind=): each variant compiles it at one shape
                return DynamicModel(err.model, lambda data: compile(data, **same), shapes, on_new_shape,
                                    lambda proto: compile_symbolic(proto, target, opt_level, cast_inputs, memory_limit,
                                                                   check_indices, cache))
            if shapes:
                raise InputError(f"shapes= gives values for {', '.join(map(repr, shapes))}, but the model's "
                                 f"inputs have no dynamic axes ({', '.join(s.name + str(list(s.shape)) for s in inputs)})")
            model = None
            built = _build(work, spec, options, stats, after_pass)
    if disk is not None and hit is None and (found is None or not disk.path(key).exists()):  # type: ignore[arg-type]
        t0 = time.perf_counter()  # a build, or a memory hit the disk does not hold (yet, or any more)
        disk.store(key, built, inputs, outputs)  # type: ignore[arg-type]
        stats.seconds["cache"] += time.perf_counter() - t0
    if key is not None and found is None:
        _CACHE[key.digest] = (built, inputs, outputs)
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    stats.kernels, stats.kernel_calls = built.kernels, built.kernel_calls
    stats.tuned_kernels = list(built.tuned_kernels)
    stats.arena_bytes, stats.unplanned_bytes = built.arena_bytes, built.unplanned_bytes
    check_arena(built.arena_size, memory_limit)
    return CompiledModel(
        built.jit.address(built.entry_symbol),
        inputs,
        outputs,
        built.constants,
        built.arena_size,
        keepalive=built.jit,
        cast_inputs=cast_inputs,
        info={"stats": stats, "target": str(tgt), "num_threads": tgt.num_threads, "pipeline": spec, "llvm_ir": built.jit.llvm_ir,
              "llvm_options": options, "entry_symbol": built.entry_symbol,
              **({"profile_sites": list(built.jit.info.profile_sites),
                  "profile_counters": built.jit.address(f"{options.prefix}_profile")} if profile else {})},
    )


def dynamo_backend(gm: Any, example_inputs: Any) -> Any:
    """The `torch.compile` backend "ziggurat" (the `torch_dynamo_backends` entry point): dynamo's FX
    graph exported to ONNX and compiled with the default options (frontends/torch.py)."""
    from ziggurat.frontends.torch import backend

    return backend(gm, example_inputs, lambda data: compile(data))


def compile_symbolic(model: Any, target: str | Target = "llvm", opt_level: int = 3, cast_inputs: bool = False,
                     memory_limit: int | str | None = None, check_indices: bool = True, cache: bool | None = None) -> Any:
    """One compile of a model with dynamic axes for every shape (issue 22): a
    `runtime.symbolic_model.SymbolicModel`. Raises a ZigguratError where some part of the model
    needs a symbol's value at compile time (the caller, runtime/dynamic.py, then compiles per shape).
    The build goes into the disk cache as a static compile's does (`cache`: as `compile`'s), with
    its symbols, buffers of symbolic size and constraints, so another process loads it."""
    from ziggurat.backends.llvm.translate import LLVMOptions
    from ziggurat.runtime.symbolic_model import SymbolicModel
    from ziggurat.symbolic import Constraint

    tgt = Target.parse(target)
    if not tgt.is_native or tgt.kind != "llvm" or opt_level < 2:
        raise CompileError(f"a compile for every shape needs a native LLVM target at opt level 2 or 3, not "
                           f"'{tgt}' at {opt_level}")
    stats = CompileStats()
    spec = pipelines.symbolic_pipeline(opt_level, tgt)
    options = LLVMOptions.for_target(tgt)
    t0 = time.perf_counter()
    stamp = spec + "|symbolic" + ("" if check_indices else "|unchecked-indices")
    key = disk_cache.compile_key(model, None, stamp, tgt, options, None)
    disk = disk_cache.DiskCache.default() if disk_cache.enabled(cache) and not options.profile else None
    hit = disk.load(key, options) if disk is not None else None
    stats.seconds["cache"] = time.perf_counter() - t0
    if hit is not None and hit.built.get("symbolic"):
        built, inputs, outputs = _Built(**hit.built), hit.inputs, hit.outputs
        stats.cache_hit, stats.cache = True, "disk"
    else:
        with _fewer_collections():
            work, inputs, outputs = _import_model(model, None, memory_limit, check_indices, stats, symbolic=True)
            # one process: fork_build splits the module by kernel, and a row driver calls its block kernels
            built = _build(work, spec, options, stats, None, fork=False)
        built = dataclasses.replace(built, symbolic={
            "symbols": list(built.jit.info.symbols), "dynamic_buffers": list(built.jit.info.dynamic_buffers),
            "constraints": [c.to_json() for c in work.constraints]})
        if disk is not None:
            disk.store(key, built, inputs, outputs)
    check_arena(built.arena_size, memory_limit)
    sym = built.symbolic
    return SymbolicModel(built.jit.address(built.entry_symbol), inputs, outputs, built.constants, built.arena_size,
                         keepalive=built.jit, cast_inputs=cast_inputs, symbol_slots=sym["symbols"],
                         constraints=[Constraint.from_json(c) for c in sym["constraints"]],
                         dynamic_buffers=sym["dynamic_buffers"],
                         info={"stats": stats, "target": str(tgt), "num_threads": tgt.num_threads, "pipeline": spec,
                               "llvm_ir": built.jit.llvm_ir, "entry_symbol": built.entry_symbol})


def _import_model(model: Any, bind: dict[str, Any] | None, memory_limit: int | str | None, check_indices: bool,
                  stats: CompileStats, int8_dot: str = "none", symbolic: bool = False,
                  int8_pairs: str = "exact") -> tuple[_Work, list[Any], list[Any]]:
    """Imports `model` (ONNX, after `bind`): the module and store a build runs on, and the signature
    (the inputs, then the outputs followed by the outputs of the index checks)."""
    from ziggurat.frontends.onnx import ImportedModel, import_onnx
    from ziggurat.runtime.executor import TensorSpec

    t0 = time.perf_counter()
    if bind:
        if isinstance(model, ImportedModel):
            raise CompileError("bind= applies to an ONNX model (path, bytes or ModelProto), not an imported one")
        from ziggurat.frontends.onnx.loader import load_model
        from ziggurat.frontends.onnx.specialize import bind_inputs

        model = bind_inputs(load_model(model, memory_limit)[0], bind)
    imported = (model if isinstance(model, ImportedModel)
                else import_onnx(model, memory_limit=memory_limit, check_indices=check_indices, int8_dot=int8_dot,
                                 symbolic=symbolic, int8_pairs=int8_pairs))
    owned, model = imported is not model, None  # bind='s ModelProto is not needed past the import
    stats.seconds["import"] = time.perf_counter() - t0

    in_dtypes, out_dtypes = _signature_dtypes(imported)
    inputs = [TensorSpec(n, tuple(s), d) for n, s, d in zip(imported.input_names, imported.input_shapes, in_dtypes)]
    outputs = [TensorSpec(n, tuple(s), d) for n, s, d in zip(imported.output_names, imported.output_shapes, out_dtypes)]
    hidden = out_dtypes[len(outputs):]
    outputs += [TensorSpec(f"{c.node}.index_check", (2 * len(c.bounds),), d, c)
                for c, d in zip(imported.checks, hidden[:len(imported.checks)], strict=True)]
    outputs += [TensorSpec(f"{imported.output_names[e.output]}.extent", (1,), d, extent=e)
                for e, d in zip(imported.extents, hidden[len(imported.checks):], strict=True)]
    # A model imported here is this compile's own: the pipeline runs on its module and
    # store in place, and `_build` frees what the native code no longer needs (a caller's
    # ImportedModel is copied instead and stays as it was).
    return _Work.of(imported, owned), inputs, outputs


def check_arena(arena_size: int, memory_limit: int | str | None) -> None:
    """Refuses a model whose arena (allocated per call in flight) would not fit the memory limit."""
    from ziggurat.limits import over_budget, resolve_memory_limit

    limit = resolve_memory_limit(memory_limit)
    if arena_size > limit:
        raise over_budget("the arena of the model's intermediates", arena_size, limit,
                          "Compile it for smaller input shapes, or raise the limit.")


def _signature_dtypes(imported: Any) -> tuple[list[np.dtype], list[np.dtype]]:
    """The numpy dtypes of the model function's arguments and results (float32,
    float16/64, (u)int8-64 or bool), from its graph-level signature."""
    from ziggurat.dtypes import to_numpy

    main = next((f for f in imported.module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == "main"), None)
    if main is None:
        n_in, n_out = len(imported.input_names), len(imported.output_names)
        return [np.dtype(np.float32)] * n_in, [np.dtype(np.float32)] * n_out
    ftype = main.function_type
    return ([to_numpy(t.element_type) for t in ftype.inputs.data],  # type: ignore[attr-defined]
            [to_numpy(t.element_type) for t in ftype.outputs.data])  # type: ignore[attr-defined]


def _tuning_stamp(tuning_db: Any, tgt: Target) -> str:
    """What the cache key needs of a tuning database: its path, size and mtime."""
    if tuning_db is None:
        return ""
    try:
        st = os.stat(tuning_db)
    except OSError as err:
        raise CompileError(f"cannot read tuning database '{tuning_db}': {err.strerror}. "
                           "Create it with `ziggurat tune MODEL --db FILE`.") from None
    return f"|tuning:{os.path.abspath(tuning_db)}:{st.st_size}:{st.st_mtime_ns}:{tgt}"


@dataclass
class _Work:
    """The module and weight store one build runs the pipeline on; `_build` clears the fields
    as it goes, so that nothing it no longer needs stays alive through LLVM's code generation."""

    module: Any
    weights: Any
    constraints: list[Any] = field(default_factory=list)  # a symbolic import's (symbolic.Constraint)

    @classmethod
    def of(cls, imported: Any, owned: bool) -> _Work:
        """`imported`'s module and store itself when this compile `owned` it, else copies (a
        clone of the module, a store sharing the arrays), so the caller's model is left as is."""
        from ziggurat.weights import WeightStore

        if owned:
            return cls(imported.module, imported.weights, list(imported.constraints))
        return cls(imported.module.clone(), WeightStore(imported.weights), list(imported.constraints))


# While a model compiles, Python's cycle collector runs its youngest generation every GC_GEN0
# allocations instead of every 700: xDSL's IR is millions of small objects with parent links, and the
# full collections that the default threshold triggers scanned all of them (0.8 s of regnet_y_small's
# 4.2 s of passes; +10 MB peak). The thresholds are the process's, so concurrent compiles share one
# raise: the first in sets it, the last out restores it.
GC_GEN0 = 10_000
_gc_lock = threading.Lock()
_gc_state: list[Any] = [0, None]  # compiles in flight, the thresholds they replaced


@contextmanager
def _fewer_collections():
    with _gc_lock:
        if _gc_state[0] == 0:
            _gc_state[1] = gc.get_threshold()
            gc.set_threshold(max(GC_GEN0, _gc_state[1][0]), *_gc_state[1][1:])
        _gc_state[0] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_state[0] -= 1
            if _gc_state[0] == 0:
                gc.set_threshold(*_gc_state[1])


def _build(work: _Work, spec: str, options: Any, stats: CompileStats, after_pass: PassCallback | None,
           fork: bool = True) -> _Built:
    """Passes, translation and JIT: the uncached part of `compile`.

    Memory: what LLVM does not need is let go before it optimizes and generates code. After
    translation the module's weight store is unbound, which frees the weights the code does not
    read (originals that graph passes repacked or folded); each constant it reads moves into a
    64-byte aligned buffer (runtime/executor.py `aligned`, so the executor copies nothing) and
    its unaligned original is freed before the next one is copied. The xDSL module and the
    llvmlite IR objects are dropped once the LLVM IR text exists (IR has parent links: the cycle
    collector returns their memory; a `gc.collect()` here would cost 0.5 s on mobilenetv3_large).
    """
    from ziggurat.backends.llvm.codegen_pool import compile_jobs
    from ziggurat.backends.llvm.jit import jit_compile

    low = _lower(work, spec, options, stats, after_pass, fork=fork and after_pass is None and not options.profile)
    t0 = time.perf_counter()
    if low.objects is not None:  # compiled in two processes (fork_build.py)
        from ziggurat.backends.llvm.jit import declared_externals, load_objects

        jit = load_objects(low.objects, low.llvm_ir, options, declared_externals(low.llvm_ir), low.info)
    else:
        jit = jit_compile(low.llvm_ir, options, low.info, jobs=compile_jobs())
    stats.seconds["llvm"] += time.perf_counter() - t0
    return _Built(jit, low.info.entry_symbol, low.info.arena_size, low.constants, low.kernels, low.kernel_calls,
                  low.arena_bytes, low.unplanned_bytes, low.tuned_kernels)


@dataclass
class _Lowered:
    """A model lowered to LLVM IR text, with what calling it needs (`_lower`)."""

    llvm_ir: str
    info: Any  # backends.llvm.options.ModuleInfo
    constants: tuple[np.ndarray, ...]
    kernels: int
    kernel_calls: int
    arena_bytes: int | None
    unplanned_bytes: int | None
    tuned_kernels: tuple[str, ...]
    objects: list[bytes] | None = None  # with fork=True: the object code of `llvm_ir`, compiled in two parts


def _lower(work: _Work, spec: str, options: Any, stats: CompileStats, after_pass: PassCallback | None,
           translate: Callable[..., Any] | None = None, fork: bool = False) -> _Lowered:
    """Passes and translation to LLVM IR text (what `_build` JIT-compiles and cross.py exports); `translate`
    replaces `translate_module` (the C target's `backends.c.emit_module`: `llvm_ir` is then C source).
    `fork=True`: the function-local tail of the pipeline, the translation and LLVM run in two processes
    where that pays (fork_build.py), and the result carries the object code."""
    from ziggurat.backends.llvm.translate import translate_module
    from ziggurat.runtime.executor import aligned
    from ziggurat.transforms.schedule.mark import scheduled_kernels
    from ziggurat.transforms.graph.weight_binding import bind_weights, unbind_weights

    # Graph passes may add weights (folded constants, rewritten conv weights): they go into
    # the store bound to this module.
    bind_weights(work.module, work.weights)
    t0 = time.perf_counter()
    # the lowered (hw) IR is verified only where translation fails, or always with ZIGGURAT_VERIFY=1
    strict = os.environ.get("ZIGGURAT_VERIFY", "") not in ("", "0")
    passes = parse_pipeline(spec)
    cut = fork_build.tail_start([p.name for p in passes]) if fork and fork_build.usable() else len(passes)
    # a cut pipeline's head ends at a stage end (plan-memory): verified there, as in one piece
    unverified = run_passes(work.module, passes[:cut],
                            verify=True if after_pass is not None else "stages" if strict or cut < len(passes)
                            else "deferred", after_pass=after_pass)
    stats.seconds["passes"] = time.perf_counter() - t0
    module = work.module
    tuned = tuple(scheduled_kernels(module))  # marked by apply-tuning
    kernels = sum(1 for f in module.ops if getattr(f, "sym_name", None) and f.sym_name.data != "main")  # type: ignore[attr-defined]
    plan = [module.attributes.get(f"plan.{k}_bytes") for k in ("arena", "unplanned")]
    calls = sum(isinstance(o, func.CallOp) for f in module.ops if getattr(f, "sym_name", None) and f.sym_name.data == "main" for o in f.walk())  # type: ignore[attr-defined]
    arena, unplanned = (a.value.data if a is not None else None for a in plan)  # type: ignore[attr-defined]
    del module, plan

    t0 = time.perf_counter()
    forked = None
    if cut < len(passes):
        forked = fork_build.lower_tail(work.module, lambda m, v: run_passes(m, passes[cut:], verify=v), options,
                                       strict, lambda m: (translate or translate_module)(m, options))
        if forked is None:  # one process after all (few kernels)
            unverified += run_passes(work.module, passes[cut:], verify="stages" if strict else "deferred")
            stats.seconds["passes"] += time.perf_counter() - t0
        else:
            stats.seconds["tail"] = time.perf_counter() - t0
        t0 = time.perf_counter()
    try:
        if forked is not None:
            objects, llvm_text, info, stats.forked_child_bytes = forked
        else:
            ir_module, info = (translate or translate_module)(work.module, options)
    except Exception:
        verify_lowered(work.module, unverified)  # invalid IR is the clearer error
        raise
    unbind_weights(work.module)
    work.module = None
    stats.seconds["translate"] = time.perf_counter() - t0
    store, work.weights = {name: work.weights[name] for name in info.const_names}, None
    constants = tuple(aligned(store.pop(name)) for name in info.const_names)
    if forked is not None:
        stats.seconds["llvm"] = 0.0  # linking the two objects (_build)
        return _Lowered(llvm_text, info, constants, kernels, calls, arena, unplanned, tuned, objects)
    t0 = time.perf_counter()
    llvm_ir = str(ir_module)
    del ir_module
    stats.seconds["llvm"] = time.perf_counter() - t0
    return _Lowered(llvm_ir, info, constants, kernels, calls, arena, unplanned, tuned)
