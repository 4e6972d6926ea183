"""Per-kernel profile of a compiled model: where one inference spends its time.

`profile_model` compiles the model twice, as `compile` always does and once
instrumented (`compile(..., profile=True)`: the entry function reads
CLOCK_MONOTONIC around every kernel call and adds the time to that call
site's counters, backends/llvm/translate.py), then runs both builds in
turns on the same inputs (each first in every other round) with
`run_native`, the one native call that runs the whole model. It returns a
`Profile`:

* one `KernelRow` per kernel function: the ONNX nodes fused into its calls,
  calls per inference, median time per inference, share of the kernel total,
  GFLOP/s and GB/s, and the percent of the host's roofline it reaches;
* `kernel_seconds`, the median over the rounds of the sum of all kernel
  calls of one inference, next to `model_seconds`, the median time of the
  uninstrumented build's `run_native` call;
* `chrome_trace()`: the kernel calls of the median round as Chrome
  trace-event JSON (open it in https://ui.perfetto.dev or chrome://tracing).

Kernel names come from the graph ops they were made of (`fused_conv2d_add_relu_3`).
The ONNX nodes of each call are those `convert-graph-to-te` recorded on the
kernel it outlined for the call, its `graph.source_nodes` (the importer's
`loc("<node>")` of the ops it computes, lowering/locations.py), so the profile,
`ziggurat viz` and the compiler's errors name the same nodes (`<node #i>` for a
node without a name). Where later passes changed the calls (they are matched in
order) each call takes its final kernel's nodes. A graph built by hand has no
locations: its calls list the name hints of their ops' results instead, and
`ops` names the graph ops either way. A node of the ONNX model that no call
names, whose output is the first input of a node a call names, is listed before
it (`_place_folded`: a node folded away without its location carried along).

Flops are counted on the final loop nest (`count_work` of the cost oracle: an
FMA counts 2, a `math` op MATH_OP_FLOPS; an int8 GEMM's integer multiply-adds,
its tensorized dot steps, count 2 each too); bytes are the sizes of the kernel's
argument buffers. The roofline time is `max(flops / (peak x threads), bytes /
bandwidth)` with the peaks `machine_peaks` measured once per machine for one
thread (the f32 FMA peak, so an int8 GEMM's roof can pass 100%); `roof_pct` is
that time over the measured one.

```python
prof = profile_model("model.onnx", target="llvm -num-cores=1", rounds=20)
print(prof.format_table(top=10))          # the table `ziggurat profile` prints
json.dump(prof.chrome_trace(), open("trace.json", "w"))
prof.rows[0].kernel, prof.rows[0].seconds, prof.coverage   # 'fused_conv2d_add_relu_3', 8.1e-4, 0.97
```
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ziggurat.errors import InputError
from ziggurat.runtime.executor import CompiledModel, TensorSpec

FIELDS = 4  # i64 counters per call site (backends/llvm/translate.py PROFILE_FIELDS): ns, calls, start, end


@dataclass(frozen=True)
class CallSite:
    """One kernel call of the entry function: its position, callee and origin."""

    index: int
    kernel: str
    nodes: tuple[str, ...] = ()  # the ONNX nodes whose ops the call computes, in graph order
    ops: tuple[str, ...] = ()  # the graph ops of the group (graph.conv2d, ...)


@dataclass(frozen=True)
class KernelRow:
    """One kernel function's figures per inference (its calls together)."""

    kernel: str
    calls: int
    seconds: float  # median over the rounds of its calls' time in one inference
    share: float  # of the kernel total
    flops: float  # per inference
    bytes: float  # per inference: argument buffer sizes
    roof_seconds: float  # the roofline bound of the same work
    sites: tuple[CallSite, ...]

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def gbs(self) -> float:
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def roof_pct(self) -> float:
        return 100.0 * self.roof_seconds / self.seconds if self.seconds > 0 else 0.0

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(n for s in self.sites for n in s.nodes)


@dataclass
class Profile:
    """What `profile_model` measured; `format_table`, `to_json` and `chrome_trace` present it."""

    model: str
    target: str
    threads: int
    rounds: int
    rows: list[KernelRow]
    sites: list[CallSite]
    kernel_seconds: float  # median of the per-round sums of all kernel calls
    model_seconds: float  # median of the uninstrumented run_native call
    instrumented_seconds: float  # median of the instrumented run_native call
    peaks: tuple[float, float]  # GFLOP/s and GB/s of one thread
    trace_ns: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 2), np.int64))  # start, end per site

    @property
    def coverage(self) -> float:
        """Kernel total over the measured model call (1.0: every nanosecond is in a kernel)."""
        return self.kernel_seconds / self.model_seconds if self.model_seconds > 0 else 0.0

    def format_table(self, top: int | None = None) -> str:
        """The per-kernel table, largest first; `top` rows, the rest summed in one line."""
        head = (f"{'#':>3}  {'kernel':<38} {'calls':>5} {'time us':>10} {'share':>6} {'GFLOP/s':>8} {'GB/s':>7} "
                f"{'roof%':>6}  nodes")
        lines = [f"profile of {self.model} for '{self.target}' ({self.threads} thread(s)), median of "
                 f"{self.rounds} rounds, per inference", head]
        shown = self.rows if top is None else self.rows[:top]
        for i, r in enumerate(shown, 1):
            lines.append(f"{i:>3}  {_clip(r.kernel, 38):<38} {r.calls:>5} {r.seconds * 1e6:>10.2f} {r.share:>6.1%} "
                         f"{r.gflops:>8.2f} {r.gbs:>7.2f} {r.roof_pct:>5.0f}%  {_nodes_text(r)}")
        rest = self.rows[len(shown):]
        if rest:
            t = sum(r.seconds for r in rest)
            lines.append(f"{'':>3}  {f'({len(rest)} more kernels)':<38} {sum(r.calls for r in rest):>5} "
                         f"{t * 1e6:>10.2f} {sum(r.share for r in rest):>6.1%}")
        lines.append(f"kernels: {_us(self.kernel_seconds)} us per inference, the median of the sums of its "
                     f"{len(self.sites)} calls of {len(self.rows)} kernels (the rows' medians add up to "
                     f"{_us(sum(r.seconds for r in self.rows))} us)")
        lines.append(f"model call: {_us(self.model_seconds)} us (run_native, uninstrumented; instrumented "
                     f"{_us(self.instrumented_seconds)} us); kernels = {self.coverage:.1%} of the call")
        lines.append(f"roofline: {self.peaks[0]:.1f} GFLOP/s and {self.peaks[1]:.1f} GB/s per thread "
                     "(measured once per machine, cost_oracle.machine_peaks)")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """Everything in the table, as JSON-ready values (seconds)."""
        return {
            "model": self.model, "target": self.target, "threads": self.threads, "rounds": self.rounds,
            "kernel_seconds": self.kernel_seconds, "model_seconds": self.model_seconds,
            "instrumented_seconds": self.instrumented_seconds, "coverage": self.coverage,
            "peaks": {"gflops": self.peaks[0], "bandwidth_gbs": self.peaks[1]},
            "kernels": [{"kernel": r.kernel, "calls": r.calls, "seconds": r.seconds, "share": r.share,
                         "flops": r.flops, "bytes": r.bytes, "gflops": r.gflops, "gbs": r.gbs,
                         "roof_pct": r.roof_pct,
                         "sites": [{"index": s.index, "nodes": list(s.nodes), "ops": list(s.ops)} for s in r.sites]}
                        for r in self.rows],
        }

    def chrome_trace(self) -> dict[str, Any]:
        """The kernel calls of the median round as Chrome trace events: one complete event
        ("ph": "X", microseconds from the first call's start) per call, args naming its nodes."""
        origin = int(self.trace_ns[:, 0].min()) if len(self.trace_ns) else 0
        events: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": f"ziggurat {self.model}"}},
            {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "entry function"}},
        ]
        for s, (start, end) in zip(self.sites, self.trace_ns.tolist()):
            events.append({"name": s.kernel, "cat": "kernel", "ph": "X", "pid": 1, "tid": 1,
                           "ts": (start - origin) / 1e3, "dur": (end - start) / 1e3,
                           "args": {"site": s.index, "nodes": list(s.nodes), "ops": list(s.ops)}})
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"model": self.model, "target": self.target, "threads": self.threads}}


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.2f}" if seconds < 1e-5 else f"{seconds * 1e6:.1f}"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _nodes_text(row: KernelRow, width: int = 60) -> str:
    """The first call's nodes (else its graph ops), and how many more the other calls add."""
    first = row.sites[0]
    names = list(first.nodes) or [f"[{op}]" for op in first.ops]
    text = ", ".join(names)
    if len(text) > width:  # the first name, its tail if long (the start is the model's common path)
        rest = f" and {len(names) - 1} more" if len(names) > 1 else ""
        room = width - len(rest)
        text = (names[0] if len(names[0]) <= room else "..." + names[0][-(room - 3):]) + rest
    more = len(row.nodes) - len(first.nodes)
    return text + (f" (+{more} in {row.calls - 1} more calls)" if more > 0 and row.calls > 1 else "")


# ---------------------------------------------------------------- what the passes leave


class _Recorder:
    """An `after_pass` callback keeping what the profile needs of the compile: the graph ops of
    each kernel (last seen before kernels are outlined), the kernel and its `graph.source_nodes`
    of each call after `convert-graph-to-te`, and the module (the final one once compile returns)."""

    def __init__(self) -> None:
        self.groups: list[list[tuple[str, str | None]]] = []  # per kernel op: (graph op, result name hint)
        self.outlined: list[tuple[str, tuple[str, ...]]] = []  # per graph.call_kernel: callee, its nodes
        self.module: Any = None

    def __call__(self, p: Any, module: Any, seconds: float) -> None:
        from ziggurat.dialects import graph
        from ziggurat.lowering.locations import kernel_nodes

        self.module = module
        main = _entry(module)
        if main is None:
            return
        calls = [op for op in main.body.block.ops if isinstance(op, graph.CallKernelOp)]
        if calls:
            if not self.outlined:
                nodes = {f.sym_name.data: kernel_nodes(f) for f in module.ops if getattr(f, "sym_name", None)}
                self.outlined = [(op.callee.data, nodes.get(op.callee.data, ())) for op in calls]  # type: ignore[attr-defined]
            return
        if self.outlined or any(op.name == "func.call" for op in main.body.block.ops):
            return
        groups = []
        for op in main.body.block.ops:
            if op.dialect_name() != "graph" or isinstance(op, graph.ConstantOp):
                continue
            members = list(op.body.block.ops)[:-1] if isinstance(op, graph.FusedOp) else [op]
            groups.append([(m.name, m.results[0].name_hint if m.results else None) for m in members])
        self.groups = groups


def _entry(module: Any) -> Any:
    from xdsl.dialects import func

    return next((f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == "main"), None)


def _onnx_nodes(model: Any) -> list[Any]:
    """The top-level nodes of an ONNX model (none for an ImportedModel), in graph order."""
    from ziggurat.frontends.onnx import ImportedModel
    from ziggurat.frontends.onnx.loader import load_model

    return [] if isinstance(model, ImportedModel) else list(load_model(model)[0].graph.node)


def _labels(nodes: Sequence[Any]) -> list[str]:
    """The names the importer gives the nodes' locations: the node's name, else `<node #i>`."""
    return [node.name or f"<node #{i}>" for i, node in enumerate(nodes)]


def _call_sites(rec: _Recorder, sites: list[str], nodes: Sequence[Any]) -> list[CallSite]:
    """The timed calls with the source nodes of their kernels (see the module docstring)."""
    from ziggurat.lowering.locations import kernel_nodes

    final = [op.callee.root_reference.data for op in _entry(rec.module).walk()  # type: ignore[union-attr]
             if op.name == "func.call"]
    matched = final == sites and len(rec.outlined) == len(sites)
    if not matched:  # the final kernels' nodes (all the calls of a merged kernel share them)
        by_kernel = {f.sym_name.data: kernel_nodes(f) for f in rec.module.ops if getattr(f, "sym_name", None)}
        return [CallSite(i, kernel, by_kernel.get(kernel, ())) for i, kernel in enumerate(sites)]
    groups = rec.groups if len(rec.groups) == len(sites) else [[] for _ in sites]
    found: list[list[str]] = []
    for (_, names), members in zip(rec.outlined, groups):
        found.append(list(names) if names or nodes else list(dict.fromkeys(h for _, h in members if h)))
    _place_folded(nodes, found)
    return [CallSite(i, kernel, tuple(f), tuple(op for op, _ in members))
            for i, (kernel, members, f) in enumerate(zip(sites, groups, found))]


_NOT_FOLDED = {"Constant", "ConstantOfShape", "Shape", "Size"}


def _place_folded(nodes: Sequence[Any], found: list[list[str]]) -> None:
    """Puts each node that no call names, whose output is the first input of a node that a call names,
    before that node in the call: a node folded into the next one without its location. One step
    only: a chain of unnamed nodes (a transpose, reshape and concat before a conv) is as likely to
    have been computed elsewhere."""
    labels = _labels(nodes)
    where = {name: i for i, f in enumerate(found) for name in f}
    first_reader: dict[str, str] = {}  # a value -> the first named node that takes it as its first input
    for node, label in zip(nodes, labels):
        if node.input and node.input[0] and label in where:
            first_reader.setdefault(node.input[0], label)
    for node, label in zip(nodes, labels):
        if label in where or node.op_type in _NOT_FOLDED or not node.input or len(node.output) != 1:
            continue
        reader = first_reader.get(node.output[0])
        if reader is not None:
            site = found[where[reader]]
            site.insert(site.index(reader), label)


def _work(module: Any, kernel: str) -> tuple[float, float]:
    """Ops of one call of `kernel` (float ops and the integer multiply-adds of tensorized dot
    steps, 2 each) and the bytes of its argument buffers."""
    from xdsl.dialects.builtin import MemRefType

    from ziggurat.errors import ZigguratError
    from ziggurat.transforms.costs.cost_oracle import count_work
    from ziggurat.transforms.loop.plan_memory import memref_nbytes

    fn = next(f for f in module.ops if getattr(f, "sym_name", None) is not None and f.sym_name.data == kernel)
    nbytes = sum(memref_nbytes(t) for t in fn.function_type.inputs.data if isinstance(t, MemRefType))
    try:
        work = count_work(module, kernel)
        flops = work.flops + work.dot_ops  # an int8 GEMM's multiply-adds count as 2 ops, as a float FMA
    except (ZigguratError, KeyError, ValueError, AttributeError):
        flops = 0.0
    return float(flops), float(nbytes)


# ---------------------------------------------------------------- inputs and runs


def random_inputs(specs: Sequence[TensorSpec], seed: int = 0) -> list[np.ndarray]:
    """Inputs of the right shapes and dtypes: floats from N(0, 1), integers 0 or 1 (valid token
    ids, masks and indices alike), booleans at random."""
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        kind = np.dtype(s.dtype).kind
        if kind == "f":
            a = rng.standard_normal(s.shape).astype(s.dtype)
        elif kind == "b":
            a = rng.integers(0, 2, s.shape).astype(bool)
        else:
            a = rng.integers(0, 2, s.shape).astype(s.dtype)
        out.append(np.ascontiguousarray(a))
    return out


def counters(model: CompiledModel) -> np.ndarray:
    """The live (sites, FIELDS) int64 counters of an instrumented model (a view, not a copy)."""
    sites = model.info.get("profile_sites")
    if sites is None:
        raise InputError("the model is not instrumented; compile it with ziggurat.compile(..., profile=True)")
    address = ctypes.CFUNCTYPE(ctypes.c_void_p)(model.info["profile_counters"])()
    buf = (ctypes.c_int64 * (FIELDS * max(1, len(sites)))).from_address(address)
    return np.ctypeslib.as_array(buf).reshape(-1, FIELDS)[: len(sites)]


def profile_model(model: Any, inputs: Any = None, target: str = "llvm", rounds: int = 20, warmup: int = 3,
                  opt_level: int = 3, pipeline: str | None = None, tuning_db: Any = None) -> Profile:
    """Compiles `model` (a path, bytes, ModelProto or ImportedModel) plainly and instrumented,
    runs both `warmup + rounds` times in turns on `inputs` (in input order or by name; None:
    `random_inputs`) and returns the `Profile` of the rounds. A model that does not compile
    raises the compiler's error."""
    import ziggurat
    from ziggurat.target import Target
    from ziggurat.transforms.costs.cost_oracle import machine_peaks

    if rounds < 1 or warmup < 0:
        raise InputError(f"rounds must be at least 1 and warmup at least 0, got {rounds} and {warmup}")
    kw = {"target": target, "opt_level": opt_level, "pipeline": pipeline, "tuning_db": tuning_db}
    rec = _Recorder()
    timed = ziggurat.compile(model, after_pass=rec, profile=True, **kw)
    plain = ziggurat.compile(model, **kw)
    sites = _call_sites(rec, timed.info["profile_sites"], _onnx_nodes(model))
    ins = random_inputs(plain.inputs) if inputs is None else (
        plain.prepare(inputs) if isinstance(inputs, Mapping) else plain.prepare(*inputs))
    outs_plain = [np.empty(s.shape, s.dtype) for s in plain.outputs]
    outs_timed = [np.empty(s.shape, s.dtype) for s in timed.outputs]
    live = counters(timed)
    n = len(sites)
    plain_ns, timed_ns = np.zeros(rounds, np.int64), np.zeros(rounds, np.int64)
    site_ns = np.zeros((rounds, n), np.int64)
    spans = np.zeros((rounds, n, 2), np.int64)
    for r in range(-warmup, rounds):
        for build in ("plain", "timed") if r % 2 == 0 else ("timed", "plain"):  # neither always runs first
            before = live[:, 0].copy()
            t0 = time.perf_counter_ns()
            if build == "plain":
                plain.run_native(ins, outs_plain)
            else:
                timed.run_native(ins, outs_timed)
            t1 = time.perf_counter_ns()
            if r < 0:
                continue
            if build == "plain":
                plain_ns[r] = t1 - t0
            else:
                timed_ns[r], site_ns[r], spans[r] = t1 - t0, live[:, 0] - before, live[:, 2:4]
    per_round = site_ns.sum(axis=1)
    median_round = int(np.argsort(per_round)[(rounds - 1) // 2])
    tgt = Target.parse(target)
    peaks = machine_peaks()
    rows = _rows(rec.module, sites, site_ns, tgt.num_threads, (peaks.gflops, peaks.bandwidth_gbs))
    name = str(model) if isinstance(model, (str, os.PathLike)) else "<model>"
    return Profile(name, str(tgt), tgt.num_threads, rounds, rows, sites,
                   float(np.median(per_round)) / 1e9, float(np.median(plain_ns)) / 1e9,
                   float(np.median(timed_ns)) / 1e9, (peaks.gflops, peaks.bandwidth_gbs), spans[median_round])


def _rows(module: Any, sites: list[CallSite], site_ns: np.ndarray, threads: int,
          peaks: tuple[float, float]) -> list[KernelRow]:
    """One row per kernel function, largest median time first."""
    by_kernel: dict[str, list[CallSite]] = {}
    for s in sites:
        by_kernel.setdefault(s.kernel, []).append(s)
    medians = {k: float(np.median(site_ns[:, [s.index for s in ss]].sum(axis=1))) / 1e9 for k, ss in by_kernel.items()}
    total = sum(medians.values())
    rows = []
    for kernel, ss in by_kernel.items():
        flops, nbytes = _work(module, kernel)
        flops, nbytes = flops * len(ss), nbytes * len(ss)
        roof = max(flops / (peaks[0] * threads * 1e9), nbytes / (peaks[1] * 1e9))
        rows.append(KernelRow(kernel, len(ss), medians[kernel], medians[kernel] / total if total > 0 else 0.0,
                              flops, nbytes, roof, tuple(ss)))
    rows.sort(key=lambda r: -r.seconds)
    return rows
