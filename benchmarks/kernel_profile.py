"""Where does a model's time go? Per-kernel timings of one pipeline, or of two side by side.

    python -m benchmarks.kernel_profile MODEL.onnx [--compare-feedback] [--threads 1] [--rounds 20]

`profile_kernels(model, graph)` runs the pipeline up to the loop stage
(graph passes, TO_LOOP, MODULE), then builds each distinct kernel in a module
of its own with the O3 loop stage, JIT-compiles it and times it on random
inputs (median of `rounds` timed calls after a warm-up). The report lists
per kernel: its name (which names the fused ops), how often `@main` calls it,
its median time and calls x time. `--compare-feedback` profiles the O3 graph
pipeline with and without the feedback channel (`fuse-ops{cost-guided=true}`
vs `fuse-ops`) and prints both, largest first, with the kernels present in
only one of them marked. The totals ignore the executor and memory planning,
so they are a lower bound of `run_native`'s time.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import builtin, func

from ziggurat.lowering import pipelines
from ziggurat.target import Target


@dataclass(frozen=True)
class KernelTime:
    name: str
    calls: int
    seconds: float  # median of one call

    @property
    def total(self) -> float:
        return self.calls * self.seconds


def graph_pipelines(opt_level: int = 3, measure: bool = False) -> tuple[str, str]:
    """(with, without) the feedback channel: the O`opt_level` graph pipeline with
    cost-guided fuse-ops (`measure=true` with `measure`), and the same with rule-based fuse-ops."""
    tgt = Target.parse("llvm")
    rule = pipelines.graph_stage(opt_level, tgt, options={"fuse-ops": {"cost-guided": False}})
    guided = pipelines.graph_stage(opt_level, tgt, options={"fuse-ops": {"cost-guided": True, "measure": measure}})
    return guided, rule


def _pre_loop_module(model: Any, graph: str) -> builtin.ModuleOp:
    from ziggurat.compiler import parse_pipeline, run_passes
    from ziggurat.frontends.onnx import ImportedModel, import_onnx
    from ziggurat.weights import WeightStore
    from ziggurat.transforms.graph.weight_binding import bind_weights

    imported = model if isinstance(model, ImportedModel) else import_onnx(model)
    module = imported.module.clone()
    bind_weights(module, WeightStore(imported.weights))
    run_passes(module, parse_pipeline(pipelines.join(graph, pipelines.lowering_stage(3))))
    return module


def time_kernel(fn: func.FuncOp, threads: int = 1, rounds: int = 20, seed: int = 0) -> float:
    """Median seconds of one call of loop-level kernel `fn` (before scheduling), built alone
    with the O3 loop stage and run on random inputs."""
    from ziggurat.autotune.tuner import _signature
    from ziggurat.backends.llvm import LLVMOptions, translate_module
    from ziggurat.backends.llvm.jit import jit_compile
    from ziggurat.compiler import parse_pipeline, run_passes
    from ziggurat.target import Target

    tgt = Target.parse(f"llvm -num-cores={threads}")
    loop_spec = pipelines.loop_stage(3, tgt)
    shapes, _ = _signature(fn)
    single = builtin.ModuleOp([fn.clone()])
    run_passes(single, parse_pipeline(loop_spec))
    options = LLVMOptions.for_target(tgt, export_all=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jit = jit_compile(translate_module(single, options)[0], options)
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    f = jit.cfunc(fn.sym_name.data, None, *([ctypes.c_void_p] * len(args)))
    ptrs = [a.ctypes.data for a in args]
    for _ in range(3):
        f(*ptrs)
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        f(*ptrs)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def profile_kernels(model: Any, graph: str, threads: int = 1, rounds: int = 20) -> list[KernelTime]:
    """Median time of each distinct kernel of `model` compiled with graph pipeline `graph`."""
    from ziggurat.transforms.schedule.apply_tuning import kernel_names

    module = _pre_loop_module(model, graph)
    main = next(f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == "main")
    calls: dict[str, int] = {}
    for o in main.walk():
        if isinstance(o, func.CallOp):
            calls[o.callee.root_reference.data] = calls.get(o.callee.root_reference.data, 0) + 1
    out: list[KernelTime] = []
    for name in kernel_names(module):
        fn = next(f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == name)
        out.append(KernelTime(name, calls.get(name, 1), time_kernel(fn, threads, rounds)))
    return out


def format_profile(rows: list[KernelTime], title: str, others: set[str] | None = None) -> str:
    lines = [f"{title}: {len(rows)} kernels, {sum(r.calls for r in rows)} calls, "
             f"sum {sum(r.total for r in rows) * 1e3:.3f} ms"]
    for r in sorted(rows, key=lambda r: -r.total):
        mark = " " if others is None or r.name in others else "*"
        lines.append(f"  {mark} {r.total * 1e6:9.1f} us  {r.calls:3d} x {r.seconds * 1e6:8.1f} us  {r.name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="an .onnx file, or the name of a benchmarks.workloads builder (bert_layer)")
    p.add_argument("--compare-feedback", action="store_true", help="O3 with and without cost-guided fusion")
    p.add_argument("--measure", action="store_true", help="cost-guided fusion with measure=true")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args(argv)
    model: Any = args.model
    if not model.endswith(".onnx"):
        from ziggurat.benchmarks.workloads import BUILDERS

        model = BUILDERS[model]()[1]
    with_fb, without = graph_pipelines(measure=args.measure)
    runs = [("O3 with feedback", with_fb), ("O3 without feedback", without)] if args.compare_feedback else \
        [("O3", pipelines.graph_stage(3))]
    profiles = [(t, profile_kernels(model, g, args.threads, args.rounds)) for t, g in runs]
    names = [{r.name for r in rows} for _, rows in profiles]
    for i, (title, rows) in enumerate(profiles):
        other = names[1 - i] if len(profiles) == 2 else None
        print(format_profile(rows, title, other))
    return 0


if __name__ == "__main__":
    sys.exit(main())
