"""Einsum decomposed onto transpose, reshape, slice, reduce and batched matmul.

The equation is parsed (explicit `->` output or the implicit alphabetical
one, `...` expanded to one label per broadcast dim, aligned from the right),
then:

1. a label repeated within one operand takes the diagonal: the two dims are
   moved last, merged, and every (n+1)-th element is sliced out;
2. a label that no other operand and not the output needs is summed away
   (`graph.reduce`);
3. operands are contracted left to right; for each pair the labels are split
   into batch (both, still needed), contracted (both, not needed) and
   free ones, each side is transposed and reshaped to [B, M, K] and [B, K, N],
   and one `graph.matmul` forms the product;
4. the result is summed over what the output drops and transposed to the
   output order.

```mlir
// Einsum "bij,bjk->bik" on tensor<2x3x4xf32> and tensor<2x4x5xf32>
%y = graph.matmul %a, %b : tensor<2x3x4xf32>, tensor<2x4x5xf32> -> tensor<2x3x5xf32>
```
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import onnx
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of
from ziggurat.frontends.onnx.convert_index import reduce
from ziggurat.frontends.onnx.convert_window import like, reshape, transpose

Term = list[str]
"""One label per dim; `...` dims get labels that cannot occur in an equation."""


def _ellipsis_label(k: int) -> str:
    return f"...{k}"  # k counts from the right


def parse_equation(ctx: ConversionContext, equation: str, ranks: Sequence[int]) -> tuple[list[Term], Term]:
    """The label lists of the operands and of the output."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    parts = lhs.split(",")
    if len(parts) != len(ranks):
        raise ctx.shape_error(f"equation '{equation}' names {len(parts)} operands; the node has {len(ranks)}")

    def labels(part: str, rank: int | None) -> Term:
        head, dots, tail = part.partition("...")
        if any(not c.isalpha() for c in head + tail) or "..." in tail:
            raise ctx.shape_error(f"equation term '{part}' holds something other than letters and one '...'")
        if not dots:
            if rank is not None and len(head) != rank:
                raise ctx.shape_error(f"equation term '{part}' has {len(head)} labels for a rank-{rank} operand")
            return list(head)
        width = (rank - len(head) - len(tail)) if rank is not None else max_ellipsis
        if width < 0:
            raise ctx.shape_error(f"equation term '{part}' has more labels than the operand's rank {rank}")
        return [*head, *(_ellipsis_label(k) for k in range(width - 1, -1, -1)), *tail]

    max_ellipsis = 0
    terms = []
    for part, rank in zip(parts, ranks):
        term = labels(part, rank)
        max_ellipsis = max(max_ellipsis, sum(label.startswith("...") for label in term))
        terms.append(term)
    if arrow:
        out = labels(rhs, None)
        if len(set(out)) != len(out):
            raise ctx.shape_error(f"output term '{rhs}' repeats a label")
        known = {label for term in terms for label in term}
        if any(label not in known for label in out):
            raise ctx.shape_error(f"output term '{rhs}' has a label no operand has")
    else:
        counts: dict[str, int] = {}
        for term in terms:
            for label in term:
                counts[label] = counts.get(label, 0) + 1
        out = [_ellipsis_label(k) for k in range(max_ellipsis - 1, -1, -1)]
        out += sorted(label for label, n in counts.items() if n == 1 and not label.startswith("..."))
    return terms, out


class Operand:
    """A value with one label per dim."""

    def __init__(self, value: SSAValue, labels: Term):
        self.value, self.labels = value, list(labels)

    @property
    def shape(self) -> tuple[int, ...]:
        return shape_of(self.value)

    def size_of(self, label: str) -> int:
        return self.shape[self.labels.index(label)]


def _diagonals(ctx: ConversionContext, op: Operand) -> Operand:
    """Takes the diagonal of every label repeated within `op`."""
    while len(set(op.labels)) != len(op.labels):
        label = next(lb for lb in op.labels if op.labels.count(lb) > 1)
        p = op.labels.index(label)
        q = op.labels.index(label, p + 1)
        shape = op.shape
        if shape[p] != shape[q]:
            raise ctx.shape_error(f"label '{label}' has sizes {shape[p]} and {shape[q]} in one operand")
        n = shape[p]
        rest = [d for d in range(len(shape)) if d not in (p, q)]
        moved = transpose(ctx, op.value, [*rest, p, q])
        lead = [shape[d] for d in rest]
        flat = reshape(ctx, moved, [*lead, n * n])
        diag = ctx.emit(graph.SliceOp(flat, [0] * (len(lead) + 1), [1] * len(lead) + [n + 1], like(flat, [*lead, n])))
        op = Operand(diag, [op.labels[d] for d in rest] + [label])
    return op


def _sum_out(ctx: ConversionContext, op: Operand, keep: set[str]) -> Operand:
    """Sums `op` over its labels outside `keep`."""
    axes = [d for d, label in enumerate(op.labels) if label not in keep]
    if not axes:
        return op
    if len(axes) == len(op.labels):  # a total, kept as one size-1 dim (labels never meet it)
        total = reduce(ctx, op.value, "sum", axes, True)
        return Operand(reshape(ctx, total, [1]), [f"...total{id(total)}"])
    return Operand(reduce(ctx, op.value, "sum", axes, False), [lb for d, lb in enumerate(op.labels) if d not in axes])


def _arrange(ctx: ConversionContext, op: Operand, order: Term) -> SSAValue:
    return transpose(ctx, op.value, [op.labels.index(label) for label in order])


def _broadcast_label(ctx: ConversionContext, op: Operand, sizes: dict[str, int]) -> Operand:
    """`op` with its size-1 dims grown to the sizes other operands give the same label."""
    target = [sizes[label] for label in op.labels]
    if list(op.shape) == target:
        return op
    return Operand(ctx.emit(graph.BroadcastToOp(op.value, like(op.value, target))), op.labels)


def _contract(ctx: ConversionContext, a: Operand, b: Operand, needed: set[str]) -> Operand:
    """The product of `a` and `b`, summed over the shared labels that `needed` lacks."""
    batch = [lb for lb in a.labels if lb in b.labels and lb in needed]
    summed = [lb for lb in a.labels if lb in b.labels and lb not in needed]
    a_free = [lb for lb in a.labels if lb not in b.labels]
    b_free = [lb for lb in b.labels if lb not in a.labels]
    size = {lb: a.size_of(lb) for lb in a.labels} | {lb: b.size_of(lb) for lb in b.labels}
    nb, m = math.prod(size[lb] for lb in batch), math.prod(size[lb] for lb in a_free)
    k, n = math.prod(size[lb] for lb in summed), math.prod(size[lb] for lb in b_free)
    lhs = reshape(ctx, _arrange(ctx, a, batch + a_free + summed), [nb, m, k])
    rhs = reshape(ctx, _arrange(ctx, b, batch + summed + b_free), [nb, k, n])
    product = ctx.emit(graph.MatmulOp(lhs, rhs, like(lhs, [nb, m, n])))
    labels = batch + a_free + b_free
    return Operand(reshape(ctx, product, [size[lb] for lb in labels]), labels)


def convert_einsum(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Einsum (opsets 12+) over any number of operands, with `...` broadcasting,
    diagonals (repeated labels) and the implicit output form."""
    values = [ctx.value(name) for name in node.input]
    terms, out = parse_equation(ctx, attributes(node)["equation"], [len(shape_of(v)) for v in values])
    operands = [_diagonals(ctx, Operand(v, t)) for v, t in zip(values, terms)]
    sizes: dict[str, int] = {}
    for op in operands:
        for label, n in zip(op.labels, op.shape):
            if sizes.get(label, 1) not in (1, n) and n != 1:
                raise ctx.shape_error(f"label '{label}' has sizes {sizes[label]} and {n}")
            sizes[label] = max(sizes.get(label, 1), n)
    operands = [_broadcast_label(ctx, op, sizes) for op in operands]
    acc = None
    for i, op in enumerate(operands):
        needed = set(out).union(*(o.labels for o in operands[i + 1:]))
        op = _sum_out(ctx, op, needed | (set(acc.labels) if acc else set()))
        if acc is None:
            acc = op
            continue
        acc = _sum_out(ctx, acc, needed | set(op.labels))
        acc = _contract(ctx, acc, op, needed)
    assert acc is not None
    acc = _sum_out(ctx, acc, set(out))
    if not out:  # a scalar
        return [reshape(ctx, acc.value, [])]
    return [_arrange(ctx, acc, out)]


EINSUM_CONVERTERS = {"Einsum": convert_einsum}
"""ONNX op type -> converter, merged into the importer's table."""
