"""The rewriting half of convert-layout: which ops may run in the blocked layout
NCHW[x]c (`conv_eligible`, `find_members`, `regions_of`), the weight repacking
(`to_blocked_array`, `weight_array`) and the `Rewriter` that moves a region to
the blocked layout with transforms only at its boundaries. The pass
(convert_layout.py) decides which regions; the layout cost query
(transforms/costs/layout_costs.py) prices a region by rewriting a scratch copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.components import connected_components
from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp
from ziggurat.dialects.graph_layout import (
    Conv2dNchwcOp,
    DepthwiseConv2dNchwcOp,
    GroupedConv2dNchwcOp,
    LayoutTransformOp,
    MaxPool2dNchwcOp,
    blocked_shape,
    padded_blocked_shape,
)
from ziggurat.dialects.sym import shape_of, tensor_of
from ziggurat.lowering.locations import carry
from ziggurat.weights import WeightStore

DECISION_ATTR = "graph.layout_decision"
_BINARY = (graph.AddOp, graph.SubOp, graph.MulOp, graph.DivOp, graph.MaxOp, graph.MinOp)
# Ops a region carries lane for lane: unary and binary arithmetic, and the casts, compares and
# selects of an int8 model's quantize/dequantize steps (simplify-graph's NaN guard among them).
_ELEMENTWISE = (graph.UnaryOp, CastOp, graph.CompareOp, graph.WhereOp, *_BINARY)


def _shape(v: SSAValue) -> tuple[int, ...]:
    """The value's shape, a `Sym` for each symbolic dim (a model compiled for every shape)."""
    return shape_of(v.type)  # type: ignore[return-value]


def _ints(attr) -> tuple[int, ...]:
    return tuple(attr.get_values())


def _tensor(like: SSAValue, shape) -> TensorType:
    return tensor_of(like.type.element_type, list(shape))  # type: ignore[attr-defined]


def input_block(channels: int, block: int) -> int:
    """The channel block of a conv input: `block` when it divides C, else the largest divisor of C up to `block`."""
    if channels % block == 0:
        return block
    return max(d for d in range(1, min(channels, block) + 1) if channels % d == 0)


def block_local(op: Operation, block: int) -> bool:
    """A grouped conv2d whose groups sit inside channel blocks (C_in = C_out, the group width
    dividing `block`), so each output block reads only its own input block: depthwise (width 1)
    or RegNet's width 8."""
    g = op.groups.value.data  # type: ignore[attr-defined]
    c = _shape(op.input)[1]  # type: ignore[attr-defined]
    return g > 1 and c == _shape(op.result)[1] and block % (c // g) == 0  # type: ignore[attr-defined]


def conv_eligible(op: Operation, block: int, grouped: bool = True) -> bool:
    """A conv2d that the blocked layout can compute: a constant weight, no groups (or, with `grouped`:
    the weight store is there to repack them, groups inside channel blocks, `block_local`), C_out a
    multiple of `block` or above it (the last block padded: at most half of it wasted)."""
    if not isinstance(op, graph.Conv2dOp) or not isinstance(op.weight.owner, graph.ConstantOp):
        return False
    if op.groups.value.data != 1 and not (grouped and block_local(op, block)):
        return False
    c = _shape(op.result)[1]
    return c % block == 0 or c > block


def _ragged(v: SSAValue, block: int) -> bool:
    """`v`'s channels do not fill whole blocks: its blocked twin has padding lanes."""
    return _shape(v)[1] % block != 0


def _finite_on_padding(op: Operation, block: int) -> bool:
    """Padding lanes hold finite values (0 from a conv, whatever elementwise ops make of it) that
    the next conv multiplies by zero weights: an op that can turn them into inf or NaN (log, sqrt,
    division by a computed value) stays out of a region whose channels are padded."""
    if isinstance(op, graph.UnaryOp):
        return not (isinstance(op, (graph.LogOp, graph.SqrtOp)) and _ragged(op.input, block))
    if isinstance(op, graph.DivOp):
        return not (_ragged(op.result, block) and not isinstance(op.rhs.owner, graph.ConstantOp))
    return True


def _channel_broadcast(v: SSAValue, out: tuple[int, ...]) -> bool:
    """`v` broadcasts to NCHW `out` along N, H and W only (a bias, a folded BN scale, a scalar)."""
    s = (1,) * (4 - len(_shape(v))) + _shape(v)
    return len(_shape(v)) <= 4 and s[0] == 1 and s[2] == 1 and s[3] == 1 and s[1] in (1, out[1])


def find_members(ops: list[Operation], block: int, grouped: bool = True) -> list[Operation]:
    """The ops that go to the blocked layout, in program order: eligible convs, and the
    elementwise ops (table lookups among them), residual adds, max pools and spatial pools (`spatial_pool`) that consume
    (transitively) their results."""
    members: list[Operation] = []
    blocked: set[SSAValue] = set()
    for op in ops:
        ok = False
        if conv_eligible(op, block, grouped):
            ok = True
        elif isinstance(op, graph.LookupOp):  # lane for lane through its table (one, or one per channel)
            ok = op.input in blocked and op.table_dims in ((), (1,)) and len(_shape(op.input)) == 4
        elif isinstance(op, _ELEMENTWISE) and any(v in blocked for v in op.operands):
            out = _shape(op.results[0])
            ok = len(out) == 4 and all(v in blocked or _shape(v) == out or _channel_broadcast(v, out)
                                       for v in op.operands)
        elif isinstance(op, graph.MaxPool2dOp) and op.input in blocked:
            ok = not (op.ceil_mode is not None and op.ceil_mode.value.data)
        elif isinstance(op, graph.ReduceOp | graph.GlobalAvgPoolOp) and op.input in blocked:
            ok = spatial_pool(op)
        if ok and _finite_on_padding(op, block):
            members.append(op)
            blocked.add(op.results[0])
    return members


def spatial_pool(op: graph.ReduceOp | graph.GlobalAvgPoolOp) -> bool:
    """A global average pool, or a reduce over H and W of NCHW with kept dims (a squeeze-excite
    block's pool): in NCHW[x]c it reduces the same axes, each block's lanes side by side (a
    contiguous vector per step instead of a lane-strided gather); a padded block's extra lanes
    reduce finite values that the transform back drops (no product: it could overflow)."""
    if isinstance(op, graph.GlobalAvgPoolOp):
        return len(_shape(op.input)) == 4
    return (len(_shape(op.input)) == 4 and tuple(_ints(op.axes)) == (2, 3) and op.keeps_dims
            and op.kind.data in ("sum", "mean", "max", "min"))


def regions_of(members: list[Operation]) -> list[list[Operation]]:
    """Connected components of `members` (edges: one member uses another's result)."""
    inside = set(members)
    return connected_components(members, [(op, v.owner) for op in members for v in op.operands
                                          if v.owner in inside])  # type: ignore[misc]


def to_blocked_array(a: np.ndarray, b: int, fill: float = 0.0) -> np.ndarray:
    """NCHW `a` in NCHW<b>c, channels beyond C (a ragged last block) set to `fill`."""
    n, c, h, w = a.shape
    if c % b:
        a = np.concatenate([a, np.full((n, b - c % b, h, w), fill, a.dtype)], axis=1)
        c = a.shape[1]
    return np.ascontiguousarray(a.reshape(n, c // b, b, h, w).transpose(0, 1, 3, 4, 2))


def depthwise_weight_array(a: np.ndarray, b: int) -> np.ndarray:
    """A depthwise OIHW weight `[C, 1, KH, KW]` as `[ceil(C/b), KH, KW, b]`, zero beyond C."""
    c, _, kh, kw = a.shape
    a = np.pad(a.reshape(c, kh, kw), ((0, -c % b), (0, 0), (0, 0)))
    return np.ascontiguousarray(a.reshape(-1, b, kh, kw).transpose(0, 2, 3, 1))


def grouped_weight_array(a: np.ndarray, b: int) -> np.ndarray:
    """A grouped OIHW weight `[C, g, KH, KW]` (group width g dividing b) as `[ceil(C/b), KH, KW, b, b]`:
    per channel block the block-diagonal (input lane, output lane) matrix, zero elsewhere and beyond C."""
    c, g, kh, kw = a.shape
    cb = -(-c // b)
    out = np.zeros((cb, kh, kw, b, b), a.dtype)
    for o in range(c):
        blk, lane = divmod(o, b)
        first = (o // g) * g - blk * b  # input lane of the group's first channel
        out[blk, :, :, first:first + g, lane] = a[o].transpose(1, 2, 0)
    return out


def weight_array(a: np.ndarray, bi: int, bo: int) -> np.ndarray:
    """OIHW `a` in OIHW<bi>i<bo>o, zero beyond O and I."""
    o, i, h, w = a.shape
    if o % bo or i % bi:
        a = np.pad(a, ((0, -o % bo), (0, -i % bi), (0, 0), (0, 0)))
        o, i = a.shape[:2]
    return np.ascontiguousarray(a.reshape(o // bo, bo, i // bi, bi, h, w).transpose(0, 2, 4, 5, 3, 1))


@dataclass
class Rewriter:
    """Rewrites one function's member ops into the blocked layout."""

    block: int
    store: WeightStore | None
    bl: dict[SSAValue, SSAValue] = field(default_factory=dict)  # NCHW value -> its blocked twin
    backs: list[LayoutTransformOp] = field(default_factory=list)
    weights: dict[tuple[SSAValue, str], SSAValue] = field(default_factory=dict)
    repacked: list[graph.ConstantOp] = field(default_factory=list)  # constants read into repacked copies

    def insert(self, at: Operation, op: Operation, hint: str | None = None) -> SSAValue:
        carry(op, at)  # made for `at`: its source node
        Builder(InsertPoint.before(at)).insert(op)
        if hint:
            op.results[0].name_hint = hint
        return op.results[0]

    def constant(self, at: Operation, ref: str, value: np.ndarray, like: SSAValue) -> SSAValue:
        """A new constant `ref` before `at`: `value`, repacked from the constant `like`."""
        assert self.store is not None and isinstance(like.owner, graph.ConstantOp)
        self.repacked.append(like.owner)
        name = self.store.add(ref, value.astype(np.float32, copy=False))
        return self.insert(at, graph.ConstantOp(name, _tensor(like, value.shape)))

    def to_blocked(self, at: Operation, v: SSAValue, b: int) -> SSAValue:
        """`v` (NCHW, full shape) in NCHW<b>c: its twin, else a transform (once per value)."""
        if v in self.bl and _shape(self.bl[v])[-1] == b:
            return self.bl[v]
        shape = blocked_shape(_shape(v), f"NCHW{b}c")
        if isinstance(v.owner, graph.ConstantOp) and self.store is not None:
            fill = 1.0 if isinstance(at, (graph.MulOp, graph.DivOp)) else 0.0  # padding lanes stay finite
            arr = to_blocked_array(self.store[v.owner.ref.data], b, fill)
            t = self.constant(at, f"{v.owner.ref.data}.NCHW{b}c", arr, v)
        else:
            t = self.insert(at, LayoutTransformOp(v, "NCHW", f"NCHW{b}c", _tensor(v, shape)))
        self.bl[v] = t
        return t

    def channel_tables(self, op: graph.LookupOp) -> SSAValue:
        """A per-channel lookup's tables [C, n] as [C/b, n, b] (entry dim 1: a vector's b lanes that
        read the same entry read one line; the padding channels' tables repeat the last one: any
        finite values do); a single table as it is."""
        t = op.table
        if not op.table_dims:
            return t
        assert self.store is not None and isinstance(t.owner, graph.ConstantOp)
        arr = np.asarray(self.store[t.owner.ref.data])
        c, n = arr.shape
        b = self.block
        padded = np.concatenate([arr, np.repeat(arr[-1:], -c % b, axis=0)]).reshape(-1, b, n).transpose(0, 2, 1)
        self.repacked.append(t.owner)
        name = self.store.add(f"{t.owner.ref.data}.NCHW{b}c", np.ascontiguousarray(padded))
        return self.insert(op, graph.ConstantOp(name, _tensor(t, padded.shape)))

    def padded_boundary(self, conv: graph.Conv2dOp) -> bool:
        """A padded conv whose NCHW input enters the region here and feeds nothing else."""
        v = conv.input
        return (any(_ints(conv.pads)) and v not in self.bl and not isinstance(v.owner, graph.ConstantOp)
                and all(u.operation is conv for u in v.uses))

    def to_blocked_padded(self, at: Operation, v: SSAValue, b: int, pads: tuple[int, ...]) -> SSAValue:
        """`v` in NCHW<b>c with its H and W zero-padded by `pads` (not cached: only `at` reads it)."""
        shape = padded_blocked_shape(_shape(v), f"NCHW{b}c", pads)
        return self.insert(at, LayoutTransformOp(v, "NCHW", f"NCHW{b}c", _tensor(v, shape), pads=pads))

    def broadcast_operand(self, at: Operation, v: SSAValue, out: tuple[int, ...]) -> SSAValue:
        """A per-channel (or scalar) operand reshaped to [1, C/b, 1, 1, b] (or [1, 1, 1, 1, 1])."""
        c = (1,) * (4 - len(_shape(v))) + _shape(v)
        b = self.block
        shape = (1, -(-c[1] // b), 1, 1, b) if c[1] > 1 else (1, 1, 1, 1, 1)
        if isinstance(v.owner, graph.ConstantOp) and self.store is not None:
            arr = self.store[v.owner.ref.data].reshape(c)
            fill = 1.0 if isinstance(at, (graph.MulOp, graph.DivOp)) else 0.0  # padding lanes stay finite
            arr = to_blocked_array(arr, b, fill) if c[1] > 1 else arr.reshape(shape)
            return self.constant(at, f"{v.owner.ref.data}.NCHW{b}c", arr, v)
        r = v if len(_shape(v)) == 4 else self.insert(at, graph.ReshapeOp(v, _tensor(v, c)))
        if c[1] == 1:
            return self.insert(at, graph.ReshapeOp(r, _tensor(v, shape)))
        return self.insert(at, LayoutTransformOp(r, "NCHW", f"NCHW{b}c", _tensor(v, shape)))

    def weight(self, at: Operation, w: SSAValue, bi: int, bo: int) -> SSAValue:
        layout = f"OIHW{bi}i{bo}o"
        if (w, layout) in self.weights:
            return self.weights[(w, layout)]
        self.weights[(w, layout)] = t = self._weight(at, w, layout)
        return t

    def _weight(self, at: Operation, w: SSAValue, layout: str) -> SSAValue:
        bi, bo = (int(x) for x in layout[4:-1].split("i"))
        shape = blocked_shape(_shape(w), layout)
        assert isinstance(w.owner, graph.ConstantOp)
        if self.store is not None:  # pre-transformed at compile time
            return self.constant(at, f"{w.owner.ref.data}.{layout}", weight_array(self.store[w.owner.ref.data], bi, bo), w)
        return self.insert(at, LayoutTransformOp(w, "OIHW", layout, _tensor(w, shape)))

    def block_local(self, op: graph.Conv2dOp) -> Operation:
        """The blocked twin of a grouped conv whose groups sit inside channel blocks (`block_local`):
        input and result in NCHW<block>c, the weight repacked at compile time from the store."""
        b, pads = self.block, _ints(op.pads)
        if self.padded_boundary(op):
            x, pads = self.to_blocked_padded(op, op.input, b, pads), (0, 0, 0, 0)
        else:
            x = self.to_blocked(op, op.input, b)
        w = op.weight
        assert isinstance(w.owner, graph.ConstantOp) and self.store is not None
        dw = op.groups.value.data == _shape(op.input)[1]  # group width 1: one filter per channel
        key = (w, f"DW{b}" if dw else f"G{b}")
        if key not in self.weights:
            pack = depthwise_weight_array if dw else grouped_weight_array
            arr = pack(self.store[w.owner.ref.data], b)
            self.weights[key] = self.constant(op, f"{w.owner.ref.data}.{key[1]}c", arr, w)
        res = op.results[0]
        kind = DepthwiseConv2dNchwcOp if dw else GroupedConv2dNchwcOp
        return kind(x, self.weights[key], _tensor(res, blocked_shape(_shape(res), f"NCHW{b}c")),
                    _ints(op.strides), pads, _ints(op.dilations))

    def operand(self, at: Operation, v: SSAValue, out: tuple[int, ...]) -> SSAValue:
        if v in self.bl:
            return self.bl[v]
        if _shape(v) == out:
            return self.to_blocked(at, v, self.block)
        return self.broadcast_operand(at, v, out)

    def rewrite(self, op: Operation) -> Operation:
        """Replaces member `op` by its blocked twin followed by a transform back to NCHW
        (erased at the end when only blocked ops read it); returns the twin."""
        b = self.block
        res = op.results[0]
        if isinstance(op, graph.Conv2dOp) and op.groups.value.data != 1:
            new = self.block_local(op)
        elif isinstance(op, graph.Conv2dOp):
            twin = self.bl.get(op.input)
            # a blocked input keeps its (possibly padded) blocks; a plain one gets a divisor of C
            bi = b if twin is not None and _shape(twin)[-1] == b else input_block(_shape(op.input)[1], b)
            pads = _ints(op.pads)
            if self.padded_boundary(op):  # the boundary transform pads: no padded copy in the conv kernel
                x = self.to_blocked_padded(op, op.input, bi, pads)
                pads = (0, 0, 0, 0)
            else:
                x = self.to_blocked(op, op.input, bi)
            w = self.weight(op, op.weight, bi, b)
            new: Operation = Conv2dNchwcOp(x, w, _tensor(res, blocked_shape(_shape(res), f"NCHW{b}c")),
                                           _ints(op.strides), pads, _ints(op.dilations))
        elif isinstance(op, graph.ReduceOp | graph.GlobalAvgPoolOp):  # spatial_pool: the blocked tensor's H, W
            kind = op.kind.data if isinstance(op, graph.ReduceOp) else "mean"
            new = graph.ReduceOp(self.bl[op.input], kind, (2, 3), True,
                                 _tensor(res, blocked_shape(_shape(res), f"NCHW{b}c")))
        elif isinstance(op, graph.LookupOp):  # per-channel tables: [C/b, n, b], selected by channel block and lane
            dims, entry = ((1, 4), 1) if op.table_dims else ((), None)
            new = graph.LookupOp(self.bl[op.input], self.channel_tables(op), op.offset.value.data,
                                 _tensor(res, blocked_shape(_shape(res), f"NCHW{b}c")), dims, entry)
        elif isinstance(op, graph.MaxPool2dOp):
            x = self.bl[op.input]
            new = MaxPool2dNchwcOp(x, _tensor(res, blocked_shape(_shape(res), f"NCHW{b}c")), _ints(op.kernel),
                                   _ints(op.strides), _ints(op.pads), _ints(op.dilations))
        else:  # elementwise (`_ELEMENTWISE`): the same op on the blocked operands
            out = _shape(res)
            new = op.create(operands=[self.operand(op, v, out) for v in op.operands],
                            result_types=[_tensor(res, blocked_shape(out, f"NCHW{b}c"))],
                            properties=dict(op.properties), attributes=dict(op.attributes))
        twin = self.insert(op, new, res.name_hint)
        back = LayoutTransformOp(twin, f"NCHW{b}c", "NCHW", res.type)
        carry(back, op)
        Builder(InsertPoint.after(new)).insert(back)
        back.results[0].name_hint = res.name_hint
        res.replace_all_uses_with(back.results[0])
        op.detach()
        op.erase()
        self.bl[back.results[0]] = twin
        self.backs.append(back)
        return new

    def finish(self) -> None:
        """Erases the transforms back to NCHW that no op outside the region reads, and the constants
        that only repacked copies replaced (else they would stay in the IR, dead, down to the
        entry function's constant arguments and the weights the compiled model keeps)."""
        for back in reversed(self.backs):
            if not back.results[0].uses:
                back.detach()
                back.erase()
        for const in dict.fromkeys(self.repacked):
            if const.parent is not None and not const.results[0].uses:
                const.detach()
                const.erase()
