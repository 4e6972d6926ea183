"""`ziggurat conformance`: the ONNX backend node tests through ziggurat.

    ziggurat conformance [--filter REGEX] [--json out.json] [--jobs N] [--timeout S]

The test cases are generated from the installed onnx package
(`onnx.backend.test.case.node`) and cached as model.onnx plus
test_data_set_*/{input,output}_*.pb under
`~/.cache/ziggurat/onnx-node-tests/<onnx version>/<case>` (or under
`$ZIGGURAT_CACHE_DIR`). Each case is compiled with `ziggurat.compile` and run
in a worker process of a small pool (started with 'forkserver': libgomp does
not survive fork); a worker that dies or overruns the timeout is killed and
replaced. Every case lands in one category:

* passed: every output matches in shape, dtype and value (rtol 1e-3, atol 1e-4);
* wrong result: it compiled and ran, and some output differs;
* unsupported: a clean refusal (UnsupportedOpError, ShapeError, ModelLoadError);
* crashed: any other exception, a dead worker (segfault) or a timeout.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import sys
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

CATEGORIES = ("passed", "wrong result", "unsupported", "crashed")
RTOL, ATOL = 1e-3, 1e-4
INDEX = "index.json"
"""Case name -> opset, written once the whole suite is cached."""


@dataclass
class CaseResult:
    name: str
    opset: int
    category: str
    detail: str
    seconds: float


# ---------------------------------------------------------------------------
# Generating and caching the cases
# ---------------------------------------------------------------------------


def cache_root() -> Path:
    import onnx

    base = os.environ.get("ZIGGURAT_CACHE_DIR") or Path.home() / ".cache" / "ziggurat"
    return Path(base) / "onnx-node-tests" / onnx.__version__


def _opset(model) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _proto(value, info):
    """A data-set entry as the proto that onnx's own test data uses for `info`'s type."""
    from onnx import TensorProto, numpy_helper

    kind = info.type.WhichOneof("value")
    if isinstance(value, TensorProto):
        return value
    if kind == "sequence_type":
        return numpy_helper.from_list(value, info.name)
    if kind == "optional_type":
        return numpy_helper.from_optional(value, info.name)
    if kind == "map_type":
        return numpy_helper.from_dict(value, info.name)
    return numpy_helper.from_array(value, info.name)


def _write_case(case, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.onnx").write_bytes(case.model.SerializeToString())
    graph = case.model.graph
    for i, (inputs, outputs) in enumerate(case.data_sets):
        data = folder / f"test_data_set_{i}"
        data.mkdir(exist_ok=True)
        for j, value in enumerate(inputs):
            (data / f"input_{j}.pb").write_bytes(_proto(value, graph.input[j]).SerializeToString())
        for j, value in enumerate(outputs):
            (data / f"output_{j}.pb").write_bytes(_proto(value, graph.output[j]).SerializeToString())
    (folder / ".complete").touch()


def ensure_cases(pattern: str | None = None, root: Path | None = None) -> dict[str, int]:
    """Case name -> opset for the cases matching `pattern`, generated into the
    cache first where missing."""
    root = root or cache_root()
    index_file = root / INDEX
    regex = re.compile(pattern) if pattern else None
    if index_file.exists():
        index = json.loads(index_file.read_text())
        wanted = {n: v for n, v in index.items() if regex is None or regex.search(n)}
        if all((root / n / ".complete").exists() for n in wanted):
            return wanted
    import warnings

    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import numpy as np

        with np.errstate(all="ignore"):
            cases = [c for c in node.collect_testcases() if c.kind == "node" and c.model is not None]
    index = {c.name: _opset(c.model) for c in cases}
    wanted = {}
    for case in cases:
        if regex is not None and not regex.search(case.name):
            continue
        if not (root / case.name / ".complete").exists():
            _write_case(case, root / case.name)
        wanted[case.name] = index[case.name]
    if regex is None:
        index_file.write_text(json.dumps(index, indent=0, sort_keys=True))
    return wanted


# ---------------------------------------------------------------------------
# Running one case (inside a worker)
# ---------------------------------------------------------------------------


def _load_value(path: Path, info):
    import onnx
    from onnx import numpy_helper

    kind = info.type.WhichOneof("value")
    if kind == "tensor_type":
        tensor = onnx.TensorProto()
        tensor.ParseFromString(path.read_bytes())
        return numpy_helper.to_array(tensor)
    if kind == "sequence_type":
        sequence = onnx.SequenceProto()
        sequence.ParseFromString(path.read_bytes())
        return numpy_helper.to_list(sequence)
    if kind == "optional_type":
        optional = onnx.OptionalProto()
        optional.ParseFromString(path.read_bytes())
        return numpy_helper.to_optional(optional)  # None when empty
    return None  # maps: never produced by a compiled model


def compare(got, want, rtol: float, atol: float) -> str | None:
    """Why `got` differs from `want`, or None when it matches."""
    import numpy as np

    if want is None:
        return "a non-tensor output is expected"
    if isinstance(want, list) or isinstance(got, list):
        if not (isinstance(want, list) and isinstance(got, list)):
            return "a sequence and a tensor"
        if len(got) != len(want):
            return f"sequence length {len(got)}, expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            why = compare(g, w, rtol, atol)
            if why is not None:
                return f"element {i}: {why}"
        return None
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind == "V" and want.dtype.name.startswith(("bfloat", "float")):  # ml_dtypes' bfloat16, float8
        got, want = got.astype(np.float32), want.astype(np.float32)
    if want.dtype.kind in "fc":
        ok = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        ok = got == want
    if not np.all(ok):
        bad = int(np.size(ok) - np.count_nonzero(ok))
        return f"{bad} of {np.size(ok)} elements differ beyond rtol {rtol}, atol {atol}"
    return None


SHAPE_PARAMETERS = {"Resize": {1, 2, 3}, "Upsample": {1}}
"""Float inputs that ONNX defines as shape parameters (roi, scales, sizes), by op and input index."""


def _shape_parameters(model) -> set[str]:
    """Graph inputs used only as shape parameters of the ops in SHAPE_PARAMETERS."""
    uses: dict[str, list[bool]] = {}
    for node in model.graph.node:
        for index, name in enumerate(node.input):
            uses.setdefault(name, []).append(index in SHAPE_PARAMETERS.get(node.op_type, ()))
    return {name for name, flags in uses.items() if all(flags)}


def freeze_inputs(model, data: Path):
    """`model` with its non-float32 tensor inputs (and float inputs used only as
    roi/scales/sizes) turned into initializers holding the values of data set
    `data` (the specialization a static-shape compiler needs for shape, axis,
    pad and index inputs), and the names frozen."""
    import onnx
    from onnx import numpy_helper

    frozen = onnx.ModelProto()
    frozen.CopyFrom(model)
    keep, names = [], []
    shape_parameters = _shape_parameters(model)
    for j, info in enumerate(model.graph.input):
        t = info.type
        if t.WhichOneof("value") == "tensor_type" and (
            t.tensor_type.elem_type != onnx.TensorProto.FLOAT or info.name in shape_parameters
        ):
            value = _load_value(data / f"input_{j}.pb", info)
            frozen.graph.initializer.append(numpy_helper.from_array(value, info.name))
            names.append(info.name)
            if model.ir_version < 4:  # initializers must be listed as inputs there
                keep.append(info)
        else:
            keep.append(info)
    del frozen.graph.input[:]
    frozen.graph.input.extend(keep)
    return frozen, names


def _compile_any(model):
    """ziggurat.compile, or a SpecializingModel when the model needs input values bound."""
    import ziggurat
    from ziggurat.errors import ShapeError, UnsupportedOpError
    from ziggurat.frontends.onnx.specialize import SpecializingModel

    try:
        return ziggurat.compile(model, target="llvm -num-cores=1")
    except (UnsupportedOpError, ShapeError) as e:
        if not e.needs_values:
            raise
        return SpecializingModel(model, lambda m, b: ziggurat.compile(m, target="llvm -num-cores=1", bind=b),
                                 e.needs_values)


def run_case(folder: Path, rtol: float = RTOL, atol: float = ATOL, freeze: bool = False) -> tuple[str, str]:
    """(category, detail) of one cached case; exceptions other than clean
    refusals propagate (the worker files them as crashed). Shape-parameter
    inputs that the importer needs as constants (axes, pads, sizes) are bound
    to each data set's values and compiled per value, as the ONNX backend does
    (frontends/onnx/specialize.py). With `freeze`, every non-float32 input is
    bound that way (see `freeze_inputs`)."""
    import onnx

    import ziggurat
    from ziggurat.errors import ModelLoadError, ShapeError, UnsupportedOpError
    from ziggurat.frontends.onnx.sequence_io import SequenceModel, has_sequence_io
    from ziggurat.frontends.onnx.specialize import SpecializingModel

    original = onnx.load(str(folder / "model.onnx"))
    compiled, model, frozen = None, original, []
    for data in sorted(folder.glob("test_data_set_*")):
        if compiled is None or freeze:
            model, frozen = freeze_inputs(original, data) if freeze else (original, [])
            if has_sequence_io(model):  # lists in and out, compiled per structure at the call
                compiled = SequenceModel(model, _compile_any)
            else:
                compiled = None
        if compiled is None:
            try:
                compiled = ziggurat.compile(model, target="llvm -num-cores=1")
            except (UnsupportedOpError, ShapeError) as e:
                if not e.needs_values:
                    return "unsupported", f"{type(e).__name__}: {e}"
                compiled = SpecializingModel(
                    model, lambda m, b: ziggurat.compile(m, target="llvm -num-cores=1", bind=b), e.needs_values)
            except ModelLoadError as e:
                return "unsupported", f"{type(e).__name__}: {e}"
        inputs = [(j, i) for j, i in enumerate(original.graph.input) if i.name not in frozen]
        inputs = [(j, i) for j, i in inputs if i.name not in {t.name for t in original.graph.initializer}]
        feeds = [_load_value(data / f"input_{j}.pb", info) for j, info in inputs]
        try:
            got = compiled(*feeds)
        except (UnsupportedOpError, ShapeError, ModelLoadError) as e:  # a specialized variant refused
            return "unsupported", f"{type(e).__name__}: {e}"
        for j, info in enumerate(model.graph.output):
            why = compare(got[j], _load_value(data / f"output_{j}.pb", info), rtol, atol)
            if why is not None:
                return "wrong result", f"{data.name} output '{info.name}': {why}"
    if isinstance(compiled, SpecializingModel):
        return "passed", f"specialized on the values of: {', '.join(compiled.needs)}"
    return "passed", f"frozen inputs: {', '.join(frozen)}" if frozen else ""


def _worker(conn: Connection) -> None:
    """Serves (folder, rtol, atol) requests until it gets None."""
    import warnings

    os.environ.setdefault("ZIGGURAT_NUM_THREADS", "1")
    warnings.simplefilter("ignore")  # shape-mismatch and numpy warnings of the cases
    while True:
        task = conn.recv()
        if task is None:
            return
        folder, rtol, atol, freeze = task
        try:
            category, detail = run_case(Path(folder), rtol, atol, freeze)
        except BaseException as e:  # noqa: BLE001 - every escape is a finding
            tb = traceback.extract_tb(e.__traceback__)
            where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
            category, detail = "crashed", f"{type(e).__name__}: {' '.join(str(e).split())[:400]}{where}"
        conn.send((category, detail))


# ---------------------------------------------------------------------------
# The pool
# ---------------------------------------------------------------------------


class _Slot:
    """One worker process and the case it is running."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.start()

    def start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.case: str | None = None
        self.started = 0.0

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join()
        self.conn.close()


def run_cases(
    cases: dict[str, int], root: Path, jobs: int = 2, timeout: float = 60.0,
    rtol: float = RTOL, atol: float = ATOL, progress=None, freeze: bool = False,
) -> list[CaseResult]:
    """Runs `cases` (name -> opset) on `jobs` workers; `progress(result)` sees each result."""
    ctx = multiprocessing.get_context("forkserver")
    pending = sorted(cases)
    slots = [_Slot(ctx) for _ in range(max(1, min(jobs, len(pending))))]
    results: list[CaseResult] = []

    def finish(slot: _Slot, category: str, detail: str) -> None:
        result = CaseResult(slot.case or "", cases[slot.case or ""], category, detail,
                            round(time.monotonic() - slot.started, 3))
        results.append(result)
        slot.case = None
        if progress is not None:
            progress(result)

    try:
        while pending or any(s.case for s in slots):
            for slot in slots:
                if slot.case is None and pending:
                    slot.case, slot.started = pending.pop(0), time.monotonic()
                    slot.conn.send((str(root / slot.case), rtol, atol, freeze))
            busy = [s for s in slots if s.case]
            ready = wait([s.conn for s in busy], timeout=1.0)
            for slot in busy:
                if slot.conn in ready:
                    try:
                        category, detail = slot.conn.recv()
                    except (EOFError, OSError):
                        slot.proc.join()
                        finish(slot, "crashed", f"the worker died (exit code {slot.proc.exitcode})")
                        slot.kill()
                        slot.start()
                        continue
                    finish(slot, category, detail)
                elif time.monotonic() - slot.started > timeout:
                    finish(slot, "crashed", f"timeout after {timeout:.0f} s")
                    slot.kill()
                    slot.start()
    finally:
        for slot in slots:
            if slot.proc.is_alive():
                try:
                    slot.conn.send(None)
                except OSError:
                    pass
                slot.proc.join(timeout=5)
                if slot.proc.is_alive():
                    slot.kill()
    return sorted(results, key=lambda r: r.name)


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------


def summarize(results: list[CaseResult]) -> dict:
    """Counts per category, overall and for opset <= 26, and the pass rates."""
    def counts(rs: list[CaseResult]) -> dict:
        c = Counter(r.category for r in rs)
        out = {k: c.get(k, 0) for k in CATEGORIES}
        out["total"] = len(rs)
        out["pass_rate"] = round(out["passed"] / len(rs), 4) if rs else 0.0
        return out

    return {"all": counts(results), "opset<=26": counts([r for r in results if r.opset <= 26])}


def format_table(summary: dict) -> str:
    head = f"{'category':<14}" + "".join(f"{k:>12}" for k in summary)
    lines = [head, "-" * len(head)]
    for key in (*CATEGORIES, "total"):
        lines.append(f"{key:<14}" + "".join(f"{s[key]:>12}" for s in summary.values()))
    lines.append(f"{'pass rate':<14}" + "".join(f"{s['pass_rate'] * 100:>11.1f}%" for s in summary.values()))
    return "\n".join(lines)


def cmd_conformance(args) -> int:
    root = cache_root()
    t0 = time.monotonic()
    cases = ensure_cases(args.filter, root)
    if not cases:
        print(f"no ONNX node test matches '{args.filter}'", file=sys.stderr)
        return 1
    print(f"{len(cases)} ONNX node tests from {root} ({time.monotonic() - t0:.1f} s to prepare)", file=sys.stderr)

    counts: dict[str, int] = {}
    tty = sys.stderr.isatty()
    step = max(1, len(cases) // 20)

    def progress(r: CaseResult) -> None:
        counts[r.category] = counts.get(r.category, 0) + 1
        if args.verbose:
            print(f"{r.category:<13} {r.name} {r.detail}", file=sys.stderr)
            return
        done = sum(counts.values())
        if tty or done % step == 0 or done == len(cases):
            line = (f"[{done}/{len(cases)}] " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                    + f"; {time.monotonic() - t0:.0f} s")
            print(("\r" + line) if tty else line, end="\n" if not tty or done == len(cases) else "",
                  file=sys.stderr, flush=True)

    results = run_cases(cases, root, args.jobs, args.timeout, args.rtol, args.atol, progress, args.freeze_int_inputs)
    summary = summarize(results)
    print(format_table(summary))
    print(f"{time.monotonic() - t0:.0f} s", file=sys.stderr)
    if args.json:
        doc = {"summary": summary, "rtol": args.rtol, "atol": args.atol, "freeze_int_inputs": args.freeze_int_inputs,
               "results": [asdict(r) for r in results]}
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("conformance", help="run the ONNX backend node tests and classify each result")
    p.add_argument("--filter", default=None, help="only the tests whose name matches this regex (re.search)")
    p.add_argument("--json", default=None, help="write per-test results and the summary to this file")
    p.add_argument("--jobs", "-j", type=int, default=min(2, os.cpu_count() or 1), help="worker processes")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per test before it counts as crashed")
    p.add_argument("--rtol", type=float, default=RTOL)
    p.add_argument("--atol", type=float, default=ATOL)
    p.add_argument("--freeze-int-inputs", action="store_true",
                   help="compile each data set with its non-float32 inputs (shapes, axes, indices) as constants")
    p.add_argument("--verbose", "-v", action="store_true", help="print each test's result as it comes")
    p.set_defaults(func=cmd_conformance)
