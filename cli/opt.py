"""`ziggurat-opt`: run pass pipelines on MLIR text, in the manner of mlir-opt.

    ziggurat-opt FILE.mlir -p 'convert-graph-to-te,convert-te-to-loop'
    ziggurat-opt MODEL.onnx -p fold-constants --weights-out W.npz -o M.mlir
    ziggurat-opt FILE.mlir -t llvm                # LLVM IR: lowers the rest of the way
    ziggurat-opt FILE.mlir -t 'ptx{arch="sm_90"}'  # PTX for a CUDA GPU (and its launch list)

Every ziggurat dialect and pass is registered, next to all of upstream
xDSL's. The IR is verified after each pass (`--disable-verify` turns that off);
`--print-between-passes` (alias `--print-ir`) prints it, `--print-after PASS`
prints it after one pass (or `all`), `--time-passes` times it (a table of each
pass's seconds and share, with the total, on stderr) and `--list-passes` lists
ziggurat's passes with their summaries. An `.onnx` input is imported first.
Weights: the module's `graph.weights_file` (relative to the input's folder) or
`--weights W.npz`; `--weights-out W.npz` saves them (with those the passes
made) and names that file in the output. `-t llvm` is ziggurat's LLVM target
(cli/llvm_target.py), not xDSL's; `-t ptx` lowers for a CUDA target and prints
PTX (cli/ptx_target.py). Errors print as one message, naming the pass
(with its options) or option at fault, and exit with status 1; IR that a pass
leaves invalid is shown around the failing op, with its location. `--debug` (or
ZIGGURAT_DEBUG=1) prints the traceback too. `--verify-diagnostics` checks
`expected-error` annotations as mlir-opt does (cli/diagnostics.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import sys
import time
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.xdsl_opt_main import xDSLOptMain

from ziggurat import plugins, registry
from ziggurat.cli import diagnostics
from ziggurat.cli.report import error_message, pop_debug, report_error
from ziggurat.cli.timing import timing_table
from ziggurat.errors import CompileError
from ziggurat.transforms import get_all_passes
from ziggurat.transforms.graph import weight_binding as wb

__all__ = ["ZigguratOptMain", "list_passes", "main", "timing_table"]


class ZigguratOptMain(xDSLOptMain):
    """xDSL's opt driver with ziggurat's dialects and passes registered."""

    version_format = "ziggurat-opt (xdsl {xdsl_version})"

    def register_all_dialects(self) -> None:
        for name, factory in registry.all_dialects().items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        for name, factory in registry.all_passes().items():
            self.register_pass(name, factory)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["onnx"] = self._import_onnx

    def register_all_targets(self) -> None:
        from ziggurat.cli.llvm_target import ZigguratLLVMTarget
        from ziggurat.cli.ptx_target import ZigguratPTXTarget

        super().register_all_targets()
        self.available_targets["llvm"] = lambda: ZigguratLLVMTarget  # ours, in place of xDSL's
        self.available_targets["ptx"] = lambda: ZigguratPTXTarget  # a CUDA GPU's (cli/ptx_target.py)

    def _import_onnx(self, stream) -> ModuleOp:
        """An ONNX model as graph-level IR, its weights bound (saved by --weights-out)."""
        from ziggurat.frontends.onnx import import_onnx

        imported = import_onnx(self.args.input_file or stream.read())
        wb.bind_weights(imported.module, imported.weights)
        return imported.module

    def setup_pipeline(self) -> None:
        """The pipeline from our parser (a bad pass or option is named, with the closest known
        names); verifies after each pass, prints between passes or after one, times them for
        `timing_table`, and refuses a pass that needs weight values where none are bound."""
        self.timings: list[tuple[str, float]] = []
        start = time.perf_counter()
        after = self.args.print_after

        def callback(previous: ModulePass | None, module: ModuleOp, following: ModulePass | None) -> None:
            nonlocal start
            if previous is not None:
                self.timings.append((previous.name, time.perf_counter() - start))
            if not self.args.disable_verify:
                self._verify(module, previous)
            if previous and following and self.args.print_between_passes:
                print(f"IR after {previous.name}:")
                Printer(stream=sys.stdout).print_op(module)
                print("\n\n\n")
            if previous and after in (previous.name, "all"):
                print(f"// -----// IR after {previous.name} //----- //")
                Printer(stream=sys.stdout).print_op(module)
                print()
            if following is not None:
                wb.require_weights(module, following)
            self.running = following
            start = time.perf_counter()

        passes = tuple(registry.parse_pipeline(self.args.passes or ""))
        names = list(dict.fromkeys(p.name for p in passes))
        if after not in (None, "all") and after not in names:
            hint = (" (a pass, but not in this pipeline)" if after in self.available_passes else
                    registry._did_you_mean(after, names) or registry._did_you_mean(after, self.available_passes))
            raise CompileError(f"--print-after {after}: the pipeline has no pass of that name{hint}; it runs "
                               f"{', '.join(names) or 'no passes'}")
        self.pipeline = PassPipeline(passes, callback)
        self.running: ModulePass | None = None  # the pass being applied
        self.problems: list[str] = []  # --verify-diagnostics: annotations that did not match
        self.expected: list[diagnostics.Expected] = []  # ... those of the chunk at hand
        self.skip_output = False

    @staticmethod
    def _verify(module: ModuleOp, previous: ModulePass | None) -> None:
        """Verifies the module; invalid IR is one error naming the pass before (with its options),
        the failing op and its location, and showing the op in its function."""
        from ziggurat.compiler import invalid_ir_error, pass_text
        from ziggurat.lowering.locations import invalid_ir_report

        try:
            module.verify()
        except VerifyException as err:
            if previous is None:  # the input: stays a VerifyException, which --verify-diagnostics prints
                raise VerifyException(f"the input IR is invalid: {invalid_ir_report(module, err)}") from None
            raise invalid_ir_error(module, err, f"pass '{pass_text(previous)}'") from None

    def parse_chunk(self, chunk, file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        """With --verify-diagnostics and `expected-error` annotations in the chunk: parses it giving ops
        their file positions as locations, and checks a parse error against the annotations."""
        self.expected, self.skip_output = [], False
        if not self.args.verify_diagnostics or file_extension != "mlir":
            return super().parse_chunk(chunk, file_extension, start_offset)
        text = chunk.read().decode()
        self.expected = diagnostics.expectations(text, start_offset + 1)
        if not self.expected:
            return super().parse_chunk(io.BytesIO(text.encode()), file_extension, start_offset)
        try:
            return diagnostics.LocatingParser(self.ctx, text, self.get_input_name(), start_offset + 1).parse_module(
                not self.args.no_implicit_module)
        except ParseError as err:
            err.span = dataclasses.replace(err.span, line_offset=start_offset)
            self._check_diagnostics(err, None)
            return None

    def _check_diagnostics(self, err: BaseException | None, module: ModuleOp | None) -> None:
        produced = None if err is None else (diagnostics.error_line(err, module), error_message(err))
        self.problems += diagnostics.check(self.expected, produced, self.get_input_name())
        self.skip_output = err is not None

    def output_resulting_program(self, prog: ModuleOp) -> str:
        return "" if self.skip_output else super().output_resulting_program(prog)

    def apply_passes(self, prog: ModuleOp) -> None:
        """Binds the weights (--weights, else the module's graph.weights_file read from the input
        file's folder), runs the pipeline, then saves or re-points the weights (`_weights_out`)."""
        source = self.args.input_file
        folder = os.path.dirname(os.path.abspath(source)) if source else os.getcwd()
        origin = None  # the weights file the input used, as an absolute path
        if self.args.weights:
            from ziggurat.cli.mlir_model import read_weights

            wb.bind_weights(prog, read_weights(self.args.weights))
            origin = os.path.abspath(self.args.weights)
        else:
            wb.bind_weights_file(prog, folder)
            attr = prog.attributes.get(wb.WEIGHTS_FILE_ATTR)
            if isinstance(attr, StringAttr):
                origin = os.path.join(folder, attr.data)
        store = wb.weights_of(prog)
        saved = set(store) if store is not None and origin is not None else set()
        try:
            self._run_pipeline(prog)
        except Exception as err:
            if not self.expected:
                raise
            self._check_diagnostics(err, prog)  # --verify-diagnostics with annotations
            return
        if self.expected:
            self._check_diagnostics(None, prog)
        self._weights_out(prog, origin, saved, changed_folder=folder != self._output_folder())

    def _run_pipeline(self, prog: ModuleOp) -> None:
        """The pipeline; an exception a pass raises (not a ZigguratError) is marked with the pass."""
        from ziggurat.compiler import name_pass, pass_text

        self.running = None
        try:
            super().apply_passes(prog)
        except CompileError:
            raise
        except Exception as err:
            if self.running is not None:  # None: the input failed to verify
                name_pass(err, pass_text(self.running))
            raise

    def _output_folder(self) -> str:
        out = self.args.output_file
        return os.path.dirname(os.path.abspath(out)) if out else os.getcwd()

    def _record(self, prog: ModuleOp, path: str) -> None:
        """Names the weights file `path` in the output: relative to the -o file's folder, else absolute."""
        recorded = os.path.relpath(path, self._output_folder()) if self.args.output_file else path
        prog.attributes[wb.WEIGHTS_FILE_ATTR] = StringAttr(recorded)

    def _weights_out(self, prog: ModuleOp, origin: str | None, saved: set[str], changed_folder: bool) -> None:
        """--weights-out: writes the module's weights (old and made by the passes) and names the file in
        the output. Else re-points the input's weights file for the output's folder, and warns about
        weights the output names that no file holds (made by a pass, or imported from ONNX)."""
        store = wb.weights_of(prog)
        if self.args.weights_out:
            from ziggurat.weights import WeightStore

            if store is None and wb.constant_refs(prog):
                raise CompileError(f"--weights-out {self.args.weights_out}: the module's constants have no values "
                                   "bound; pass --weights W.npz or give the module a graph.weights_file")
            self._record(prog, os.path.abspath((store or WeightStore()).save(self.args.weights_out)))
            return
        if origin is not None and (self.args.weights or changed_folder):
            self._record(prog, origin)
        unsaved = ([r for r in wb.constant_refs(prog) if r not in saved]
                   if store is not None and self.args.target == "mlir" else [])
        if unsaved:
            print(f"ziggurat-opt: warning: the output names {len(unsaved)} weight(s) no file holds "
                  f"({', '.join(unsaved[:3])}{', ...' if len(unsaved) > 3 else ''}); pass --weights-out W.npz to "
                  "save them and name the file in the output", file=sys.stderr)

    def run(self) -> None:
        super().run()
        if self.problems:
            raise CompileError("--verify-diagnostics: the diagnostics differ from the expected ones:\n"
                               + "\n".join(self.problems))
        if self.args.time_passes:
            print(timing_table(self.timings), file=sys.stderr)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        for action in arg_parser._actions:
            if action.dest == "target":
                action.help = (f"{action.help}. 'llvm' is ziggurat's (not xDSL's): LLVM IR for IR of any level, "
                               "lowered the rest of the way; options: llvm{target=\"llvm -mcpu=haswell\" opt-level=3}. "
                               "'ptx': the same for a CUDA GPU, the launch list (as comments) and the PTX; "
                               "options: ptx{arch=\"sm_90\" opt-level=3}")
        arg_parser.add_argument(
            "--print-ir", dest="print_between_passes", action="store_true", help="alias of --print-between-passes"
        )
        arg_parser.add_argument(
            "--print-after", metavar="PASS", help="print the IR after this pass of the pipeline ('all': after each)"
        )
        arg_parser.add_argument(
            "--weights", metavar="NPZ", help="the weights of the module's constants (default: the .npz file its "
                                             "graph.weights_file names, relative to the input file's folder)"
        )
        arg_parser.add_argument(
            "--weights-out", metavar="NPZ", help="write the module's weights (with those the passes made) to this "
                                                 ".npz file and name it in the output's graph.weights_file"
        )
        arg_parser.add_argument(
            "--list-passes", action="store_true", help="list ziggurat's passes with their summaries and options and exit"
        )
        arg_parser.add_argument(
            "--debug", action="store_true", help="on an error, print the Python traceback too (also: ZIGGURAT_DEBUG=1)"
        )
        for action in arg_parser._actions:
            if action.dest == "verify_diagnostics":
                action.help = ("check the `// expected-error@+1 {{text}}` annotations of each chunk as mlir-opt does; "
                               "a chunk without annotations prints its verifier error instead (cli/diagnostics.py)")
        arg_parser.add_argument(
            "--load-plugin", action="append", metavar="MODULE",
            help="load a plugin (module name or .py path) that registers dialects and passes; repeatable (docs/tutorial.md)",
        )


def list_passes() -> str:
    """Each of our and the plugins' passes with its summary line and its options (defaults), as
    written in a pipeline: `name{option=value other=value}`, options separated by spaces."""
    lines = ["ziggurat passes (upstream xDSL passes are available too); options go in braces, separated by",
             "spaces: -p 'fuse-ops{cost-guided=true vector-width=8}'"]
    for name, factory in {**get_all_passes(), **plugins.plugin_passes()}.items():
        cls = factory()
        doc = (cls.__doc__ or "").strip().splitlines()
        lines.append(f"  {name:28s} {doc[0] if doc else ''}")
        options = [f"{name}={_default(f)}" for name, f in zip(registry.option_names(cls), dataclasses.fields(cls))]
        if options:
            lines.append(f"  {'':28s}   options: {' '.join(options)}")
    return "\n".join(lines)


def _default(field: dataclasses.Field) -> str:
    value = field.default
    if value is dataclasses.MISSING:
        return "(required)"
    if isinstance(value, bool):
        return str(value).lower()
    return f'"{value}"' if isinstance(value, str) else str(value)


def main(argv: Sequence[str] | None = None) -> int:
    debug, argv = pop_debug(list(sys.argv[1:] if argv is None else argv))
    try:
        specs, argv = plugins.pop_plugin_args(argv)
        for spec in specs:
            plugins.load_plugin(spec)
        if "--list-passes" in argv:
            print(list_passes())
            return 0
        ZigguratOptMain(description=__doc__.splitlines()[0], args=argv).run()  # type: ignore[union-attr]
    except SystemExit:
        raise
    except KeyboardInterrupt:
        return 130
    except BaseException as err:  # parse, verify and pipeline errors (some are BaseException)
        return report_error("ziggurat-opt", err, debug)
    return 0


if __name__ == "__main__":
    sys.exit(main())
