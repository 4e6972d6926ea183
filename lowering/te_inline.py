"""Inlining of te.compute definitions into their single consumer (TVM's compute_inline).

Used by `convert-graph-to-te` on fused kernels: a group's chain of
elementwise/injective definitions collapses into one `te.compute` (or into
the body of the reduction that reads it), so its intermediates never reach
memory.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.ir import SSAValue

from ziggurat.dialects import te


def _sole_read(value: SSAValue) -> te.ReadOp | None:
    """The one te.read of `value` in a compute/reduce body, if that is its only use."""
    uses = list(value.uses)
    if len(uses) != 1:
        return None
    read = uses[0].operation
    if not isinstance(read, te.ReadOp) or read.pad is not None:
        return None
    if not isinstance(read.parent_op(), te.ComputeOp | te.ReduceOp):
        return None
    return read


def inline_compute(producer: te.ComputeOp, read: te.ReadOp) -> None:
    """Replaces `read` by `producer`'s body evaluated at the read's indices.

    The body's ops are moved, not cloned: the caller erases `producer` next,
    and a chain of n inlined computes then costs O(n), not O(n^2) clones.
    """
    body = producer.body.block
    block = read.parent_block()
    assert block is not None
    for arg, index in zip(body.args, read.indices):
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
    read.result.replace_all_uses_with(value)
    block.erase_op(read)


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
