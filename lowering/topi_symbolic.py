"""Compute definitions of `graph.iota` and `graph.dims` (dialects/graph_symbolic.py).

`lowering/topi.py` merges `SYMBOLIC_COMPUTE_DEFS` into its `COMPUTE_DEFS`. An
element of `graph.dims` is its expression's value (`te.sym`), picked by the
flat index where the tensor holds several.

Example: `graph.iota {start = 0, step = 1} : tensor<?xi64, #sym.dims<"n">>`
becomes a `te.compute` whose body is `index_cast(i)`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerType
from xdsl.ir import SSAValue

from ziggurat.dialects.graph_symbolic import DimsOp, IotaOp
from ziggurat.dtypes import scalar_type
from ziggurat.lowering.te_builder import Expr, compute
from ziggurat.lowering.topi_base import Define, Lookup


def _from_index(e: Expr, i: SSAValue, elt) -> SSAValue:
    if isinstance(elt, IntegerType):
        return e._add(arith.IndexCastOp(i, elt))
    return e.cast(e._add(arith.IndexCastOp(i, IntegerType(64))), elt)


def define_iota(op: IotaOp, b: Builder, x: Lookup) -> SSAValue:
    elt = scalar_type(op.result.type.element_type)  # type: ignore[attr-defined]
    start, step = op.start.value.data, op.step.value.data

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        return _from_index(e, e.iadd(e.imul(i[0], step), start), elt)

    return compute(b, "iota", op.result.type, body)  # type: ignore[arg-type]


def define_dims(op: DimsOp, b: Builder, x: Lookup) -> SSAValue:
    elt = scalar_type(op.result.type.element_type)  # type: ignore[attr-defined]
    shape = op.result.type.get_shape()  # type: ignore[attr-defined]
    values = op.dims

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        flat = e.affine([(v, int(s)) for v, s in zip(i, _strides(shape))]) if i else None
        out = _from_index(e, e.idx(values[-1]), elt)
        for k in range(len(values) - 2, -1, -1):  # select the k-th value where flat == k
            hit = e._add(arith.CmpiOp(flat, e.idx(k), "eq"))
            out = e.select(hit, _from_index(e, e.idx(values[k]), elt), out)
        return out

    return compute(b, "dims", op.result.type, body)  # type: ignore[arg-type]


def _strides(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return list(reversed(out))


SYMBOLIC_COMPUTE_DEFS: dict[type, Define] = {IotaOp: define_iota, DimsOp: define_dims}  # type: ignore[dict-item]
