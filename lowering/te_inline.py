"""Inlining of te.compute definitions into their single consumer (TVM's compute_inline).

A padded read (`te.read ... pad v`: a layout transform with a halo, a Pad) inlines too where
its consumer is a te.compute: the body is evaluated at the index clamped into range and the pad
value selected outside, as convert-te-to-loop does for a buffer. A reduction's padded read (a
pool or conv window) keeps the producer's buffer: inlined, the body would run once per tap.

Used by `convert-graph-to-te` on fused kernels: a group's chain of
elementwise/injective definitions collapses into one `te.compute` (or into
the body of the reduction that reads it), so its intermediates never reach
memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import BlockArgument, SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import te


def _index_key(v: SSAValue) -> object:
    """An index as a key: an `arith.constant` by its value (each read may have its own), else itself."""
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return ("const", owner.value.value.data)
    return v


def merge_equal_reads(value: SSAValue) -> int:
    """Makes the te.reads of `value` that one block holds at equal indices (and pad) one read, the
    first: a body that reads its producer twice at one point (`x == x ? x : 0`, a NaN guard; `x * x`)
    reads it once, so the producer can inline. Returns how many reads went."""
    first: dict[tuple, te.ReadOp] = {}
    merged = 0
    for use in list(value.uses):
        read, block = use.operation, use.operation.parent_block()
        if not isinstance(read, te.ReadOp) or read.tensor is not value or block is None:
            continue
        key = (id(block), read.pad, tuple(_index_key(i) for i in read.indices))
        kept = first.get(key)
        if kept is None:
            first[key] = read
            continue
        if block.get_operation_index(read) < block.get_operation_index(kept):
            first[key], read, kept = read, kept, read
        read.result.replace_all_uses_with(kept.result)
        block.erase_op(read)
        merged += 1
    return merged


def _sole_read(value: SSAValue) -> te.ReadOp | None:
    """The one te.read of `value` in a compute/reduce body, if that is its only use."""
    uses = list(value.uses)
    if len(uses) != 1:
        return None
    read = uses[0].operation
    if not isinstance(read, te.ReadOp):
        return None
    consumer = read.parent_op()
    if not isinstance(consumer, te.ComputeOp | te.ReduceOp):
        return None
    if read.pad is not None and not isinstance(consumer, te.ComputeOp):
        return None  # a window (pool, conv) would evaluate the body once per tap: it keeps its buffer
    return read


def inline_compute(producer: te.ComputeOp, read: te.ReadOp) -> None:
    """Replaces `read` by `producer`'s body evaluated at the read's indices.

    The body's ops are moved, not cloned: the caller erases `producer` next,
    and a chain of n inlined computes then costs O(n), not O(n^2) clones.
    """
    body = producer.body.block
    block = read.parent_block()
    assert block is not None
    indices, inside = list(read.indices), None
    if read.pad is not None:  # the body at the index clamped into the producer's shape, then the pad outside
        consumer = read.parent_op()
        extents = consumer.result.type.get_shape()  # type: ignore[union-attr]  # a te.compute's variables
        args = consumer.body.block.args  # type: ignore[union-attr]

        def fits(i: SSAValue, size: int) -> bool:
            return isinstance(i, BlockArgument) and i in args and extents[i.index] <= size

        indices, inside = clamp_indices(Builder(InsertPoint.before(read)), read.indices,
                                        producer.result.type.get_shape(), fits)
    for arg, index in zip(body.args, indices):
        hint = index.name_hint
        arg.replace_all_uses_with(index)
        index.name_hint = hint  # as a clone would leave it: the index keeps its own name
    value: SSAValue | None = None
    for op in list(body.ops):
        if isinstance(op, te.YieldOp):
            value = op.value
            break
        body.detach_op(op)
        block.insert_op_before(op, read)
    assert value is not None, "te bodies end with te.yield (verified)"
    if inside is not None:
        pad = arith.ConstantOp(read.pad)
        pick = arith.SelectOp(inside, value, pad.result)
        block.insert_ops_before([pad, pick], read)
        value = pick.result
    read.result.replace_all_uses_with(value)
    block.erase_op(read)


def clamp_indices(b: Builder, indices: Sequence[SSAValue], shape: Sequence[int | SSAValue],
                  fits: Callable[[SSAValue, int], bool]) -> tuple[list[SSAValue], SSAValue | None]:
    """The indices of a padded read clamped into `shape` (0 where out of range) and whether all were
    in range (None: no index needed a test), as ops inserted at `b`; an index for which
    `fits(index, size)` holds (a bare loop variable whose extent fits) is kept as it is. The clamp of
    convert-te-to-loop's padded loads and of a body inlined at a padded read (`inline_compute`). A size
    may be an `index` value (a symbolic extent's, in a kernel over symbols)."""
    zero = b.insert(arith.ConstantOp(IntegerAttr(0, IndexType()))).result
    inside: SSAValue | None = None
    safe: list[SSAValue] = []
    for i, size in zip(indices, shape):
        if fits(i, size):
            safe.append(i)
            continue
        lo = b.insert(arith.CmpiOp(i, zero, "sge")).result
        n = size if isinstance(size, SSAValue) else b.insert(arith.ConstantOp(IntegerAttr(size, IndexType()))).result
        hi = b.insert(arith.CmpiOp(i, n, "slt")).result
        ok = b.insert(arith.AndIOp(lo, hi)).result
        inside = ok if inside is None else b.insert(arith.AndIOp(inside, ok)).result
        safe.append(b.insert(arith.SelectOp(ok, i, zero)).result)
    return safe, inside


def inline_computes(kernel: func.FuncOp) -> int:
    """Inlines every te.compute that exactly one read consumes (after `merge_equal_reads`); returns how many.

    Consumers go first (reverse block order): a producer's body then moves
    into the read's block once, wherever earlier inlining put that read, so
    every op moves once however long the chain (the result is the same as
    inlining producers first: each body lands right before its read).
    """
    count = 0
    for op in reversed(list(kernel.body.block.ops)):
        if not isinstance(op, te.ComputeOp):
            continue
        merge_equal_reads(op.result)
        read = _sole_read(op.result)
        if read is None:
            continue
        inline_compute(op, read)
        kernel.body.block.erase_op(op)
        count += 1
    return count
