"""Differential and robustness fuzzing of ziggurat, on demand.

    python -m tests.fuzz --minutes N [--seed S] [--kind graphs|mutations|both] [--out DIR]
    python -m tests.fuzz --replay DIR/<finding>      # reruns a saved reproducer

`graphs`: hypothesis draws random valid ONNX graphs (tests/fuzz_graphs.py,
tests/fuzz_ops*.py) and each runs under ziggurat and onnxruntime; a failure is
shrunk by hypothesis. `mutations`: seed models (tests/fuzz_mutations.py, plus
/work/shared/models/**/*.onnx when that folder exists) are mutated at the byte
and protobuf level and fed to `ziggurat.compile`. Every case runs in a worker
process with a timeout (tests/fuzz_worker.py). Each finding is saved under
--out as a folder with the model (model.onnx), the inputs (feeds.npz, graphs)
and meta.json (kind, detail, seed, mutation steps). Findings: crash, hang,
unclean (an exception that is not a ZigguratError), wrong (differs from
onnxruntime), refused (a ZigguratError on a valid generated graph). The exit
status is 1 when there is any. The bounded CI version is tests/unit/test_fuzz.py.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

os.environ.setdefault("ZIGGURAT_CACHE", "0")

KINDS = ("crash", "hang", "unclean", "wrong", "refused")


class TimeUp(BaseException):
    """Ends a hypothesis run when the fuzzing time is spent (a BaseException: hypothesis does not shrink it)."""


class Finding(AssertionError):
    pass


@dataclass
class Stats:
    cases: Counter = field(default_factory=Counter)  # by fuzzer
    findings: Counter = field(default_factory=Counter)  # by kind (distinct, saved)
    repeats: int = 0  # failures with the signature of a finding already saved
    notes: Counter = field(default_factory=Counter)  # invalid generated graphs, clean rejections, ...
    saved: list[str] = field(default_factory=list)
    seen: set = field(default_factory=set)
    started: float = field(default_factory=time.time)

    def total(self) -> int:
        return sum(self.findings.values())

    def line(self) -> str:
        c = self.findings
        return (f"{sum(self.cases.values())} cases ({self.cases['graphs']} graphs, {self.cases['mutations']} mutations) "
                f"in {(time.time() - self.started) / 60:.1f} min: crashes={c['crash']} hangs={c['hang']} "
                f"unclean={c['unclean']} wrong={c['wrong']} refused={c['refused']} (repeats {self.repeats}; "
                + ", ".join(f"{k} {v}" for k, v in sorted(self.notes.items())) + ")")


def signature(kind: str, detail: str, ops) -> tuple:
    """What makes two failures the same finding: the kind, the exception's type and (digits dropped)
    first line for errors, the set of op types for wrong results."""
    if kind in ("wrong",):
        return (kind, tuple(sorted(set(ops))))
    head = re.sub(r"\d+", "#", detail.splitlines()[0] if detail else "")[:120]
    return (kind, head)


def save(out: Path, stats: Stats, kind: str, model: bytes, meta: dict, feeds=None) -> str:
    folder = out / f"{kind}-{len(stats.saved) + 1:03d}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.onnx").write_bytes(model)
    if feeds is not None:
        np.savez(folder / "feeds.npz", **feeds)
    (folder / "meta.json").write_text(json.dumps({"kind": kind, **meta}, indent=1, default=str))
    stats.saved.append(str(folder))
    return str(folder)


def _progress(stats: Stats, every: float = 15.0) -> None:
    now = time.time()
    if now - getattr(stats, "_last", 0) >= every:
        stats._last = now  # type: ignore[attr-defined]
        print(f"[{(now - stats.started) / 60:5.1f} min] {stats.line()}", flush=True)


def run_graphs(worker, stats: Stats, out: Path, seed: int, deadline: float, max_examples: int | None = None,
               derandomize: bool = False, shrink: bool = True) -> None:
    """Hypothesis runs of graph cases until `deadline` (or `max_examples` cases, in one run)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from tests.fuzz_graphs import check_case, graph_cases

    batch = 0
    while time.time() < deadline:
        state: dict = {}

        def test(case) -> None:
            if time.time() > deadline:
                raise TimeUp
            stats.cases["graphs"] += 1
            _progress(stats)
            res = check_case(worker, case)
            if res is None:
                return
            kind, detail = res
            if kind == "invalid":
                stats.notes["invalid graphs"] += 1
                return
            if signature(kind, detail, case.ops) in stats.seen:
                stats.repeats += 1
                return
            state["last"] = (kind, detail, case)
            raise Finding(f"{kind}: {detail}")

        phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]
        run = settings(max_examples=max_examples or 10**6, derandomize=derandomize, database=None, deadline=None,
                       phases=phases, suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                       print_blob=False)(given(graph_cases())(test))
        if not derandomize:
            run = hseed(seed * 1000 + batch)(run)
        batch += 1
        try:
            run()
        except TimeUp:
            return
        except Finding:
            kind, detail, case = state["last"]
            stats.findings[kind] += 1
            stats.seen.add(signature(kind, detail, case.ops))
            where = save(out, stats, kind, case.model.SerializeToString(),
                         {"fuzzer": "graphs", "seed": seed, "batch": batch - 1, "rtol": case.rtol, "atol": case.atol,
                          "ops": case.ops, "detail": detail}, case.feeds)
            print(f"FINDING {kind} (graphs) saved in {where}: {detail.splitlines()[0][:300]}", flush=True)
        if max_examples:
            return


def _nonfinite_weights(data: bytes) -> bool:
    """Whether a float initializer of the model holds NaN or an infinity (a mutation wrote one): the
    result then depends on how each runtime's approximations treat NaN (onnxruntime's LSTM gates
    return finite values for a NaN weight, IEEE arithmetic and ziggurat NaN), so it is not compared."""
    import onnx
    from onnx import numpy_helper

    try:
        model = onnx.load_from_string(data)
        arrays = [numpy_helper.to_array(t) for t in model.graph.initializer]
    except Exception:  # noqa: BLE001 - unreadable: the comparison below decides
        return False
    return any(a.dtype.kind == "f" and not np.isfinite(a).all() for a in arrays)


def check_mutation(worker, data: bytes, seed: int) -> tuple[str, str] | None:
    """(kind, detail) of a finding for mutated model bytes, or ("note:<what>", detail), or None."""
    from tests.fuzz_worker import compare, ort_fusion_deviates

    got = worker.call({"op": "zig", "model": data, "feeds": None, "seed": seed})
    status = got["status"]
    if status in ("crash", "hang"):
        return (status, got["msg"])
    if status == "unclean":
        return ("unclean", f"{got['phase']}: {got['type']}: {got['msg'][:300]}\n{got['tb']}")
    if status != "ok":
        return ("note:rejected cleanly", got.get("msg", "")) if status == "error" else ("note:skipped", "")
    ref = worker.call({"op": "ort", "model": data, "feeds": got["feeds"]})
    if ref["status"] != "ok":
        return ("note:compiled, onnxruntime refuses", ref.get("msg", ""))
    want = ref["outputs"]
    if any(w.dtype.kind == "f" and not np.isfinite(w).all() for w in want):
        return ("note:non-finite reference", "")
    if _nonfinite_weights(data):  # onnxruntime's LSTM/GRU activations clamp NaN away; NaN stays NaN in ziggurat
        return ("note:non-finite weights", "")
    scale = max([float(np.abs(w).max()) for w in want if w.dtype.kind == "f" and w.size] + [1.0])
    why = compare(got["outputs"], want, 1e-3, 1e-4 * scale)
    if why is None and got["names"] != ref["names"]:
        why = f"output names {got['names']} vs {ref['names']}"
    if why and _undefined(data):
        return ("note:results the spec leaves undefined differ", why)
    if why and ort_fusion_deviates(worker, data, got["feeds"], got["outputs"], 1e-3, 1e-4 * scale):
        return ("note:onnxruntime's graph optimizations deviate", why)
    return ("wrong", why) if why else ("note:compiled and matched", "")


FLAGS = {"keepdims", "transA", "transB", "ceil_mode", "count_include_pad", "select_last_index", "exclusive",
         "reverse", "noop_with_empty_axes", "upper", "largest", "sorted", "fmod", "allowzero", "storage_order",
         "training_mode", "input_forget", "linear_before_reset", "layout", "detect_negative", "detect_positive",
         "inverse", "onesided"}


def _undefined(data: bytes) -> bool:
    """Whether the model's results are not the spec's to decide, so a difference is no finding:
    a 0/1 flag attribute with another value (onnxruntime reads keepdims=3 as false (`== 1`),
    ziggurat as true; the spec allows neither: findings F3 and F8 in /work/scratch/fuzz_findings.md,
    the importer should refuse it), or a Cast to an integer type (a float out of its range casts to an
    undefined value: ziggurat saturates, onnxruntime wraps)."""
    import onnx

    m = onnx.ModelProto()
    try:
        m.ParseFromString(data)
    except Exception:  # noqa: BLE001
        return False
    ints = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
            onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64}
    return any(a.name in FLAGS and a.i not in (0, 1) or n.op_type == "Cast" and a.name == "to" and a.i in ints
               for n in m.graph.node for a in n.attribute)


def run_mutations(worker, stats: Stats, out: Path, seed: int, deadline: float, max_cases: int | None = None,
                  shared: bool = False, minimize: bool = True) -> None:
    from tests.fuzz_mutations import draw_steps, mutate, seed_models, shared_models

    seeds = seed_models()
    if shared:
        seeds.update({f"shared:{k}": v for k, v in shared_models().items()})
    names = sorted(seeds)
    r = random.Random(seed)
    case = 0
    while time.time() < deadline and (max_cases is None or case < max_cases):
        case += 1
        base = r.choice(names)
        steps = draw_steps(r)
        data = mutate(seeds[base], steps)
        stats.cases["mutations"] += 1
        _progress(stats)
        res = check_mutation(worker, data, case)
        if res is None:
            continue
        kind, detail = res
        if kind.startswith("note:"):
            stats.notes[kind[5:]] += 1
            continue
        if minimize and len(steps) > 1:  # the shortest sub-list of steps that gives the same kind of finding
            for sub in [[s] for s in steps] + [steps[:i] + steps[i + 1:] for i in range(len(steps))]:
                again = check_mutation(worker, mutate(seeds[base], sub), case)
                if again and again[0] == kind:
                    steps, data, detail = sub, mutate(seeds[base], sub), again[1]
                    break
        sig = signature(kind, detail, ())
        if sig in stats.seen:
            stats.repeats += 1
            continue
        stats.seen.add(sig)
        stats.findings[kind] += 1
        where = save(out, stats, kind, data, {"fuzzer": "mutations", "seed": seed, "case": case, "base": base,
                                              "steps": steps, "input_seed": case, "detail": detail})
        print(f"FINDING {kind} (mutations of {base}, steps {steps}) saved in {where}: "
              f"{detail.splitlines()[0][:300]}", flush=True)


def replay(folder: Path) -> int:
    import onnx

    from tests.fuzz_graphs import reference_deviates
    from tests.fuzz_worker import Worker, compare

    meta = json.loads((folder / "meta.json").read_text())
    data = (folder / "model.onnx").read_bytes()
    worker = Worker()
    try:
        if meta["fuzzer"] == "graphs":
            feeds = dict(np.load(folder / "feeds.npz"))
            ref = worker.call({"op": "ort", "model": data, "feeds": feeds})
            got = worker.call({"op": "zig", "model": data, "feeds": feeds})
            res = None
            if got["status"] != "ok" or ref["status"] != "ok":
                res = (got["status"], got.get("msg", ""), got.get("tb", ""))
            elif (deviates := reference_deviates(onnx.load_from_string(data), ref["outputs"])) is not None:
                res = None
                print(f"onnxruntime is no reference here: {deviates}")
            else:
                res = compare(got["outputs"], ref["outputs"], meta["rtol"], meta["atol"])
        else:
            res = check_mutation(worker, data, meta["input_seed"])
            res = None if res is None or res[0].startswith("note:") else res
    finally:
        worker.close()
    print("reproduced:" if res else "not reproduced", *(res if isinstance(res, tuple) else [res or ""]))
    return 1 if res else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--kind", choices=["graphs", "mutations", "both"], default="both")
    p.add_argument("--out", default=None, help="folder for the reproducers (default: <tmp>/ziggurat-fuzz-<seed>)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds a case may take")
    p.add_argument("--replay", default=None, help="a saved finding's folder to run again")
    args = p.parse_args(argv)
    if args.replay:
        return replay(Path(args.replay))
    from tests.fuzz_worker import Worker

    seed = args.seed if args.seed is not None else random.randrange(2**31)
    out = Path(args.out) if args.out else Path(tempfile.gettempdir()) / f"ziggurat-fuzz-{seed}"
    stats = Stats()
    print(f"fuzzing {args.kind} for {args.minutes} min, seed {seed}, findings into {out}/", flush=True)
    worker = Worker(timeout=args.timeout)
    end = time.time() + args.minutes * 60
    try:
        if args.kind in ("graphs", "both"):
            run_graphs(worker, stats, out, seed, end if args.kind == "graphs" else (time.time() + end) / 2)
        if args.kind in ("mutations", "both"):
            run_mutations(worker, stats, out, seed, end, shared=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    finally:
        worker.close()
    print(f"fuzz summary (seed {seed}): {stats.line()}", flush=True)
    for s in stats.saved:
        print("  finding:", s)
    return 1 if stats.total() or stats.repeats else 0


if __name__ == "__main__":
    sys.exit(main())
