"""loop-default-schedule: the fast default schedule for reduction nests (conv2d, matmul, dense)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, builtin, func
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, StringAttr
from xdsl.ir import BlockArgument, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.transforms.schedule.apply_tuning import is_scheduled
from ziggurat.errors import ScheduleError
from ziggurat.lowering.convert_loop_to_hw import _const_int
from ziggurat.lowering.qgemm import schedule_qgemm
from ziggurat.transforms.schedule.epilogue import fuse_epilogues
from ziggurat.transforms.schedule.pad import pad_clamped_reads
from ziggurat.transforms.schedule.plan import k_block_and_pack, plan_narrow, schedule_block

BLOCKING = (8, 6, 4, 3, 2)
DOT_BLOCKING = (4, 3, 2)
FUSE_EPILOGUES = True  # elementwise stages after a register block run in its store blocks
COPY_NESTS = True  # layout transforms: divided loops strip-mined, padding peeled (copy_nest.py)
KC = 256  # reduction block: a 256-deep slice of a streamed operand stays in L2


@dataclass
class _ReduceNest:
    """A naive reduction nest as convert-te-to-loop emits it."""

    spatial: list[loop.ForOp]
    init: loop.BlockOp
    reduction: list[loop.ForOp]
    update: loop.BlockOp
    out: SSAValue


def _chain(f: loop.ForOp) -> list[loop.ForOp]:
    """`f` and the loops perfectly nested in it."""
    loops = [f]
    while True:
        ops = list(loops[-1].body.block.ops)
        if len(ops) != 1 or not isinstance(ops[0], loop.ForOp):
            return loops
        loops.append(ops[0])


def match_reduce_nest(top: loop.ForOp) -> _ReduceNest | None:
    """The parts of `top` when it is a naive serial reduction nest, else None."""
    spatial = _chain(top)
    body = list(spatial[-1].body.block.ops)
    if len(body) != 2 or not isinstance(body[0], loop.BlockOp) or not isinstance(body[1], loop.ForOp):
        return None
    init, red_top = body
    reduction = _chain(red_top)
    inner = list(reduction[-1].body.block.ops)
    if len(inner) != 1 or not isinstance(inner[0], loop.BlockOp):
        return None
    update = inner[0]
    n, r = len(spatial), len(reduction)
    if any(f.kind.data != "serial" or f.bounds[0] != 0 or f.bounds[2] != 1 for f in spatial + reduction):
        return None
    if update.iter_kinds.data != "S" * n + "R" * r or init.iter_kinds.data != "S" * n:
        return None
    ivs = [f.iv for f in spatial] + [f.iv for f in reduction]
    if list(update.bindings) != ivs or list(init.bindings) != ivs[:n]:
        return None
    stores = [o for o in update.body.walk() if isinstance(o, loop.StoreOp)]
    if len(stores) != 1 or list(stores[0].indices) != list(update.vars[:n]):
        return None
    out = stores[0].buffer
    for blk, nvars in ((update, n), (init, n)):
        for o in blk.body.walk():
            if isinstance(o, (loop.LoadOp, loop.StoreOp)) and o.buffer == out and list(o.indices) != list(blk.vars[:nvars]):
                return None
    return _ReduceNest(spatial, init, reduction, update, out)


def _stride(v: SSAValue, var: SSAValue, memo: dict) -> int | None:
    """Stride of index `v` in block variable `var` (None: not affine)."""
    if v in memo:
        return memo[v]
    if v is var:
        s: int | None = 1
    elif isinstance(v, BlockArgument):
        s = 0
    else:
        op = v.owner
        subs = [_stride(o, var, memo) if isinstance(o.type, IndexType) else 0 for o in op.operands]
        if all(x == 0 for x in subs):
            s = 0
        elif isinstance(op, (arith.AddiOp, arith.SubiOp)) and None not in subs:
            s = subs[0] + subs[1] if isinstance(op, arith.AddiOp) else subs[0] - subs[1]  # type: ignore[operator]
        elif isinstance(op, arith.MuliOp) and None not in subs and 0 in subs:
            const = [o.owner.value.value.data if isinstance(o.owner, arith.ConstantOp) else None for o in op.operands]
            k = const[1] if subs[1] == 0 else const[0]
            s = None if k is None else k * (subs[0] + subs[1])  # type: ignore[operator]
        elif isinstance(op, arith.SelectOp) and subs[2] == 0:
            s = subs[1]  # a clamped index: the vectorizer masks the lanes outside
        else:
            s = None
    memo[v] = s
    return s


def _depends(v: SSAValue, var: SSAValue, memo: dict) -> bool:
    if v in memo:
        return memo[v]
    if v is var:
        d = True
    elif isinstance(v, BlockArgument):
        d = False
    else:
        d = any(_depends(o, var, memo) for o in v.owner.operands)
    memo[v] = d
    return d


def _plan_parts(nest: _ReduceNest) -> tuple[list[int], list[int], int] | None:
    """(spatial loops other than `L` with >= 2 trips that no `L`-dependent read
    uses, those such reads do use, reduction block size or 0); None to leave
    the nest alone."""
    n = len(nest.spatial)
    lvar = nest.update.vars[n - 1]
    if nest.spatial[-1].trip_count < 8:
        return None
    streamed = []
    memo: dict = {}
    dmemo: dict = {}
    pre = prepacked(nest)
    for o in nest.update.body.walk():
        if not isinstance(o, loop.LoadOp) or o.buffer == nest.out:
            continue
        if not any(_depends(i, lvar, dmemo) for i in o.indices):
            continue
        if o is pre:
            streamed.append(o)
            continue
        step = _stride(o.indices[-1], lvar, memo)
        if step is None or step < 1 or any(_depends(i, lvar, dmemo) for i in o.indices[:-1]):
            return None
        streamed.append(o)
    free, used = [], []
    for d in range(n - 1):
        var, trips = nest.update.vars[d], nest.spatial[d].trip_count
        if trips < 2:
            continue
        if any(_depends(i, var, {}) for o in streamed for i in o.indices):
            used.append(d)
        else:
            free.append(d)
    red = nest.reduction[0].trip_count
    kc = KC if red > 2 * KC and red % KC == 0 else 0
    return free, used, kc


def plan(nest: _ReduceNest) -> tuple[int, int, int] | None:
    """(index of the blocked spatial loop or -1, blocking factor, reduction
    block size or 0); None to leave the nest alone."""
    parts = _plan_parts(nest)
    if parts is None:
        return None
    free, _, kc = parts
    best, factor = -1, 1
    for d in free:
        trips = nest.spatial[d].trip_count
        u = next((u for u in BLOCKING if trips % u == 0), 1)
        if u > factor:
            best, factor = d, u
    return best, factor, kc


def plan_dot(nest: _ReduceNest, width: int) -> list[tuple[int, int]] | None:
    """Register tile for a reduction along contiguous reads (dense with a
    transposed weight): [(spatial loop index, factor)] for up to two loops."""
    rvar = nest.update.vars[-1]
    if nest.reduction[-1].trip_count < width:
        return None
    memo: dict = {}
    dmemo: dict = {}
    streamed = 0
    for o in nest.update.body.walk():
        if not isinstance(o, loop.LoadOp) or o.buffer == nest.out:
            continue
        if not any(_depends(i, rvar, dmemo) for i in o.indices):
            continue
        if _stride(o.indices[-1], rvar, memo) != 1 or any(_depends(i, rvar, dmemo) for i in o.indices[:-1]):
            return None
        streamed += 1
    if not streamed:
        return None
    cands = []
    for d, f in enumerate(nest.spatial):
        u = next((u for u in DOT_BLOCKING if f.trip_count % u == 0), 1)
        if u > 1:
            cands.append((f.trip_count, d, u))
    tile = sorted(sorted(cands, reverse=True)[:2], key=lambda c: c[1])
    if width < 16 and len(tile) == 2:  # 16 registers: at most 4 x 2 accumulators (mlp_b64: 1.9 -> 1.2 ms)
        (t0, d0, u0), (t1, d1, _) = tile
        tile = [(t0, d0, u0)] + ([(t1, d1, 2)] if t1 % 2 == 0 else [])
    return [(d, u) for _, d, u in tile] or None


def schedule_dot(nest: _ReduceNest, tile: list[tuple[int, int]]) -> None:
    """Blocks the tile's spatial loops and repeats the init and update blocks
    once per tile point; the innermost reduction loop is vectorized, so each
    tile point accumulates in its own vector register."""
    for d, u in tile:
        nest.spatial[d].properties["step"] = IntegerAttr(u, builtin.i64)
    n = len(nest.spatial)
    b = Builder(InsertPoint.at_start(nest.spatial[-1].body.block))
    base = [f.iv for f in nest.spatial]
    points: list[list[SSAValue]] = [list(base)]
    for d, u in tile:
        grown = []
        for c in range(u):
            off = base[d]
            if c:
                k = b.insert(arith.ConstantOp(IntegerAttr(c, IndexType()))).result
                off = b.insert(arith.AddiOp(base[d], k)).result
            grown += [p[:d] + [off] + p[d + 1:] for p in points]
        points = grown
    ib = Builder(InsertPoint.before(nest.init))
    for pt in points:
        ib.insert(nest.init.clone()).operands = pt  # type: ignore[misc]
    ub = Builder(InsertPoint.before(nest.update))
    red = list(nest.update.bindings[n:])
    for pt in points:
        ub.insert(nest.update.clone()).operands = pt + red  # type: ignore[misc]
    for blk in (nest.init, nest.update):
        blk.detach()
        blk.erase()
    nest.reduction[-1].properties["kind"] = StringAttr("vectorized")


def _clone_redirected(blk: loop.BlockOp, b: Builder, bindings, out: SSAValue, acc: SSAValue,
                      row: int, lpos: int, name: str | None = None,
                      packed: tuple[loop.LoadOp, SSAValue] | None = None,
                      packed_a: tuple[loop.LoadOp, SSAValue] | None = None) -> None:
    """Clones `blk` with new bindings; accesses of `out` go to `acc[row, var]`.

    With `packed` = (read, panel), the three extra trailing bindings are
    (panel, lane, depth) and `read` becomes `panel[panel, depth, lane]`; with
    `packed_a` = (read, sliver), one more (depth) and `read` becomes `sliver[depth, row]`."""
    kinds = blk.iter_kinds.data + ("SSR" if packed else "") + ("R" if packed_a else "")
    new = b.insert(loop.BlockOp(name or blk.block_name.data, kinds, bindings))
    mapping: dict[SSAValue, SSAValue] = dict(zip(blk.vars, new.vars))
    nb = Builder(InsertPoint.at_end(new.body.block))
    c = nb.insert(arith.ConstantOp(IntegerAttr(row, IndexType()))).result
    idx = [c, new.vars[lpos]]
    for op in blk.body.block.ops:
        if isinstance(op, loop.LoadOp) and op.buffer == out:
            mapping[op.result] = nb.insert(loop.LoadOp(acc, idx)).result
        elif isinstance(op, loop.StoreOp) and op.buffer == out:
            nb.insert(loop.StoreOp(mapping.get(op.value, op.value), acc, idx))
        elif packed_a is not None and op is packed_a[0]:
            mapping[op.result] = nb.insert(loop.LoadOp(packed_a[1], [new.vars[-1], c])).result
        elif packed is not None and op is packed[0]:
            jo, ji, r0 = new.vars[-4:-1] if packed_a else new.vars[-3:]
            if packed[1] is op.buffer:  # B stored in panels already (graph.matmul_panels): the whole k
                r0 = mapping[op.indices[1]]
            mapping[op.result] = nb.insert(loop.LoadOp(packed[1], [jo, r0, ji])).result
        else:
            nb.insert(op.clone(value_mapper=mapping))
    if packed is not None and packed[1] is packed[0].buffer:  # drop the j // w, j % w the panel read used
        for op in reversed(list(new.body.block.ops)):
            if op.dialect_name() == "arith" and op.results and not any(r.uses for r in op.results):
                op.detach()
                op.erase()


def prepacked(nest: _ReduceNest, width: int | None = None) -> loop.LoadOp | None:
    """The read `wp[j // w, k, j % w]` of B stored in column panels of `w` = `width` lanes (any `w`
    that is the panel buffer's last dim with None) (`graph.matmul_panels`): the schedule reads
    it as it reads the panels it packs, with no pack nest."""
    n = len(nest.spatial)
    if len(nest.reduction) != 1:
        return None
    lvar, kvar = nest.update.vars[n - 1], nest.update.vars[n]

    def of_l(v: SSAValue, kind: type, w: int) -> bool:
        op = v.owner
        return isinstance(op, kind) and op.lhs is lvar and _const_int(op.rhs) == w

    for o in nest.update.body.walk():
        if isinstance(o, loop.LoadOp) and o.buffer != nest.out and len(o.indices) == 3 and o.indices[1] is kvar:
            w = o.buffer.type.get_shape()[-1]  # type: ignore[attr-defined]
            if (width is None or w == width) and of_l(o.indices[0], arith.DivUIOp, w) \
                    and of_l(o.indices[2], arith.RemUIOp, w):
                return o
    return None


def _packable(nest: _ReduceNest, kc: int, width: int) -> loop.LoadOp | None:
    """The streamed read `B[k, j]` of a plain 2-D matmul whose k-slices are packed into panels,
    or B already in panels (`prepacked`, whatever `kc`)."""
    n = len(nest.spatial)
    lvar, kvar = nest.update.vars[n - 1], nest.update.vars[n]
    pre = prepacked(nest, width)
    if pre is not None:
        return pre
    if not kc or nest.spatial[-1].trip_count % width:
        return None
    memo: dict = {}
    reads = [o for o in nest.update.body.walk() if isinstance(o, loop.LoadOp) and o.buffer != nest.out
             and any(_depends(i, lvar, memo) for i in o.indices)]
    if len(reads) == 1 and list(reads[0].indices) == [kvar, lvar]:
        return reads[0]
    return None


def schedule_reduce_nest(nest: _ReduceNest, blocked: int, factor: int, kc: int, width: int) -> None:
    """Rewrites the nest in place (see the pass docstring)."""
    n = len(nest.spatial)
    last = nest.spatial[-1]
    kb, packed = k_block_and_pack(nest, _packable(nest, kc, width), kc, width)
    if blocked >= 0 and factor > 1:
        nest.spatial[blocked].properties["step"] = IntegerAttr(factor, builtin.i64)
    elt = nest.out.type.element_type  # type: ignore[attr-defined]
    ub = last.bounds[1]
    before = Builder(InsertPoint.before(last))
    acc = before.insert(loop.AllocOp(MemRefType(elt, [factor, ub + width]), "local")).result
    if packed is None:
        vec = before.insert(loop.ForOp(0, ub, 1, "vectorized"))
        vec.iv.name_hint = last.iv.name_hint
        b = Builder(InsertPoint.at_end(vec.body.block))
        lval = vec.iv
    else:  # the column loop walks the panels, one vector per panel
        jo = before.insert(loop.ForOp(0, ub // width))
        jo.iv.name_hint = last.iv.name_hint + "p"
        vec = Builder(InsertPoint.at_end(jo.body.block)).insert(loop.ForOp(0, width, 1, "vectorized"))
        vec.iv.name_hint = last.iv.name_hint + "l"
        b = Builder(InsertPoint.at_end(vec.body.block))
        w = b.insert(arith.ConstantOp(IntegerAttr(width, IndexType()))).result
        lval = b.insert(arith.AddiOp(b.insert(arith.MuliOp(jo.iv, w)).result, vec.iv)).result
    spatial_ivs = [f.iv for f in nest.spatial[:-1]] + [lval]
    rows = []
    for c in range(factor):
        ivs = list(spatial_ivs)
        if c and blocked >= 0:
            k = b.insert(arith.ConstantOp(IntegerAttr(c, IndexType()))).result
            ivs[blocked] = b.insert(arith.AddiOp(ivs[blocked], k)).result
        rows.append(ivs)
    for c, ivs in enumerate(rows):
        if kb is None:
            _clone_redirected(nest.init, b, ivs, nest.out, acc, c, n - 1)
            continue
        lb = b.insert(loop.BlockOp(f"{nest.update.block_name.data}_load", "S" * n, ivs))
        bb = Builder(InsertPoint.at_end(lb.body.block))
        row = bb.insert(arith.ConstantOp(IntegerAttr(c, IndexType()))).result
        v = bb.insert(loop.LoadOp(nest.out, list(lb.vars))).result
        bb.insert(loop.StoreOp(v, acc, [row, lb.vars[-1]]))
    rb = b
    red_ivs = []
    for k, f in enumerate(nest.reduction):
        bounds = (0, kc, 1) if kb is not None and k == 0 else f.bounds
        g = rb.insert(loop.ForOp(*bounds, "serial"))
        g.iv.name_hint = f.iv.name_hint
        red_ivs.append(g.iv)
        rb = Builder(InsertPoint.at_end(g.body.block))
    depth = red_ivs[0]
    if kb is not None:
        red_ivs[0] = rb.insert(arith.AddiOp(kb.iv, red_ivs[0])).result
    for c, ivs in enumerate(rows):
        if packed is None:
            _clone_redirected(nest.update, rb, ivs + red_ivs, nest.out, acc, c, n - 1)
        else:
            _clone_redirected(nest.update, rb, ivs + red_ivs + [jo.iv, vec.iv, depth], nest.out, acc, c, n - 1,
                              packed=packed)
    for c, ivs in enumerate(rows):
        wb = b.insert(loop.BlockOp(f"{nest.update.block_name.data}_store", "S" * n, ivs))
        bb = Builder(InsertPoint.at_end(wb.body.block))
        row = bb.insert(arith.ConstantOp(IntegerAttr(c, IndexType()))).result
        v = bb.insert(loop.LoadOp(acc, [row, wb.vars[-1]])).result
        bb.insert(loop.StoreOp(v, nest.out, list(wb.vars)))
    last.detach()
    last.erase()


@dataclass(frozen=True)
class LoopDefaultSchedulePass(ModulePass):
    """Gives naive reduction nests (conv2d, matmul, ...) a register-blocked vector schedule.

    **Input:** loop-level kernels as convert-te-to-loop emits them. A nest is
    scheduled when it is spatial loops around an init block and reduction
    loops around one update block, the last spatial loop (`L`, trip count >= 8)
    indexes the last dim of the output, and every input read that depends on
    `L` reads it contiguously (stride 1, possibly clamped by padding) in its
    last index and nowhere else. Other nests (elementwise, reductions along
    the contiguous axis such as softmax) are left to the other loop passes.

    **Output:** `L` moves outside the reduction loops and becomes
    `vectorized` (convert-loop-to-hw vectorizes it as an outer loop, with a
    masked tail). The accumulators live in a `loop.alloc "local"` buffer
    `acc[U, ub(L) + vector-width]` that LLVM keeps in registers across the
    reduction loops; a `<tag>_store` block writes them to the output at the
    end. A spatial loop that no `L`-dependent read uses (output channels of a
    conv, rows of a matmul) is register-blocked: it steps by `U` (8, 6, 4, 3
    or 2, a divisor of its trip count) and the init/update/store blocks are
    repeated `U` times, so each loaded input vector feeds `U` FMAs. When the
    outer reduction loop is longer than 512 and a multiple of 256 (matmul
    1024^3), it is blocked by 256 and moved outside: the output is initialized
    by its own nest, and each block loads the partial sums into the
    accumulators (`<tag>_load`), so a 256-deep slice of the streamed operand
    stays in L2.

    A nest that fails those tests but whose innermost reduction loop (trip
    count >= vector-width) reads contiguously (dense with a transposed
    weight, row sums) gets a dot-product register tile instead: up to two
    spatial loops step by 4, 3 or 2, the init and update blocks are repeated
    per tile point and the reduction loop becomes `vectorized` (one vector
    accumulator per tile point, convert-loop-to-hw's vector reduction).

    A `graph.qgemm` kernel (block `qgemm`, u8 x packed s8 -> i32) gets the
    VNNI schedule of lowering/qgemm.py instead: register blocks of up to 8
    rows by 32 columns, the k loop outside the block, and every 16-column x
    4-k step tensorized onto `x86_vnni_u8s8_16x4` (docs/hw-level.md).

    With 8 lanes (`vector-width=8`, AVX2: 16 registers) the block is 2-D
    instead (transforms/schedule/plan.py): `U` rows (6, 4, 3 or 2) times two
    vectors, along `L` (`L` walks 8-lane panels two at a time) or, when `L`
    is one vector (a conv in NCHW8c), over a second output-channel block, at
    most 12 accumulators; a matmul's B is packed as one block for k of 512
    up to 1024 (`plan.ONE_BLOCK`) and k = 256 with >= 32 rows (B
    packed once, no init nest, no reload of partial sums), and k-blocked by
    256 and packed beyond. A padded conv's clamped input read
    becomes a read of a zero-padded local copy (transforms/schedule/pad.py;
    only its halo is zeroed, then the interior copied), and a dot-product
    tile keeps at most 4 x 2 points. Vector width 16 keeps the schedule
    above.

    A copy nest (one block storing a read at the loops' own indices: conv's
    boundary layout transforms) gets its divided loops strip-mined, the lane
    innermost, and its zero padding peeled into halo nests, so that LLVM
    vectorizes the copy (transforms/schedule/copy_nest.py).

    Then, at either width, the elementwise stages of a fused group that read
    a register block's result at their own indices (bias, activation,
    residual add) move into the block's `<tag>_store` blocks
    (transforms/schedule/epilogue.py): they run on the tile in registers, and
    their local intermediates disappear.

    **Options:** `vector-width` (default 16); `int8-dot` (`auto`: VNNI when
    the host has AVX512-VNNI; `vnni`; `none`: leave qgemm nests scalar).

    Example (matmul 16x32x8, U = 8):
    ```mlir
    loop.for %i0 = 0 to 16 serial {
      loop.for %i1 = 0 to 32 serial {
        loop.block "matmul_init" [...] {...}
        loop.for %r0 = 0 to 8 serial { loop.block "matmul" [...] {...} }
      }
    }
    ```
    becomes
    ```mlir
    loop.for %i0 = 0 to 16 step 8 serial {
      %acc = loop.alloc "local" : memref<8x48xf32>
      loop.for %i1 = 0 to 32 vectorized {
        loop.block "matmul_init" [...] {...}   // x8, into %acc
        loop.for %r0 = 0 to 8 serial { loop.block "matmul" [...] {...} }   // x8
        loop.block "matmul_store" [...] {...}  // x8, %acc -> output
      }
    }
    ```
    """

    name = "loop-default-schedule"
    vector_width: int = 16
    int8_dot: str = "auto"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.int8_dot not in ("auto", "vnni", "none"):
            raise ScheduleError(f"loop-default-schedule: int8-dot must be auto, vnni or none, got '{self.int8_dot}'")
        for fn in op.ops:
            if not isinstance(fn, func.FuncOp) or fn.sym_name.data == "main":
                continue
            if is_scheduled(fn):  # apply-tuning replayed a record's schedule
                continue
            for top in [o for o in fn.body.block.ops if isinstance(o, loop.ForOp)]:
                nest = match_reduce_nest(top)
                if nest is None:
                    if COPY_NESTS:  # layout transforms: no div/rem, no padding tests (imports this module)
                        from ziggurat.transforms.schedule.copy_nest import schedule_copy

                        schedule_copy(top)
                    continue
                if nest.update.block_name.data == "qgemm":  # graph.qgemm: VNNI register blocks (lowering/qgemm.py)
                    if self.int8_dot != "none":
                        schedule_qgemm(fn, "qgemm", require=self.int8_dot == "vnni")
                    continue
                if self.vector_width < 16:
                    pad_clamped_reads(nest)  # padded conv input: no tests in the register block
                if self.vector_width < 16 and (parts := _plan_parts(nest)) is not None:
                    block = plan_narrow(nest, self.vector_width, *parts)
                    if block is not None:  # 16 registers: rows x 2 vectors (transforms/schedule/plan.py)
                        schedule_block(nest, block, self.vector_width)
                        continue
                decision = plan(nest)
                if decision is not None:
                    schedule_reduce_nest(nest, *decision, self.vector_width)
                    continue
                tile = plan_dot(nest, self.vector_width)
                if tile is not None:
                    schedule_dot(nest, tile)
            if FUSE_EPILOGUES:
                fuse_epilogues(fn)  # bias, GELU, residual adds run on the register tile (epilogue.py)
