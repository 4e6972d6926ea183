"""`ziggurat`: import, compile and run models from the command line.

    ziggurat import model.onnx                       graph-level IR
    ziggurat compile model.onnx --emit loop          IR at a stage (te|loop|hw|llvm), with compile times
    ziggurat compile model.onnx --target 'cuda -arch=sm_90' --emit ptx   PTX for a CUDA GPU (no GPU needed)
    ziggurat run model.onnx --inputs in.npz --check expected.npz
    ziggurat run m.mlir --inputs in.npz              text IR of any level (weights: its graph.weights_file)
    ziggurat demo                                    compile and check a bundled model
    ziggurat tune model.onnx --trials 64 --db r.jsonl   tune the kernels (then compile/run --tuning-db r.jsonl)
    ziggurat profile model.onnx --trace t.json       time per kernel of the real executor (Perfetto trace)
    ziggurat conformance --json c.json               the ONNX backend node tests, by category
    ziggurat cache info|clear                        the persistent compile cache

A user error (bad model, unsupported op, bad input) prints one message and
exits with status 1; so does a bug, naming the pass it was in. `--debug` (or
ZIGGURAT_DEBUG=1) prints the Python traceback too.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import sys
import time
from collections.abc import Sequence

import numpy as np

from ziggurat import plugins
from ziggurat.errors import CompileError, ZigguratError

from ziggurat.cli.mlir_model import STAGES, compile_mlir, is_mlir  # STAGES: the pass after which each --emit level exists


def _add_compile_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="llvm", help="target string, e.g. 'llvm -num-cores=2' (default: llvm)")
    p.add_argument("--opt-level", "-O", type=int, default=3, choices=(0, 1, 2, 3), help="optimization level (default 3)")
    p.add_argument("-p", "--pipeline", default=None, help="graph-level pass pipeline replacing the default one")
    p.add_argument("--tuning-db", default=None, metavar="FILE", help="apply the best schedule per kernel from this tuning record database (ziggurat tune)")
    p.add_argument("--load-plugin", action="append", default=[], metavar="MODULE",
                   help="load a plugin (module name or .py path) whose dialects and passes -p may use; repeatable (docs/tutorial.md)")
    p.add_argument("--weights", metavar="NPZ", help="weights of a .mlir model (default: the file its graph.weights_file "
                                                    "names, relative to the .mlir file's folder)")
    _add_shapes_option(p)


def _add_shapes_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shapes", metavar="SYM=N,...", default=None,
                   help="for a model with dynamic axes: fix every symbol (dim_param) to a value, e.g. "
                        "batch=1,sequence=128, and work on that static model (run takes any shape without it)")


def _fix_shapes(args: argparse.Namespace) -> None:
    """With --shapes, `args.model` becomes the static model of that binding (a temporary file)."""
    import atexit
    import shutil
    import tempfile
    from pathlib import Path

    from ziggurat.frontends.onnx.symbols import fix_shapes, parse_shapes

    data = fix_shapes(args.model, parse_shapes(args.shapes))
    folder = tempfile.mkdtemp(prefix="ziggurat-shapes-")
    atexit.register(shutil.rmtree, folder, True)
    fixed = Path(folder) / f"{Path(args.model).stem}.{args.shapes.replace('=', '').replace(',', '.')}.onnx"
    fixed.write_bytes(data)
    args.model = str(fixed)


def _compile(args: argparse.Namespace, pipeline: str | None = None, after_pass=None):
    """`ziggurat.compile` for an ONNX model; for a .mlir file (text IR of any level) the rest of the
    default pipeline from its level (cli/mlir_model.py)."""
    import ziggurat

    if is_mlir(args.model):
        if _is_cuda(args.target):
            from ziggurat.target import Target

            arch = Target.parse(args.target).llvm_cpu
            raise ZigguratError(f"a .mlir model compiles for the CPU here; for the target '{args.target}' compile the "
                                f"ONNX model, or print the PTX of the IR with `ziggurat-opt {args.model} "
                                f"-t 'ptx{{arch=\"{arch}\"}}'`")
        return compile_mlir(args.model, target=args.target, opt_level=args.opt_level, pipeline=pipeline,
                            tuning_db=args.tuning_db, after_pass=after_pass, weights=args.weights)
    if args.weights:
        raise ZigguratError("--weights applies to a .mlir model; an ONNX model carries its own weights")
    return ziggurat.compile(args.model, target=args.target, opt_level=args.opt_level, pipeline=pipeline,
                            after_pass=after_pass, tuning_db=args.tuning_db)


def _is_cuda(target: str) -> bool:
    """Whether the target string names a CUDA GPU (`cuda -arch=sm_90`); a malformed one is
    Target.parse's clear error."""
    from ziggurat.target import Target

    return Target.parse(target).kind == "cuda"


def _refuse_cuda(args: argparse.Namespace, command: str, why: str) -> None:
    """A ZigguratError for a command that does not take a CUDA target."""
    if _is_cuda(args.target):
        raise ZigguratError(f"ziggurat {command}: target '{args.target}': {why}")


def _require_gpu(args: argparse.Namespace, command: str) -> None:
    """For a CUDA target: a CudaError now, before compiling, where this machine has no usable GPU."""
    from ziggurat.errors import CudaError
    from ziggurat.runtime import cuda_driver

    if not _is_cuda(args.target):
        return
    ok, why = cuda_driver.available()
    if not ok:
        raise CudaError(f"ziggurat {command}: the target '{args.target}' runs on an NVIDIA GPU and this machine has "
                        f"none usable ({why}); compile it here with `ziggurat compile {args.model} --target "
                        f"'{args.target}' --export model.cuda.json` and load that on a machine with a GPU "
                        "(ziggurat.runtime.cuda.load_cuda)")


def _load_npz(path: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except (OSError, ValueError) as err:
        raise ZigguratError(f"cannot read '{path}' as an .npz file: {err}") from None


def cmd_import(args: argparse.Namespace) -> int:
    from ziggurat.frontends.onnx import import_onnx

    imported = import_onnx(args.model)
    if args.weights:  # ziggurat-opt's graph passes load the values from it (transforms/graph/weight_binding.py)
        from xdsl.dialects.builtin import StringAttr

        from ziggurat.transforms.graph.weight_binding import WEIGHTS_FILE_ATTR

        # recorded relative to the .mlir file's folder (the pair moves together), absolute for stdout
        weights = os.path.abspath(imported.weights.save(args.weights))  # the path numpy wrote (adds .npz)
        recorded = os.path.relpath(weights, os.path.dirname(os.path.abspath(args.output))) if args.output else weights
        imported.module.attributes[WEIGHTS_FILE_ATTR] = StringAttr(recorded)
    text = str(imported.module)
    if args.print_debuginfo:  # each op's loc("<ONNX node>")
        import io

        from xdsl.printer import Printer

        out = io.StringIO()
        Printer(stream=out, print_debuginfo=True).print_op(imported.module)
        text = out.getvalue()
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    if not args.weights and len(imported.weights):
        print(f"ziggurat import: note: the IR names {len(imported.weights)} weight(s) by reference only; add "
              "--weights W.npz to save them beside it (ziggurat-opt and ziggurat run read them from there)",
              file=sys.stderr)
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    pipeline, decisions, fused = args.pipeline, [], []
    cuda = _is_cuda(args.target)
    stages = dict(STAGES)  # --emit level -> the pass after which that IR exists
    if cuda:  # no hw stage; the loop IR a CUDA target translates is the GPU-scheduled one
        from ziggurat.lowering import pipelines

        if args.emit == "hw":
            raise ZigguratError(f"--emit hw: the target '{args.target}' has no hw stage (hw is CPU vector code; the CUDA "
                                "backend translates the GPU-scheduled loop IR): use --emit te, loop, llvm (the NVPTX "
                                "LLVM IR) or ptx")
        del stages["hw"]
        stages["loop"] = pipelines.GPU_SCHEDULE[-1]
        if args.explain_fusion:
            _refuse_cuda(args, "compile --explain-fusion", "the cost-guided fusion prices kernels on a CPU; a CUDA "
                         "target fuses by rule (fuse-ops{cost-guided=false}); drop --explain-fusion")
    elif args.emit == "ptx":
        raise ZigguratError(f"--emit ptx: the target '{args.target}' is not a GPU; give a CUDA target, e.g. "
                            "--target 'cuda -arch=sm_90'")
    if args.explain_fusion:  # the graph pipeline with cost-guided fuse-ops; its decisions as a table
        from ziggurat.lowering import pipelines
        from ziggurat.target import Target
        from ziggurat.transforms.graph import annotate_costs

        if pipeline is None:
            pipeline = pipelines.graph_stage(args.opt_level, Target.parse(args.target),
                                             options={"fuse-ops": {"cost-guided": True}})
        else:
            pipeline = annotate_costs.cost_guided_pipeline(pipeline)

    ran: list[str] = []
    timings: list[tuple[str, float]] = []
    if args.weights_out and args.emit not in stages:
        raise ZigguratError(f"--weights-out saves the weights of the IR that --emit {'|'.join(stages)} prints; give "
                            "--emit")

    def after_pass(p, module, seconds: float) -> None:
        ran.append(p.name)
        timings.append((p.name, seconds))
        if args.emit in stages and p.name == stages[args.emit]:
            _print_stage(module, args.weights_out)
        if args.print_after in (p.name, "all"):
            print(f"// -----// IR after {p.name} ({seconds * 1e3:.1f} ms) //----- //")
            print(module)
        if args.explain_fusion and p.name == "fuse-ops":
            fused.append(p)
            decisions.extend(annotate_costs.fusion_decisions(module))

    model = _compile(args, pipeline, after_pass)
    if args.print_after not in (None, "all") and args.print_after not in ran:
        close = difflib.get_close_matches(args.print_after, list(dict.fromkeys(ran)), n=3)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        raise CompileError(f"--print-after {args.print_after}: no pass of that name ran{hint}; the pipeline ran "
                           f"{', '.join(dict.fromkeys(ran))}")
    if args.time_passes:
        from ziggurat.cli.timing import timing_table

        print(timing_table(timings), file=sys.stderr)
    if args.explain_fusion:
        print(annotate_costs.format_fusion_table(decisions) if fused else
              f"fusion: the O{args.opt_level} graph pipeline has no fuse-ops; nothing to explain (use -O2 or -O3)")
    stats = model.info["stats"]
    times = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in stats.seconds.items())
    runs_on = (f"{len(model.program.launches)} GPU launch(es) for {model.program.arch}" if cuda else
               f"{model.info['num_threads']} thread(s)")
    print(f"compiled {args.model}: {stats.kernels} kernels ({stats.kernel_calls} calls), {runs_on}; {times}; total {stats.total:.2f} s", file=sys.stderr)
    if args.tuning_db:
        print(f"tuning: {len(stats.tuned_kernels)} kernel(s) scheduled from {args.tuning_db}", file=sys.stderr)
    if stats.arena_bytes is not None:
        print(f"memory plan: arena {stats.arena_bytes} bytes for {stats.unplanned_bytes} bytes of intermediates", file=sys.stderr)
    if args.emit == "llvm":
        print(model.info["llvm_ir"])
    if args.emit == "ptx":
        from ziggurat.cli.ptx_target import format_steps

        print(format_steps(model.program))
        print(model.program.ptx)
    if args.export and cuda:  # no shared library: the program (PTX, steps) as JSON and the weights
        model.save(args.export)
        print(f"exported {args.export} (+ {args.export}.weights.npz); load it on a machine with an NVIDIA GPU with "
              f"ziggurat.runtime.cuda.load_cuda('{args.export}')", file=sys.stderr)
    elif args.export:
        out = model.export(args.export)
        from ziggurat.target import Target

        use = (f"load with ziggurat.runtime.load('{out}')" if Target.parse(model.info.get("target") or "llvm").is_native else
               "run it on the target with runtime/runner/runner.c (docs/targets.md)")  # cross-compiled
        print(f"exported {out} (+ {out}.json, {out}.weights.npz, {out}.abi); {use}", file=sys.stderr)
    return 0


def _print_stage(module, weights_out: str | None) -> None:
    """Prints the IR of an --emit stage; with `weights_out`, saves the module's weights there first
    and names the file (absolute) in the printed module's graph.weights_file."""
    if not weights_out:
        print(module)
        return
    from xdsl.dialects.builtin import StringAttr

    from ziggurat.transforms.graph.weight_binding import WEIGHTS_FILE_ATTR, weights_of

    path = os.path.abspath(weights_of(module).save(weights_out))  # type: ignore[union-attr]
    module.attributes[WEIGHTS_FILE_ATTR] = StringAttr(path)
    print(module)
    del module.attributes[WEIGHTS_FILE_ATTR]


def _is_positional(inputs: dict[str, np.ndarray]) -> bool:
    """Whether an .npz was written positionally (np.savez(f, a, b): arr_0, arr_1, ...)."""
    return list(inputs) == [f"arr_{i}" for i in range(len(inputs))]


def _positional_inputs(inputs: dict[str, np.ndarray], names: Sequence[str], path: str) -> list[np.ndarray]:
    """The arrays of an .npz in the model's input order: by name, or by position when the file was
    written positionally (`_is_positional`). Other names are an error."""
    if set(inputs) == set(names):
        return [inputs[n] for n in names]
    if _is_positional(inputs):
        return list(inputs.values())
    missing, extra = [n for n in names if n not in inputs], sorted(set(inputs) - set(names))
    raise ZigguratError(f"'{path}' does not name the model's inputs: missing {missing}, unknown {extra}; "
                        f"save the arrays under the input names {list(names)} (np.savez(f, **{{name: array}}))")


def cmd_run(args: argparse.Namespace) -> int:
    _require_gpu(args, "run")
    start = time.perf_counter()
    model = _compile(args, args.pipeline)
    compile_s = time.perf_counter() - start
    inputs = _load_npz(args.inputs)
    start = time.perf_counter()
    from ziggurat.runtime.dynamic import DynamicModel

    dynamic = isinstance(model, DynamicModel)
    before = model.compiles if dynamic else 0
    outputs = model(*_positional_inputs(inputs, model.input_names, args.inputs))
    if dynamic and model.compiles > before:  # the call compiled the variant of its shape
        shape = ", ".join(f"{k}={v}" for k, v in model.info["variants"][-1].items())
        compile_s += time.perf_counter() - start
        print(f"compiled in {compile_s:.2f} s (dynamic axes: the variant for {shape}, at the call)")
    elif dynamic:
        how = "one generic compile for every shape" if model.generic is not None else "a variant compiled up front"
        print(f"compiled in {compile_s:.2f} s (dynamic axes: {how})")
    else:
        print(f"compiled in {compile_s:.2f} s")
    if not args.check:
        for name, value in zip(model.output_names, outputs):
            print(f"{name}: shape {value.shape}\n{value}")
        return 0
    expected = _load_npz(args.check)
    ok = True
    for name, value in zip(model.output_names, outputs):
        if name not in expected:
            raise ZigguratError(f"'{args.check}' has no array named '{name}' (it has {sorted(expected)})")
        ref = expected[name]
        if ref.shape != value.shape:
            print(f"{name}: shape {value.shape}, expected {ref.shape} FAIL")
            ok = False
            continue
        err = float(np.max(np.abs(value.astype(np.float64) - ref))) if value.size else 0.0
        good = value.shape == ref.shape and bool(np.allclose(value, ref, rtol=args.rtol, atol=args.atol))
        ok &= good
        print(f"{name}: max abs error {err:.3g} {'PASS' if good else 'FAIL'} (rtol {args.rtol}, atol {args.atol})")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def cmd_tune(args: argparse.Namespace) -> int:
    from ziggurat.autotune import JSONDatabase, tune_model
    from ziggurat.autotune.measure import rotate_bytes_for_host

    from ziggurat.autotune.scheduler import parse_duration

    budget = None
    if args.time_budget is not None:
        try:
            budget = parse_duration(args.time_budget)
        except ValueError as err:
            raise ZigguratError(f"ziggurat tune: --time-budget: {err}") from None
    trials = args.trials if args.trials is not None or budget is not None else 64
    if (trials is not None and trials < 1) or args.timeout <= 0 or args.parallel_builds < 1:
        raise ZigguratError("ziggurat tune: --trials and --parallel-builds must be at least 1 and --timeout positive")
    _refuse_cuda(args, "tune", "tuning measures CPU kernels; GPU kernels are not tuned yet (compile for it without "
                 "--tuning-db: the default GPU schedule)")
    rotate = rotate_bytes_for_host() if args.cache_flush else 0
    with contextlib.ExitStack() as stack:
        db = stack.enter_context(JSONDatabase(args.db))
        pools = {}
        if args.dask_scheduler:
            from ziggurat.autotune.distributed import DaskBuilder, DaskRunner, connect

            client = stack.enter_context(connect(args.dask_scheduler))
            pools = {"builder": DaskBuilder(client), "runner": DaskRunner(client, timeout=args.timeout, repeat=5,
                                                                          min_repeat_ms=15.0, rotate_bytes=rotate)}
        results = tune_model(args.model, trials, db, target=args.target, opt_level=args.opt_level,
                             timeout=args.timeout, parallel_builds=args.parallel_builds, seed=args.seed,
                             validate=args.validate, runner_options={"rotate_bytes": rotate}, time_budget=budget,
                             transfer=not args.no_transfer, model_check=not args.no_model_check, **pools)
        if args.report:
            from ziggurat.autotune.report import format_report, ranking_report
            from ziggurat.autotune.tuner import extract_tasks

            tasks = [(n, t) for n, t, _ in extract_tasks(args.model, args.opt_level, args.target)]
            rows = [row for split in ("order", "random")
                    for row in ranking_report(tasks, db, args.target, train=200, split=split)]
            print(format_report(rows) if rows else "ranking report: too few records")
    if results:
        print(f"tuning wall time {results[0].seconds:.1f} s (per trial: the progress lines)")
        both = [r for r in results if r.best_cost < float("inf") and r.default_cost < float("inf")]
        if both:
            default = sum(r.calls * r.default_cost for r in both)
            best = sum(r.calls * r.best_cost for r in both)
            print(f"model kernels (calls x time): default {default * 1e3:.3f} ms, tuned {best * 1e3:.3f} ms "
                  f"({default / best:.2f}x)")
        if results[0].model_check is not None:
            print(results[0].model_check.line())
    for r in results:
        if r.best_cost == float("inf"):
            print(f"{r.name}: {r.trials} trials, nothing measured yet (raise --trials)")
            continue
        gain = r.default_cost / r.best_cost if r.best_cost > 0 else float("nan")
        print(f"{r.name} (x{r.calls}): {r.trials} trials, best {r.best_cost * 1e6:.1f} us, default {r.default_cost * 1e6:.1f} us "
              f"({gain:.2f}x)")
    print(f"records in {args.db}; compile with --tuning-db {args.db}")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    import json

    from ziggurat.runtime.profile import profile_model
    from ziggurat.target import Target

    if args.rounds < 1 or args.warmup < 0 or (args.threads is not None and args.threads < 1):
        raise ZigguratError("ziggurat profile: --rounds and --threads must be at least 1 and --warmup at least 0")
    _refuse_cuda(args, "profile", "the profiler times CPU kernels; a GPU model is not profiled per kernel yet "
                 "(ziggurat.compile(...).time_device() times the whole model on the GPU)")
    target = Target.parse(args.target)
    if args.threads is not None:
        target = target.with_threads(args.threads)
    inputs = None
    if args.inputs:  # by position, or by name (the compiled model checks the names)
        arrays = _load_npz(args.inputs)
        inputs = list(arrays.values()) if _is_positional(arrays) else arrays
    prof = profile_model(args.model, inputs, target=str(target), rounds=args.rounds, warmup=args.warmup,
                         opt_level=args.opt_level, pipeline=args.pipeline, tuning_db=args.tuning_db)
    if args.trace:
        with open(args.trace, "w") as f:
            json.dump(prof.chrome_trace(), f)
        print(f"trace of one inference ({len(prof.sites)} kernel calls) in {args.trace}; open it in "
              "https://ui.perfetto.dev or chrome://tracing", file=sys.stderr)
    print(json.dumps(prof.to_json(), indent=1) if args.json else prof.format_table(top=args.top))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from ziggurat.cli.demo import run_demo

    _refuse_cuda(args, "demo", "the demo runs on the CPU; try a GPU with `ziggurat run MODEL --inputs in.npz "
                 f"--target '{args.target}'`")

    return run_demo(target=args.target)


def version_string() -> str:
    """`ziggurat X (xdsl Y, llvmlite Z)`, from the installed distributions."""
    from importlib.metadata import PackageNotFoundError, version

    def v(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return f"ziggurat {v('ziggurat')} (xdsl {v('xdsl')}, llvmlite {v('llvmlite')})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ziggurat", description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog="\n".join(__doc__.splitlines()[2:8]))
    parser.add_argument("--version", action="version", version=version_string())
    parser.add_argument("--debug", action="store_true", help="on an error, print the Python traceback too (anywhere "
                                                             "on the command line; also: ZIGGURAT_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("import", help="print the graph-level IR of an ONNX model")
    p.add_argument("model")
    p.add_argument("-o", "--output", help="write the IR to this file instead of stdout")
    p.add_argument("--weights", help="also save the weights as an .npz file")
    p.add_argument("--print-debuginfo", action="store_true",
                   help="print each op's location: loc(\"<ONNX node name>\") (ziggurat-opt reads them back)")
    _add_shapes_option(p)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("compile", help="compile a model (.onnx, or .mlir text IR of any level); print the IR after passes and the compile times")
    p.add_argument("model", help="an ONNX model, or a .mlir file of graph, te, loop or hw IR (the rest of the default pipeline runs)")
    _add_compile_options(p)
    p.add_argument("--print-after", metavar="PASS", help="print the IR after this pass ('all' for every pass)")
    p.add_argument("--time-passes", action="store_true", help="print a table of each pass's seconds and share, with the total, on stderr")
    p.add_argument("--emit", choices=(*STAGES, "llvm", "ptx"), help="print the IR at this stage (llvm: the LLVM IR before "
                   "LLVM's optimizations; for a CUDA target, loop: the GPU-scheduled loops, llvm: the NVPTX LLVM IR, "
                   "ptx: the launch list and the PTX; it has no hw)")
    p.add_argument("--weights-out", metavar="NPZ", help="with --emit te|loop|hw: save the weights of that IR (with those the passes made) and name the file in its graph.weights_file, so `ziggurat run`/`ziggurat-opt` can take the printed IR")
    p.add_argument("--export", metavar="LIB", help="also write the compiled model as a shared library LIB (with LIB.json and LIB.weights.npz); load it with ziggurat.runtime.load(LIB). For a CUDA target: the program as JSON (with LIB.weights.npz); load it with ziggurat.runtime.cuda.load_cuda(LIB)")
    p.add_argument("--explain-fusion", action="store_true", help="compile with cost-guided fuse-ops and print each fusion decision: rule-based vs cost-guided choice and both costs")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", help="compile and run a model (.onnx or .mlir) on inputs from an .npz file")
    p.add_argument("model", help="an ONNX model, or a .mlir file of graph, te, loop or hw IR")
    p.add_argument("--inputs", required=True, help=".npz file with one array per model input, saved under the input names (or positionally: np.savez(f, a, b))")
    p.add_argument("--check", help=".npz file with the expected outputs; prints max error and PASS/FAIL")
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-4)
    _add_compile_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("tune", help="tune the model's kernels; records go to a JSON-lines database")
    p.add_argument("model")
    p.add_argument("--trials", type=int, default=None,
                   help="measurements in all, shared across the kernels (default 64 without --time-budget)")
    p.add_argument("--time-budget", default=None, metavar="DURATION",
                   help="stop before this much wall time is spent (600, 90s, 10m, 1h; the validation round "
                        "included): the batches go where the model's estimated time falls fastest")
    p.add_argument("--no-model-check", action="store_true",
                   help="skip the final check that the model built with the tuned kernels runs faster than the "
                        "default build (without it, the defaults are kept when it is not 1%% faster)")
    p.add_argument("--no-transfer", action="store_true",
                   help="do not train the cost model on the database's records of other kernels first")
    p.add_argument("--db", required=True, help="tuning record database (JSON lines); an existing one is resumed")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to measure one candidate (default 10)")
    p.add_argument("--parallel-builds", type=int, default=2, help="worker processes compiling candidates (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", default="llvm", help="target string, e.g. 'llvm -num-cores=2' (default: llvm)")
    p.add_argument("--opt-level", "-O", type=int, default=3, choices=(0, 1, 2, 3), help="opt level the kernels are extracted at (default 3)")
    p.add_argument("--dask-scheduler", default=None, metavar="ADDRESS",
                   help="build and measure on this Dask cluster (extra [distributed]; one worker with "
                        "--resources measure=1 per measuring machine)")
    p.add_argument("--validate", type=int, default=4, metavar="N",
                   help="re-measure the default and the N best schedules of each kernel together at the end; "
                        "the best of that round, when 2%% faster than the default, is what compile applies "
                             "(default 4, 0: off)")
    p.add_argument("--cache-flush", action="store_true",
                   help="time each candidate with its operands out of L1 and L2, as a layer's weights are in a "
                        "model run: the calls rotate over copies of the arguments totalling twice the cores' L2 (below "
                        "L3, so unlike TVM's clflush they still come from L3); for memory-bound kernels such as "
                        "batch-1 matrix-vector products. Keep one setting per --db")
    _add_shapes_option(p)
    p.add_argument("--report", action="store_true",
                   help="then print the cost model's ranking quality on held-out records (autotune/report.py)")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("profile", help="time every kernel of a model in the real executor; per-kernel table, Chrome trace",
                       description="Compiles the model twice, as usual and with every kernel call of the entry function "
                                   "timed (CLOCK_MONOTONIC), runs both in turns and prints per kernel: calls per "
                                   "inference, median time, share, GFLOP/s, GB/s, percent of the host's roofline and "
                                   "the ONNX nodes fused into it; then the sum of the kernel times next to the "
                                   "uninstrumented model call's time (docs/index.md, 'Profiling a model').",
                       epilog="example: ziggurat profile model.onnx --inputs in.npz --threads 1 --top 10 --trace t.json "
                              "(then open t.json in https://ui.perfetto.dev)")
    p.add_argument("model")
    p.add_argument("--inputs", metavar="NPZ", help=".npz file with one array per model input (default: random inputs; "
                                                   "integer inputs such as token ids get 0 or 1)")
    p.add_argument("--threads", type=int, default=None, help="threads for parallel loops (sets -num-cores of the target)")
    p.add_argument("--rounds", type=int, default=20, help="timed inferences; times are their medians (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed inferences first (default 3)")
    p.add_argument("--top", type=int, default=None, metavar="N", help="show the N slowest kernels, the rest in one line")
    p.add_argument("--trace", metavar="FILE", help="write the kernel calls of the median inference as Chrome "
                                                   "trace-event JSON (opens in Perfetto)")
    p.add_argument("--json", action="store_true", help="print the profile as JSON instead of the table")
    _add_compile_options(p)
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("demo", help="compile a small bundled CNN and check it against numpy")
    p.add_argument("--target", default="llvm")
    p.set_defaults(func=cmd_demo)

    from ziggurat.cli.cache import add_parser as add_cache_parser
    from ziggurat.cli.conformance import add_parser as add_conformance_parser

    from ziggurat.cli.quantize import add_parser as add_quantize_parser

    add_conformance_parser(sub)
    add_cache_parser(sub)
    add_quantize_parser(sub)
    from ziggurat.cli.viz import add_parser as add_viz_parser

    add_viz_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from ziggurat.cli.report import pop_debug, report_error

    debug, argv = pop_debug(list(sys.argv[1:] if argv is None else argv))  # --debug goes anywhere
    args = build_parser().parse_args(argv)
    try:
        for spec in getattr(args, "load_plugin", []):
            plugins.load_plugin(spec)
        if getattr(args, "shapes", None):
            _fix_shapes(args)
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # a user error in one line; a bug names its pass (the traceback with --debug)
        return report_error("ziggurat", err, debug)


if __name__ == "__main__":
    sys.exit(main())
