"""Cost-guided regrouping for `fuse-ops{cost-guided=true}`: the feedback channel.

`fuse_block_cost_guided` starts from the rule-based groups of one block
(`transforms/graph/fusion.py`) and re-decides them with a price function (the
cost oracle's seconds for one kernel of the given ops, `transforms/costs/cost_oracle.py`).
Every alternative is priced as the loop-level kernel it would become, so the
decisions see what the default schedule makes of a group: a fused epilogue
left scalar, a reduction chain that reads its input once, a recomputed
producer. Each change must lower the summed estimate by `_GAIN`; the changed
kernel (or op) records `graph.fusion_decision = "merged: 4 groups -> 1, cost
19.40us -> 9.86us"` (the rule-based alternative's cost, then the chosen one's).
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod

from xdsl.dialects import builtin
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, Operation

from ziggurat.dialects import graph
from ziggurat.dialects.graph import PatternKind, pattern_kind
from ziggurat.transforms.costs.prices import Prices
from ziggurat.transforms.graph.fusion import FusionGraph, Fuser, place_group
from ziggurat.transforms.graph.pack_weight_panels import replace_weight

K = PatternKind
_GAIN = 0.98  # a change must save at least 2% of the estimated time
# Merges beyond the rules stay within elementwise/broadcast ops and reductions: the roofline
# prices traffic, not how the default schedule copes with a matmul or a layout change inside
# a bigger kernel (such merges ran ~5x slower on transformer_encoder_2l_d128).
_MERGEABLE = (K.ELEMWISE, K.BROADCAST, K.COMM_REDUCE)


def _numel(op: Operation) -> int:
    t = op.results[0].type
    return prod(t.get_shape()) if isinstance(t, TensorType) else 0


class _CostGuided:
    """Re-decides the rule-based groups of one block with the cost oracle.

    A unit is a list of node indices in block order that would become one
    kernel. Merging takes a unit that holds a reduction together with every
    unit that consumes its value (the rules never give a reduction its
    consumers), when all their ops are elementwise, broadcast or reductions;
    splitting cuts a unit into a producer part (an op and its ancestors in the
    unit) and the rest, where a consumer of that op has more elements than it
    (the fused kernel would recompute the op) or two ops of the unit read it
    (the fused kernel materializes it and runs its consumers as a separate,
    possibly scalar, nest). Each change must lower the
    summed estimate; rounds (merge to a fixed point, then split) repeat until
    nothing changes or `max_rounds` is reached.
    """

    def __init__(self, g: FusionGraph, units: list[list[int]], price: Callable[[list[Operation]], float],
                 max_size: int):
        self.g, self.price, self.max_size = g, price, max_size
        self.units = units
        self.costs: dict[tuple[int, ...], float] = {}
        self.decisions: dict[tuple[int, ...], str] = {}
        self.origin: dict[tuple[int, ...], tuple[int, float]] = {}

    def cost(self, unit: list[int]) -> float:
        key = tuple(unit)
        if key not in self.costs:
            self.costs[key] = self.price([self.g.nodes[i] for i in unit])
        return self.costs[key]

    def valid(self, unit: list[int]) -> bool:
        from ziggurat.transforms.costs.kernels import is_kernel_op

        ops = [self.g.nodes[i] for i in unit]
        if len(unit) > self.max_size or not all(is_kernel_op(o) and not isinstance(o, graph.FusedOp) for o in ops):
            return False
        if not all(isinstance(o.results[0].type, TensorType) for o in ops):
            return False
        if sum(pattern_kind(o) == K.OUT_ELEMWISE_FUSABLE for o in ops) > 1:
            return False  # never two anchors (conv2d, matmul) in one kernel
        members = set(unit)
        for i in unit[:-1]:
            if any(j not in members for j, _ in self.g.outs[i]):
                return False  # only the last op's value may leave the unit
        return True

    def _owner(self, i: int) -> int:
        return next(k for k, u in enumerate(self.units) if i in u)

    def _record(self, unit: list[int], what: str, before: float, after: float) -> None:
        self.decisions[tuple(unit)] = f"{what}, cost {before * 1e6:.2f}us -> {after * 1e6:.2f}us"

    def merge_once(self) -> bool:
        for k, unit in enumerate(self.units):
            found = self._merge(k, unit)
            if found is None:
                continue
            owners, parts, merged = found
            before = sum(self.cost(p) for p in parts)
            after = self.cost(merged)
            if after < _GAIN * before:
                self.units = [u for n, u in enumerate(self.units) if n != k and n not in owners] + [merged]
                # Report against the groups before any merge: a chain of merges reads as one decision.
                origin = [self.origin.pop(tuple(p), (1, self.cost(p))) for p in parts]
                self.origin[tuple(merged)] = (sum(n for n, _ in origin), sum(c for _, c in origin))
                n, first = self.origin[tuple(merged)]
                self._record(merged, f"merged: {n} groups -> 1", first, after)
                return True
        return False

    def _splits(self, unit: list[int]) -> list[tuple[list[int], list[int]]]:
        """The (head, tail) cuts of `unit` that split_once prices."""
        if len(unit) < 2 or not self.valid(unit):
            return []
        cuts = []
        for p in unit[:-1]:
            if not (self._expands(p, unit) or self._shared(p, unit)):
                continue  # p is neither recomputed nor materialized inside the fused kernel
            head = self._ancestors(p, set(unit))
            tail = [i for i in unit if i not in head]
            a = sorted(head)
            if tail and self.valid(a) and self.valid(tail):
                cuts.append((a, tail))
        return cuts

    def _merge(self, k: int, unit: list[int]) -> tuple[list[int], list[list[int]], list[int]] | None:
        """(owners, parts, merged) of the merge merge_once prices for unit `k`, if any."""
        if not self.valid(unit) or not any(pattern_kind(self.g.nodes[i]) == K.COMM_REDUCE for i in unit):
            return None  # the rules already merge everything else they can: only a reduction's consumers are new
        outs = self.g.outs[unit[-1]]
        if any(j is None for j, _ in outs) or not outs:
            return None
        owners = sorted({self._owner(j) for j, _ in outs if j is not None} - {k})
        if not owners:
            return None
        parts = [unit, *(self.units[o] for o in owners)]
        merged = sorted(i for p in parts for i in p)
        if not self.valid(merged) or not all(pattern_kind(self.g.nodes[i]) in _MERGEABLE for i in merged):
            return None
        return owners, parts, merged

    def prefetch(self, step: Callable[[], bool]) -> None:
        """Prices, in one batch (two processes: `Prices.prefetch`), every group that one round of
        `step` (merge_once or split_once) would price first."""
        wanted: list[list[int]] = []
        for k, unit in enumerate(self.units):
            if step == self.merge_once:
                found = self._merge(k, unit)
                wanted += [*found[1], found[2]] if found else []
            else:
                cuts = self._splits(unit)
                wanted += [unit, *(u for cut in cuts for u in cut)] if cuts else []
        fetch = getattr(self.price, "prefetch", None)
        if fetch is not None:
            fetch([[self.g.nodes[i] for i in u] for u in wanted if tuple(u) not in self.costs])

    def split_once(self) -> bool:
        for k, unit in enumerate(self.units):
            best: tuple[float, list[int], list[int]] | None = None
            cuts = self._splits(unit)
            for a, tail in cuts:
                after = self.cost(a) + self.cost(tail)
                if best is None or after < best[0]:
                    best = (after, a, tail)
            if best is not None and best[0] < _GAIN * self.cost(unit):
                before = self.cost(unit)
                self.units = [u for n, u in enumerate(self.units) if n != k] + [best[1], best[2]]
                for part in best[1:]:
                    self._record(part, "split: 1 group -> 2", before, best[0])
                return True
        return False

    def _expands(self, p: int, unit: list[int]) -> bool:
        """Whether a consumer of p in `unit` has more elements than p (a broadcast or a
        window reads p's elements repeatedly, so a fused kernel recomputes them)."""
        size = _numel(self.g.nodes[p])
        return any(j is not None and j in unit and _numel(self.g.nodes[j]) > size
                   and not isinstance(self.g.nodes[j], graph.ConcatOp)  # reads each input element once
                   for j, _ in self.g.outs[p])

    def _shared(self, p: int, unit: list[int]) -> bool:
        """Whether p's value feeds two or more ops of `unit`: the te inliner then keeps it as
        a nest of its own inside the fused kernel (an intermediate buffer, and an epilogue that
        the default schedule may leave scalar), so a kernel boundary after p can be cheaper."""
        return len({j for j, _ in self.g.outs[p] if j is not None and j in unit}) >= 2

    def _ancestors(self, p: int, members: set[int]) -> set[int]:
        found, stack = {p}, [p]
        while stack:
            for v in self.g.nodes[stack.pop()].operands:
                i = self.g.index.get(v.owner)  # type: ignore[arg-type]
                if i is not None and i in members and i not in found:
                    found.add(i)
                    stack.append(i)
        return found

    def run(self, max_rounds: int) -> list[list[int]]:
        for _ in range(max_rounds):
            changed = False
            for step in (self.merge_once, self.split_once):
                self.prefetch(step)
                for _ in range(len(self.g.nodes)):
                    if not step():
                        break
                    changed = True
            if not changed:
                break
        return sorted(self.units, key=lambda u: u[-1])


# Ops of a group that may be duplicated into each group that reads it, and of those groups
# (no reductions: a reduction chain is better merged whole, see `_CostGuided`; no anchors).
_DUPLICABLE = (K.ELEMWISE, K.BROADCAST, K.INJECTIVE)


def _rule_units(block: Block, max_size: int, allow_reduction_fusion: bool) -> tuple[FusionGraph, list[list[int]]]:
    g = FusionGraph(block)
    rule = Fuser(g, max_size, allow_reduction_fusion).run()
    grouped = {i for m in rule for i in m}
    return g, [sorted(m) for m in rule] + [[i] for i in range(len(g.nodes)) if i not in grouped]


def _duplications(g: FusionGraph, units: list[list[int]], price: Callable[[list[Operation]], float],
                  max_size: int) -> list[tuple[list[int], list[list[int]], float, float]]:
    """Units of injective ops whose value several units read, and which are cheaper
    recomputed inside each of them than materialized once (a layout change whose own
    kernel gathers through divisions, while each consumer reads only its slice): per
    unit, its consumer units and both costs; no unit appears in two of them."""
    candidates = list(_duplication_candidates(g, units, max_size))
    fetch = getattr(price, "prefetch", None)
    if fetch is not None:  # every group the loop below may price, in one batch
        fetch([[g.nodes[i] for i in u] for unit, consumers in candidates
               for u in [unit, *consumers, *(sorted(unit + c) for c in consumers)]])
    found: list[tuple[list[int], list[list[int]], float, float]] = []
    taken: set[int] = set()
    for unit, consumers in candidates:
        if unit[0] in taken or any(c[0] in taken for c in consumers):
            continue
        ops = [g.nodes[i] for i in unit]
        before = price(ops) + sum(price([g.nodes[i] for i in c]) for c in consumers)
        after = sum(price([g.nodes[i] for i in sorted(unit + c)]) for c in consumers)
        if after < _GAIN * before:
            found.append((unit, consumers, before, after))
            taken.update(u[0] for u in (unit, *consumers))
    return found


def _duplication_candidates(g: FusionGraph, units: list[list[int]], max_size: int):
    """Units of injective ops whose last value several units read (all of them injective too), with
    those consumer units: what `_duplications` prices."""
    from ziggurat.transforms.costs.kernels import is_kernel_op

    owner = {i: k for k, u in enumerate(units) for i in u}
    for unit in units:
        ops = [g.nodes[i] for i in unit]
        if not all(is_kernel_op(o) and not isinstance(o, graph.FusedOp) and pattern_kind(o) in _DUPLICABLE
                   and isinstance(o.results[0].type, TensorType) for o in ops):
            continue
        members = set(unit)
        if any(j not in members for i in unit[:-1] for j, _ in g.outs[i]):
            continue  # only the last op's value may leave the unit
        outs = g.outs[unit[-1]]
        if not outs or any(j is None for j, _ in outs):
            continue
        consumers = [units[k] for k in sorted({owner[j] for j, _ in outs})]
        if len(consumers) < 2 or any(len(unit) + len(c) > max_size for c in consumers):
            continue
        if not all(is_kernel_op(g.nodes[i]) and not isinstance(g.nodes[i], graph.FusedOp)
                   and pattern_kind(g.nodes[i]) in _DUPLICABLE for c in consumers for i in c):
            continue
        yield unit, consumers


def _duplicate(g: FusionGraph, unit: list[int], consumers: list[list[int]]) -> None:
    """Gives every consumer unit but the first its own copy of `unit`'s ops."""
    ops = [g.nodes[i] for i in unit]
    block = ops[-1].parent_block()
    assert block is not None
    for c in consumers[1:]:
        mapping: dict = {}
        anchor = ops[-1]
        for op in ops:
            copy = op.clone()
            copy.operands = [mapping.get(v, v) for v in op.operands]
            for r, cr in zip(op.results, copy.results):
                mapping[r] = cr
                cr.name_hint = r.name_hint
            block.insert_op_after(copy, anchor)
            anchor = copy
        for i in c:
            user = g.nodes[i]
            user.operands = [mapping.get(v, v) for v in user.operands]


def _weight_layouts(block: Block, price: Callable[[list[Operation]], float], store,
                    width: int = 0) -> dict[Operation, str]:
    """Stores the constant 2-d weight of a matmul in column panels of `width` lanes
    (`graph.matmul_panels`: what the 8-lane schedule reads, packing B on every call or
    walking it by rows otherwise) where the oracle prices that kernel no higher, or
    transposed (`transpose_b`) where it prices it at least 2% lower; the cheaper of the
    two wins. The panels take ties: measured on the Zen 1 host they were as fast or faster
    than the weight as it is on every shape tried (docs/feedback.md, "Packed weights"),
    which the roofline cannot tell apart when no pack nest or set conflict separates
    them. A weight that is already transposed (`Gemm(transB=1)`) may go to panels the
    same way. Returns the decision per rewritten matmul."""
    done: dict[Operation, str] = {}
    fetch = getattr(price, "prefetch", None)
    if fetch is not None:  # every matmul and its alternatives, in one batch
        trial = [alt for op, alts in _layout_alternatives(block, width) for alt in [op, *(a[-1] for a in alts)]]
        fetch([[op] for op in trial])
        for op in trial:
            if op.parent is None:
                op.erase()
    for op, alts in _layout_alternatives(block, width):
        w = op.operands[1].owner
        elt, ref = w.results[0].type.element_type, w.ref.data
        before = price([op])
        best = None
        for what, name, shape, gain, array, make, alt in alts:
            after = price([alt])
            alt.erase()
            if after <= gain * before and after < float("inf") and (best is None or after < best[0]):
                best = (after, what, name, shape, array, make)
        if best is None:
            continue
        after, what, name, shape, array, make = best
        c = graph.ConstantOp(store.add(name, array(store[ref])), TensorType(elt, shape))
        alt = make(op.operands[0], c.results[0])
        replace_weight(op, c, alt)
        done[alt] = f"{what}: 1 group -> 1, cost {before * 1e6:.2f}us -> {after * 1e6:.2f}us"
    return done


def _layout_alternatives(block: Block, width: int):
    """Per matmul of `block` with a constant 2-d weight: the op and its alternatives, each
    (what, weight name, weight shape, gain needed, how to make the weight, how to make the op, the
    op made over a detached constant of that shape, for pricing: the caller erases it)."""
    import numpy as np

    from ziggurat.dialects.graph_layout import MatmulPanelsOp, pack_panels

    for op in list(block.ops):
        if not isinstance(op, graph.MatmulOp):
            continue
        w = op.operands[1].owner
        if not isinstance(w, graph.ConstantOp) or len(w.results[0].type.get_shape()) != 2:
            continue
        tb = op.is_transpose_b
        k, n = reversed(w.results[0].type.get_shape()) if tb else w.results[0].type.get_shape()
        elt, ref, rtype = w.results[0].type.element_type, w.ref.data, op.results[0].type
        rows = prod(op.operands[0].type.get_shape()[:-1])
        if tb and rows == 1:  # a matrix-vector product keeps its dot-product kernel (see below)
            continue
        plain = (lambda a: a.T) if tb else (lambda a: a)  # the stored weight as B[k, n]
        packed = [("packed", f"{ref}.p{width}", [n // width, k, width], 1.0,
                   lambda a: pack_panels(plain(a), width), lambda x, c: MatmulPanelsOp(x, c, rtype))
                  ] if width and n % width == 0 else []
        transposed = [("transposed", f"{ref}.T", [n, k], _GAIN if rows > 1 else 1.0,
                       lambda a: np.ascontiguousarray(a.T), lambda x, c: graph.MatmulOp(x, c, rtype, transpose_b=True))
                      ] if not tb else []
        # The first alternative takes ties: the panels the FMA schedule reads, except for one row
        # (a matrix-vector product), where the dot-product kernel of the transposed weight keeps
        # several accumulators and the panel kernel one FMA chain per panel (measured 2-3x apart).
        alts = packed + transposed if rows > 1 else transposed + packed
        yield op, [(*a, a[-1](op.operands[0], graph.ConstantOp(a[1], TensorType(elt, a[2])).results[0]))
                   for a in alts]


def fuse_block_cost_guided(block: Block, max_size: int, allow_reduction_fusion: bool,
                           price: Callable[[list[Operation]], float], max_rounds: int = 4, store=None,
                           width: int = 0, parallel: bool = False) -> int:
    """Rule-based groups of `block`, then re-decided by `price` (seconds of one kernel of the
    given ops); each changed group (or op) records its decision as `graph.fusion_decision`.
    `parallel`: batches of prices in two processes (`Prices`).

    First, for at most `max_rounds` rounds, a group of injective ops read by several
    groups is duplicated into each of them where that is cheaper (`_duplication`), and
    the rules run again on the result; then `_CostGuided` merges and splits."""
    cached = Prices(price, parallel)
    duplicated: dict[Operation, str] = {}  # a consumer unit's last op -> its decision
    layouts = _weight_layouts(block, cached, store, width) if store is not None else {}
    g, units = _rule_units(block, max_size, allow_reduction_fusion)
    for _ in range(max_rounds):
        found = _duplications(g, units, cached, max_size)
        if not found:
            break
        for unit, consumers, before, after in found:
            what = (f"duplicated: {len(consumers) + 1} groups -> {len(consumers)}, "
                    f"cost {before * 1e6:.2f}us -> {after * 1e6:.2f}us")
            for c in consumers:
                duplicated[g.nodes[c[-1]]] = what
            _duplicate(g, unit, consumers)
        g, units = _rule_units(block, max_size, allow_reduction_fusion)
    cg = _CostGuided(g, units, cached, max_size)
    made = 0
    for members in cg.run(max_rounds):
        ops = [g.nodes[i] for i in members]
        decision = cg.decisions.get(tuple(members)) or duplicated.get(ops[-1]) or next(
            (layouts[o] for o in ops if o in layouts), None)
        target: Operation | None = ops[0]
        if len(ops) > 1:
            target = place_group(block, ops)
            if target is None:
                continue
            made += 1
        if decision is not None:
            target.attributes["graph.fusion_decision"] = builtin.StringAttr(decision)
    return made
