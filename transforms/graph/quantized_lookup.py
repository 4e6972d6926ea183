"""quantized-lookup: elementwise chains of a quantized value become one table lookup.

In an int8 QDQ model every activation passes through QuantizeLinear, so after
simplify-graph many float values are known to hold one of at most 256 integers
(`clamp(round(x / s) + z, 0, 255)` behind a NaN guard, or a cast from uint8).
Whatever elementwise chain of scalar constants follows such a value until the
next op with another varying input (dequantize, SiLU or GELU with their own
quantize/dequantize steps, a requantization) is a function of that value alone:
its results for the 256 inputs are computed once, at compile time, and the
chain becomes `graph.lookup` of that table (onnxruntime's QLinear lookup-table
ops do the same for single activations).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.dead_code_elimination import is_trivially_dead

import ziggurat.dtypes as dtypes
from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp
from ziggurat.lowering.locations import carry
from ziggurat.target import LOOKUP_COST
from ziggurat.transforms.graph.graph_reference import LANEWISE, apply, supports
from ziggurat.transforms.graph.weight_binding import bodies_with_weights
from ziggurat.weights import WeightStore

# Entries of a per-channel table at most (C x 256 float32: 128 KB).
MAX_ENTRIES = 1 << 15

# What an op of a chain costs per element, in vector ops (a division: about 6 on AVX-512 hosts;
# a transcendental function: its polynomial); the rest cost 1. A gather from a table costs
# about `min-cost` (the pass option; the pipelines give the target's `Target.lookup_cost`):
# chains below it stay arithmetic.
_COST = {graph.DivOp: 6, graph.ExpOp: 12, graph.TanhOp: 12, graph.SigmoidOp: 14, graph.ErfOp: 14,
         graph.LogOp: 12, graph.PowOp: 20, graph.SqrtOp: 4}


@dataclass(frozen=True)
class _Ints:
    """A value known to hold integers in [lo, hi] (and NaN unless `nan_free`)."""

    lo: float
    hi: float
    nan_free: bool


def _shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(v.type.get_shape())  # type: ignore[attr-defined]


def _elt(v: SSAValue):
    return v.type.element_type  # type: ignore[attr-defined]


class _Chains:
    """The analysis of one function body: scalar constants, integer ranges, and each value's root."""

    def __init__(self, store: WeightStore, max_table: int, max_entries: int):
        self.store, self.max_table, self.max_entries = store, max_table, max_entries
        self.consts: dict[SSAValue, float] = {}
        self.vectors: dict[SSAValue, np.ndarray] = {}  # constants of more than one element (per-channel only)
        self.ints: dict[SSAValue, _Ints] = {}
        self.root: dict[SSAValue, SSAValue] = {}
        self.axis: dict[SSAValue, int] = {}  # chain values that vary along one axis with per-axis constants

    def scan(self, args, ops: list[Operation]) -> None:
        for a in args:
            if isinstance(a.type, TensorType) and _small_int(_elt(a)):
                self.ints[a] = _int_type_range(_elt(a))
                if self._is_root(a):
                    self.root[a] = a
        for op in ops:
            if isinstance(op, graph.ConstantOp):
                self._constant(op)
                continue
            if len(op.results) != 1 or not isinstance(op.results[0].type, TensorType):
                continue
            res = op.results[0]
            self._range(op)
            root = self._extends(op)
            if root is not None:
                self.root[res] = root
            elif self._is_root(res):
                self.root[res] = res

    def _constant(self, op: graph.ConstantOp) -> None:
        t = op.results[0].type
        if self.max_entries and isinstance(t, TensorType) and t.element_count() > 1 and op.ref.data in self.store:
            self.vectors[op.results[0]] = np.asarray(self.store[op.ref.data])
        if isinstance(t, TensorType) and t.element_count() == 1 and op.ref.data in self.store:
            c = float(np.asarray(self.store[op.ref.data]).reshape(()))
            self.consts[op.results[0]] = c
            if math.isfinite(c) and c == round(c):
                self.ints[op.results[0]] = _Ints(c, c, True)

    def _range(self, op: Operation) -> None:
        """Integer ranges through the steps of a quantize: round, + zero point, clamp, NaN guard."""
        res, ops = op.results[0], op.operands
        r = [self.ints.get(v) for v in ops]
        out = None
        if isinstance(op, CastOp) and _small_int(_elt(ops[0])):
            out = _int_type_range(_elt(ops[0]))
        elif isinstance(op, graph.RoundOp):
            out = _Ints(-math.inf, math.inf, False)
        elif isinstance(op, graph.AddOp | graph.SubOp) and r[0] and r[1] and ops[1] in self.consts:
            c = self.consts[ops[1]] * (1 if isinstance(op, graph.AddOp) else -1)
            out = _Ints(r[0].lo + c, r[0].hi + c, r[0].nan_free)
        elif isinstance(op, graph.MaxOp | graph.MinOp) and r[0] and r[1]:
            f = max if isinstance(op, graph.MaxOp) else min
            out = _Ints(f(r[0].lo, r[1].lo), f(r[0].hi, r[1].hi), r[0].nan_free and r[1].nan_free)
        elif isinstance(op, graph.WhereOp) and (bound := _select_bound(op)) is not None and r[1] and r[2]:
            c = r[2].lo  # where(a > c, a, c) is max(a, c), where(a < c, a, c) min(a, c); NaN goes to c
            f = max if bound == "gt" else min
            out = _Ints(f(r[1].lo, c), f(r[1].hi, c), r[2].nan_free)
        elif isinstance(op, graph.WhereOp) and r[1] and r[2]:
            cond = ops[0].owner
            guarded = (isinstance(cond, graph.CompareOp) and cond.kind.data == "eq" and cond.lhs == cond.rhs == ops[1])
            out = _Ints(min(r[1].lo, r[2].lo), max(r[1].hi, r[2].hi), (r[1].nan_free or guarded) and r[2].nan_free)
        if _small_int(_elt(res)):
            out = _int_type_range(_elt(res))
        if out is not None:
            self.ints[res] = out

    def _is_root(self, v: SSAValue) -> bool:
        r = self.ints.get(v)
        return (r is not None and r.nan_free and math.isfinite(r.lo) and math.isfinite(r.hi)
                and r.hi - r.lo + 1 <= self.max_table)

    def _extends(self, op: Operation) -> SSAValue | None:
        """The root whose chain `op` continues: an elementwise op that `graph_reference` evaluates,
        on that root's values and scalar constants only, of the root's shape."""
        if type(op) not in LANEWISE or not supports(op):
            return None
        roots = {self.root.get(v) for v in op.operands if v not in self.consts and v not in self.vectors}
        if len(roots) != 1 or None in roots:
            return None
        root = roots.pop()
        out = _shape(op.results[0])
        if out != _shape(root):
            return None
        axes = {self.axis[v] for v in op.operands if v in self.axis}
        for v in op.operands:
            if v in self.vectors:
                axes.add(_one_axis(_shape(v), out))
        if None in axes or len(axes) > 1:
            return None  # a constant that varies along more than one axis, or chains along two axes
        if axes:
            d = axes.pop()
            if out[d] * (self.ints[root].hi - self.ints[root].lo + 1) > self.max_entries:
                return None
            self.axis[op.results[0]] = d
        return root


def _select_bound(op: graph.WhereOp) -> str | None:
    """'gt' for `where(a > c, a, c)`, 'lt' for `where(a < c, a, c)` (simplify-graph's form of a
    quantize step's clamp: a bound by a select, NaN to the bound), else None."""
    cond = op.cond.owner
    if isinstance(cond, graph.CompareOp) and cond.kind.data in ("gt", "lt") and cond.lhs == op.lhs \
            and cond.rhs == op.rhs:
        return cond.kind.data
    return None


def _one_axis(shape: tuple[int, ...], out: tuple[int, ...]) -> int | None:
    """The one axis of `out` along which a constant of `shape` varies (broadcast over the others)."""
    full = (1,) * (len(out) - len(shape)) + tuple(shape)
    if len(full) != len(out):
        return None
    varying = [d for d, n in enumerate(full) if n != 1]
    return varying[0] if len(varying) == 1 and full[varying[0]] == out[varying[0]] else None


def _small_int(elt) -> bool:
    """An 8- or 16-bit integer type (narrower ones are stored in bytes and left alone)."""
    return dtypes.is_int(elt) and elt.width.data in (8, 16)


def _int_type_range(elt) -> _Ints:
    info = np.iinfo(dtypes.to_numpy(elt))
    return _Ints(float(info.min), float(info.max), True)


def _cone(v: SSAValue, members: set[SSAValue], position: dict[Operation, int]) -> list[Operation]:
    """The chain's ops that `v` depends on, in program order."""
    seen: dict[Operation, None] = {}
    stack = [v]
    while stack:
        w = stack.pop()
        op = w.owner
        if w not in members or not isinstance(op, Operation) or op in seen:
            continue
        seen[op] = None
        stack.extend(op.operands)
    return sorted(seen, key=position.__getitem__)


def _tables(root: SSAValue, lo: int, n: int, ops: list[Operation], chains: _Chains, axis: int | None) -> dict[SSAValue, np.ndarray]:
    """Every value of the chain for the n inputs lo .. lo + n - 1 (`graph_reference.apply`: float
    ops in float64, rounded once to the result type; integers wrap): [n], or [C, n] for a chain
    with constants along `axis` (C entries)."""
    shape = (n,) if axis is None else (_shape(root)[axis], n)
    vals: dict[SSAValue, np.ndarray] = {root: np.arange(lo, lo + n).astype(dtypes.to_numpy(_elt(root)))}

    def arg(v: SSAValue) -> np.ndarray:
        if v in vals:
            return vals[v]
        if v in chains.vectors:
            return chains.vectors[v].reshape(-1, 1)  # along the chain's axis (`_one_axis`)
        return np.asarray(chains.consts[v])

    for op in ops:
        with np.errstate(all="ignore"):
            vals[op.results[0]] = np.broadcast_to(apply(op, [arg(v) for v in op.operands]), shape)
    return vals


def fold_chains(f: func.FuncOp, store: WeightStore, min_cost: int, max_table: int, max_entries: int) -> int:
    """Replaces the chains of `f` worth a table by `graph.lookup`; returns how many tables."""
    block = f.body.block
    ops = list(block.ops)
    chains = _Chains(store, max_table, max_entries)
    chains.scan(block.args, ops)
    members = {v for v, r in chains.root.items() if v is not r}
    if not members:
        return 0
    position = {op: k for k, op in enumerate(ops)}
    tables: list[tuple[SSAValue, np.ndarray]] = []  # all first: a replaced value is in later cones
    for v in [v for v in chains.root if v in members]:
        users = [u.operation for u in v.uses]
        if all(op.results and all(r in members for r in op.results) for op in users):
            continue  # used inside its chain only
        cone = _cone(v, members, position)
        if sum(_COST.get(type(op), 1) for op in cone) < min_cost:
            continue
        r = chains.ints[chains.root[v]]
        tables.append((v, _tables(chains.root[v], int(r.lo), int(r.hi - r.lo) + 1, cone, chains, chains.axis.get(v))[v]))
    rewriter = Rewriter()
    for v, table in tables:
        axis = chains.axis.get(v)
        hint = v.name_hint or v.owner.name.split(".")[1]  # type: ignore[union-attr]
        ref = store.add(f"lookup.{hint}", np.ascontiguousarray(table))
        const = graph.ConstantOp(ref, TensorType(_elt(v), list(table.shape)))
        lo = int(chains.ints[chains.root[v]].lo)
        look = graph.LookupOp(unclamped(chains.root[v], chains, lo, table.shape[-1]), const.results[0], lo, v.type,
                              () if axis is None else (axis,))
        carry(look, v.owner)  # type: ignore[arg-type]
        rewriter.insert_op([const, look], InsertPoint.after(v.owner))  # type: ignore[arg-type]
        look.results[0].name_hint = v.name_hint
        v.replace_all_uses_with(look.results[0])
    made = len(tables)
    if made:  # the chains' ops, their constants and the clamps a lookup reads around, now unread
        for op in reversed(list(block.ops)):
            if is_trivially_dead(op):
                rewriter.erase_op(op)
    return made


def unclamped(root: SSAValue, chains: _Chains, lo: int, n: int) -> SSAValue:
    """What a lookup of `root` may read instead: the integer-valued `a` of a quantize step's
    `where(m == m, m, lo)` with `m = min(max(a, lo), lo + n - 1)` (or without the guard; or the
    clamp as two selects, `where(a > lo, a, lo)` and `where(b < hi, b, hi)`), since the
    lookup's own clamp into its n entries from `lo` and its NaN-to-entry-0 rule pick the same entry
    for every `a`, infinities and NaN included (the guard's value must be `lo`: entry 0). Saves
    the clamp's and the guard's vector ops; anything else returns `root`."""
    v = root
    op = v.owner
    if isinstance(op, graph.WhereOp) and _select_bound(op) is None:
        cond = op.operands[0].owner
        if not (isinstance(cond, graph.CompareOp) and cond.kind.data == "eq" and cond.lhs == cond.rhs == op.operands[1]) \
                or chains.consts.get(op.operands[2]) != lo:
            return root
        v = op.operands[1]
    bounds = set()
    for _ in range(2):
        step = v.owner
        if isinstance(step, graph.MaxOp | graph.MinOp) and step.operands[1] in chains.consts:
            bounds.add((type(step), chains.consts[step.operands[1]]))
            v = step.operands[0]
        elif isinstance(step, graph.WhereOp) and (bound := _select_bound(step)) and step.rhs in chains.consts:
            bounds.add((graph.MaxOp if bound == "gt" else graph.MinOp, chains.consts[step.rhs]))  # NaN -> the bound
            v = step.lhs
    if bounds != {(graph.MaxOp, lo), (graph.MinOp, lo + n - 1)} or v not in chains.ints or _shape(v) != _shape(root) \
            or _elt(v) != _elt(root):
        return root
    return v


@dataclass(frozen=True)
class QuantizedLookupPass(ModulePass):
    """Folds elementwise chains of a value with at most `max-table` integer values into `graph.lookup`.

    **Input:** graph-level IR with a weight store (int8 models after simplify-graph and
    fold-constants). A *root* is a value known to hold integers in a range of at most
    `max-table` values and no NaN: a cast from a 8- or 16-bit integer, or a quantize step
    `where(q == q, clamp(round(x / s) + z, lo, hi), 0)`. Its *chain* is every elementwise
    op (arithmetic, compare, select, exact casts, the functions `graph_reference` evaluates)
    whose operands are values of that chain and scalar constants.

    **Output:** each value of a chain that an op outside it reads, and that costs at least
    `min-cost` per element to compute from its root (a division counts 6, exp/tanh/log 12,
    sigmoid/erf 14, pow 20, the rest 1), becomes `graph.lookup %root, %table` with the
    table of its values for every value of the root, evaluated at compile time in float64
    and rounded once per op (as ONNX's QDQ semantics computes each node separately). The
    ops only the chain used are erased. Where the root is a quantize step's clamp into the
    table's range (and its NaN guard to the range's low end), the lookup reads the value before
    them (`unclamped`): its own index clamp picks the same entries.

    With `per-channel`, a chain may also pass per-channel constants (a BatchNorm that a Q/DQ
    pair kept from its conv): its table is one per channel, `[C, n]` (`dims = [1]`; at most
    32768 entries), read in the blocked layout as `[C/16, n, 16]`, one column per vector lane
    (lanes that read the same entry read one line). On by default.

    **Options:** `min-cost` (int, default 16; the default pipelines give the target's
    `Target.lookup_cost`: 28 on AMD Zen cores, whose gathers are microcode), `max-table` (int,
    default 256), `per-channel` (bool, default true).

    Example (a dequantize, SiLU and a requantize of a uint8 value `%q`):
    ```mlir
    %x = graph.cast %q : tensor<64xui8> -> tensor<64xf32>
    %d = graph.mul %x, %s : tensor<64xf32>, tensor<f32> -> tensor<64xf32>
    %g = graph.sigmoid %d : tensor<64xf32>
    %y = graph.mul %d, %g : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    %z = graph.div %y, %s2 : tensor<64xf32>, tensor<f32> -> tensor<64xf32>
    %r = graph.round %z : tensor<64xf32>
    ```
    becomes
    ```mlir
    %t = graph.constant "lookup.r" : tensor<256xf32>
    %r = graph.lookup %q, %t {offset = 0 : i64} : tensor<64xui8>, tensor<256xf32> -> tensor<64xf32>
    ```
    """

    name = "quantized-lookup"
    min_cost: int = LOOKUP_COST
    max_table: int = 256
    per_channel: bool = True

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for f, store in bodies_with_weights(op):
            fold_chains(f, store, self.min_cost, self.max_table, MAX_ENTRIES if self.per_channel else 0)
