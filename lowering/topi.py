"""Compute definitions: what each graph op means as tensor expressions.

This is ziggurat's TOPI. `COMPUTE_DEFS` maps each graph op class to a
function `define(op, b, x) -> SSAValue` that inserts te ops with builder `b`,
where `x(v)` gives the te-level value of the graph operand `v`. The table is
keyed by op class, not by string, and a test checks that every graph op with
a compute meaning has an entry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.builder import Builder
from xdsl.dialects.builtin import BFloat16Type, IntegerType, TensorType, f32, i1, i64
from xdsl.ir import Operation, SSAValue

from ziggurat.dialects import graph
from ziggurat.dialects.sym import tensor_of
from ziggurat.symbolic import Sym
from ziggurat.dialects.graph_dtype import BitAndOp, BitNotOp, BitOrOp, BitShiftOp, BitXorOp, CastOp, GatherOp, ModOp
from ziggurat.dtypes import is_sub_byte, is_unsigned, scalar_type
from ziggurat.lowering.te_builder import Expr, compute, reduce
from ziggurat.lowering.te_fp8 import decode as fp8_decode
from ziggurat.lowering.te_fp8 import encode as fp8_encode
from ziggurat.lowering.te_fp8 import fp8_format
from ziggurat.lowering.topi_base import NEG_INF, Define, Lookup, ints_of, shape_of  # noqa: F401 - re-exported


def _broadcast_index(e: Expr, idx: Sequence[SSAValue], shape: Sequence[int]) -> list[SSAValue]:
    """Output indices -> operand indices under numpy broadcasting."""
    offset = len(idx) - len(shape)
    zero: SSAValue | None = None
    out = []
    for d, size in enumerate(shape):
        if size == 1:
            zero = zero or e.idx(0)
            out.append(zero)
        else:
            out.append(idx[offset + d])
    return out


# ---------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------

UNARY_BODIES: dict[type[Operation], Callable[[Expr, SSAValue], SSAValue]] = {
    graph.ReluOp: lambda e, v: e.max(v, e.const(0.0)),
    graph.TanhOp: lambda e, v: e.tanh(v),
    graph.SigmoidOp: lambda e, v: e.div(e.const(1.0), e.add(e.const(1.0), e.exp(e.neg(v)))),
    graph.ExpOp: lambda e, v: e.exp(v),
    graph.SqrtOp: lambda e, v: e.sqrt(v),
    graph.NegOp: lambda e, v: e.neg(v),
    graph.ErfOp: lambda e, v: e.erf(v),
    graph.AbsOp: lambda e, v: e.abs(v),
    graph.LogOp: lambda e, v: e.log(v),
    graph.FloorOp: lambda e, v: e.floor(v),
    graph.CeilOp: lambda e, v: e.ceil(v),
    graph.SinOp: lambda e, v: e.sin(v),
    graph.CosOp: lambda e, v: e.cos(v),
    graph.AtanOp: lambda e, v: e.atan(v),
    graph.RoundOp: lambda e, v: e.roundeven(v),
    BitNotOp: lambda e, v: e.bitnot(v),
}

BINARY_BODIES: dict[type[Operation], Callable[[Expr, SSAValue, SSAValue, Operation], SSAValue]] = {
    graph.AddOp: lambda e, a, b, op: e.add(a, b),
    graph.SubOp: lambda e, a, b, op: e.sub(a, b),
    graph.MulOp: lambda e, a, b, op: e.mul(a, b),
    graph.DivOp: lambda e, a, b, op: e.div(a, b, _unsigned(op.operands[0])),
    graph.PowOp: lambda e, a, b, op: e.pow(a, b),
    graph.MaxOp: lambda e, a, b, op: e.max(a, b, _unsigned(op.operands[0])),
    graph.MinOp: lambda e, a, b, op: e.min(a, b, _unsigned(op.operands[0])),
    ModOp: lambda e, a, b, op: e.rem(a, b, _unsigned(op.operands[0]), floor=op.fmod.value.data == 0),
    BitShiftOp: lambda e, a, b, op: e.shift(a, b, op.direction.data == "left", not _unsigned(op.operands[0])),
    BitAndOp: lambda e, a, b, op: e.bitand(a, b),
    BitOrOp: lambda e, a, b, op: e.bitor(a, b),
    BitXorOp: lambda e, a, b, op: e.bitxor(a, b),
}


def _unsigned(v: SSAValue) -> bool:
    return is_unsigned(v.type.element_type)  # type: ignore[attr-defined]


def define_unary(op: Operation, b: Builder, x: Lookup) -> SSAValue:
    src = x(op.operands[0])
    fn = UNARY_BODIES[type(op)]
    tag = op.name.split(".")[1]
    return compute(b, tag, op.results[0].type, lambda e, i: fn(e, e.read(src, i)))  # type: ignore[arg-type]


def define_binary(op: Operation, b: Builder, x: Lookup) -> SSAValue:
    lhs, rhs = x(op.operands[0]), x(op.operands[1])
    fn = BINARY_BODIES[type(op)]
    tag = op.name.split(".")[1]

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        a = e.read(lhs, _broadcast_index(e, i, shape_of(lhs)))
        c = e.read(rhs, _broadcast_index(e, i, shape_of(rhs)))
        return fn(e, a, c, op)

    return compute(b, tag, op.results[0].type, body)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Linear algebra and convolution
# ---------------------------------------------------------------------------


def define_matmul(op: graph.MatmulOp, b: Builder, x: Lookup) -> SSAValue:
    lhs, rhs = x(op.lhs), x(op.rhs)
    a_shape, b_shape = shape_of(lhs), shape_of(rhs)
    out_type: TensorType = op.result.type  # type: ignore[assignment]
    rank = len(out_type.get_shape())
    k_extent = a_shape[-1]
    tb = op.is_transpose_b

    def body(e: Expr, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        (k,) = r
        batch = i[: rank - 2]
        a_idx = _broadcast_index(e, batch, a_shape[:-2]) + [i[rank - 2], k]
        b_last = [i[rank - 1], k] if tb else [k, i[rank - 1]]
        b_idx = _broadcast_index(e, batch, b_shape[:-2]) + b_last
        return e.mul(e.read(lhs, a_idx), e.read(rhs, b_idx))

    return reduce(b, "matmul", "add", 0.0, out_type, [k_extent], body)


def define_conv2d(op: graph.Conv2dOp, b: Builder, x: Lookup) -> SSAValue:
    inp, w = x(op.input), x(op.weight)
    _, _, ih, iw = shape_of(inp)
    co, cg, kh, kw = shape_of(w)
    sh, sw = ints_of(op.strides)
    pt, pl, _, _ = ints_of(op.pads)
    dh, dw = ints_of(op.dilations)
    groups = op.groups.value.data
    co_per_group = co // groups
    padded = any(ints_of(op.pads))

    def body(e: Expr, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        n, o, y, xx = i
        c, ky, kx = r
        ci = c if groups == 1 else e.affine([(e.idiv(o, co_per_group), cg), (c, 1)])
        hy = e.affine([(y, sh), (ky, dh)], -pt)
        wx = e.affine([(xx, sw), (kx, dw)], -pl)
        v = e.read(inp, [n, ci, hy, wx], pad=0.0 if padded else None)
        return e.mul(v, e.read(w, [o, c, ky, kx]))

    return reduce(b, "conv2d", "add", 0.0, op.result.type, [cg, kh, kw], body)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Pooling and normalization
# ---------------------------------------------------------------------------


def _window(e: Expr, op: graph.Pool2dOp, i: Sequence[SSAValue], r: Sequence[SSAValue]):
    sh, sw = ints_of(op.strides)
    pt, pl, _, _ = ints_of(op.pads)
    dh, dw = ints_of(op.dilations)
    n, c, y, xx = i
    ky, kx = r
    hy = e.affine([(y, sh), (ky, dh)], -pt)
    wx = e.affine([(xx, sw), (kx, dw)], -pl)
    return n, c, hy, wx


def _may_leave_input(op: graph.Pool2dOp) -> bool:
    """Whether some window reaches outside the input (pads or ceil_mode)."""
    ceil = op.ceil_mode is not None and bool(op.ceil_mode.value.data)
    return ceil or any(ints_of(op.pads))


def define_max_pool(op: graph.MaxPool2dOp, b: Builder, x: Lookup) -> SSAValue:
    inp = x(op.input)
    pad = NEG_INF if _may_leave_input(op) else None

    def body(e: Expr, i, r) -> SSAValue:
        return e.read(inp, list(_window(e, op, i, r)), pad=pad)

    return reduce(b, "max_pool2d", "max", NEG_INF, op.result.type, ints_of(op.kernel), body)  # type: ignore[arg-type]


def define_avg_pool(op: graph.AvgPool2dOp, b: Builder, x: Lookup) -> SSAValue:
    inp = x(op.input)
    _, _, ih, iw = shape_of(inp)
    pt, pl, pb, pr = ints_of(op.pads)
    include_pad = op.count_include_pad is not None and bool(op.count_include_pad.value.data)
    out_type: TensorType = op.result.type  # type: ignore[assignment]

    leaves = _may_leave_input(op)
    kh, kw = ints_of(op.kernel)

    def total(e: Expr, i, r) -> SSAValue:
        return e.read(inp, list(_window(e, op, i, r)), pad=0.0 if leaves else None)

    sums = reduce(b, "avg_pool2d_sum", "add", 0.0, out_type, (kh, kw), total)
    if not leaves:  # every window is full
        return compute(b, "avg_pool2d", out_type, lambda e, i: e.mul(e.read(sums, i), e.const(1.0 / (kh * kw))))
    # The divisor counts window positions inside the input (or inside the
    # padded input with count_include_pad), which handles edges and ceil_mode.
    lo_h, hi_h = (-pt, ih + pb) if include_pad else (0, ih)
    lo_w, hi_w = (-pl, iw + pr) if include_pad else (0, iw)

    def count(e: Expr, i, r) -> SSAValue:
        _, _, hy, wx = _window(e, op, i, r)
        inside = e.and_(e.in_range(hy, lo_h, hi_h), e.in_range(wx, lo_w, hi_w))
        return e.select(inside, e.const(1.0), e.const(0.0))

    counts = reduce(b, "avg_pool2d_count", "add", 0.0, out_type, ints_of(op.kernel), count)
    return compute(b, "avg_pool2d", out_type, lambda e, i: e.div(e.read(sums, i), e.read(counts, i)))


def define_global_avg_pool(op: graph.GlobalAvgPoolOp, b: Builder, x: Lookup) -> SSAValue:
    inp = x(op.input)
    shape = shape_of(inp)
    spatial = shape[2:]
    out_type: TensorType = op.result.type  # type: ignore[assignment]
    size = 1
    for s in spatial:
        size *= s

    def body(e: Expr, i, r) -> SSAValue:
        return e.read(inp, [i[0], i[1], *r])

    # The sums as [N, C]: the channels are the reduction nest's innermost spatial loop, so a channels-last
    # input (an int8 pointwise conv's rows, read transposed) takes the vector block along them; as
    # [N, C, 1, 1] that loop had trailing 1-trip loops and stayed scalar.
    sums = reduce(b, "global_avg_pool_sum", "add", 0.0, tensor_of(out_type.element_type, shape[:2]), spatial, body)
    if isinstance(size, Sym):  # a symbolic map: times the reciprocal of its run-time size
        return compute(b, "global_avg_pool", out_type,
                       lambda e, i: e.mul(e.read(sums, i[:2]), e.div(e.const(1.0), e.extent(size))))
    return compute(b, "global_avg_pool", out_type, lambda e, i: e.mul(e.read(sums, i[:2]), e.const(1.0 / size)))


def define_batch_norm(op: graph.BatchNormOp, b: Builder, x: Lookup) -> SSAValue:
    inp, scale, bias, mean, var = (x(v) for v in op.operands)
    eps = op.epsilon.value.data

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        c = [i[1]]
        inv = e.div(e.read(scale, c), e.sqrt(e.add(e.read(var, c), e.const(eps))))
        centered = e.sub(e.read(inp, i), e.read(mean, c))
        return e.add(e.mul(centered, inv), e.read(bias, c))

    return compute(b, "batch_norm", op.result.type, body)  # type: ignore[arg-type]


def define_softmax(op: graph.SoftmaxOp, b: Builder, x: Lookup) -> SSAValue:
    inp = x(op.input)
    shape = shape_of(inp)
    axis = op.axis.value.data
    out_type: TensorType = op.result.type  # type: ignore[assignment]
    kept = tensor_of(out_type.element_type, [1 if d == axis else s for d, s in enumerate(shape)])

    def along(i: Sequence[SSAValue], k: SSAValue) -> list[SSAValue]:
        return [k if d == axis else v for d, v in enumerate(i)]

    def reduced(e: Expr, i: Sequence[SSAValue]) -> list[SSAValue]:
        return along(i, e.idx(0))

    mx = reduce(b, "softmax_max", "max", NEG_INF, kept, [shape[axis]], lambda e, i, r: e.read(inp, along(i, r[0])))
    ex = compute(b, "softmax_exp", out_type, lambda e, i: e.exp(e.sub(e.read(inp, i), e.read(mx, reduced(e, i)))))
    sm = reduce(b, "softmax_sum", "add", 0.0, kept, [shape[axis]], lambda e, i, r: e.read(ex, along(i, r[0])))
    # times the row sum's reciprocal (one division per row once LLVM hoists it; what onnxruntime's
    # MLAS softmax does), not a division per element: within 1 ulp of exp / sum
    return compute(b, "softmax", out_type,
                   lambda e, i: e.mul(e.read(ex, i), e.div(e.const(1.0), e.read(sm, reduced(e, i)))))


# ---------------------------------------------------------------------------
# Injective data movement
# ---------------------------------------------------------------------------


def define_reshape(op: graph.ReshapeOp, b: Builder, x: Lookup) -> SSAValue:
    inp = x(op.input)
    in_shape, out_shape = shape_of(inp), shape_of(op.result)

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        strides = [1] * len(out_shape)
        for d in range(len(out_shape) - 2, -1, -1):
            strides[d] = strides[d + 1] * out_shape[d + 1]
        flat = e.affine([(v, s) for v, s, n in zip(i, strides, out_shape) if n != 1])
        idx = []
        rest = flat
        for d in range(len(in_shape) - 1, -1, -1):
            size = in_shape[d]
            if size == 1:
                idx.append(e.idx(0))
                continue
            idx.append(e.irem(rest, size) if d > 0 else rest)
            rest = e.idiv(rest, size)
        return e.read(inp, list(reversed(idx)))

    return compute(b, "reshape", op.result.type, body)  # type: ignore[arg-type]


def define_transpose(op: graph.TransposeOp, b: Builder, x: Lookup) -> SSAValue:
    inp = x(op.input)
    perm = ints_of(op.perm)

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        idx: list[SSAValue] = [None] * len(perm)  # type: ignore[list-item]
        for d, p in enumerate(perm):
            idx[p] = i[d]
        return e.read(inp, idx)

    return compute(b, "transpose", op.result.type, body)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# ONNX decomposition core: slice, concat, reduce, broadcast_to
# ---------------------------------------------------------------------------


def define_slice(op: graph.SliceOp, b: Builder, x: Lookup) -> SSAValue:
    inp = x(op.input)
    starts, steps = ints_of(op.starts), ints_of(op.steps)

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        return e.read(inp, [e.affine([(v, step)], start) for v, start, step in zip(i, starts, steps)])

    return compute(b, "slice", op.result.type, body)  # type: ignore[arg-type]


def define_concat(op: graph.ConcatOp, b: Builder, x: Lookup) -> SSAValue:
    """Each element reads the input whose range along `axis` holds it: a chain
    of selects, each read at an index clamped into its input (never out of
    bounds, whichever input is selected)."""
    inputs = [x(v) for v in op.inputs]
    axis = op.axis.value.data
    offsets, total = [], 0
    for v in inputs:
        offsets.append(total)
        total += shape_of(v)[axis]

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        def read(k: int) -> SSAValue:
            end = offsets[k] + shape_of(inputs[k])[axis]
            shifted = e.iadd(i[axis], -offsets[k]) if offsets[k] else i[axis]
            if len(inputs) > 1:
                shifted = e.select(e.in_range(i[axis], offsets[k], end), shifted, e.idx(0))
            return e.read(inputs[k], [shifted if d == axis else v for d, v in enumerate(i)])

        value = read(len(inputs) - 1)
        for k in range(len(inputs) - 2, -1, -1):
            end = offsets[k] + shape_of(inputs[k])[axis]
            value = e.select(e.ilt(i[axis], end), read(k), value)
        return value

    return compute(b, "concat", op.result.type, body)  # type: ignore[arg-type]


_REDUCE_COMBINERS = {"sum": ("add", 0.0), "mean": ("add", 0.0), "max": ("max", NEG_INF),
                     "min": ("min", float("inf")), "prod": ("mul", 1.0)}


def define_reduce(op: graph.ReduceOp, b: Builder, x: Lookup) -> SSAValue:
    inp = x(op.input)
    shape = shape_of(inp)
    axes = ints_of(op.axes)
    kind = op.kind.data
    keep = op.keeps_dims
    out_type: TensorType = op.result.type  # type: ignore[assignment]
    combiner, init = _REDUCE_COMBINERS[kind]
    elt = op.input.type.element_type  # type: ignore[attr-defined]
    if (_unsigned(op.input) or elt == i1) and kind in ("max", "min"):  # unsigned order (bool: or, and)
        all_ones = 1.0 if elt == i1 else -1.0  # -1 is all ones, signless
        combiner, init = ("umax", 0.0) if kind == "max" else ("umin", all_ones)

    def body(e: Expr, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        kept = iter(i if not keep else [v for d, v in enumerate(i) if d not in axes])
        red = iter(r)
        return e.read(inp, [next(red) if d in axes else next(kept) for d in range(len(shape))])

    extents = [shape[a] for a in axes]
    acc = reduce(b, f"reduce_{kind}", combiner, init, out_type, extents, body)
    if kind != "mean":
        return acc
    count = 1
    for n in extents:
        count *= n
    if isinstance(count, Sym):  # over a symbolic extent: times the reciprocal of its run-time count
        return compute(b, "reduce_mean", out_type,
                       lambda e, i: e.mul(e.read(acc, i), e.div(e.const(1.0), e.extent(count))))
    return compute(b, "reduce_mean", out_type, lambda e, i: e.mul(e.read(acc, i), e.const(1.0 / count)))


def define_compare(op: graph.CompareOp, b: Builder, x: Lookup) -> SSAValue:
    """An i1 (bool) result, or a float 1.0/0.0 mask when the result is float."""
    lhs, rhs = x(op.lhs), x(op.rhs)
    uns = _unsigned(op.lhs)
    as_mask = op.result.type.element_type != i1  # type: ignore[attr-defined]

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        a = e.read(lhs, _broadcast_index(e, i, shape_of(lhs)))
        c = e.read(rhs, _broadcast_index(e, i, shape_of(rhs)))
        holds = e.compare(a, c, op.kind.data, uns)
        return e.select(holds, e.const(1.0), e.const(0.0)) if as_mask else holds

    return compute(b, "compare", op.result.type, body)  # type: ignore[arg-type]


def define_where(op: graph.WhereOp, b: Builder, x: Lookup) -> SSAValue:
    cond, lhs, rhs = x(op.cond), x(op.lhs), x(op.rhs)

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        c = e.read(cond, _broadcast_index(e, i, shape_of(cond)))
        a = e.read(lhs, _broadcast_index(e, i, shape_of(lhs)))
        f = e.read(rhs, _broadcast_index(e, i, shape_of(rhs)))
        holds = c if c.type == i1 else e.cmpf(c, e.const(0.0, c.type), "une")
        return e.select(holds, a, f)

    return compute(b, "where", op.result.type, body)  # type: ignore[arg-type]


def _wrapped_index(e: Expr, raw: SSAValue, size: int) -> SSAValue:
    """An index read from a tensor as an index into a dim of `size`: integers
    below 0 count from the end, and the result is clamped into [0, size) so a
    bad index never reads outside the buffer. Float32 tables hold exact
    non-negative integers (compile-time tables of the frontend)."""
    k = e.to_index(raw)
    if not isinstance(raw.type, IntegerType):
        return k
    n = e.idx(size)
    k = e.select(e.ilt(k, 0), e.iadd(k, n), k)
    k = e.select(e.ilt(k, 0), e.idx(0), k)
    return e.select(e.ilt(k, size), k, e.idx(size - 1))


def define_gather_elements(op: graph.GatherElementsOp, b: Builder, x: Lookup) -> SSAValue:
    inp, indices = x(op.input), x(op.indices)
    axis = op.axis.value.data
    size = shape_of(inp)[axis]

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        k = _wrapped_index(e, e.read(indices, i), size)
        return e.read(inp, [k if d == axis else v for d, v in enumerate(i)])

    return compute(b, "gather_elements", op.result.type, body)  # type: ignore[arg-type]


def define_gather(op: GatherOp, b: Builder, x: Lookup) -> SSAValue:
    inp, indices = x(op.input), x(op.indices)
    axis = op.axis.value.data
    size = shape_of(inp)[axis]
    q = len(shape_of(indices))

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        k = _wrapped_index(e, e.read(indices, list(i[axis:axis + q])), size)
        return e.read(inp, [*i[:axis], k, *i[axis + q:]])

    return compute(b, "gather", op.result.type, body)  # type: ignore[arg-type]


def define_cast(op: CastOp, b: Builder, x: Lookup) -> SSAValue:
    """ONNX Cast; bfloat16 (stored as i16 bits) and float8 (i8 bits,
    lowering/te_fp8.py, saturating) go through float32."""
    inp = x(op.input)
    src_uns, dst_uns = _unsigned(op.input), _unsigned(op.result)
    src_elt, dst_elt = op.input.type.element_type, op.result.type.element_type  # type: ignore[attr-defined]
    to = scalar_type(dst_elt)

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        v = e.read(inp, i)
        if isinstance(src_elt, BFloat16Type):
            v = e.bf16_to_f32(v)
        elif fp8_format(src_elt) is not None:
            v = fp8_decode(e, v, fp8_format(src_elt))  # type: ignore[arg-type]
        elif is_sub_byte(src_elt):  # the value sits in the byte's low bits
            v = e.unpack_bits(v, src_elt.width.data, src_uns)  # type: ignore[attr-defined]
        if isinstance(dst_elt, BFloat16Type):
            return e.f32_to_bf16(e.cast(v, f32, src_uns))
        if fp8_format(dst_elt) is not None:
            return fp8_encode(e, e.cast(v, f32, src_uns), fp8_format(dst_elt), op.saturates,  # type: ignore[arg-type]
                              op.rounding)
        if is_sub_byte(dst_elt):  # truncate (floats) and wrap into the low bits
            wide = e.cast(v, i64, src_uns, False)
            return e.pack_bits(e.cast(wide, to), dst_elt.width.data)  # type: ignore[attr-defined]
        return e.cast(v, to, src_uns, dst_uns)

    return compute(b, "cast", op.result.type, body)  # type: ignore[arg-type]


def define_broadcast_to(op: graph.BroadcastToOp, b: Builder, x: Lookup) -> SSAValue:
    inp = x(op.input)
    return compute(b, "broadcast_to", op.result.type,  # type: ignore[arg-type]
                   lambda e, i: e.read(inp, _broadcast_index(e, i, shape_of(inp))))


COMPUTE_DEFS: dict[type[Operation], Define] = {
    **{cls: define_unary for cls in UNARY_BODIES},
    **{cls: define_binary for cls in BINARY_BODIES},
    graph.MatmulOp: define_matmul,  # type: ignore[dict-item]
    graph.Conv2dOp: define_conv2d,  # type: ignore[dict-item]
    graph.MaxPool2dOp: define_max_pool,  # type: ignore[dict-item]
    graph.AvgPool2dOp: define_avg_pool,  # type: ignore[dict-item]
    graph.GlobalAvgPoolOp: define_global_avg_pool,  # type: ignore[dict-item]
    graph.BatchNormOp: define_batch_norm,  # type: ignore[dict-item]
    graph.SoftmaxOp: define_softmax,  # type: ignore[dict-item]
    graph.ReshapeOp: define_reshape,  # type: ignore[dict-item]
    graph.TransposeOp: define_transpose,  # type: ignore[dict-item]
    graph.SliceOp: define_slice,  # type: ignore[dict-item]
    graph.ConcatOp: define_concat,  # type: ignore[dict-item]
    graph.ReduceOp: define_reduce,  # type: ignore[dict-item]
    graph.BroadcastToOp: define_broadcast_to,  # type: ignore[dict-item]
    graph.CompareOp: define_compare,  # type: ignore[dict-item]
    graph.WhereOp: define_where,  # type: ignore[dict-item]
    graph.GatherElementsOp: define_gather_elements,  # type: ignore[dict-item]
    GatherOp: define_gather,  # type: ignore[dict-item]
    CastOp: define_cast,  # type: ignore[dict-item]
}

# The blocked-layout ops (NCHW[x]c) of convert-layout: lowering/topi_layout.py.
from ziggurat.lowering.topi_layout import LAYOUT_COMPUTE_DEFS  # noqa: E402

COMPUTE_DEFS.update(LAYOUT_COMPUTE_DEFS)

from ziggurat.lowering.topi_quant import QUANT_COMPUTE_DEFS  # noqa: E402

COMPUTE_DEFS.update(QUANT_COMPUTE_DEFS)

from ziggurat.lowering.topi_bitcast import BITCAST_COMPUTE_DEFS  # noqa: E402

COMPUTE_DEFS.update(BITCAST_COMPUTE_DEFS)

# The Winograd F(2x2, 3x3) transforms of winograd-conv: lowering/topi_winograd.py.
from ziggurat.lowering.topi_winograd import WINOGRAD_COMPUTE_DEFS  # noqa: E402

COMPUTE_DEFS.update(WINOGRAD_COMPUTE_DEFS)

from ziggurat.lowering.topi_symbolic import SYMBOLIC_COMPUTE_DEFS  # noqa: E402

COMPUTE_DEFS.update(SYMBOLIC_COMPUTE_DEFS)
