"""`ziggurat viz`: a picture of the compiled model (docs/viz.md).

    ziggurat viz model.onnx -o graph.html     drawing + kernel table; measures each kernel (--no-measure: skip)
    ziggurat viz model.onnx -o graph.svg      the drawing alone (estimated costs; --measure adds times)
    ziggurat viz model.onnx -o graph.dot      Graphviz DOT, one cluster per kernel (dot -Tsvg graph.dot)
    ziggurat viz model.onnx -o graph.png      the page as a headless-Chromium screenshot

The graph ops after the graph passes (with their ONNX nodes), each kernel's
fused group as a coloured frame with the cost oracle's estimate (the one
cost-guided fusion uses) and, measured, its time in the instrumented executor
(runtime/profile.py), the layouts the passes changed (NCHW16c, weight panels)
and the feedback channel's decisions (graph.fusion_decision).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ziggurat.errors import ZigguratError

FORMATS = ("html", "svg", "dot", "png")


def output_format(path: str, fmt: str | None) -> str:
    if fmt is not None:
        return fmt
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix in FORMATS:
        return suffix
    raise ZigguratError(f"ziggurat viz: cannot tell the format of '{path}' from its suffix; name it .html, .svg, "
                        ".dot or .png, or give --format")


def render(viz, fmt: str) -> str:
    """The text of `viz` in format html, svg or dot."""
    from ziggurat.cli import viz_render

    return {"html": viz_render.to_html, "svg": viz_render.to_svg, "dot": viz_render.to_dot}[fmt](viz)


def write(viz, path: str | Path, fmt: str, width: int = 1400, height: int = 1000) -> Path:
    """Writes `viz` to `path` as html, svg, dot or png (a screenshot of the html page)."""
    out = Path(path)
    if fmt != "png":
        out.write_text(render(viz, fmt), encoding="utf-8")
        return out
    from ziggurat.cli.viz_png import screenshot

    with tempfile.TemporaryDirectory(prefix="ziggurat-viz-") as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(render(viz, "html"), encoding="utf-8")
        return screenshot(page, out, width, height)


def cmd_viz(args: argparse.Namespace) -> int:
    from ziggurat.cli.viz_model import extract
    from ziggurat.target import Target

    fmt = output_format(args.output, args.format)
    if args.rounds < 1 or args.warmup < 0 or (args.threads is not None and args.threads < 1):
        raise ZigguratError("ziggurat viz: --rounds and --threads must be at least 1 and --warmup at least 0")
    measure = args.measure if args.measure is not None else fmt in ("html", "png")
    target = Target.parse(args.target)
    if args.threads is not None:
        target = target.with_threads(args.threads)
    viz = extract(args.model, target=str(target), opt_level=args.opt_level, pipeline=args.pipeline,
                  tuning_db=args.tuning_db, measure=measure, rounds=args.rounds, warmup=args.warmup)
    out = write(viz, args.output, fmt, args.width, args.height)
    fused = sum(k.fused for k in viz.kernels)
    print(f"{out}: {len(viz.kernels)} kernels ({fused} fused groups), {len(viz.vertices)} boxes, "
          f"{'measured' if viz.measured else 'estimated only'}", file=sys.stderr)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("viz", help="draw the compiled model: ops, fused kernels, layouts, estimated and measured "
                                   "costs (ziggurat viz model.onnx -o graph.html|svg|dot|png)",
                       description=__doc__.splitlines()[0], epilog="\n".join(__doc__.splitlines()[2:]),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("-o", "--output", required=True, help="file to write: .html, .svg, .dot or .png")
    p.add_argument("--format", choices=FORMATS, default=None, help="output format (default: from the suffix of -o)")
    p.add_argument("--measure", action=argparse.BooleanOptionalAction, default=None,
                   help="time every kernel with the profiler (runtime/profile.py: two more compiles and --rounds "
                        "inferences); default on for html and png, off for svg and dot")
    p.add_argument("--rounds", type=int, default=20, help="timed inferences with --measure (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed inferences first (default 3)")
    p.add_argument("--threads", type=int, default=None, help="threads for parallel loops (sets -num-cores)")
    p.add_argument("--width", type=int, default=1400, help="png: window width in CSS pixels (default 1400)")
    p.add_argument("--height", type=int, default=1000, help="png: window height in CSS pixels (default 1000)")
    p.add_argument("--target", default="llvm", help="target string, e.g. 'llvm -num-cores=2' (default: llvm)")
    p.add_argument("--opt-level", "-O", type=int, default=3, choices=(0, 1, 2, 3), help="optimization level (default 3)")
    p.add_argument("-p", "--pipeline", default=None, help="graph-level pass pipeline replacing the default one")
    p.add_argument("--tuning-db", default=None, metavar="FILE",
                   help="tuning records: schedules for the compile and measured costs for the estimates")
    p.add_argument("--load-plugin", action="append", default=[], metavar="MODULE",
                   help="load a plugin (module name or .py path) whose dialects and passes -p may use; repeatable")
    p.set_defaults(func=cmd_viz)
