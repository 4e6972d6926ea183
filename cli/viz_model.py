"""What `ziggurat viz` draws: the compiled model's graph, kernels, layouts and costs.

`extract` compiles the model with an `after_pass` callback that keeps a copy of
the graph-level module after each graph pass and stops the compile once
`convert-graph-to-te` has outlined the kernels (nothing below the graph level
is drawn, so LLVM never runs). From the last graph-level module it builds a
`VizGraph`:

* one `Vertex` per graph op (inside `graph.fused` regions too), with the ONNX
  nodes it computes (its location, `loc("<node>")` or a fused location, that
  the importer gives each op and the passes keep; else its result's name hint,
  as runtime/profile.py matches them); ONNX nodes that no op computes (a Conv folded into its
  BatchNormalization, Shape and Constant nodes folded at compile time) are
  listed on the first vertex downstream of them, as `folded`;
* one `Kernel` per top-level graph op that `convert-graph-to-te` makes a kernel
  of (a `graph.fused` group or a single op; constants are none), with its
  estimated time from the cost oracle that cost-guided fusion uses
  (`transforms/costs`: tuning records, learned model, roofline), the
  `graph.fusion_decision` the feedback channel left on it and any
  `graph.layout_decision` inside it;
* the layout of every value that the graph passes changed (`NCHW16c`, a weight
  in `OIHW16i16o`, a matmul weight in column panels), on vertices and edges;
* with `measure=True`, each kernel call's measured time from
  `runtime.profile.profile_model` (the instrumented build of the real executor).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ziggurat.errors import ZigguratError

DEFAULT_LAYOUTS = frozenset({"NCHW", "OIHW", ""})
_LAYOUT_SUFFIX = re.compile(r"\.((?:NCHW|OIHW)\d+[a-z](?:\d+[a-z])?)$")


@dataclass
class Vertex:
    """One drawn box: a graph op (`kind="op"`), a model input or a model output."""

    id: str
    kind: str  # "op" | "input" | "output"
    op: str  # graph op without the dialect prefix, or the input/output name
    type: str  # result type, e.g. 1x2x32x32x16xf32
    nodes: list[tuple[str, str]] = field(default_factory=list)  # (op_type, name) of the ONNX nodes it computes
    folded: list[tuple[str, str]] = field(default_factory=list)  # ONNX nodes folded into it
    kernel: int | None = None  # index into VizGraph.kernels
    layout: str | None = None  # its result's layout where a pass changed it
    notes: list[str] = field(default_factory=list)  # operand layouts: "const OIHW16i16o", "B transposed"
    part_of: tuple[str, str] | None = None  # no node of its own: the node downstream in its kernel it helps compute


@dataclass
class Edge:
    src: str
    dst: str
    layout: str | None = None  # the value's layout where a pass changed it
    type: str = ""


@dataclass
class Kernel:
    """One kernel call of the entry function, in call order."""

    index: int
    name: str  # the kernel function (after convert-graph-to-te; with measure, the final callee)
    vertices: list[str]
    est_us: float | None = None
    est_source: str = ""  # database | model | roofline | annotated
    flops: float = 0.0
    bytes: float = 0.0
    measured_us: float | None = None  # the kernel function's median per inference over its calls
    calls: int = 1  # calls of the same kernel function per inference (dedupe-kernels)
    decision: str | None = None  # graph.fusion_decision
    layout_decision: str | None = None  # graph.layout_decision

    @property
    def fused(self) -> bool:
        return len(self.vertices) > 1


@dataclass
class VizGraph:
    model: str
    target: str
    opt_level: int
    vertices: list[Vertex]
    edges: list[Edge]
    kernels: list[Kernel]
    passes: list[str]  # the graph passes that ran
    unplaced: list[tuple[str, str]] = field(default_factory=list)  # ONNX nodes with no vertex downstream
    notes: list[str] = field(default_factory=list)  # summary lines (rule-based kernel count, profile facts)
    measured: bool = False

    def vertex(self, vid: str) -> Vertex:
        return self._by_id()[vid]

    def _by_id(self) -> dict[str, Vertex]:
        return {v.id: v for v in self.vertices}


class _Stop(Exception):
    """Raised from the callback once the kernels are outlined: the rest of the compile is not needed."""


class _Capture:
    """`after_pass` callback: a copy of the graph-level module after every graph pass, the one
    before `fuse-ops`, and the kernel names once `convert-graph-to-te` outlines them."""

    def __init__(self) -> None:
        self.graph: Any = None
        self.before_fuse: Any = None
        self.passes: list[str] = []
        self.kernel_names: list[str] = []
        self.fuse_pass: Any = None

    def __call__(self, p: Any, module: Any, seconds: float) -> None:
        from ziggurat.dialects import graph

        main = entry(module)
        calls = [op for op in main.body.block.ops if isinstance(op, graph.CallKernelOp)] if main else []
        if calls:
            self.kernel_names = [op.callee.data for op in calls]
            raise _Stop
        if p.name == "fuse-ops":
            self.before_fuse, self.fuse_pass = self.graph, p
        self.passes.append(p.name)
        self.graph = module.clone()


def entry(module: Any) -> Any:
    from xdsl.dialects import func

    return next((f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == "main"), None)


def _type_text(t: Any) -> str:
    shape = getattr(t, "get_shape", None)
    if shape is None:
        return str(t)
    return "x".join(str(d) for d in shape()) + "x" + str(t.element_type) if shape() else str(t.element_type)


def _onnx_nodes(model: Any) -> list[Any]:
    from ziggurat.frontends.onnx import ImportedModel
    from ziggurat.frontends.onnx.loader import load_model

    return [] if isinstance(model, ImportedModel) else list(load_model(model)[0].graph.node)


def node_label(node: Any) -> tuple[str, str]:
    return node.op_type, node.name or (node.output[0] if node.output else "?")


# ---------------------------------------------------------------- layouts


def value_layouts(main: Any) -> dict[Any, str]:
    """The layout of every value the graph passes moved out of the plain one (NCHW, OIHW):
    layout transforms, blocked ops and what they feed, weights repacked at compile time."""
    from ziggurat.dialects import graph

    lay: dict[Any, str] = {}

    def visit(block: Any) -> None:
        for op in block.ops:
            if isinstance(op, graph.FusedOp):
                for arg, outer in zip(op.body.block.args, op.operands):
                    if outer in lay:
                        lay[arg] = lay[outer]
                visit(op.body.block)
                yielded = list(op.body.block.ops)[-1].operands
                for res, inner in zip(op.results, yielded):
                    if inner in lay:
                        lay[res] = lay[inner]
                continue
            if not op.results:
                continue
            res = op.results[0]
            if isinstance(op, graph.LayoutTransformOp):
                lay[res] = op.dst.data
            elif isinstance(op, graph.ConstantOp):
                m = _LAYOUT_SUFFIX.search(op.ref.data)
                if m:
                    lay[res] = m[1]
            elif op.name.endswith("_nchwc"):
                lay[res] = f"NCHW{res.type.get_shape()[-1]}c"
            elif isinstance(op, graph.MatmulPanelsOp):
                w = op.rhs.type.get_shape()
                lay.setdefault(op.rhs, f"panels {'x'.join(map(str, w))}")
            else:  # elementwise and friends keep a blocked operand's layout
                inherited = next((lay[v] for v in op.operands if v in lay and v.type == res.type), None)
                if inherited is not None:
                    lay[res] = inherited
    visit(main.body.block)
    return {v: k for v, k in lay.items() if k not in DEFAULT_LAYOUTS}


# ---------------------------------------------------------------- the graph


def _build(module: Any, nodes: list[Any]) -> tuple[list[Vertex], list[Edge], list[tuple[Any, list[str]]], list]:
    """Vertices, edges, (kernel op, its vertex ids) in call order, and the unplaced ONNX nodes."""
    from xdsl.dialects import func
    from xdsl.ir import BlockArgument

    from ziggurat.dialects import graph
    from ziggurat.frontends.onnx.context import name_hint

    main = entry(module)
    if main is None:
        raise ZigguratError("ziggurat viz: the compiled module has no @main function")
    from ziggurat.lowering.locations import loc_names

    by_name = {name: i for i, node in enumerate(nodes) for name in (node.name or None, f"<node #{i}>") if name}
    by_hint: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for out in node.output:
            hint = name_hint(out) if out else None
            if hint is not None:
                by_hint.setdefault(hint, i)
    layouts = value_layouts(main)
    vertices: list[Vertex] = []
    edges: list[Edge] = []
    made: dict[Any, str] = {}  # SSA value -> the vertex that computes it
    outer: dict[Any, Any] = {}  # block argument of a fused region -> the operand it stands for
    node_vertices: dict[int, list[str]] = {}
    kernels: list[tuple[Any, list[str]]] = []
    input_names = [a.data for a in main.attributes["graph.input_names"].data] \
        if "graph.input_names" in main.attributes else []
    for i, arg in enumerate(main.body.block.args):
        vid = f"in{i}"
        vertices.append(Vertex(vid, "input", input_names[i] if i < len(input_names) else f"input {i}",
                               _type_text(arg.type)))
        made[arg] = vid

    def resolve(v: Any) -> Any:
        while isinstance(v, BlockArgument) and v in outer:
            v = outer[v]
        return v

    counter = iter(range(1 << 62))

    def add_vertex(op: Any, kernel: int | None) -> str:
        vid = f"n{next(counter)}"
        res = op.results[0] if op.results else None
        vx = Vertex(vid, "op", op.name.split(".", 1)[1], _type_text(res.type) if res is not None else "",
                    kernel=kernel, layout=layouts.get(res))
        hint = res.name_hint if res is not None else None
        located = [by_name[n] for n in loc_names(op.location) if n in by_name]  # the importer's loc("<node>")
        for k in dict.fromkeys(located or ([by_hint[hint]] if hint in by_hint else [])):
            vx.nodes.append(node_label(nodes[k]))
            node_vertices.setdefault(k, []).append(vid)
        if isinstance(op, graph.MatmulOp) and op.transpose_b is not None and op.transpose_b.value.data:
            vx.notes.append("B transposed")
        for v in op.operands:
            src = resolve(v)
            if isinstance(src.owner, graph.ConstantOp):
                if src in layouts or v in layouts:
                    vx.notes.append(f"const {layouts.get(src) or layouts[v]}")
                continue
            if src in made:
                edges.append(Edge(made[src], vid, layouts.get(src) or layouts.get(v), _type_text(src.type)))
        vertices.append(vx)
        for r in op.results:
            made[r] = vid
        return vid

    for op in main.body.block.ops:
        if isinstance(op, func.ReturnOp):
            names = [a.data for a in main.attributes["graph.output_names"].data] \
                if "graph.output_names" in main.attributes else []
            for i, v in enumerate(op.operands):
                vid = f"out{i}"
                vertices.append(Vertex(vid, "output", names[i] if i < len(names) else f"output {i}", _type_text(v.type)))
                if v in made:
                    edges.append(Edge(made[v], vid, layouts.get(v), _type_text(v.type)))
            continue
        if op.dialect_name() != "graph" or isinstance(op, graph.ConstantOp):
            continue
        k = len(kernels)
        if isinstance(op, graph.FusedOp):
            block = op.body.block
            for arg, o in zip(block.args, op.operands):
                outer[arg] = o
            members = [add_vertex(inner, k) for inner in block.ops if not isinstance(inner, graph.YieldOp)]
            yielded = list(block.ops)[-1].operands
            for res, inner in zip(op.results, yielded):
                src = resolve(inner)
                if src in made:
                    made[res] = made[src]
            kernels.append((op, members))
        else:
            kernels.append((op, [add_vertex(op, k)]))
    unplaced = _place_unmapped(nodes, node_vertices, vertices)
    _part_of(vertices, edges)
    return vertices, edges, kernels, unplaced


def _part_of(vertices: list[Vertex], edges: list[Edge]) -> None:
    """Names, for each op without an ONNX node of its own (a LayerNormalization's reductions, a Gemm's
    matmul), the first node downstream of it inside its kernel."""
    by_id = {v.id: v for v in vertices}
    succ: dict[str, list[str]] = {}
    for e in edges:
        succ.setdefault(e.src, []).append(e.dst)
    for v in vertices:
        if v.kind != "op" or v.nodes or v.kernel is None:
            continue
        queue, seen = deque(succ.get(v.id, [])), set()
        while queue:
            w = by_id[queue.popleft()]
            if w.id in seen or w.kernel != v.kernel:
                continue
            seen.add(w.id)
            if w.nodes:
                v.part_of = w.nodes[0]
                break
            queue.extend(succ.get(w.id, []))


def _place_unmapped(nodes: list[Any], node_vertices: dict[int, list[str]], vertices: list[Vertex]) -> list:
    """Lists each ONNX node no op computes on the first vertex of the nearest node downstream that
    one does (breadth first over the ONNX graph); returns those with none downstream."""
    by_id = {v.id: v for v in vertices}
    readers: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        for name in node.input:
            if name:
                readers.setdefault(name, []).append(i)
    unplaced = []
    for i, node in enumerate(nodes):
        if i in node_vertices:
            continue
        seen, queue, target = {i}, deque([i]), None
        while queue and target is None:
            j = queue.popleft()
            for out in nodes[j].output:
                for r in readers.get(out, []):
                    if r in node_vertices:
                        target = node_vertices[r][0]
                        break
                    if r not in seen:
                        seen.add(r)
                        queue.append(r)
                if target is not None:
                    break
        if target is None:
            unplaced.append(node_label(node))
        else:
            by_id[target].folded.append(node_label(node))
    return unplaced


# ---------------------------------------------------------------- costs


def _estimate(op: Any, oracle: Any, width: int) -> tuple[float | None, str, float, float]:
    """The oracle's price of the kernel `op` becomes: microseconds, source, flops, bytes."""
    from ziggurat.dialects import graph
    from ziggurat.transforms.costs.kernels import COST_ATTR, kernel_of_ops, lower_kernel

    attr = op.attributes.get(COST_ATTR)
    if isinstance(attr, graph.CostAttr):  # annotate-costs already priced it
        return attr.time_us.data, "annotated", float(attr.flops.data), float(attr.bytes.data)
    ops = [o for o in op.body.block.ops if not isinstance(o, graph.YieldOp)] if isinstance(op, graph.FusedOp) else [op]
    try:
        module, key = lower_kernel(kernel_of_ops(ops), width, keyed=oracle.database is not None)
        est = oracle.cost(module, "kernel", key)
    except Exception:  # noqa: BLE001 - a kernel the cost queries cannot lower is drawn without an estimate
        return None, "", 0.0, 0.0
    return est.time * 1e6, est.source, float(est.flops), float(est.bytes)


def _decisions(op: Any) -> tuple[str | None, str | None]:
    from xdsl.dialects.builtin import StringAttr

    from ziggurat.transforms.graph.annotate_costs import DECISION_ATTR
    from ziggurat.transforms.graph.layout_rewrite import DECISION_ATTR as LAYOUT_ATTR

    fusion = op.attributes.get(DECISION_ATTR)
    layout = next((o.attributes[LAYOUT_ATTR] for o in op.walk() if LAYOUT_ATTR in o.attributes), None)
    return (fusion.data if isinstance(fusion, StringAttr) else None,
            layout.data if isinstance(layout, StringAttr) else None)


def _rule_based_kernels(cap: _Capture) -> int | None:
    """How many kernels the rule-based fuse-ops makes of the module before fuse-ops (None: no fuse-ops)."""
    from ziggurat.dialects import graph
    from ziggurat.registry import make_context
    from ziggurat.transforms.graph.fuse_ops import FuseOpsPass

    if cap.before_fuse is None or cap.fuse_pass is None:
        return None
    module = cap.before_fuse.clone()
    FuseOpsPass(max_group_size=cap.fuse_pass.max_group_size,
                allow_reduction_fusion=cap.fuse_pass.allow_reduction_fusion).apply(make_context(), module)
    return sum(1 for o in entry(module).body.block.ops
               if o.dialect_name() == "graph" and not isinstance(o, graph.ConstantOp))


def _attach_profile(viz: VizGraph, prof: Any) -> None:
    """Measured times from `runtime.profile`: its call sites are the entry function's kernel calls in
    the order of the graph-level kernels, each naming its graph ops; matched one to one."""
    sites = prof.sites
    mine = [[viz.vertex(v).op for v in k.vertices] for k in viz.kernels]
    theirs = [[op.split(".", 1)[1] for op in s.ops] for s in sites]
    if len(sites) != len(viz.kernels) or (all(theirs) and theirs != mine):
        viz.notes.append(f"measured: the profile's {len(sites)} kernel calls do not match the {len(viz.kernels)} "
                         "graph-level kernels one to one; no measured times drawn")
        return
    rows = {r.kernel: r for r in prof.rows}
    for k, site in zip(viz.kernels, sites):
        row = rows[site.kernel]
        k.name, k.calls, k.measured_us = site.kernel, row.calls, row.seconds / row.calls * 1e6
    viz.measured = True
    viz.notes.append(f"measured: {prof.kernel_seconds * 1e6:.1f} us in kernels per inference, model call "
                     f"{prof.model_seconds * 1e6:.1f} us (median of {prof.rounds} rounds, {prof.threads} thread(s), "
                     "runtime/profile.py)")


def extract(model: Any, target: str = "llvm", opt_level: int = 3, pipeline: str | None = None,
            tuning_db: str | None = None, measure: bool = False, rounds: int = 20, warmup: int = 3,
            estimate: bool = True) -> VizGraph:
    """Compiles `model` (a path, bytes, ModelProto or ImportedModel) to its kernels and returns the
    `VizGraph` of the last graph-level module, priced (`estimate`) and, with `measure`, profiled."""
    import ziggurat
    from ziggurat.target import Target
    from ziggurat.transforms.costs.cost_oracle import oracle_from_options

    tgt = Target.parse(target)
    cap = _Capture()
    try:
        ziggurat.compile(model, target=str(tgt), opt_level=opt_level, pipeline=pipeline, after_pass=cap,
                         tuning_db=tuning_db)
    except _Stop:
        pass
    if cap.graph is None:
        raise ZigguratError("ziggurat viz: the pipeline ran no graph-level pass; nothing to draw")
    vertices, edges, kops, unplaced = _build(cap.graph, _onnx_nodes(model))
    names = cap.kernel_names if len(cap.kernel_names) == len(kops) else [f"kernel_{i}" for i in range(len(kops))]
    oracle = oracle_from_options(0, 0, str(tuning_db or "")) if estimate else None
    kernels = []
    for i, ((op, vids), name) in enumerate(zip(kops, names)):
        k = Kernel(i, name, vids)
        k.decision, k.layout_decision = _decisions(op)
        if oracle is not None:
            k.est_us, k.est_source, k.flops, k.bytes = _estimate(op, oracle, tgt.vector_width)
        kernels.append(k)
    label = str(model) if isinstance(model, str) else getattr(model, "name", None) or "<model>"
    viz = VizGraph(label, str(tgt), opt_level, vertices, edges, kernels, cap.passes, unplaced)
    rules = _rule_based_kernels(cap)
    if rules is not None:
        changed = sum(k.decision is not None for k in kernels)
        viz.notes.append(f"fusion: the op-pattern rules make {rules} kernels, the pipeline's fuse-ops "
                         f"{len(kernels)}; the cost model changed {changed} of them (graph.fusion_decision)")
    if measure:
        from ziggurat.runtime.profile import profile_model

        _attach_profile(viz, profile_model(model, target=str(tgt), rounds=rounds, warmup=warmup,
                                           opt_level=opt_level, pipeline=pipeline, tuning_db=tuning_db))
    return viz
