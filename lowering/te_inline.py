"""Inlining of te.compute definitions into their single consumer (TVM's compute_inline).

Used by `convert-graph-to-te` on fused kernels: a group's chain of
elementwise/injective definitions collapses into one `te.compute` (or into
the body of the reduction that reads it), so its intermediates never reach
memory.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

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
    """Replaces `read` by `producer`'s body evaluated at the read's indices."""
    body = producer.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(body.args, read.indices))
    block = read.parent_block()
    assert block is not None
    value: SSAValue | None = None
    for op in body.ops:
        if isinstance(op, te.YieldOp):
            value = mapping.get(op.value, op.value)
            break
        clone: Operation = op.clone(value_mapper=mapping)
        block.insert_op_before(clone, read)
    assert value is not None, "te bodies end with te.yield (verified)"
    read.result.replace_all_uses_with(value)
    block.erase_op(read)


def inline_computes(kernel: func.FuncOp) -> int:
    """Inlines every te.compute that exactly one read consumes; returns how many."""
    count = 0
    for op in list(kernel.body.block.ops):
        if not isinstance(op, te.ComputeOp):
            continue
        read = _sole_read(op.result)
        if read is None:
            continue
        inline_compute(op, read)
        kernel.body.block.erase_op(op)
        count += 1
    return count
