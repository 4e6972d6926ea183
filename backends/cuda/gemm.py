"""The GPU GEMM template: one tile of C per block, registers and double-buffered shared memory.

transforms/gpu/gpu_gemm.py marks a kernel that is a (batched) f32 matrix
product with `gpu.gemm`; `emit_gemm` writes its body as NVPTX LLVM IR:

* a block of 256 threads (16 x 16) computes a `tile` x `tile` tile of C
  (tile 128: 8 x 8 accumulators a thread, rows `ty*4 + 64*g + r`, columns
  `tx*4 + 64*h + s`; tile 64: 4 x 4), batch index, tile row and tile column
  taken from `%ctaid.x`;
* k advances 8 at a time (32 with gpu-gemm's `deep-k`): each thread loads its share of the next A and B
  tiles from global memory into registers (consecutive threads read
  consecutive addresses of whichever dimension is contiguous), computes on
  the current shared-memory tiles (As[k][m], Bs[k][n]: 16-byte vector loads
  of 4 rows / 4 columns, broadcast across a warp), then stores its registers
  to the other buffer; one barrier per step;
* loads past M, N or K read 0; stores past M or N are skipped; a float16
  operand (`a_f16`/`b_f16`, gpu-fold-casts) is widened to f32 as it is loaded.

The accumulators, the fetched values and the operand fragments are allocas
with constant indices (SROA makes them registers).
"""

from __future__ import annotations

from llvmlite import ir

from ziggurat.backends.llvm.lltypes import F32, I32, I64, VOID
from ziggurat.errors import CompileError

THREADS = 256
SHARED_LIMIT = 48 * 1024  # bytes of static shared memory a block may have
SHARED = 3  # the shared address space
V4 = ir.VectorType(F32, 4)


class Strided:
    """Operand addressing of a plain (batched) product: element strides per batch and matrix dimension
    (`gpu.gemm`). `setup` reads the block's batch index; `a`, `b`, `c` give (offset, in range) of an
    element of A (row, k), B (k, column) and C (row, column)."""

    def __init__(self, spec: dict):
        self.m, self.n, self.k = (int(spec[x]) for x in ("m", "n", "k"))
        self.batch = [int(x) for x in spec["batch"]]  # type: ignore[union-attr]
        self.strides = [[int(x) for x in spec[f"{o}_strides"]] for o in "abc"]  # type: ignore[union-attr]
        self.count = 1
        for e in self.batch:
            self.count *= e
        nb = len(self.batch)
        (self.sa_m, self.sa_k), (self.sb_k, self.sb_n), (self.sc_m, self.sc_n) = (s[nb:] for s in self.strides)
        self.a_k_fast = self.sa_k == 1 and self.sa_m != 1  # consecutive threads fetch along k
        self.b_k_fast = self.sb_k == 1 and self.sb_n != 1
        self.offs: list[ir.Value] = []

    def setup(self, b: ir.IRBuilder, bb: ir.Value) -> None:
        """The operands' offsets of batch entry `bb` (row-major over the batch extents)."""
        self.offs = [_c64(0), _c64(0), _c64(0)]
        for d in range(len(self.batch) - 1, -1, -1):
            idx = b.urem(bb, _c64(self.batch[d]))
            bb = b.udiv(bb, _c64(self.batch[d]))
            for o, strides in enumerate(self.strides):
                if strides[d]:
                    self.offs[o] = b.add(self.offs[o], b.mul(idx, _c64(strides[d])))

    def a(self, b: ir.IRBuilder, gm: ir.Value, gk: ir.Value) -> tuple[ir.Value, ir.Value]:
        ok = b.and_(b.icmp_unsigned("<", gm, _c64(self.m)), b.icmp_unsigned("<", gk, _c64(self.k)))
        return b.add(self.offs[0], b.add(b.mul(gm, _c64(self.sa_m)), b.mul(gk, _c64(self.sa_k)))), ok

    def b(self, b: ir.IRBuilder, gk: ir.Value, gn: ir.Value) -> tuple[ir.Value, ir.Value]:
        ok = b.and_(b.icmp_unsigned("<", gk, _c64(self.k)), b.icmp_unsigned("<", gn, _c64(self.n)))
        return b.add(self.offs[1], b.add(b.mul(gk, _c64(self.sb_k)), b.mul(gn, _c64(self.sb_n)))), ok

    def c(self, b: ir.IRBuilder, gm: ir.Value, gn: ir.Value) -> tuple[ir.Value, ir.Value]:
        ok = b.and_(b.icmp_unsigned("<", gm, _c64(self.m)), b.icmp_unsigned("<", gn, _c64(self.n)))
        return b.add(self.offs[2], b.add(b.mul(gm, _c64(self.sc_m)), b.mul(gn, _c64(self.sc_n)))), ok


def _c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def emit_gemm(module: ir.Module, fn: ir.Function, spec: dict, decl, addressing=None) -> tuple[int, int]:
    """Writes the template into the empty kernel `fn` (its arguments: the kernel's buffers, `spec`'s
    a, b, c positions among them); returns (grid, block). `addressing` maps tile coordinates to the
    operands' elements: `Strided(spec)` by default, backends/cuda/implicit.py's for a convolution."""
    addr = addressing if addressing is not None else Strided(spec)
    tile = int(spec["tile"])
    BK = int(spec.get("bk", 8))  # noqa: N806 - k per step (gpu-gemm's `deep-k`)
    if 2 * 2 * BK * tile * 4 > SHARED_LIMIT:
        raise CompileError(f"cuda backend: a {tile}-wide GEMM tile stepping k by {BK} needs "
                           f"{16 * BK * tile} bytes of shared memory; a block has {SHARED_LIMIT}")
    tm = tile // 16  # accumulators per thread along m (and n)
    groups = tm // 4
    m, n, k = addr.m, addr.n, addr.k
    tiles_m, tiles_n = -(-m // tile), -(-n // tile)
    grid = addr.count * tiles_m * tiles_n
    a_ptr, b_ptr, c_ptr = (fn.args[int(spec[o])] for o in "abc")

    smem_ty = ir.ArrayType(F32, 2 * BK * tile)
    a_sh = ir.GlobalVariable(module, smem_ty, f"{fn.name}.As", addrspace=SHARED)
    b_sh = ir.GlobalVariable(module, smem_ty, f"{fn.name}.Bs", addrspace=SHARED)
    for g in (a_sh, b_sh):
        g.linkage = "internal"
        g.align = 16
        g.initializer = ir.Constant(smem_ty, ir.Undefined)

    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    sreg = lambda r: b.zext(b.call(decl.function(f"llvm.nvvm.read.ptx.sreg.{r}", I32, []), []), I64)  # noqa: E731
    barrier = decl.function("llvm.nvvm.barrier0", VOID, [])
    fma = decl.intrinsic("fma", F32, [F32, F32, F32])
    c64 = _c64
    f0 = ir.Constant(F32, 0.0)

    tid, bid = sreg("tid.x"), sreg("ctaid.x")
    tx, ty = b.urem(tid, c64(16)), b.udiv(tid, c64(16))
    tn_ = b.urem(bid, c64(tiles_n))
    rest = b.udiv(bid, c64(tiles_n))
    tm_ = b.urem(rest, c64(tiles_m))
    addr.setup(b, b.udiv(rest, c64(tiles_m)))
    m0, n0 = b.mul(tm_, c64(tile)), b.mul(tn_, c64(tile))

    acc = b.alloca(ir.ArrayType(F32, tm * tm), name="acc")
    per = BK * tile // THREADS  # elements of A (and of B) each thread fetches per step
    fetched = b.alloca(ir.ArrayType(F32, 2 * per), name="fetched")
    for i in range(tm * tm):
        b.store(f0, b.gep(acc, [c64(0), c64(i)]))

    def at(arr, i):
        return b.gep(arr, [c64(0), c64(i)])

    # which (row, k) of the A tile and (k, col) of the B tile fetch element e of this thread
    def a_coord(e):
        idx = b.add(b.mul(tid, c64(per)), c64(e))
        if addr.a_k_fast:  # k contiguous: consecutive threads along k
            return b.udiv(idx, c64(BK)), b.urem(idx, c64(BK))
        return b.urem(idx, c64(tile)), b.udiv(idx, c64(tile))

    def b_coord(e):
        idx = b.add(b.mul(tid, c64(per)), c64(e))
        if addr.b_k_fast:  # k contiguous: consecutive threads along k
            return b.urem(idx, c64(BK)), b.udiv(idx, c64(BK))
        return b.udiv(idx, c64(tile)), b.urem(idx, c64(tile))

    a_coords = [a_coord(e) for e in range(per)]  # (row, kk)
    b_coords = [b_coord(e) for e in range(per)]  # (kk, col)

    def guarded_load(ptr, off, ok):
        """ptr[off] where `ok`, else 0 (a select of a load from a clamped address: no branch)."""
        safe = b.select(ok, off, c64(0))
        v = b.load(b.gep(ptr, [safe]), align=4 if ptr.type.pointee == F32 else 2)
        if v.type != F32:  # a float16 operand (gpu-fold-casts): widened as it is loaded
            v = b.fpext(v, F32)
        return b.select(ok, v, f0)

    def fetch(k0):
        for e, (row, kk) in enumerate(a_coords):
            off, ok = addr.a(b, b.add(m0, row), b.add(k0, kk))
            b.store(guarded_load(a_ptr, off, ok), at(fetched, e))
        for e, (kk, col) in enumerate(b_coords):
            off, ok = addr.b(b, b.add(k0, kk), b.add(n0, col))
            b.store(guarded_load(b_ptr, off, ok), at(fetched, per + e))

    def shared_at(arr, off):
        return b.gep(arr, [c64(0), off])

    def deposit(buf):
        base = b.mul(buf, c64(BK * tile))
        for e, (row, kk) in enumerate(a_coords):
            b.store(b.load(at(fetched, e)), shared_at(a_sh, b.add(base, b.add(b.mul(kk, c64(tile)), row))))
        for e, (kk, col) in enumerate(b_coords):
            b.store(b.load(at(fetched, per + e)), shared_at(b_sh, b.add(base, b.add(b.mul(kk, c64(tile)), col))))

    def compute(buf):
        base = b.mul(buf, c64(BK * tile))
        rows = b.mul(ty, c64(4))
        cols = b.mul(tx, c64(4))
        for kk in range(BK):
            row_base = b.add(base, c64(kk * tile))
            a_frag, b_frag = [], []
            for g in range(groups):
                for frag, arr, first in ((a_frag, a_sh, rows), (b_frag, b_sh, cols)):
                    p = shared_at(arr, b.add(row_base, b.add(first, c64(64 * g))))
                    vec = b.load(b.bitcast(p, V4.as_pointer(SHARED)), align=16)
                    frag.extend(b.extract_element(vec, ir.Constant(I32, r)) for r in range(4))
            for i in range(tm):
                for j in range(tm):
                    p = at(acc, i * tm + j)
                    b.store(b.call(fma, [a_frag[i], b_frag[j], b.load(p)]), p)

    steps = -(-k // BK)
    fetch(c64(0))
    deposit(c64(0))
    b.call(barrier, [])
    loop = fn.append_basic_block("k_loop")
    prefetch = fn.append_basic_block("prefetch")
    body = fn.append_basic_block("compute")
    stash = fn.append_basic_block("stash")
    latch = fn.append_basic_block("latch")
    done = fn.append_basic_block("epilogue")
    b.branch(loop)
    b.position_at_end(loop)
    step = b.phi(I64, "step")
    step.add_incoming(c64(0), entry)
    buf = b.and_(step, c64(1))
    has_next = b.icmp_unsigned("<", b.add(step, c64(1)), c64(steps))
    b.cbranch(has_next, prefetch, body)
    b.position_at_end(prefetch)
    fetch(b.mul(b.add(step, c64(1)), c64(BK)))
    b.branch(body)
    b.position_at_end(body)
    compute(buf)
    b.cbranch(has_next, stash, latch)
    b.position_at_end(stash)
    deposit(b.xor(buf, c64(1)))
    b.call(barrier, [])
    b.branch(latch)
    b.position_at_end(latch)
    nxt = b.add(step, c64(1))
    step.add_incoming(nxt, latch)
    b.cbranch(b.icmp_unsigned("<", nxt, c64(steps)), loop, done)

    b.position_at_end(done)
    for i in range(tm):
        gm = b.add(m0, b.add(b.mul(ty, c64(4)), c64(64 * (i // 4) + i % 4)))
        for j in range(tm):
            gn = b.add(n0, b.add(b.mul(tx, c64(4)), c64(64 * (j // 4) + j % 4)))
            off, ok = addr.c(b, gm, gn)
            store = fn.append_basic_block(f"store{i}_{j}")
            after = fn.append_basic_block(f"next{i}_{j}")
            b.cbranch(ok, store, after)
            b.position_at_end(store)
            b.store(b.load(at(acc, i * tm + j)), b.gep(c_ptr, [off]), align=4)
            b.branch(after)
            b.position_at_end(after)
    b.ret_void()
    return grid, THREADS
