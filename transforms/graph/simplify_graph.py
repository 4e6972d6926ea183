"""simplify-graph: small algebraic rewrites of graph ops, one identity per pattern."""

from __future__ import annotations

import math

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp
from ziggurat.lowering.locations import fused_loc, keep_locations
from ziggurat.weights import WeightStore
from ziggurat.transforms.graph.weight_binding import weights_of


def _ints(attr) -> tuple[int, ...]:
    return tuple(attr.get_values())


def _shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(v.type.get_shape())  # type: ignore[attr-defined]


def _single_use(v: SSAValue) -> bool:
    return len(list(v.uses)) == 1


class _WithWeights(RewritePattern):
    """A pattern that reads (and adds) constant values in the weight store."""

    def __init__(self, store: WeightStore):
        self.store = store

    def value(self, v: SSAValue) -> np.ndarray | None:
        if isinstance(v.owner, graph.ConstantOp):
            return self.store[v.owner.ref.data]
        return None

    def constant(self, name: str, array: np.ndarray) -> graph.ConstantOp:
        ref = self.store.add(name, np.ascontiguousarray(array, dtype=np.float32))
        return graph.ConstantOp(ref, TensorType(builtin.f32, list(array.shape)))


# ---------------------------------------------------------------------------
# Shape ops
# ---------------------------------------------------------------------------


class RemoveIdentityReshape(RewritePattern):
    """reshape(x : T) -> T  ==>  x"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ReshapeOp, rewriter: PatternRewriter) -> None:
        if op.input.type == op.result.type:
            rewriter.replace(op, [], [op.input])


class MergeReshapes(RewritePattern):
    """reshape(reshape(x)) ==> reshape(x)"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ReshapeOp, rewriter: PatternRewriter) -> None:
        inner = op.input.owner
        if isinstance(inner, graph.ReshapeOp):
            rewriter.replace(op, graph.ReshapeOp(inner.input, op.result.type))


class RemoveIdentityTranspose(RewritePattern):
    """transpose(x, perm=[0, 1, ..., n-1]) ==> x"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.TransposeOp, rewriter: PatternRewriter) -> None:
        if list(_ints(op.perm)) == list(range(len(_ints(op.perm)))):
            rewriter.replace(op, [], [op.input])


class MergeTransposes(RewritePattern):
    """transpose(transpose(x, p), q) ==> transpose(x, [p[q[i]] for i])"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.TransposeOp, rewriter: PatternRewriter) -> None:
        inner = op.input.owner
        if not isinstance(inner, graph.TransposeOp):
            return
        p, q = _ints(inner.perm), _ints(op.perm)
        rewriter.replace(op, graph.TransposeOp(inner.input, [p[i] for i in q], op.result.type))


# ---------------------------------------------------------------------------
# Arithmetic with constants
# ---------------------------------------------------------------------------


class RemoveNeutralOperand(_WithWeights):
    """x * 1 ==> x,  1 * x ==> x,  x + 0 ==> x,  0 + x ==> x,  x - 0 ==> x,  x / 1 ==> x
    (only where the result has x's type, so no broadcast is lost)"""

    NEUTRAL = {graph.AddOp: (0.0, True), graph.SubOp: (0.0, False), graph.MulOp: (1.0, True), graph.DivOp: (1.0, False)}

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        entry = self.NEUTRAL.get(type(op))  # type: ignore[call-overload]
        if entry is None:
            return
        neutral, commutative = entry
        lhs, rhs = op.operands
        pairs = [(lhs, rhs), (rhs, lhs)] if commutative else [(lhs, rhs)]
        for keep, other in pairs:
            c = self.value(other)
            if keep.type == op.results[0].type and c is not None and np.all(c == neutral):
                rewriter.replace(op, [], [keep])
                return


class DivByConstantToMul(_WithWeights):
    """x / c ==> x * (1 / c)   for a float32 constant c (an integer division truncates; the
    reciprocal constant is float32). Not for a one-element x: a scalar division costs nothing
    and stays exact (DynamicQuantizeLinear's scale, (max - min) / 255, must round as ONNX
    says: a scale one ulp off moves the rounding ties of the whole tensor)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.DivOp, rewriter: PatternRewriter) -> None:
        if any(v.type.element_type != builtin.f32 for v in (op.lhs, op.rhs)):  # type: ignore[attr-defined]
            return
        if math.prod(op.result.type.get_shape()) == 1:  # type: ignore[attr-defined]
            return
        c = self.value(op.rhs)
        if c is None or not np.all(c != 0):
            return
        recip = self.constant(f"{op.rhs.owner.ref.data}.reciprocal", 1.0 / c.astype(np.float64))  # type: ignore[attr-defined]
        rewriter.replace(op, [recip, graph.MulOp(op.lhs, recip.result, op.result.type)])


class PowByConstant(_WithWeights):
    """x ** 2 ==> x * x,  x ** 0.5 ==> sqrt(x),  x ** 1 ==> x   for a constant exponent (one value, no
    broadcast beyond x's type): RMSNorm's pow(x, 2) otherwise runs as a scalar `powf` per element"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.PowOp, rewriter: PatternRewriter) -> None:
        c = self.value(op.rhs)
        if c is None or c.size == 0 or op.lhs.type != op.result.type or not np.all(c == c.reshape(-1)[0]):
            return
        e = float(c.reshape(-1)[0])
        if e == 2.0:
            rewriter.replace(op, [graph.MulOp(op.lhs, op.lhs, op.result.type)])
        elif e == 0.5:
            rewriter.replace(op, [graph.SqrtOp(op.lhs)])
        elif e == 1.0:
            rewriter.replace(op, [], [op.lhs])


# ---------------------------------------------------------------------------
# BatchNorm folding
# ---------------------------------------------------------------------------


class _BatchNormPattern(_WithWeights):
    def affine(self, bn: graph.BatchNormOp) -> tuple[np.ndarray, np.ndarray] | None:
        """(a, c) with batch_norm(x) = x * a + c per channel (float64), where the parameters are constants."""
        params = [self.value(v) for v in (bn.scale, bn.bias, bn.mean, bn.var)]
        if any(p is None for p in params):
            return None
        scale, bias, mean, var = (p.astype(np.float64) for p in params)  # type: ignore[union-attr]
        a = scale / np.sqrt(var + bn.epsilon.value.data)
        return a, bias - mean * a


class FoldBatchNormIntoProducer(_BatchNormPattern):
    """batch_norm(conv2d(x, W) [+ b0]) ==> conv2d(x, W * a[o]) + (b0 * a + c)
    with a = scale / sqrt(var + eps), c = bias - mean * a; the same for a rank-2
    matmul, scaling the weight's output columns"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, bn: graph.BatchNormOp, rewriter: PatternRewriter) -> None:
        affine = self.affine(bn)
        if affine is None:
            return
        a, c = affine
        channels = a.shape[0]
        producer, b0 = bn.input.owner, np.zeros(channels)
        if isinstance(producer, graph.AddOp) and _single_use(producer.result):
            const = self.value(producer.rhs)
            inner = producer.lhs.owner
            if const is None or not isinstance(inner, graph.Conv2dOp | graph.MatmulOp):
                return
            per_channel = (channels,) if isinstance(inner, graph.MatmulOp) else (channels, 1, 1)
            if const.size not in (1, channels) or np.broadcast_shapes(const.shape, per_channel) != per_channel:
                return
            b0 = np.broadcast_to(const, per_channel).reshape(channels).astype(np.float64)
            producer = inner
        new = self._scaled(producer, a)
        if new is None:
            return
        w_const, core = new
        shift = (b0 * a + c).reshape((channels, 1, 1) if isinstance(core, graph.Conv2dOp) else (channels,))
        b_const = self.constant(f"{w_const.ref.data}.bn_bias", shift)
        add = graph.AddOp(core.results[0], b_const.result, bn.result.type)
        core.location = fused_loc([producer.location, bn.location])  # computes both source nodes
        rewriter.replace(bn, [w_const, core, b_const, add])

    def _scaled(self, producer: Operation | None, a: np.ndarray) -> tuple[graph.ConstantOp, Operation] | None:
        if isinstance(producer, graph.Conv2dOp) and _single_use(producer.result):
            w = self.value(producer.weight)
            if w is None:
                return None
            wc = self.constant(f"{producer.weight.owner.ref.data}.bn", w * a.reshape(-1, 1, 1, 1))  # type: ignore[attr-defined]
            conv = graph.Conv2dOp(
                producer.input, wc.result, producer.result.type, _ints(producer.strides), _ints(producer.pads),
                _ints(producer.dilations), producer.groups.value.data,
            )
            return wc, conv
        if isinstance(producer, graph.MatmulOp) and _single_use(producer.result) and len(_shape(producer.result)) == 2:
            w = self.value(producer.rhs)
            if w is None or w.ndim != 2:
                return None
            scaled = w * (a.reshape(-1, 1) if producer.is_transpose_b else a.reshape(1, -1))
            wc = self.constant(f"{producer.rhs.owner.ref.data}.bn", scaled)  # type: ignore[attr-defined]
            mm = graph.MatmulOp(producer.lhs, wc.result, producer.result.type, producer.is_transpose_b)
            return wc, mm
        return None


class RemoveExactCastPair(_WithWeights):
    """cast(cast(x : f32 -> int) -> f32) ==> where(x == x, x, 0) where x is an integer inside the
    int type's range but for NaN (which the casts make 0): a quantize-dequantize pair's
    `clamp(round(x / s) + zp, lo, hi)` through uint8 and back is that float already, and the
    compare and select cost fewer vector instructions than the saturating cast and its way back.

    Where x is `min(max(a, 0), hi)` (a uint8 or uint16 quantize step's clamp, whose low end is the
    guard's 0), the clamp and guard become `where(b < hi, b, hi)` of `b = where(a > 0, a, 0)`:
    the same float for every `a` (NaN and -0.0 go to +0.0, as the guard and IEEE maximum send
    them), and x86's max and min instructions each (2 instructions where the NaN-propagating
    clamp and the guard took 6)."""

    def __init__(self, store: WeightStore):
        super().__init__(store)
        self._zero: str | None = None

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CastOp, rewriter: PatternRewriter) -> None:
        inner = op.input.owner
        if not isinstance(inner, CastOp) or op.result.type != inner.input.type:
            return
        src, mid = inner.input.type.element_type, inner.result.type.element_type  # type: ignore[attr-defined]
        if src != builtin.f32 or not isinstance(mid, builtin.IntegerType) or mid.width.data not in (8, 16):
            return
        bits = mid.width.data
        lo, hi = (0, (1 << bits) - 1) if mid.signedness.data == builtin.Signedness.UNSIGNED else (
            -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        span = self._integral(inner.input, 8)
        if span is None or not (lo <= span[0] and span[1] <= hi):
            return
        x = inner.input
        selects = self._select_clamp(x)
        if selects:
            rewriter.replace(op, selects)
            return
        if self._zero is None:  # one weight for every guard (cse then merges the constants)
            self._zero = self.constant("cast_pair.zero", np.zeros((), np.float32)).ref.data
        zero = graph.ConstantOp(self._zero, TensorType(builtin.f32, []))
        ordered = graph.CompareOp(x, x, "eq", x.type)
        keep = graph.WhereOp(ordered.result, x, zero.result, x.type)
        rewriter.replace(op, [zero, ordered, keep])

    def _select_clamp(self, x: SSAValue) -> list[Operation]:
        """`b = where(a > 0, a, 0)`, `where(b < hi, b, hi)` for `x = min(max(a, 0), hi)` with scalar
        constant bounds; [] for any other `x`."""
        top = x.owner
        if not isinstance(top, graph.MinOp) or not isinstance(low := top.lhs.owner, graph.MaxOp):
            return []
        lo_v, hi_v = self._through_reshapes(low.rhs), self._through_reshapes(top.rhs)
        if lo_v is None or hi_v is None or lo_v.size != 1 or hi_v.size != 1 or float(lo_v.reshape(())) != 0.0 \
                or np.signbit(lo_v.reshape(())) or not float(hi_v.reshape(())) > 0.0:
            return []
        a = low.lhs
        if a.type != x.type:
            return []
        above = graph.CompareOp(a, low.rhs, "gt", a.type)
        b = graph.WhereOp(above.result, a, low.rhs, a.type)
        below = graph.CompareOp(b.result, top.rhs, "lt", a.type)
        return [above, b, below, graph.WhereOp(below.result, b.result, top.rhs, a.type)]

    def _through_reshapes(self, v: SSAValue) -> np.ndarray | None:
        """The constant `v` holds, looking through reshapes (fold-constants runs after this pass)."""
        while isinstance(v.owner, graph.ReshapeOp):
            v = v.owner.input
        return self.value(v)

    def _integral(self, v: SSAValue, depth: int) -> tuple[float, float] | None:
        """(min, max) of `v`'s elements where each is an integer or +-inf (rounded values, and
        integral constants, combined by add, max and min); NaN aside. None where that is not
        shown within `depth` ops."""
        const = self.value(v)
        owner = v.owner
        if const is None and isinstance(owner, CastOp) and isinstance(owner.input.type.element_type, builtin.IntegerType):  # type: ignore[attr-defined]
            const = self.value(owner.input)
        if const is not None:
            return (float(const.min()), float(const.max())) if const.size and np.all(np.floor(const) == const) else None
        if depth == 0 or not isinstance(owner, Operation):
            return None
        if isinstance(owner, graph.RoundOp | graph.FloorOp | graph.CeilOp):
            return (-np.inf, np.inf)
        if isinstance(owner, graph.ReshapeOp | graph.BroadcastToOp):
            return self._integral(owner.input, depth - 1)
        if isinstance(owner, graph.AddOp | graph.MaxOp | graph.MinOp):
            a, b = self._integral(owner.lhs, depth - 1), self._integral(owner.rhs, depth - 1)
            if a is None or b is None:
                return None
            if isinstance(owner, graph.AddOp):  # rounded to a float, a sum of integers is one (>= 2^23 all are)
                return (a[0] + b[0], a[1] + b[1])
            pick = max if isinstance(owner, graph.MaxOp) else min
            return (pick(a[0], b[0]), pick(a[1], b[1]))
        return None


class BatchNormToAffine(_BatchNormPattern):
    """batch_norm(x) ==> x * a + c per channel (a = scale / sqrt(var + eps), c = bias - mean * a),
    where it cannot fold into a producer: two channel-broadcast ops that fuse with their
    neighbours and stay in a blocked layout region (an int8 model's BatchNorm sits behind a
    quantize/dequantize pair, not behind its conv)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, bn: graph.BatchNormOp, rewriter: PatternRewriter) -> None:
        rank = len(_shape(bn.result))
        if rank < 2 or bn.result.type.element_type != builtin.f32:  # type: ignore[attr-defined]
            return
        per_channel = (_shape(bn.scale)[0],) + (1,) * (rank - 2)
        affine = self.affine(bn)
        if affine is not None:  # the constants now
            name = getattr(bn.scale.owner, "ref", None)
            base = name.data if name is not None else "bn"
            made: list[Operation] = [self.constant(f"{base}.affine_a", affine[0].reshape(per_channel)),
                                     self.constant(f"{base}.affine_c", affine[1].reshape(per_channel))]
            a_v, c_v = made[0].results[0], made[1].results[0]
        else:  # computed ones (an int8 model's dequantized parameters): ops fold-constants folds
            t = bn.scale.type
            made = [eps := self.constant("bn.eps", np.array(bn.epsilon.value.data, np.float32))]
            made.append(var_eps := graph.AddOp(bn.var, eps.result, t))
            made.append(root := graph.SqrtOp(var_eps.result))
            made.append(a_flat := graph.DivOp(bn.scale, root.result, t))
            made.append(shift := graph.MulOp(bn.mean, a_flat.result, t))
            made.append(c_flat := graph.SubOp(bn.bias, shift.result, t))
            shaped = TensorType(builtin.f32, list(per_channel))
            made += [a_op := graph.ReshapeOp(a_flat.result, shaped), c_op := graph.ReshapeOp(c_flat.result, shaped)]
            a_v, c_v = a_op.results[0], c_op.results[0]
        mul = graph.MulOp(bn.input, a_v, bn.result.type)
        add = graph.AddOp(mul.result, c_v, bn.result.type)
        rewriter.replace(bn, [*made, mul, add])


@dataclass(frozen=True)
class SimplifyGraphPass(ModulePass):
    """Applies small graph rewrites, each an identity, until none applies.

    **Input:** graph-level IR; the value patterns need the weight store
    (`transforms/graph/weight_binding.py`) and are skipped without one.

    **Output:** the same computation with fewer or cheaper ops. Patterns:
    - `reshape(x : T) -> T ==> x`; `reshape(reshape(x)) ==> reshape(x)`;
    - `transpose(x, identity) ==> x`; `transpose(transpose(x, p), q) ==> transpose(x, p∘q)`;
    - `x * 1`, `1 * x`, `x + 0`, `0 + x`, `x - 0`, `x / 1` `==> x` (same type only);
    - `x / c ==> x * (1 / c)` for a constant c (new weight), unless x has one element;
    - `x ** 2 ==> x * x`, `x ** 0.5 ==> sqrt(x)`, `x ** 1 ==> x` for a constant exponent;
    - `batch_norm(conv2d(x, W) [+ b0]) ==> conv2d(x, W * a) + (b0 * a + c)`, and the
      same after a rank-2 matmul, with weights rewritten at compile time; any other
      `batch_norm(x) ==> x * a + c` with per-channel constants (or ops on computed parameters);
    - `cast(cast(x : f32 -> ui8/i8/ui16/i16) -> f32) ==> where(x == x, x, 0)` where x is a clamped,
      rounded value inside the integer range (an int8 model's quantize-dequantize pair); for a
      uint8/uint16 step's `x = min(max(a, 0), hi)`, `==> where(b < hi, b, hi)` of
      `b = where(a > 0, a, 0)` instead (the same values, NaN to 0; x86's max and min).
    Ops left dead are erased; run `cse` and `dce` after it for the rest.

    Example:
    ```mlir
    %t = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
    %u = graph.transpose %t {perm = array<i64: 1, 0>} : tensor<8x4xf32> -> tensor<4x8xf32>
    %r = graph.reshape %u : tensor<4x8xf32> -> tensor<4x8xf32>
    ```
    becomes `%x` in place of `%r`.
    """

    name = "simplify-graph"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        patterns: list[RewritePattern] = [
            RemoveIdentityReshape(),
            MergeReshapes(),
            RemoveIdentityTranspose(),
            MergeTransposes(),
        ]
        store = weights_of(op)
        if store is not None:
            patterns += [RemoveNeutralOperand(store), DivByConstantToMul(store), PowByConstant(store),
                         FoldBatchNormIntoProducer(store), BatchNormToAffine(store), RemoveExactCastPair(store)]
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns), listener=keep_locations()).rewrite_module(op)
