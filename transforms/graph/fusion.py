"""TVM's FuseOps algorithm on the graph dialect's op-pattern traits: the dataflow
graph with its post-dominator tree (`FusionGraph`), the rule-based grouping
(`Fuser`), and the outlining of a group into one `graph.fused` (`outline_group`,
`place_group`, `fuse_block`). The `fuse-ops` pass (fuse_ops.py) runs it; its
cost-guided re-decision (transforms/costs/fusion_costs.py) starts from it.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.traits import IsTerminator

from ziggurat.dialects import graph
from ziggurat.dialects.graph import PatternKind, pattern_kind
from ziggurat.lowering.locations import fused_loc

K = PatternKind


def _edge_kind(consumer: Operation, operand: SSAValue) -> PatternKind:
    """TVM's edge pattern: a broadcast op is elementwise on an operand of its result's shape."""
    kind = pattern_kind(consumer)
    if kind == K.BROADCAST and consumer.results and operand.type == consumer.results[0].type:
        return K.ELEMWISE
    return kind


class _Group:
    """A union-find node: the fused group a graph op belongs to."""

    def __init__(self, kind: PatternKind):
        self.parent: _Group | None = None
        self.kind = kind
        self.size = 1

    def root(self) -> _Group:
        g = self
        while g.parent is not None:
            g = g.parent
        node = self
        while node.parent is not None and node.parent is not g:  # path compression: a long chain
            node.parent, node = g, node.parent  # of merges is climbed once, not once per member
        return g


class FusionGraph:
    """The dataflow graph of one block with its post-dominator tree."""

    def __init__(self, block: Block):
        self.nodes = [op for op in block.ops if op.results and not op.has_trait(IsTerminator)]
        self.index = {op: i for i, op in enumerate(self.nodes)}
        # (consumer index, edge kind) per node; None stands for a use outside the graph.
        self.outs: list[list[tuple[int | None, PatternKind]]] = []
        for op in self.nodes:
            edges: list[tuple[int | None, PatternKind]] = []
            for r in op.results:
                for use in r.uses:
                    j = self.index.get(use.operation)
                    edges.append((j, _edge_kind(use.operation, r) if j is not None else K.OPAQUE))
            self.outs.append(edges)
        self.ipdom: list[int | None] = [None] * len(self.nodes)
        self.depth = [0] * len(self.nodes)
        for i in reversed(range(len(self.nodes))):
            self._post_dominate(i)

    def _post_dominate(self, i: int) -> None:
        consumers = [j for j, _ in self.outs[i]]
        if not consumers or None in consumers:
            return  # an output (or dead): the root post-dominates it
        # Deepest first: each `_lca` then climbs from where the last one stopped, so a value read
        # along a chain of n ops (a constant added at every step) costs O(n), not O(n^2).
        # The common post-dominator of a set does not depend on the order it is taken in.
        consumers.sort(key=lambda j: -self.depth[j])  # type: ignore[index]
        lca: int | None = consumers[0]
        for j in consumers[1:]:
            lca = self._lca(lca, j)
            if lca is None:
                return
        self.ipdom[i] = lca
        self.depth[i] = self.depth[lca] + 1  # type: ignore[index]

    def _lca(self, a: int | None, b: int | None) -> int | None:
        while a != b and a is not None and b is not None:
            if self.depth[a] >= self.depth[b]:
                a = self.ipdom[a]
            else:
                b = self.ipdom[b]
        return a if a == b else None

    def path_kind(self, src: int, sink: int) -> PatternKind:
        """The most complex edge kind on any path from `src` to its post-dominator `sink`."""
        kind, seen, stack = K.ELEMWISE, {src}, [src]
        while stack:
            n = stack.pop()
            for j, k in self.outs[n]:
                kind = max(kind, k)
                if j is not None and j != sink and j not in seen:
                    seen.add(j)
                    stack.append(j)
        return kind

    def path_nodes(self, src: int, sink: int) -> list[int]:
        """Nodes strictly between `src` and `sink` on paths from one to the other."""
        seen, stack = {src}, [src]
        while stack:
            n = stack.pop()
            for j, _ in self.outs[n]:
                if j is not None and j != sink and j not in seen:
                    seen.add(j)
                    stack.append(j)
        seen.discard(src)
        return sorted(seen)


Cond = Callable[[PatternKind, bool], bool]


class Fuser:
    """Runs TVM's phases over one block and returns the groups of node indices."""

    def __init__(self, g: FusionGraph, max_size: int, allow_reduction_fusion: bool):
        self.g = g
        self.max_size = max_size
        self.allow_reduction_fusion = allow_reduction_fusion
        self.groups = [_Group(pattern_kind(op)) for op in g.nodes]

    def check_path(self, src: int, sink: int, cond: Cond) -> bool:
        for n in [*self.g.path_nodes(src, sink), sink]:
            if not cond(self.groups[n].root().kind, n == sink):
                return False
        return True

    def commit(self, src: int, sink: int) -> None:
        target = self.groups[sink].root()
        for n in [src, *self.g.path_nodes(src, sink)]:
            child = self.groups[n].root()
            if child is target:
                continue
            child.parent = target
            target.size += child.size
            target.kind = max(target.kind, child.kind)

    def merged_size(self, src: int, sink: int) -> int:
        roots = {self.groups[n].root() for n in [src, sink, *self.g.path_nodes(src, sink)]}
        return sum(r.size for r in roots)

    def run(self) -> list[list[int]]:
        for phase in (0, 1):
            for i in range(len(self.g.nodes)):
                self._visit(i, phase)
        members: dict[_Group, list[int]] = {}
        for i, grp in enumerate(self.groups):
            members.setdefault(grp.root(), []).append(i)
        return [m for m in members.values() if len(m) > 1]

    def _visit(self, i: int, phase: int) -> None:
        sink = self.g.ipdom[i]
        kind = self.groups[i].kind  # the op's own kind, or its group's if others merged into it
        if sink is None or kind == K.OPAQUE:
            return
        if self.groups[i].root() is self.groups[sink].root():
            return
        if self.merged_size(i, sink) > self.max_size:
            return
        dom = self.g.path_kind(i, sink)
        cond: Cond | None = None
        if kind == K.OUT_ELEMWISE_FUSABLE:
            # conv2d/matmul/pools absorb an elementwise epilogue (phase 0 only).
            if phase == 0 and dom == K.ELEMWISE:
                cond = lambda k, is_sink: k <= K.BROADCAST  # noqa: E731
        elif kind <= K.BROADCAST:
            if dom <= K.INJECTIVE or dom == K.COMM_REDUCE:
                cond = lambda k, is_sink: k <= K.INJECTIVE or (  # noqa: E731
                    is_sink and k in (K.COMM_REDUCE, K.OUT_ELEMWISE_FUSABLE)
                )
        elif kind == K.INJECTIVE:
            # Deferred to phase 1 so that conv2d finishes its own group first;
            # a reduction takes injective producers.
            if phase == 1:
                cond = lambda k, is_sink: k <= K.INJECTIVE or (is_sink and k == K.COMM_REDUCE)  # noqa: E731
        elif kind == K.COMM_REDUCE and self.allow_reduction_fusion:
            if phase == 1:
                cond = lambda k, is_sink: k <= K.INJECTIVE or (is_sink and k == K.COMM_REDUCE)  # noqa: E731
        if cond is not None and self.check_path(i, sink, cond):
            self.commit(i, sink)


def outline_group(ops: list[Operation]) -> graph.FusedOp | None:
    """Moves `ops` (in block order) into one `graph.fused`; None (nothing moved)
    if it would break dominance or the group's value is unused."""
    inside = set(ops)
    last = ops[-1]
    inputs: list[SSAValue] = []
    outputs: list[SSAValue] = []
    for op in ops:
        for v in op.operands:
            if v.owner not in inside and v not in inputs:
                inputs.append(v)
        for r in op.results:
            if any(u.operation not in inside for u in r.uses):
                if op is not last:
                    return None  # a result used outside before the group ends
                outputs.append(r)
    if not outputs:
        return None  # dead ops: left for dce
    block = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, block.args))
    for arg, v in zip(block.args, inputs):
        arg.name_hint = v.name_hint
    for op in ops:
        op.detach()
        block.add_op(op)
        op.operands = [mapping.get(v, v) for v in op.operands]
    block.add_op(graph.YieldOp(outputs))
    fused = graph.FusedOp(inputs, [v.type for v in outputs], Region(block))
    fused.location = fused_loc(op.location for op in ops)  # loc(fused["a", "b"]): its members' source nodes
    for r, v in zip(fused.results, outputs):
        r.name_hint = v.name_hint
        v.replace_uses_with_if(r, lambda u: u.operation.parent_block() is not block)
    return fused


def fuse_block(block: Block, max_size: int, allow_reduction_fusion: bool) -> int:
    """Fuses the graph ops of `block`; returns the number of groups made."""
    g = FusionGraph(block)
    made = 0
    for members in Fuser(g, max_size, allow_reduction_fusion).run():
        if place_group(block, [g.nodes[i] for i in members]) is not None:
            made += 1
    return made


def place_group(block: Block, ops: list[Operation]) -> Operation | None:
    """Outlines `ops` into one `graph.fused` where the last of them stood.

    Returns None (and changes nothing) when a result is not a tensor or the
    group cannot be outlined."""
    if not all(isinstance(r.type, TensorType) for op in ops for r in op.results):
        return None
    anchor = ops[-1].next_op
    fused = outline_group(ops)
    if fused is None:
        return None
    if anchor is None:
        block.add_op(fused)
    else:
        block.insert_op_before(fused, anchor)
    return fused
