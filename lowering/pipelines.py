"""Every default pipeline of ziggurat, spelled out as pass-pipeline strings.

This module is the one place that says which passes run and in which order;
nothing else schedules passes. Each string can be pasted into
`ziggurat-opt FILE -p '...'` to reproduce any stage by hand.

Stages, from an imported model to code the LLVM backend takes:

* `GRAPH[level]`: graph-level optimizations at each opt level: O1 simplifies
  (BatchNorm folding, shape-op cleanups) and runs xDSL's cse/dce; O2 and up
  also fold constants and fuse ops by TVM's op-pattern rules; O3 re-decides
  those groups with loop-level costs (`fuse-ops{cost-guided=true}`), turns
  large 3x3 stride-1 convs into Winograd F(2x2, 3x3) (`winograd-conv`) and
  runs the other conv chains in the blocked layout NCHW[x]c (`convert-layout`).
* `TO_LOOP`: graph -> te -> naive loop nests, with the div/rem index math
  of reshapes simplified (`loop-simplify-index`).
* `MODULE[level]`: kernel dedupe and static memory planning (loop level).
* `LOOP[level]`: the default schedule and the lowering to `hw` vector code.

The backend (`backends/llvm`) translates the result to LLVM IR; it is not an
xDSL pass because it leaves MLIR.
"""

from __future__ import annotations

GRAPH: dict[int, str] = {
    0: "",
    1: "simplify-graph,cse,dce",
    2: "simplify-graph,fold-constants,cse,dce,fuse-ops",
    # O3 closes the feedback channel: fusion re-decided by loop-level costs
    # (design.md section 4; transforms/fuse_ops.py, autotune/cost_oracle.py).
    # and moves conv chains to NCHW16c (convert-layout: measured 1.1-1.5x on
    # the conv benchmarks, docs/benchmarks.md; the block follows the vector width).
    # winograd-conv takes the 3x3 stride-1 convs with enough channels and pixels first
    # (Winograd F(2x2, 3x3): 2.25x fewer multiplies; transforms/winograd_conv.py).
    3: "simplify-graph,fold-constants,cse,dce,winograd-conv,convert-layout,fuse-ops{cost-guided=true}",
}

# loop-simplify-index belongs to the lowering: workload keys (tuning records, the
# cost oracle's `lower_kernel`) are taken from the kernels it leaves.
TO_LOOP = "convert-graph-to-te,convert-te-to-loop,loop-simplify-index"

# Whole-module passes right after TO_LOOP, before the kernels are scheduled:
# identical kernels merge (each distinct kernel is scheduled and compiled
# once) and the model's intermediates get a static arena plan.
MODULE: dict[int, str] = {
    0: "",
    1: "dedupe-kernels,plan-memory",
    2: "dedupe-kernels,plan-memory",
    3: "dedupe-kernels,plan-memory",
}

LOOP: dict[int, str] = {
    0: "",
    1: "convert-loop-to-hw",
    2: "loop-default-schedule,loop-vectorize-innermost,convert-loop-to-hw",
    3: "loop-default-schedule,loop-parallelize-outer,loop-vectorize-innermost,convert-loop-to-hw",
}

OPT_LEVELS = tuple(sorted(GRAPH))


def join(*parts: str) -> str:
    """Joins pipeline strings, skipping empty ones."""
    return ",".join(p for p in parts if p)


def default_pipeline(opt_level: int = 3, vector_width: int = 16, graph: str | None = None) -> str:
    """The full pipeline from graph IR to hw-level IR at `opt_level`.

    `graph` replaces the graph-level part (the `-p` option of `ziggurat
    compile`); `vector_width` is the target's f32 lanes per register.
    """
    if opt_level not in GRAPH:
        raise ValueError(f"opt level must be one of {OPT_LEVELS}, got {opt_level}")
    loop = LOOP[opt_level].replace("convert-loop-to-hw", f"convert-loop-to-hw{{vector-width={vector_width}}}")
    loop = loop.replace("loop-vectorize-innermost", f"loop-vectorize-innermost{{min-extent={vector_width}}}")
    loop = loop.replace("loop-default-schedule", f"loop-default-schedule{{vector-width={vector_width}}}")
    graph_part = GRAPH[opt_level].replace("convert-layout", f"convert-layout{{block={vector_width}}}")
    return join(graph_part if graph is None else graph, TO_LOOP, MODULE[opt_level], loop)
