"""Epilogue fusion: elementwise nests after a scheduled reduction run inside its store blocks.

convert-te-to-loop lowers a fused group such as matmul + bias + GELU to one
nest per stage, with the stages' results in local buffers: the register
block stores its tile into a local `[M, N]` buffer, then a bias nest and a
GELU nest each sweep all of it again (three passes over a buffer as large as
L2 for bert's FFN, each a parallel region of its own). `fuse_epilogues`
moves each such elementwise stage into the producer's store blocks
(`<tag>_store`): the stored vector goes through the stage's ops in
registers and only the last result reaches memory. It is TVM's
`reverse_compute_at` of the epilogue under the output tile followed by
`compute_inline` of the intermediate.

A stage qualifies when it is a perfect nest with one block over exactly the
intermediate's shape, reads the intermediate only at its own indices, writes
one buffer at its own indices, and every other read steps 0 or 1 along the
innermost index (so the vectorized lane loop of the store block stays vector
code); the intermediate must be a local buffer that only the store blocks
write and only this stage reads, and the store blocks must sit in a
vectorized lane loop (register blocks; a dot tile's scalar stores keep
their stages, which vectorize on their own). Extents may be run-time ones
(a kernel over symbols, whose register blocks dynamic_block.py builds): the
loop bounds and the buffers' `#sym.dims` are compared as expressions.
"""

from __future__ import annotations

from xdsl.ir import Block, SSAValue

from ziggurat.dialects import loop
from ziggurat.dialects.sym import shape_of
from ziggurat.lowering.convert_loop_to_hw import const_int
from ziggurat.transforms.loop.sym_index import dim_of, symbol_dims
from ziggurat.transforms.schedule.nest import chain, stride

_SAFE = ("arith.", "math.")


def _identity(indices, vars_, shape) -> bool:
    """Each index is the block variable of its dimension, or the constant 0 on a dimension of extent 1."""
    if len(indices) != len(vars_) or len(shape) != len(vars_):
        return False
    return all(i is v or (n == 1 and const_int(i) == 0) for i, v, n in zip(indices, vars_, shape))


def _local(buf: SSAValue) -> bool:
    return isinstance(buf.owner, loop.AllocOp) and buf.owner.scope.data == "local"


def _stage(top: loop.ForOp, syms: dict):
    """(block, intermediate read, its loads, the store) of an elementwise stage nest, else None.
    `syms`: the kernel's symbol arguments (sym_index.symbol_dims), for loops with run-time bounds."""
    loops = chain(top)
    body = list(loops[-1].body.block.ops)
    if len(body) != 1 or not isinstance(body[0], loop.BlockOp):
        return None
    blk = body[0]
    if set(blk.iter_kinds.data) != {"S"} or list(blk.operands) != [f.iv for f in loops]:
        return None
    if any(f.lower != 0 or f.step.value.data != 1 for f in loops):
        return None
    shape = [dim_of(f.upper, syms) for f in loops]
    ops = list(blk.body.block.ops)
    stores = [o for o in ops if isinstance(o, loop.StoreOp)]
    if None in shape or len(stores) != 1 or stores[0] is not ops[-1]:
        return None
    store = stores[0]
    if list(shape_of(store.buffer.type)) != shape or not _identity(store.indices, blk.vars, shape):
        return None
    last = blk.vars[-1]
    memo: dict = {}
    reads: dict[SSAValue, list[loop.LoadOp]] = {}
    for o in ops[:-1]:
        if isinstance(o, loop.LoadOp):
            if list(shape_of(o.buffer.type)) == shape and _identity(o.indices, blk.vars, shape):
                reads.setdefault(o.buffer, []).append(o)
                continue
            steps = [stride(i, last, memo) for i in o.indices] or [0]
            if steps[-1] not in (0, 1) or any(s != 0 for s in steps[:-1]):
                return None
        elif not o.name.startswith(_SAFE) or o.regions:
            return None
    cands = [(buf, loads) for buf, loads in reads.items() if _local(buf)]
    if len(cands) != 1:
        return None
    return blk, cands[0][0], cands[0][1], store


def _producers(fn, buf: SSAValue, consumer: loop.BlockOp) -> list[loop.StoreOp] | None:
    """The stores into `buf` when all of them sit in `<tag>_store` blocks at the block's own indices and
    `consumer` is the only other user; else None. A store block may bind one more variable than
    `buf` has dimensions, after them (a run-time register block's lane: dynamic_block.py)."""
    shape = list(shape_of(buf.type))
    stores = []
    for use in buf.uses:
        op = use.operation
        if isinstance(op, loop.LoadOp) and op.parent_op() is consumer:
            continue
        if not isinstance(op, loop.StoreOp) or use.index != 1:
            return None
        blk = op.parent_op()
        if not isinstance(blk, loop.BlockOp) or not blk.block_name.data.endswith("_store"):
            return None
        lanes = blk.parent_op()
        if not isinstance(lanes, loop.ForOp) or lanes.kind.data != "vectorized":
            return None  # a register block's lane loop; elsewhere (a dot tile's scalar store) the stage stays
        if len(blk.vars) > len(shape) + 1 or not _identity(op.indices, list(blk.vars)[:len(shape)], shape):
            return None
        stores.append(op)
    return stores or None


def fuse_epilogues(fn) -> int:
    """Moves every qualifying elementwise stage of kernel `fn` into its producer's store blocks;
    returns how many stages moved."""
    moved = 0
    changed = True
    syms = symbol_dims(fn)
    while changed:
        changed = False
        for top in [o for o in fn.body.block.ops if isinstance(o, loop.ForOp)]:
            stage = _stage(top, syms)
            if stage is None:
                continue
            blk, buf, loads, store = stage
            producers = _producers(fn, buf, blk)
            if producers is None or not _in_order(fn, producers, blk, loads, store):
                continue
            for st in producers:
                _inline(blk, loads, store, st)
            top.detach()
            top.erase()
            if not buf.uses and isinstance(buf.owner, loop.AllocOp):
                buf.owner.detach()
                buf.owner.erase()
            moved += 1
            changed = True
            break
    return moved


def _top(fn, op):
    """The op of `fn`'s body that holds `op`."""
    while op.parent_op() is not fn:
        op = op.parent_op()
    return op


def _in_order(fn, producers: list[loop.StoreOp], stage: loop.BlockOp, loads: list[loop.LoadOp],
              store: loop.StoreOp) -> bool:
    """Whether the stage may run inside the producer's nest, which comes earlier in `fn`: every other
    buffer it reads is written (if at all) before that nest, and the buffer it writes is allocated
    before it (its `loop.alloc` is moved up when it came between them: an alloc has no operands).
    A softmax over an axis of extent 1 reads its max at the exp nest's own indices, so the exp nest
    qualified as an epilogue of the max nest while its output was allocated after that nest."""
    ops = list(fn.body.block.ops)
    first = min(ops.index(_top(fn, st)) for st in producers)
    for o in stage.body.block.ops:
        if isinstance(o, loop.LoadOp) and o not in loads:
            writers = [u.operation for u in o.buffer.uses if isinstance(u.operation, loop.StoreOp)]
            if any(ops.index(_top(fn, w)) >= first for w in writers):
                return False
    owner = store.buffer.owner
    if isinstance(owner, loop.AllocOp) and owner.parent_op() is fn and ops.index(owner) > first:
        owner.detach()
        fn.body.block.insert_op_before(owner, ops[first])
    return True


def _inline(stage: loop.BlockOp, loads: list[loop.LoadOp], store: loop.StoreOp, at: loop.StoreOp) -> None:
    """Clones the stage's ops before the producer store `at`, on the stored value, and makes `at` store
    the stage's result into the stage's buffer."""
    blk = at.parent_op()
    assert isinstance(blk, loop.BlockOp)
    mapping: dict[SSAValue, SSAValue] = dict(zip(stage.vars, blk.vars))
    for ld in loads:
        mapping[ld.results[0]] = at.value
    block: Block = at.parent_block()  # type: ignore[assignment]
    for op in stage.body.block.ops:
        if op is store or op in loads:
            continue
        new = op.clone()
        new.operands = [mapping.get(v, v) for v in op.operands]  # type: ignore[misc]
        for old, res in zip(op.results, new.results):
            mapping[old] = res
        block.insert_op_before(new, at)
    at.operands = [mapping.get(store.value, store.value), store.buffer, *list(blk.vars)[:len(at.indices)]]  # type: ignore[misc]
