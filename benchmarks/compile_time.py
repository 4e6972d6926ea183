"""Compile time: seconds per node of a long Add chain, and per real model with its split.

    python -m benchmarks.compile_time [--nodes 500,1000,2000,5000,8000] [--models DIR]
                                      [--repeat 3] [--target llvm] [--markdown FILE]

Every measurement runs in a fresh Python process (`--worker`), so that no
process-level cache (compiled models, kernel prices, parsed pipelines) of an
earlier compile helps a later one, and with the persistent compile cache off
(`ZIGGURAT_CACHE=0`, cache.py): this measures compiling, not a cache hit. The
worker first compiles a one-node model (module imports and one-time set-up are
not compile time), then times `ziggurat.compile` of the case and prints its
`info["stats"].seconds` as JSON.

The parent reports the median of `--repeat` runs: for the chains (`add_chain`
of benchmarks/workloads.py, shape 1x64) total seconds and ms per node, for the
models (every `model.onnx` under `--models` with static input shapes) the
total and its split into import, passes, tail, translate and llvm (`tail`: the
schedule and hw passes, translation and LLVM, run in two processes, fork_build.py;
translate and llvm then count only what is left, linking). Totals are wall
seconds; the CPU seconds of the compiling process are printed beside them (they
leave out the forked child's and the codegen workers'; on a shared machine the
wall time also counts the time other processes held the cores). `--nodes ''` or `--models ''` leaves a part out. The tables are
printed as markdown; `--markdown` also writes them to a file. Results:
docs/benchmarks.md, "Compile time".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from ziggurat.benchmarks.fresh_process import run_worker

DEFAULT_MODELS = Path(__file__).resolve().parents[2] / "shared" / "models" / "real"
SPLIT = ("import", "passes", "tail", "translate", "llvm")


def _warm_up(target: str) -> None:
    import ziggurat
    from ziggurat.benchmarks.workloads import add_chain

    ziggurat.compile(add_chain(1)[1], target=target)
    ziggurat.compiler.clear_cache()


def worker(case: str, target: str) -> dict[str, float]:
    """Compiles one case (`chain:N` or `model:PATH`) after a warm-up; returns the stats' seconds."""
    import time

    import ziggurat
    from ziggurat.benchmarks.workloads import add_chain

    _warm_up(target)
    kind, _, arg = case.partition(":")
    model = add_chain(int(arg))[1] if kind == "chain" else arg
    start, cpu = time.perf_counter(), time.process_time()
    compiled = ziggurat.compile(model, target=target)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    seconds = dict(compiled.info["stats"].seconds)
    seconds["total"], seconds["cpu"] = wall, cpu
    return seconds


def run_case(case: str, target: str, repeat: int) -> dict[str, float] | str:
    """The medians over `repeat` fresh processes, or the error text of a failed compile."""
    runs = []
    for _ in range(repeat):
        r = run_worker("ziggurat.benchmarks.compile_time", [case, "--target", target],
                       {**os.environ, "ZIGGURAT_CACHE": "0"})
        if "error" in r:
            return r["error"]
        runs.append(r)
    return {k: statistics.median(r.get(k, 0.0) for r in runs) for k in runs[0]}


def static_models(root: Path) -> list[Path]:
    """The `model.onnx` files under `root` whose graph inputs all have fixed shapes."""
    import onnx

    found = []
    for path in sorted(root.rglob("model.onnx")):
        graph = onnx.load(str(path), load_external_data=False).graph
        weights = {t.name for t in graph.initializer}
        dims = [d for i in graph.input if i.name not in weights for d in i.type.tensor_type.shape.dim]
        if all(d.HasField("dim_value") for d in dims):
            found.append(path)
    return found


def chain_table(rows: list[tuple[int, dict[str, float] | str]]) -> str:
    lines = ["| nodes | compile (s) | ms / node | cpu (s) | passes (s) | llvm (s) |", "|---|---|---|---|---|---|"]
    for n, r in rows:
        if isinstance(r, str):
            lines.append(f"| {n} | error: {r} | | | | |")
            continue
        lines.append(f"| {n} | {r['total']:.2f} | {r['total'] / n * 1e3:.2f} | {r['cpu']:.2f} | {r.get('passes', 0):.2f} "
                     f"| {r.get('llvm', 0):.2f} |")
    return "\n".join(lines)


def model_table(rows: list[tuple[str, dict[str, float] | str]]) -> str:
    lines = ["| model | compile (s) | cpu (s) | " + " | ".join(SPLIT) + " |", "|---|---|---|" + "---|" * len(SPLIT)]
    totals = []
    for name, r in rows:
        if isinstance(r, str):
            lines.append(f"| {name} | error: {r} | |" + " |" * len(SPLIT))
            continue
        totals.append(r["total"])
        lines.append(f"| {name} | {r['total']:.2f} | {r['cpu']:.2f} | "
                     + " | ".join(f"{r.get(k, 0.0):.2f}" for k in SPLIT) + " |")
    if totals:
        lines.append(f"| median / max | {statistics.median(totals):.2f} / {max(totals):.2f} | |" + " |" * len(SPLIT))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", default="500,1000,2000,5000,8000", help="chain lengths, comma-separated")
    p.add_argument("--models", default=str(DEFAULT_MODELS), help="folder searched for model.onnx files")
    p.add_argument("--repeat", type=int, default=3, help="fresh processes per case; the median is reported")
    p.add_argument("--target", default="llvm")
    p.add_argument("--markdown", default="", help="also write the tables to this file")
    p.add_argument("--worker", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.target)))
        return 0

    out = []
    if args.nodes:
        rows = []
        for n in (int(x) for x in args.nodes.split(",")):
            rows.append((n, run_case(f"chain:{n}", args.target, args.repeat)))
            print(f"chain {n}: {rows[-1]}", file=sys.stderr, flush=True)
        out.append(f"Add chain, shape 1x64, target `{args.target}`, median of {args.repeat}:\n\n" + chain_table(rows))
    if args.models:
        root = Path(args.models)
        rows = []
        for path in static_models(root):
            name = str(path.parent.relative_to(root)) if path.parent != root else path.parent.name
            rows.append((name, run_case(f"model:{path}", args.target, args.repeat)))
            print(f"{name}: {rows[-1]}", file=sys.stderr, flush=True)
        out.append(f"Models under `{root}`, target `{args.target}`, median of {args.repeat} "
                   "(seconds):\n\n" + model_table(rows))
    text = "\n\n".join(out)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
