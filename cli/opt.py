"""`ziggurat-opt`: run pass pipelines on MLIR text, in the manner of mlir-opt.

    ziggurat-opt FILE.mlir -p 'convert-graph-to-te,convert-te-to-loop'

Every ziggurat dialect and pass is registered, next to all of upstream
xDSL's. The IR is verified after each pass (`--disable-verify` turns that off);
`--print-between-passes` (alias `--print-ir`) prints it, `--time-passes` times
it and `--list-passes` lists ziggurat's passes with their summaries. Errors
print as one message and exit with status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from xdsl.xdsl_opt_main import xDSLOptMain

from ziggurat import plugins, registry
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
        # our parse first: a bad pass or option is named, with the closest known names
        registry.parse_pipeline(self.args.passes or "")
        super().setup_pipeline()

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


def list_passes() -> str:
    lines = ["ziggurat passes (upstream xDSL passes are available too):"]
    for name, factory in {**get_all_passes(), **plugins.plugin_passes()}.items():
        doc = (factory().__doc__ or "").strip().splitlines()
        lines.append(f"  {name:28s} {doc[0] if doc else ''}")
    return "\n".join(lines)


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
