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

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import SSAValue

from ziggurat.dialects import te


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
        indices, inside = _clamped(read, producer.result.type.get_shape())
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


def _clamped(read: te.ReadOp, shape: tuple[int, ...]) -> tuple[list[SSAValue], SSAValue | None]:
    """A padded read's indices clamped into `shape` (0 where out of range) and whether all were in
    range (None: every index is a constant in range), as ops before `read`; the same clamp and select
    convert-te-to-loop gives a padded read of a buffer."""
    ops: list = []
    zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
    ops.append(zero)
    inside: SSAValue | None = None
    safe: list[SSAValue] = []
    for i, size in zip(read.indices, shape):
        n = arith.ConstantOp(IntegerAttr(size, IndexType()))
        lo, hi = arith.CmpiOp(i, zero.result, "sge"), arith.CmpiOp(i, n.result, "slt")
        ok = arith.AndIOp(lo.result, hi.result)
        pick = arith.SelectOp(ok.result, i, zero.result)
        ops += [n, lo, hi, ok, pick]
        if inside is None:
            inside = ok.result
        else:
            both = arith.AndIOp(inside, ok.result)
            ops.append(both)
            inside = both.result
        safe.append(pick.result)
    block = read.parent_block()
    assert block is not None
    block.insert_ops_before(ops, read)
    return safe, inside


def inline_computes(kernel: func.FuncOp) -> int:
    """Inlines every te.compute that exactly one read consumes; returns how many.

    Consumers go first (reverse block order): a producer's body then moves
    into the read's block once, wherever earlier inlining put that read, so
    every op moves once however long the chain (the result is the same as
    inlining producers first: each body lands right before its read).
    """
    count = 0
    for op in reversed(list(kernel.body.block.ops)):
        if not isinstance(op, te.ComputeOp):
            continue
        read = _sole_read(op.result)
        if read is None:
            continue
        inline_compute(op, read)
        kernel.body.block.erase_op(op)
        count += 1
    return count
