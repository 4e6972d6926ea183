"""`ziggurat-opt`: run pass pipelines on MLIR text, in the manner of mlir-opt.

    ziggurat-opt FILE.mlir -p 'convert-graph-to-te,convert-te-to-loop'

Every ziggurat dialect and pass is registered, next to all of upstream
xDSL's. The IR is verified after each pass (`--disable-verify` turns that off);
`--print-between-passes` (alias `--print-ir`) prints it, `--time-passes` times
it (a table of each pass's milliseconds and share, with the total, on
stderr) and `--list-passes` lists ziggurat's passes with their summaries.
Errors print as one message, naming the pass or option at fault, and exit
with status 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.xdsl_opt_main import xDSLOptMain

from ziggurat import plugins, registry
from ziggurat.transforms.graph.weight_binding import bind_weights_file
from ziggurat.transforms import get_all_passes


class ZigguratOptMain(xDSLOptMain):
    """xDSL's opt driver with ziggurat's dialects and passes registered."""

    version_format = "ziggurat-opt (xdsl {xdsl_version})"

    def register_all_dialects(self) -> None:
        for name, factory in registry.all_dialects().items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        for name, factory in registry.all_passes().items():
            self.register_pass(name, factory)

    def setup_pipeline(self) -> None:
        """The pipeline from our parser (a bad pass or option is named, with the closest known
        names); verifies after each pass, prints between passes, and times them for `timing_table`."""
        self.timings: list[tuple[str, float]] = []
        start = time.perf_counter()

        def callback(previous: ModulePass | None, module: ModuleOp, following: ModulePass | None) -> None:
            nonlocal start
            if previous is not None:
                self.timings.append((previous.name, time.perf_counter() - start))
            if not self.args.disable_verify:
                module.verify()
            if previous and following and self.args.print_between_passes:
                print(f"IR after {previous.name}:")
                Printer(stream=sys.stdout).print_op(module)
                print("\n\n\n")
            start = time.perf_counter()

        self.pipeline = PassPipeline(tuple(registry.parse_pipeline(self.args.passes or "")), callback)

    def apply_passes(self, prog: ModuleOp) -> None:
        # a relative graph.weights_file is read from the input file's folder
        source = getattr(self.args, "input_file", None)
        bind_weights_file(prog, os.path.dirname(os.path.abspath(source)) if source else os.getcwd())
        super().apply_passes(prog)

    def run(self) -> None:
        super().run()
        if self.args.time_passes:
            print(timing_table(self.timings), file=sys.stderr)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--print-ir", dest="print_between_passes", action="store_true", help="alias of --print-between-passes"
        )
        arg_parser.add_argument(
            "--list-passes", action="store_true", help="list ziggurat's passes with their summaries and exit"
        )
        arg_parser.add_argument(
            "--load-plugin", action="append", metavar="MODULE",
            help="load a plugin (module name or .py path) that registers dialects and passes; repeatable (docs/tutorial.md)",
        )


def timing_table(timings: list[tuple[str, float]]) -> str:
    """Pass times as a table with each pass's share and the total (the `--time-passes` report)."""
    total = sum(s for _, s in timings)
    width = max([len(n) for n, _ in timings] + [len("total")])
    lines = [f"{'pass':{width}s}  {'ms':>10s}  {'share':>6s}"]
    for name, seconds in timings:
        share = seconds / total if total > 0 else 0.0
        lines.append(f"{name:{width}s}  {seconds * 1e3:10.2f}  {share:6.1%}")
    lines.append(f"{'total':{width}s}  {total * 1e3:10.2f}  {1:6.1%}")
    return "\n".join(lines)


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
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        specs, argv = plugins.pop_plugin_args(argv)
        for spec in specs:
            plugins.load_plugin(spec)
    except plugins.PluginError as err:
        print(f"ziggurat-opt: error: {err}", file=sys.stderr)
        return 1
    if "--list-passes" in argv:
        print(list_passes())
        return 0
    try:
        ZigguratOptMain(description=__doc__.splitlines()[0], args=argv).run()  # type: ignore[union-attr]
    except SystemExit:
        raise
    except KeyboardInterrupt:
        return 130
    except BaseException as err:  # parse, verify and pipeline errors (some are BaseException)
        print(f"ziggurat-opt: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
