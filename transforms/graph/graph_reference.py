"""A numpy reference evaluator of graph ops, for compile-time constant folding.

`EVALUATORS` maps a graph op class to `fn(op, args) -> ndarray`, with the
same semantics as the op's compute definition in `lowering/topi.py` (a test
compares the two). It runs at COMPILE time only, on constants; the model's
ops at run time always run as generated kernels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import builtin
from xdsl.ir import Operation

import ziggurat.dtypes as dtypes
from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp

Evaluate = Callable[[Operation, Sequence[np.ndarray]], np.ndarray]


def _ints(attr) -> tuple[int, ...]:
    return tuple(attr.get_values())


def _shape(op: Operation) -> tuple[int, ...]:
    return tuple(op.results[0].type.get_shape())  # type: ignore[attr-defined]


_erf = np.vectorize(math.erf, otypes=[np.float64])

UNARY: dict[type[Operation], Callable[[np.ndarray], np.ndarray]] = {
    graph.ReluOp: lambda x: np.maximum(x, 0),
    graph.TanhOp: np.tanh,
    graph.SigmoidOp: lambda x: 1 / (1 + np.exp(-x)),
    graph.ExpOp: np.exp,
    graph.SqrtOp: np.sqrt,
    graph.NegOp: np.negative,
    graph.ErfOp: _erf,
    graph.AbsOp: np.abs,
    graph.LogOp: np.log,
    graph.FloorOp: np.floor,
    graph.CeilOp: np.ceil,
    graph.RoundOp: np.round,  # halves to even, as ONNX Round
}

BINARY: dict[type[Operation], Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    graph.AddOp: np.add,
    graph.SubOp: np.subtract,
    graph.MulOp: np.multiply,
    graph.DivOp: np.divide,
    graph.PowOp: np.power,
    graph.MaxOp: np.maximum,
    graph.MinOp: np.minimum,
}


def _matmul(op: graph.MatmulOp, args: Sequence[np.ndarray]) -> np.ndarray:
    a, b = args
    return np.matmul(a, np.swapaxes(b, -1, -2) if op.is_transpose_b else b)


def _batch_norm(op: graph.BatchNormOp, args: Sequence[np.ndarray]) -> np.ndarray:
    x, scale, bias, mean, var = args
    shape = (1, -1) + (1,) * (x.ndim - 2)
    inv = scale / np.sqrt(var + op.epsilon.value.data)
    return (x - mean.reshape(shape)) * inv.reshape(shape) + bias.reshape(shape)


def _softmax(op: graph.SoftmaxOp, args: Sequence[np.ndarray]) -> np.ndarray:
    axis = op.axis.value.data
    e = np.exp(args[0] - args[0].max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _slice(op: graph.SliceOp, args: Sequence[np.ndarray]) -> np.ndarray:
    starts, steps = _ints(op.starts), _ints(op.steps)
    index = [s + np.arange(n) * st for s, st, n in zip(starts, steps, _shape(op))]
    return args[0][np.ix_(*index)]


_COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
            "eq": np.equal, "ne": np.not_equal}  # ordered; `ne` holds for NaN, as lowering's compare


def _lookup(op: graph.LookupOp, args: Sequence[np.ndarray]) -> np.ndarray:
    x, table = (np.asarray(a) for a in args)
    k = np.nan_to_num(x.astype(np.float64) - op.offset.value.data, nan=0.0)
    k = np.clip(np.trunc(k), 0, table.shape[op.entry_dim] - 1).astype(np.int64)
    grid = np.indices(x.shape, sparse=True)
    return table[tuple(op.table_index([grid[d] for d in op.table_dims], k))]


def _reduce(op: graph.ReduceOp, args: Sequence[np.ndarray]) -> np.ndarray:
    fn = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}[op.kind.data]
    return fn(args[0], axis=_ints(op.axes)).reshape(_shape(op))


EVALUATORS: dict[type[Operation], Evaluate] = {
    **{cls: (lambda op, a, f=f: f(a[0])) for cls, f in UNARY.items()},
    **{cls: (lambda op, a, f=f: f(a[0], a[1])) for cls, f in BINARY.items()},
    graph.MatmulOp: _matmul,  # type: ignore[dict-item]
    graph.BatchNormOp: _batch_norm,  # type: ignore[dict-item]
    graph.SoftmaxOp: _softmax,  # type: ignore[dict-item]
    graph.ReshapeOp: lambda op, a: a[0].reshape(_shape(op)),
    graph.TransposeOp: lambda op, a: np.transpose(a[0], _ints(op.perm)),  # type: ignore[attr-defined]
    graph.SliceOp: _slice,  # type: ignore[dict-item]
    graph.ConcatOp: lambda op, a: np.concatenate(a, axis=op.axis.value.data),  # type: ignore[attr-defined]
    graph.ReduceOp: _reduce,  # type: ignore[dict-item]
    graph.BroadcastToOp: lambda op, a: np.broadcast_to(a[0], _shape(op)),
    graph.CompareOp: lambda op, a: _COMPARE[op.kind.data](a[0], a[1]),  # type: ignore[attr-defined]
    graph.WhereOp: lambda op, a: np.where(a[0] != 0, a[1], a[2]),
    graph.LookupOp: _lookup,  # type: ignore[dict-item]
}


MOVEMENT = (graph.ReshapeOp, graph.TransposeOp, graph.SliceOp, graph.ConcatOp, graph.BroadcastToOp)
"""Ops whose evaluation only moves elements: exact on every element type."""


INTEGER = (graph.AddOp, graph.SubOp, graph.MulOp, graph.MaxOp, graph.MinOp)
"""Ops exact on 8- to 64-bit integers when computed in int64 and wrapped to the result type
(what the generated code's wrapping arithmetic gives); ReduceOp's sum, max and min too."""


def _standard_int(elt) -> bool:
    return dtypes.is_int(elt) and elt.width.data in (8, 16, 32, 64)


def _exact_cast(op: Operation) -> bool:
    """A cast numpy performs as the generated code does: integer to integer (wrapping), integer to
    float32/64 (round to nearest), float to a wider or equal float. Not float to integer (ours
    saturates) nor to or from bool, bfloat16 or float8."""
    src, dst = (dtypes.element_of(v.type) for v in (op.operands[0], op.results[0]))
    wide = (builtin.Float32Type, builtin.Float64Type)
    if _standard_int(src):
        return _standard_int(dst) or isinstance(dst, wide)
    return isinstance(src, (builtin.Float16Type, *wide)) and isinstance(dst, wide) and dst.bitwidth >= src.bitwidth


def _integer_only(op: Operation) -> bool:
    if not all(_standard_int(dtypes.element_of(v.type)) for v in (*op.operands, *op.results)):
        return False
    return isinstance(op, INTEGER) or (isinstance(op, graph.ReduceOp) and op.kind.data in ("sum", "max", "min"))


def supports(op: Operation) -> bool:
    """Whether `evaluate` has `op`'s semantics: arithmetic on float results
    (computed in float64, rounded once), data movement on any element type,
    wrapping integer arithmetic (`INTEGER`, integer sums, maxima and minima) and
    the casts of `_exact_cast`."""
    if isinstance(op, CastOp):
        return _exact_cast(op)
    if type(op) not in EVALUATORS:
        return False
    return isinstance(op, MOVEMENT) or _integer_only(op) or all(
        dtypes.is_float(dtypes.element_of(v.type)) for v in (*op.operands, *op.results))


LANEWISE = frozenset((*UNARY, *BINARY, graph.CompareOp, graph.WhereOp, CastOp))
"""Ops whose evaluation works lane by lane on arrays of any broadcastable shapes (`apply`)."""


def evaluate(op: Operation, args: Sequence[np.ndarray]) -> np.ndarray:
    """`op` applied to constant `args`, as a C-contiguous array of the result's dtype."""
    return np.ascontiguousarray(apply(op, args).reshape(_shape(op)))


def apply(op: Operation, args: Sequence[np.ndarray]) -> np.ndarray:
    """`evaluate` without the result's shape: for a `LANEWISE` op, its values on arrays of any
    shape (quantized-lookup evaluates chains on the 256 values of a quantized one)."""
    dtype = dtypes.to_numpy(dtypes.element_of(op.results[0].type))
    if isinstance(op, CastOp):
        out = np.asarray(args[0]).astype(dtype)
    elif _integer_only(op):  # int64, then wrapped by the cast below
        out = EVALUATORS[type(op)](op, [np.asarray(a).astype(np.int64) for a in args])
        out = np.asarray(out).astype(np.int64).astype(dtype)
    elif isinstance(op, MOVEMENT):
        out = EVALUATORS[type(op)](op, [np.asarray(a) for a in args])
    else:
        out = EVALUATORS[type(op)](op, [np.asarray(a, dtype=np.float64) for a in args])
    return np.asarray(out, dtype=dtype)
