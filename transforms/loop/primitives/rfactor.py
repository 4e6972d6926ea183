"""rfactor: turn one reduction loop of a block into a spatial dimension of a
partial-result buffer, then reduce that buffer in a second block.

```mlir
loop.for %i = 0 to 4 serial {
  loop.block "s_init" [S %a = %i] { loop.store %zero, %y[%a] : memref<4xf32> }
  loop.for %k = 0 to 32 serial { loop.block "s" [S %b = %i, R %c = %k] {
    %e = loop.load %x[%b, %c] ... %o = loop.load %y[%b] ... %n = arith.addf %o, %e : f32
    loop.store %n, %y[%b] : memref<4xf32> } } }
```
rfactor("s", %k) becomes
```mlir
%rf = loop.alloc "local" : memref<4x32xf32>
loop.for ... 4 { loop.for ... 32 { loop.block "s_rf_init" [S %p = .., S %q = ..] { store %zero, %rf[%p, %q] } } }
loop.for %i = 0 to 4 serial {
  loop.for %k = 0 to 32 serial { loop.block "s_rf" [S %b = %i, S %l = %k] {
    %e = loop.load %x[%b, %l] ... %o = loop.load %rf[%b, %l] ... loop.store %n, %rf[%b, %l] } } }
loop.for %s_0 = 0 to 4 serial {
  loop.block "s_init" [S %a = %s_0] {...}
  loop.for %s_r = 0 to 32 serial { loop.block "s" [S %u = %s_0, R %w = %s_r] {
    %p = loop.load %rf[%u, %w] ... %o = loop.load %y[%u] ... %n = arith.addf %o, %p : f32 ... } } }
```
The rfactored loop binds only the spatial variable `%l` of `s_rf`, so it can
be parallelized or vectorized. Legal when the loop is bound only to reduction
variables of the block, the block is `buf = buf <op> expr` for op in addf,
mulf, maximumf, minimumf (reassociated, as in any rfactor), stores at
spatial variables covering the buffer, and has an init block `<block>_init`.
"""

from __future__ import annotations

from math import prod

from xdsl.builder import Builder
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import BlockArgument, SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.loops import INDEX_OPS, describe, get_loops, uses
from ziggurat.transforms.loop.primitives.regions import (
    blocks_in, find_block, full_nest, has, identity_store, insert_alloc, loads, logical_shape, new_block, only_block_in_nest, reads,
    root, stores, unique_name, writes,
)

W = "rfactor"
MAX_RF_ELEMENTS = 1 << 24
COMBINERS = (arith.AddfOp, arith.MulfOp, arith.MaximumfOp, arith.MinimumfOp)


def _rebuild(v: SSAValue, ivmap: dict, b: Builder, memo: dict, name: str) -> SSAValue:
    """Recomputes the index `v` with loop variables replaced through `ivmap`."""
    if v in ivmap:
        return ivmap[v]
    if v in memo:
        return memo[v]
    if isinstance(v, BlockArgument) or not isinstance(v.owner, INDEX_OPS):
        raise ScheduleError(f"{W}: a reduction variable of block '{name}' depends on a loop that is not a "
                            "reduction loop")
    ops = [_rebuild(o, ivmap, b, memo, name) for o in v.owner.operands]
    new = v.owner.clone()
    new.operands = ops
    memo[v] = b.insert(new).results[0]
    return memo[v]


def _erase_with_empty_loops(blk: loop.BlockOp) -> None:
    p = blk.parent_op()
    blk.detach()
    blk.erase()
    while isinstance(p, loop.ForOp) and all(isinstance(o, INDEX_OPS) for o in p.body.block.ops):
        q = p.parent_op()
        p.detach()
        p.erase()
        p = q


def rfactor(fn: func.FuncOp, blk: loop.BlockOp, f: loop.ForOp) -> loop.BlockOp:
    name, kinds = blk.block_name.data, blk.iter_kinds.data
    loops = get_loops(blk)
    if not any(g is f for g in loops):
        raise ScheduleError(f"{W}: {describe(f)} is not a loop around block '{name}'")
    memo: dict = {}
    bound = {k for k, b in zip(kinds, blk.bindings) if uses(b, f.iv, memo)}
    memos: dict = {}
    if bound != {"R"}:
        raise ScheduleError(f"{W}: {describe(f)} is not purely a reduction loop of block '{name}' "
                            f"(it binds {sorted(bound) or 'no'} variables)")
    sts = stores(blk)
    if len(sts) != 1:
        raise ScheduleError(f"{W}: block '{name}' has {len(sts)} stores; a reduction update has one")
    st = sts[0]
    buf = st.buffer
    dims = identity_store(blk, buf, W)
    comb = st.value.owner
    lds = loads(blk, buf)
    if not isinstance(comb, COMBINERS) or len(lds) != 1 or not any(o is lds[0].result for o in comb.operands) \
            or list(lds[0].indices) != list(st.indices):
        raise ScheduleError(f"{W}: block '{name}' is not 'out = out <op> value' with op one of addf, mulf, "
                            "maximumf, minimumf")
    init = find_block(fn, f"{name}_init")
    if init is None or not has(writes(init), buf) or has(reads(init), buf):
        raise ScheduleError(f"{W}: reduction block '{name}' has no init block '{name}_init' writing its output")
    idims = identity_store(init, buf, W)
    if len(idims) != len(init.bindings):
        raise ScheduleError(f"{W}: init block '{name}_init' has variables that index no dimension of the output")
    r = root(blk)
    others = [d.block_name.data for d in blocks_in([r]) if d is not blk and d is not init]
    if others:
        raise ScheduleError(f"{W}: block '{name}' shares its loop nest with block(s) {others}")
    if root(init) is not r:
        only_block_in_nest(init, W)
    t = buf.type
    shape, n = logical_shape(buf), f.trip_count
    rank = len(shape)
    if prod(shape) * n > MAX_RF_ELEMENTS:
        raise ScheduleError(f"{W}: the partial-result buffer of block '{name}' would hold {prod(shape) * n} elements "
                            f"(more than {MAX_RF_ELEMENTS}); split {describe(f)} and rfactor the inner part")
    rf = insert_alloc(fn, MemRefType(t.element_type, shape + [n]))  # type: ignore[attr-defined]

    # 1. the partial results start from the init value
    b, ivs = full_nest(Builder(InsertPoint.before(r)), shape + [n], name, f"{name}_rfi")
    rfi, bb = new_block(b, unique_name(fn, f"{name}_rf_init"), "S" * (rank + 1), ivs)
    iargs, new_args = list(init.body.block.args), list(rfi.body.block.args)
    mapping = {iargs[v]: new_args[d] for d, v in enumerate(idims)}
    for o in init.body.block.ops:
        if isinstance(o, loop.StoreOp) and o.buffer is buf:
            bb.insert(loop.StoreOp(mapping.get(o.value, o.value), rf, new_args))
        else:
            bb.insert(o.clone(value_mapper=mapping))

    # 2. the block accumulates into rf[..., l] where l is the iteration of f
    r_loops = [g for g in loops if g is not f
               and any(k == "R" and uses(bd, g.iv, memos.setdefault(id(g), {})) for k, bd in zip(kinds, blk.bindings))]
    s_pos = [i for i, k in enumerate(kinds) if k == "S"]
    rfb = loop.BlockOp(unique_name(fn, f"{name}_rf"), "S" * (len(s_pos) + 1) + "R" * len(r_loops),
                       [blk.bindings[i] for i in s_pos] + [f.iv] + [g.iv for g in r_loops])
    blk.parent_block().insert_op_before(rfb, blk)
    bb = Builder(InsertPoint.at_end(rfb.body.block))
    nargs, oargs = list(rfb.body.block.args), list(blk.body.block.args)
    vl = nargs[len(s_pos)]
    ivmap = {f.iv: vl} | {g.iv: nargs[len(s_pos) + 1 + j] for j, g in enumerate(r_loops)}
    mapping = {oargs[i]: nargs[j] for j, i in enumerate(s_pos)}
    rebuilt: dict = {}
    for i, k in enumerate(kinds):
        if k == "R":
            mapping[oargs[i]] = _rebuild(blk.bindings[i], ivmap, bb, rebuilt, name)
    for o in blk.body.block.ops:
        if o is lds[0]:
            mapping[o.result] = bb.insert(loop.LoadOp(rf, [mapping[x] for x in o.indices] + [vl])).result
        elif o is st:
            bb.insert(loop.StoreOp(mapping[o.value], rf, [mapping[x] for x in o.indices] + [vl]))
        else:
            bb.insert(o.clone(value_mapper=mapping))
    blk.detach()
    blk.erase()

    # 3. the final block reduces rf over l after its own init block
    b, ivs = full_nest(Builder(InsertPoint.after(r)), shape, name, name)
    new_init = init.clone()
    new_init.operands = [ivs[idims.index(v)] for v in range(len(idims))]
    b.insert(new_init)
    _erase_with_empty_loops(init)
    red = b.insert(loop.ForOp(0, n))
    red.iv.name_hint = f"{name}_r"
    final, fb = new_block(Builder(InsertPoint.at_end(red.body.block)), name, "S" * rank + "R", ivs + [red.iv])
    fargs = list(final.body.block.args)
    part = fb.insert(loop.LoadOp(rf, fargs)).result
    old = fb.insert(loop.LoadOp(buf, fargs[:rank])).result
    res = fb.insert(type(comb)(old, part)).result
    fb.insert(loop.StoreOp(res, buf, fargs[:rank]))
    return rfb
