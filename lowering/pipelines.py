"""Every default pipeline of ziggurat, spelled out, and the one builder that formats them.

This module is the one place that says which passes run and in which order;
nothing else schedules passes or edits a pipeline string. Every caller (the
compiler, the tuner, the cost oracle, annotate-costs, the benchmarks, the
tests) asks the builder functions below, which format the `Target`'s facts
(vector width, thread count) into the pass options. Each string they return
can be pasted into `ziggurat-opt FILE -p '...'` to reproduce any stage by hand.

Stages, from an imported model to code the LLVM backend takes:

* `graph_stage(level, target)` (`GRAPH[level]`): graph-level optimizations. O1
  simplifies (BatchNorm folding, shape-op cleanups) and runs xDSL's cse/dce;
  O2 and up also fold constants, turn the elementwise chains of quantized
  values into table lookups (`quantized-lookup`: int8 models' SiLU, GELU and
  requantize steps) and fuse ops by TVM's op-pattern rules; O3
  re-decides those groups with loop-level costs (`fuse-ops{cost-guided=true}`,
  design.md section 4), turns large 3x3 stride-1 convs into Winograd
  F(2x2, 3x3) (`winograd-conv`: 2.25x fewer multiplies) and runs the other
  conv chains in the blocked layout NCHW[x]c (`convert-layout`, the block
  follows the vector width).
* `TO_LOOP`: graph -> te -> naive loop nests, with the div/rem index math of
  reshapes simplified (`loop-simplify-index`). Workload keys (tuning records,
  the cost oracle) are taken from the kernels it leaves. From O1 on,
  `TE_MODULE[level]` runs between its te and loop steps: kernels identical at
  the te level (repeated layers: about half the kernels of the real models)
  are lowered to loops once.
* `MODULE[level]`: kernel dedupe (each distinct kernel is scheduled and
  compiled once; this second dedupe merges kernels that only become
  identical as loops) and static memory planning.
* `schedule_stage(level, target, tuning_db)` (`SCHEDULE[level]`): the tuning
  records' schedules (`apply-tuning`, only with a database), then the default
  schedule for every kernel still unscheduled.
* `hw_stage(level, target)`: the lowering to `hw` vector code.

The backend (`backends/llvm`) translates the result to LLVM IR; it is not an
xDSL pass because it leaves MLIR.

A CUDA target (`cuda -arch=sm_90`) takes `cuda_pipeline` instead: the graph
passes of `GPU_GRAPH` (no CPU layouts, no Winograd), TO_LOOP, then
`gpu-rfactor` (reductions with few results shared out over threads),
`gpu-split-stages` (each loop nest of a kernel its own launch) and
`gpu-fold-casts` (float16 products read their f16 operands) before MODULE,
and `gpu-gemm` (matrix products to the GEMM template) and `gpu-default-schedule`
(blocks and threads for the rest) as its schedule; no hw stage
(backends/cuda translates the scalar loops to NVPTX).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import cache

from xdsl.passes import ModulePass, PassPipeline

from ziggurat.target import LOOKUP_COST, Target

GRAPH: dict[int, tuple[str, ...]] = {
    0: (),
    1: ("simplify-graph", "cse", "dce"),
    2: ("simplify-graph", "fold-constants", "cse", "dce", "quantized-lookup", "fuse-ops"),
    3: ("simplify-graph", "fold-constants", "cse", "dce", "quantized-lookup", "winograd-conv", "convert-layout",
        "fuse-ops"),
}

TO_LOOP: tuple[str, ...] = ("convert-graph-to-te", "convert-te-to-loop", "loop-simplify-index")

# Whole-module te passes, run after TO_LOOP's first step (convert-graph-to-te).
TE_MODULE: dict[int, tuple[str, ...]] = {
    0: (),
    1: ("dedupe-kernels",),
    2: ("dedupe-kernels",),
    3: ("dedupe-kernels",),
}

MODULE: dict[int, tuple[str, ...]] = {
    0: (),
    1: ("dedupe-kernels", "plan-memory"),
    2: ("dedupe-kernels", "plan-memory"),
    3: ("dedupe-kernels", "plan-memory"),
}

SCHEDULE: dict[int, tuple[str, ...]] = {
    0: (),
    1: (),
    2: ("loop-default-schedule", "loop-vectorize-innermost"),
    3: ("loop-default-schedule", "loop-parallelize-outer", "loop-vectorize-innermost"),
}

# The CUDA target's stages (see the module docstring); level 0 and 1 keep every op its own kernel.
GPU_GRAPH: dict[int, tuple[str, ...]] = {
    0: (),
    1: ("simplify-graph", "cse", "dce"),
    2: ("simplify-graph", "fold-constants", "cse", "dce", "fuse-ops"),
    3: ("simplify-graph", "fold-constants", "cse", "dce", "fuse-ops"),
}
GPU_SPLIT: tuple[str, ...] = ("gpu-rfactor", "gpu-split-stages", "gpu-fold-casts")
GPU_SCHEDULE: tuple[str, ...] = ("gpu-gemm", "gpu-default-schedule")
GPU_THREADS = 256  # threads per block of the default GPU schedule

HW: dict[int, tuple[str, ...]] = {0: (), 1: ("convert-loop-to-hw",), 2: ("convert-loop-to-hw",), 3: ("convert-loop-to-hw",)}

# A model compiled once for every shape of its dynamic axes (symbolic extents, dialects/sym.py):
# the graph passes that read symbolic shapes (no table lookups, Winograd, blocked layouts or
# cost-guided fusion yet: they plan for static extents), then the kernels over symbols take
# loop-dynamic-schedule and the static ones the usual default schedule. Constant matmul weights go
# to column panels unpriced (pack-weight-panels: the choice cost-guided fuse-ops makes by pricing).
SYMBOLIC_GRAPH: tuple[str, ...] = ("simplify-graph", "fold-constants", "cse", "dce", "pack-weight-panels", "convert-layout",
                                   "fuse-ops")
SYMBOLIC_TE: tuple[str, ...] = ("te-row-blocks",)  # kernels over symbolic rows: static block kernels
SYMBOLIC_SCHEDULE: tuple[str, ...] = ("loop-dynamic-schedule", "loop-default-schedule", "loop-parallelize-outer",
                                      "loop-vectorize-innermost")

OPT_LEVELS = tuple(sorted(GRAPH))

# The passes that end a stage (graph -> loop, whole-module): `compile` verifies the IR after these,
# before lowering (`TO_LOOP[0]`) and after the last pass, instead of after every pass. The schedule
# stage is checked with the hw stage, at the end: verifying the scheduled loop IR took 0.7 s of
# regnet_y_small's 8 s compile (the IR is largest there), and the hw lowering reads all of it.
STAGE_ENDS = frozenset({TO_LOOP[-1], *(p[-1] for p in MODULE.values() if p)})


def _width(t: Target) -> dict[str, object]:
    return {"vector-width": t.vector_width}


def _registers(t: Target) -> dict[str, object]:
    """`vector-registers` where the target's count is not the one x86 has at its width (AArch64: 4 lanes,
    32 registers); x86 pipelines stay as they were."""
    return {} if t.vector_registers == (32 if t.vector_width >= 16 else 16) else {"vector-registers": t.vector_registers}


# The options each pass takes from the target (and, for fuse-ops, from the opt level):
# pass name -> (target, opt level) -> options. tests/unit/test_pipelines.py checks every
# key is a registered pass and every option one of its fields.
TARGET_OPTIONS: dict[str, Callable[[Target, int], dict[str, object]]] = {
    "convert-layout": lambda t, level: {"block": t.vector_width},
    # named only where a read costs other than quantized-lookup's own default (LOOKUP_COST): the other
    # targets' strings stay as they were
    "quantized-lookup": lambda t, level: {} if t.lookup_cost == LOOKUP_COST else {"min-cost": t.lookup_cost},
    "pack-weight-panels": lambda t, level: {"width": t.vector_width},
    "loop-dynamic-schedule": lambda t, level: _width(t),
    "fuse-ops": lambda t, level: {"cost-guided": level >= 3, "vector-width": t.vector_width},
    "loop-default-schedule": lambda t, level: {**_width(t), **_registers(t),
                                               "int8-dot": t.int8_dot},
    "loop-parallelize-outer": lambda t, level: {**_width(t), "threads": t.num_threads},
    "loop-vectorize-innermost": lambda t, level: {"min-extent": t.vector_width},
    "gpu-default-schedule": lambda t, level: {"threads": GPU_THREADS},
    "convert-loop-to-hw": lambda t, level: _width(t),
}


def _check_level(level: int) -> None:
    if level not in GRAPH:
        raise ValueError(f"opt level must be one of {OPT_LEVELS}, got {level}")


def format_pass(name: str, options: Mapping[str, object]) -> str:
    """`name{k=v ...}` in the pipeline syntax (booleans as true/false)."""
    if not options:
        return name
    text = " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in options.items())
    return f"{name}{{{text}}}"


def _stage(names: Iterable[str], target: Target | None, level: int, skip: Iterable[str] = (),
           options: Mapping[str, Mapping[str, object]] | None = None) -> str:
    """Formats `names` with the target's options, then `options[name]` on top; drops `skip`."""
    dropped, extra = set(skip), options or {}
    out = []
    for name in names:
        if name in dropped:
            continue
        opts = dict(TARGET_OPTIONS[name](target, level)) if target is not None and name in TARGET_OPTIONS else {}
        opts.update(extra.get(name, {}))
        out.append(format_pass(name, opts))
    return join(*out)


def join(*parts: str) -> str:
    """Joins pipeline strings, skipping empty ones."""
    return ",".join(p for p in parts if p)


def graph_stage(level: int, target: Target | str | None = None, skip: Iterable[str] = (),
                options: Mapping[str, Mapping[str, object]] | None = None) -> str:
    """The graph-level passes at `level` for `target`; `skip` leaves passes out and `options`
    overrides pass options (`{"winograd-conv": {"min-channels": 1}}`)."""
    _check_level(level)
    return _stage(GRAPH[level], _target(target), level, skip, options)


def lowering_stage(level: int) -> str:
    """graph -> loop (TO_LOOP, with the whole-module te passes TE_MODULE after its te step) and the
    whole-module loop passes (MODULE) at `level`."""
    _check_level(level)
    return join(TO_LOOP[0], *TE_MODULE[level], *TO_LOOP[1:], *MODULE[level])


def schedule_stage(level: int, target: Target | str | None = None, tuning_db: str | None = None,
                   skip: Iterable[str] = (), options: Mapping[str, Mapping[str, object]] | None = None) -> str:
    """The loop-level schedule at `level`: `apply-tuning{database="F" ...}` first when a tuning database
    is given, then the default schedule (which leaves kernels already scheduled alone). The records are
    looked up under the target with its thread count spelled out (`llvm -num-cores=2`)."""
    _check_level(level)
    tuned = ""
    if tuning_db:
        tuned = format_pass("apply-tuning", {"database": _quote(str(tuning_db)),
                                             "target": _quote(str(_target(target).resolved()))})
    return join(tuned, _stage(SCHEDULE[level], _target(target), level, skip, options))


@cache
def instantiate(spec: str, passes: tuple[type[ModulePass], ...]) -> tuple[ModulePass, ...]:
    """The pass instances of `spec`, parsed against `passes` only: for code below the registry that
    runs a stage of its own (kernel pricing, trace replay). Cached: a stage is asked for again and
    again (once per priced kernel, once per tuning candidate), and the passes are frozen values."""
    return PassPipeline.parse_spec({p.name: (lambda p=p: p) for p in passes}, spec).passes


def _quote(text: str) -> str:
    """`text` as a pipeline string literal (paths and target strings hold characters bare words cannot)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def hw_stage(level: int, target: Target | str | None = None) -> str:
    """The lowering of scheduled loops to `hw` vector code at `level`."""
    _check_level(level)
    return _stage(HW[level], _target(target), level)


def loop_stage(level: int, target: Target | str | None = None, tuning_db: str | None = None,
               skip: Iterable[str] = ()) -> str:
    """schedule_stage then hw_stage: everything after the lowering to loops."""
    return join(schedule_stage(level, target, tuning_db, skip), hw_stage(level, target))


def default_pipeline(opt_level: int = 3, target: Target | str | None = None, graph: str | None = None,
                     tuning_db: str | None = None) -> str:
    """The full pipeline from graph IR to hw-level IR at `opt_level` for `target`.

    `graph` replaces the graph-level part (the `-p` option of `ziggurat compile`);
    `tuning_db` puts `apply-tuning{database=...}` in front of the default schedule.
    """
    tgt = _target(target)
    if tgt.kind == "cuda":
        return cuda_pipeline(opt_level, tgt, graph)
    return join(graph_stage(opt_level, tgt) if graph is None else graph, lowering_stage(opt_level),
                loop_stage(opt_level, tgt, tuning_db))


def symbolic_pipeline(opt_level: int = 3, target: Target | str | None = None) -> str:
    """The full pipeline of a symbolic compile (runtime/symbolic_model.py) at `opt_level` >= 2."""
    _check_level(opt_level)
    tgt = _target(target)
    graph = _stage(SYMBOLIC_GRAPH, tgt, 2)  # fuse-ops without cost guidance
    lowering = join(TO_LOOP[0], *TE_MODULE[opt_level], *SYMBOLIC_TE, *TO_LOOP[1:], *MODULE[opt_level])
    return join(graph, lowering, _stage(SYMBOLIC_SCHEDULE, tgt, opt_level), hw_stage(opt_level, tgt))


def cuda_pipeline(opt_level: int = 3, target: Target | str | None = "cuda", graph: str | None = None,
                  options: Mapping[str, Mapping[str, object]] | None = None) -> str:
    """The full pipeline of a CUDA target, graph IR to GPU-scheduled loops (see the module docstring);
    `options` overrides GPU pass options (`{"gpu-gemm": {"convolutions": True}}`)."""
    _check_level(opt_level)
    tgt = _target(target)
    low = join(TO_LOOP[0], *TE_MODULE[opt_level], *TO_LOOP[1:])
    return join(_stage(GPU_GRAPH[opt_level], tgt, 2) if graph is None else graph, low,
                _stage(GPU_SPLIT, tgt, opt_level, options=options), *MODULE[opt_level],
                _stage(GPU_SCHEDULE, tgt, opt_level, options=options))


def _target(target: Target | str | None) -> Target:
    return Target.parse(target) if target is not None else Target.parse("llvm")
