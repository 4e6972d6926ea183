"""Peak memory of compiling and running a model: ziggurat against onnxruntime.

    python -m benchmarks.memory [--models DIR ...] [--export] [--json out.json] [--markdown FILE]

Each `--models` argument is a model folder (`model.onnx` + `inputs.npz`) or a
folder of such folders; by default the static models of ../shared/models/real
and ../shared/models that MODELS names (an absent one is skipped with a
message). Every measurement runs in a fresh Python process (`--worker`), which
prints its numbers as JSON:

* ziggurat, cold: `import ziggurat; m = ziggurat.compile(path, cache=False)`,
  then one run on `inputs.npz`;
* ziggurat, warm: the same with `cache=True` after one priming compile in
  another process, with the disk cache (cache.py) in a temporary
  `ZIGGURAT_CACHE_DIR`; the worker checks that the compile was a disk hit;
* with `--export`, ziggurat, exported: the model exported as a shared library
  (`CompiledModel.export`, in another process), then `ziggurat.runtime.load`
  and one run: numpy and ctypes alone, no xDSL, llvmlite or onnx;
* onnxruntime: `InferenceSession(path)` (CPU provider, default options) and
  one run.

Peak is `ru_maxrss` of the worker (the high-water mark of its resident set,
imports included). A cold compile of a small model may start a codegen worker
process (backends/llvm/codegen_pool.py), whose own peak (`VmHWM`) is shown in the
cell; a larger one forks a child that lowers half the kernels (fork_build.py), whose
private memory at its end (the pages it copied or allocated, not those it still
shares with the worker: `CompileStats.forked_child_bytes`) is shown. Neither is in
the ratio. The ziggurat workers also report the resident set (`VmRSS` of
/proc/self/status) after the compile and after the run. The
baseline row gives the resident set of a bare interpreter after
`import ziggurat`, after the modules a compile loads (frontend, pipelines,
llvmlite with LLVM initialized) and after `import onnxruntime`: part of every
peak is interpreter and library code, not the model. MB is 2**20 bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
from pathlib import Path

from ziggurat.benchmarks.fresh_process import run_worker

SHARED = Path(__file__).resolve().parents[2] / "shared" / "models"
MODELS = (
    *(SHARED / "real" / n for n in ("distilbert_encoder", "whisper_tiny_encoder", "llama_tiny_lm", "segformer_b0_seg",
                                    "mobilenetv3_large", "efficientnet_b0", "regnet_y_small")),
    *(SHARED / n for n in ("lenet5", "lstm_seq16_h128", "mlp_784_512_256_10", "transformer_encoder_2l_d128",
                           "vgg_small_bn")),
)
TARGET_RATIO = 1.3  # issue 20: ziggurat's peak at most 1.3x onnxruntime's


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _inputs(folder: Path) -> dict:
    import numpy as np

    with np.load(folder / "inputs.npz", allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def worker(kind: str, folder: str) -> dict:
    """One measurement in this (fresh) process: `zig-cold`, `zig-warm`, `zig-load:SO`, `ort`,
    `zig-base` or `ort-base` (the imports alone); `zig-export:SO` writes the library `zig-load` reads."""
    if kind == "zig-base":
        import ziggurat  # noqa: F401

        out = {"ziggurat_import_mb": _rss_mb()}
        import llvmlite.binding as llvm

        import ziggurat.backends.llvm  # noqa: F401
        import ziggurat.compiler  # noqa: F401
        import ziggurat.frontends.onnx  # noqa: F401

        llvm.initialize_native_target()  # as the JIT does (backends/llvm/jit.py)
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
        out["ziggurat_modules_mb"] = _rss_mb()
        return out
    if kind == "ort-base":
        import onnxruntime  # noqa: F401

        return {"ort_import_mb": _rss_mb()}
    path = Path(folder)
    if kind == "ort":
        import onnxruntime as ort

        out = {"import_mb": _rss_mb()}
        sess = ort.InferenceSession(str(path / "model.onnx"), providers=["CPUExecutionProvider"])
        out["compile_mb"] = _rss_mb()
        sess.run(None, _inputs(path))
        out["run_mb"], out["peak_mb"] = _rss_mb(), _peak_mb()
        return out
    if kind.startswith("zig-export:"):  # not measured
        import ziggurat

        ziggurat.compile(str(path / "model.onnx"), cache=True).export(kind.partition(":")[2])
        return {}
    if kind.startswith("zig-load:"):
        import ziggurat.runtime

        out = {"import_mb": _rss_mb()}
        m = ziggurat.runtime.load(kind.partition(":")[2])
        out["compile_mb"] = _rss_mb()
        m(_inputs(path))
        out["run_mb"], out["peak_mb"] = _rss_mb(), _peak_mb()
        return out
    import ziggurat

    out = {"import_mb": _rss_mb()}
    m = ziggurat.compile(str(path / "model.onnx"), cache=kind == "zig-warm")
    out["compile_mb"] = _rss_mb()
    out["cache"] = m.info["stats"].cache
    m(_inputs(path))
    out["run_mb"], out["peak_mb"] = _rss_mb(), _peak_mb()
    workers = _codegen_worker_peaks()
    if workers:
        out["codegen_worker_mb"] = max(workers)
    if m.info["stats"].forked_child_bytes:
        out["forked_mb"] = m.info["stats"].forked_child_bytes / 2**20
    return out


def _codegen_worker_peaks() -> list[float]:
    """Peak resident sets (VmHWM) of the codegen worker processes this one started (codegen_pool.py):
    they generate part of a large model's code, so their memory is part of compiling it."""
    from ziggurat.backends.llvm import codegen_pool

    peaks = []
    for w in list(codegen_pool._idle):
        try:
            with open(f"/proc/{w.proc.pid}/status") as f:
                peaks += [int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:")]
        except OSError:
            pass
    return peaks


def _run_worker(kind: str, folder: str, env: dict[str, str]) -> dict:
    return run_worker("ziggurat.benchmarks.memory", [kind, folder], env)


def baseline() -> dict:
    """The interpreter's resident set after the imports alone (each in its own process)."""
    zig, ort = _run_worker("zig-base", "", dict(os.environ)), _run_worker("ort-base", "", dict(os.environ))
    return {**zig, **ort} if "error" not in zig and "error" not in ort else {"error": zig.get("error") or ort["error"]}


def measure(folder: Path, export: bool = False) -> dict:
    """Cold, warm (and exported) ziggurat numbers and onnxruntime's for one model folder."""
    row: dict = {"model": folder.name}
    with tempfile.TemporaryDirectory(prefix="zig-mem-cache-") as cache_dir:
        env = {**os.environ, "ZIGGURAT_CACHE_DIR": cache_dir}
        row["cold"] = _run_worker("zig-cold", str(folder), env)
        primed = _run_worker("zig-warm", str(folder), env)  # a miss: compiles and stores the entry
        row["warm"] = _run_worker("zig-warm", str(folder), env) if "error" not in primed else primed
        if "error" not in row["warm"] and row["warm"].get("cache") != "disk":
            row["warm"] = {"error": f"no disk cache hit (cache={row['warm'].get('cache')})"}
        if export:
            so = os.path.join(cache_dir, "model.so")
            done = _run_worker(f"zig-export:{so}", str(folder), env)
            row["exported"] = done if "error" in done else _run_worker(f"zig-load:{so}", str(folder), env)
    row["ort"] = _run_worker("ort", str(folder), dict(os.environ))
    return row


def model_folders(args: list[str]) -> list[Path]:
    """Model folders named by `args` (a model folder, or a folder of them); absent ones skipped."""
    found = []
    for arg in args:
        p = Path(arg)
        if (p / "model.onnx").is_file() and (p / "inputs.npz").is_file():
            found.append(p)
        elif p.is_dir():
            found.extend(sorted(d for d in p.iterdir() if (d / "model.onnx").is_file() and (d / "inputs.npz").is_file()))
        else:
            print(f"skipped {p}: no such model folder", file=sys.stderr)
    return found


def _cell(r: dict | None) -> str:
    """`peak (after compile / after run)` in MB, or the error."""
    if r is None:
        return ""
    if "error" in r:
        return f"error: {r['error']}"
    worker = f", codegen worker {r['codegen_worker_mb']:.0f}" if r.get("codegen_worker_mb") else ""
    worker += f", forked child {r['forked_mb']:.0f}" if r.get("forked_mb") else ""
    return f"{r['peak_mb']:.0f} ({r['compile_mb']:.0f} / {r['run_mb']:.0f}{worker})"


def _ratio(a: dict | None, b: dict) -> str:
    if a is None or "error" in a or "error" in b:
        return ""
    x = a["peak_mb"] / b["peak_mb"]
    return f"**{x:.2f}**" if x > TARGET_RATIO else f"{x:.2f}"


def table(rows: list[dict], base: dict) -> str:
    """The markdown table: peaks (and resident sets after compile / run) in MB, and the ratios
    to onnxruntime's peak (bold above TARGET_RATIO)."""
    exported = any("exported" in r for r in rows)
    head = ["model", "ziggurat cold compile", "ziggurat warm cache", *(["ziggurat exported .so"] if exported else []),
            "onnxruntime", "cold / ort", "warm / ort", *(["exported / ort"] if exported else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        e = r.get("exported")
        cells = [r["model"], _cell(r["cold"]), _cell(r["warm"]), *([_cell(e)] if exported else []),
                 _cell(r["ort"]), _ratio(r["cold"], r["ort"]), _ratio(r["warm"], r["ort"]),
                 *([_ratio(e, r["ort"])] if exported else [])]
        lines.append("| " + " | ".join(cells) + " |")
    if base and "error" not in base:
        cells = ["*imports only*", f"{base['ziggurat_import_mb']:.0f} (`import ziggurat`), "
                 f"{base['ziggurat_modules_mb']:.0f} (+ compiler, LLVM)", "", *([""] if exported else []),
                 f"{base['ort_import_mb']:.0f} (`import onnxruntime`)", "", "", *([""] if exported else [])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="*", default=[str(m) for m in MODELS],
                   help="model folders (model.onnx + inputs.npz) or folders of them")
    p.add_argument("--json", default="", help="also write the measurements to this file")
    p.add_argument("--markdown", default="", help="also write the table to this file")
    p.add_argument("--export", action="store_true",
                   help="also measure the model exported as a shared library, run by ziggurat.runtime.load")
    p.add_argument("--worker", nargs=2, metavar=("KIND", "FOLDER"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return 0
    base = baseline()
    print(f"baseline: {base}", file=sys.stderr, flush=True)
    rows = []
    for folder in model_folders(args.models):
        rows.append(measure(folder, export=args.export))
        print(f"{folder.name}: {rows[-1]}", file=sys.stderr, flush=True)
    text = table(rows, base)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"baseline": base, "models": rows}, indent=2) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
