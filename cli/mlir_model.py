"""Text IR as a model: `ziggurat compile/run M.mlir` and `ziggurat-opt -t llvm` at any level.

A `.mlir` file holds ziggurat IR at one of the four levels. `detect_level`
reads the level from the dialects present (hw/x86vec/amx ops: hw; loop ops or
a destination-passing `@main` over memrefs: loop; te ops or
`graph.call_kernel`: te; else graph; hw IR without vector code reads as loop
IR after the memory plan, whose rest leaves it as it is). `remaining_pipeline` is the part of
`pipelines.default_pipeline` after the pass that produces that level (the
stage builders of `lowering/pipelines.py` decide which passes run; nothing
here names one). `compile_mlir` runs it and builds a `CompiledModel`, its
inputs and outputs named by `@main`'s `graph.input_names` and
`graph.output_names` (what `ziggurat import` writes and every lowering keeps),
its weights from `--weights` or the module's `graph.weights_file` (relative
to the .mlir file's folder).
"""

from __future__ import annotations

import os
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, MemRefType, ModuleOp, StringAttr

from ziggurat.errors import CompileError
from ziggurat.lowering import pipelines
from ziggurat.target import Target
from ziggurat.weights import WeightStore

LEVELS = ("graph", "te", "loop", "hw")

# The pass after which each level's IR exists (`ziggurat compile --emit LEVEL` prints the IR there):
# the graph -> te and te -> loop steps of TO_LOOP, and the lowering to hw of the top opt level.
STAGES = {"te": pipelines.TO_LOOP[0], "loop": pipelines.TO_LOOP[1], "hw": pipelines.HW[max(pipelines.OPT_LEVELS)][0]}

_HW_DIALECTS = frozenset({"hw", "x86vec", "amx"})


def read_module(path: str) -> ModuleOp:
    """Parses the text IR in `path` with every registered dialect (ours, the plugins', xDSL's)."""
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import ParseError

    from ziggurat.registry import make_context

    try:
        with open(path) as f:
            text = f.read()
    except OSError as err:
        raise CompileError(f"cannot read '{path}': {err.strerror or err}") from None
    try:
        return Parser(make_context(), text, path).parse_module()
    except ParseError as err:
        raise CompileError(f"cannot parse '{path}' as MLIR: {err}") from None


def detect_level(module: ModuleOp) -> str:
    """'graph', 'te', 'loop' or 'hw': the lowest level whose ops `module` holds."""
    dialects = {op.name.partition(".")[0] for op in module.walk()}
    if dialects & _HW_DIALECTS:
        return "hw"
    main = main_function(module, required=False)
    if "loop" in dialects or (main is not None and any(isinstance(t, MemRefType) for t in main.function_type.inputs)):
        return "loop"
    if "te" in dialects or any(op.name == "graph.call_kernel" for op in module.walk()):
        return "te"
    return "graph"


def is_planned(module: ModuleOp) -> bool:
    """Whether the whole-module loop passes ran (the memory plan: `plan.arena_bytes`, what the
    compiler reads too): they run once per module."""
    return "plan.arena_bytes" in module.attributes


def remaining_pipeline(level: str, opt_level: int = 3, target: Target | str | None = None,
                       graph: str | None = None, tuning_db: str | None = None, planned: bool = False) -> str:
    """The default pipeline (`pipelines.default_pipeline`, `graph` replacing its graph part) from
    `level` on: all of it for graph-level IR, else what follows the pass that produced `level`
    (for `planned` loop-level IR, what follows the whole-module stage `pipelines.MODULE`)."""
    from xdsl.utils.arg_spec import parse_pipeline as split_pipeline

    if level not in LEVELS:
        raise CompileError(f"unknown IR level '{level}'; one of {', '.join(LEVELS)}")
    full = pipelines.default_pipeline(opt_level, target, graph=graph, tuning_db=tuning_db)
    if level == "graph":
        return full
    specs = list(split_pipeline(full))
    names = [s.name for s in specs]
    after = STAGES[level]
    if level == "loop" and planned and pipelines.MODULE[opt_level]:
        after = pipelines.MODULE[opt_level][-1]
    if after not in names:  # (no hw lowering at O0)
        return ""
    return pipelines.join(*(str(s) for s in specs[len(names) - 1 - names[::-1].index(after) + 1:]))


def main_function(module: ModuleOp, required: bool = True) -> func.FuncOp | None:
    main = next((f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == "main"), None)
    if main is None and required:
        raise CompileError("the module has no func.func @main (the model's entry function; `ziggurat import` "
                           "writes one)")
    return main


def _names(main: func.FuncOp, key: str) -> list[str] | None:
    attr = main.attributes.get(key)
    if isinstance(attr, ArrayAttr) and all(isinstance(a, StringAttr) for a in attr.data):
        return [a.data for a in attr.data]  # type: ignore[union-attr]
    return None


def signature(module: ModuleOp) -> tuple[list[Any], list[Any]]:
    """The TensorSpecs of `@main`'s inputs and outputs: results at the graph and te levels, the
    arguments after the inputs at the loop and hw levels (destination-passing style)."""
    from ziggurat.dtypes import to_numpy
    from ziggurat.signature import TensorSpec

    main = main_function(module)
    assert main is not None
    ftype = main.function_type
    in_names, out_names = _names(main, "graph.input_names"), _names(main, "graph.output_names")
    if ftype.outputs.data:
        in_types, out_types = list(ftype.inputs.data), list(ftype.outputs.data)
    else:
        if in_names is None:
            raise CompileError("@main returns nothing and names no inputs (graph.input_names): cannot tell its "
                               "inputs from its outputs")
        in_types, out_types = list(ftype.inputs.data[:len(in_names)]), list(ftype.inputs.data[len(in_names):])
    in_names = in_names or [f"input{i}" for i in range(len(in_types))]
    out_names = (out_names or [])[:len(out_types)]
    out_names += [f"output{i}" for i in range(len(out_names), len(out_types))]

    def spec(name: str, t: Any) -> Any:
        return TensorSpec(name, tuple(int(d) for d in t.get_shape()), to_numpy(t.element_type))

    return [spec(n, t) for n, t in zip(in_names, in_types)], [spec(n, t) for n, t in zip(out_names, out_types)]


def load_weights(module: ModuleOp, path: str, weights: str | None = None) -> WeightStore:
    """The weights of the module read from `path`: the `weights` file (relative to the working
    directory), else the one its `graph.weights_file` names (relative to `path`'s folder), else none;
    refuses a module that names weights the store lacks."""
    from ziggurat.transforms.graph.weight_binding import WEIGHTS_FILE_ATTR, bind_weights, bind_weights_file, \
        constant_refs, weights_of

    if weights is not None:
        bind_weights(module, read_weights(weights))
    else:
        bind_weights_file(module, os.path.dirname(os.path.abspath(path)))
    store = weights_of(module) or WeightStore()
    missing = [r for r in constant_refs(module) if r not in store]
    if missing:
        names = f"{', '.join(repr(m) for m in missing[:5])}{' ...' if len(missing) > 5 else ''}"
        if weights or WEIGHTS_FILE_ATTR in module.attributes:
            source = f"the weights file '{weights}'" if weights else f"its weights file ({WEIGHTS_FILE_ATTR})"
            problem = f"names weights that {source} lacks: {names}"
        else:
            problem = f"names weights ({names}) but no weights file ({WEIGHTS_FILE_ATTR})"
        raise CompileError(f"'{path}' {problem}. Save the weights with the IR: `ziggurat import MODEL --weights "
                           "W.npz -o M.mlir`, `ziggurat-opt ... --weights-out W.npz -o M.mlir`, or pass --weights")
    return store


def read_weights(path: str) -> WeightStore:
    try:
        return WeightStore.load(path)
    except (OSError, ValueError) as err:
        raise CompileError(f"cannot read the weights file '{path}': {getattr(err, 'strerror', None) or err}") from None


def compile_mlir(path: str, target: str | Target = "llvm", opt_level: int = 3, pipeline: str | None = None,
                 tuning_db: str | None = None, after_pass: Any = None, weights: str | None = None) -> Any:
    """Compiles the text IR in `path` (any level) to a `CompiledModel`: the rest of the default
    pipeline at `opt_level` for `target`, then the LLVM backend. `pipeline` replaces the graph-level
    passes (graph-level IR only); `weights` overrides the module's `graph.weights_file`."""
    import time

    from ziggurat import compiler
    from ziggurat.backends.llvm.translate import LLVMOptions
    from ziggurat.runtime.executor import CompiledModel

    t0 = time.perf_counter()
    module = read_module(path)
    level = detect_level(module)
    if pipeline is not None and level != "graph":
        raise CompileError(f"-p replaces the graph-level passes, but '{path}' holds {level}-level IR; run passes "
                           f"on it with ziggurat-opt instead")
    store = load_weights(module, path, weights)
    inputs, outputs = signature(module)
    tgt = Target.parse(target)
    if not getattr(tgt, "is_native", True):
        raise CompileError(f"a .mlir model compiles for this machine only; '{tgt}' is another architecture "
                           "(compile the ONNX model for it instead)")
    spec = remaining_pipeline(level, opt_level, tgt, pipeline, None if tuning_db is None else str(tuning_db),
                              planned=is_planned(module))
    options = LLVMOptions.for_target(tgt)
    stats = compiler.CompileStats()
    stats.seconds["import"] = time.perf_counter() - t0  # reading the text IR
    built = compiler._build(compiler._Work(module, store), spec, options, stats, after_pass)
    del module, store
    stats.kernels, stats.kernel_calls = built.kernels, built.kernel_calls
    stats.tuned_kernels = list(built.tuned_kernels)
    stats.arena_bytes, stats.unplanned_bytes = built.arena_bytes, built.unplanned_bytes
    compiler.check_arena(built.arena_size, None)
    return CompiledModel(built.jit.address(built.entry_symbol), inputs, outputs, built.constants, built.arena_size,
                         keepalive=built.jit,
                         info={"stats": stats, "target": str(tgt), "num_threads": tgt.num_threads, "pipeline": spec,
                               "llvm_ir": built.jit.llvm_ir, "llvm_options": options,
                               "entry_symbol": built.entry_symbol, "level": level})


def is_mlir(path: object) -> bool:
    """Whether the CLI reads `path` as text IR (a `.mlir` file) rather than as an ONNX model."""
    return isinstance(path, str) and path.endswith(".mlir")
