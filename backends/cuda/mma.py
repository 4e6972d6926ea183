"""The tensor-core GEMM template: float16 A and B, f32 accumulation, through `mma.sync`.

For a `gpu.gemm` nest whose operands are float16 (gpu-fold-casts) and whose
shape fits the tiles (`mma_fits`: m and n multiples of 128, k of 32, A with k
contiguous, B with n contiguous, 16-byte aligned rows and batch offsets) on
sm_80 or newer, `emit_mma` writes the kernel:

* a block of 256 threads (8 warps, 2 x 4) computes a 128 x 128 tile of C; a
  warp computes 64 x 32 of it as 4 x 4 `mma.sync.m16n8k16` tiles (64 f32
  accumulators a thread);
* k advances 32 at a time through a 3-stage shared-memory pipeline: each
  thread copies two 16-byte chunks of A and two of B per stage with
  `cp.async` (no registers on the way), `cp.async.wait_group` keeps two
  stages in flight, one barrier per step;
* operand fragments come from shared memory by `ldmatrix` (`.trans` for B);
  the shared tiles are XOR-swizzled by 16-byte chunk (A: rows of 64 bytes,
  chunk ^ (row / 2 % 4); B: rows of 256 bytes, chunk ^ (row % 8)) so that the
  eight rows one `ldmatrix` reads lie in eight different bank groups.

48 KB of static shared memory (3 stages x (8 KB of A + 8 KB of B)).
"""

from __future__ import annotations

from llvmlite import ir

from ziggurat.backends.cuda.gemm import Strided
from ziggurat.backends.llvm.lltypes import F32, I8, I32, I64, VOID

THREADS = 256
TILE, BK, STAGES = 128, 32, 3
STAGE_BYTES = TILE * BK * 2  # one operand's tile in one stage, float16
SHARED, GLOBAL = 3, 1
H2 = ir.VectorType(ir.HalfType(), 2)
I32x4 = ir.LiteralStructType([I32] * 4)
F32x4 = ir.LiteralStructType([F32] * 4)


def mma_fits(spec: dict, arch: str) -> bool:
    """Whether the tensor-core template computes `spec` (see the module docstring)."""
    nb = len(spec["batch"])  # type: ignore[arg-type]
    sa, sb = spec["a_strides"], spec["b_strides"]
    return (bool(spec.get("a_f16")) and bool(spec.get("b_f16")) and int(arch.split("_")[1][:2]) >= 80
            and spec["m"] % TILE == 0 and spec["n"] % TILE == 0 and spec["k"] % BK == 0  # type: ignore[operator]
            and sa[nb + 1] == 1 and sb[nb + 1] == 1 and sa[nb] % 8 == 0 and sb[nb] % 8 == 0  # type: ignore[index]
            and all(s % 8 == 0 for s in sa[:nb] + sb[:nb]))  # type: ignore[index]


def emit_mma(module: ir.Module, fn: ir.Function, spec: dict, decl) -> tuple[int, int]:
    """Writes the template into the empty kernel `fn`; returns (grid, block)."""
    addr = Strided(spec)  # the batch offsets and strides, as the f32 template reads them
    m, n, k, count = addr.m, addr.n, addr.k, addr.count
    (sa, sb, sc), nb = addr.strides, len(addr.batch)
    tiles_m, tiles_n = m // TILE, n // TILE
    a_ptr, b_ptr, c_ptr = (fn.args[int(spec[o])] for o in "abc")

    smem_ty = ir.ArrayType(I8, STAGES * STAGE_BYTES)
    shared = []
    for name in ("As", "Bs"):
        g = ir.GlobalVariable(module, smem_ty, f"{fn.name}.{name}", addrspace=SHARED)
        g.linkage, g.align, g.initializer = "internal", 128, ir.Constant(smem_ty, ir.Undefined)
        shared.append(g)
    a_sh, b_sh = shared

    b = ir.IRBuilder(fn.append_basic_block("entry"))
    c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
    sreg = lambda r: b.zext(b.call(decl.function(f"llvm.nvvm.read.ptx.sreg.{r}", I32, []), []), I64)  # noqa: E731
    barrier = decl.function("llvm.nvvm.barrier0", VOID, [])
    i8s, i8g = ir.PointerType(I8, SHARED), ir.PointerType(I8, GLOBAL)
    cp_async = decl.function("llvm.nvvm.cp.async.cg.shared.global.16", VOID, [i8s, i8g])
    commit = decl.function("llvm.nvvm.cp.async.commit.group", VOID, [])
    wait = decl.function("llvm.nvvm.cp.async.wait.group", VOID, [I32])
    ldm = decl.function("llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16", I32x4, [i8s])
    ldm_t = decl.function("llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16", I32x4, [i8s])
    mma = decl.function("llvm.nvvm.mma.m16n8k16.row.col.f32.f32", F32x4, [H2] * 6 + [F32] * 4)

    tid, bid = sreg("tid.x"), sreg("ctaid.x")
    lane, warp = b.urem(tid, c64(32)), b.udiv(tid, c64(32))
    wm, wn = b.udiv(warp, c64(4)), b.urem(warp, c64(4))
    tn_ = b.urem(bid, c64(tiles_n))
    rest = b.udiv(bid, c64(tiles_n))
    tm_ = b.urem(rest, c64(tiles_m))
    addr.setup(b, b.udiv(rest, c64(tiles_m)))
    offs = addr.offs
    m0, n0 = b.mul(tm_, c64(TILE)), b.mul(tn_, c64(TILE))
    lda, ldb = sa[nb], sb[nb]
    sc_m, sc_n = sc[nb:]
    a_g = b.addrspacecast(b.bitcast(a_ptr, ir.PointerType(I8)), i8g)
    b_g = b.addrspacecast(b.bitcast(b_ptr, ir.PointerType(I8)), i8g)

    acc = b.alloca(ir.ArrayType(F32, 64), name="acc")
    for i in range(64):
        b.store(ir.Constant(F32, 0.0), b.gep(acc, [c64(0), c64(i)]))

    def sh(base, off):
        return b.gep(base, [c64(0), off])

    # the chunks this thread copies: A row q/4, chunk q%4; B row q/16, chunk q%16 (q = tid, tid + 256)
    a_src, a_dst, b_src, b_dst = [], [], [], []
    for rep in range(2):
        q = b.add(tid, c64(rep * THREADS))
        r, ch = b.udiv(q, c64(4)), b.urem(q, c64(4))
        a_src.append(b.add(offs[0], b.add(b.mul(b.add(m0, r), c64(lda)), b.mul(ch, c64(8)))))
        a_dst.append(b.add(b.mul(r, c64(64)), b.mul(b.xor(ch, b.and_(b.lshr(r, c64(1)), c64(3))), c64(16))))
        kr, ch = b.udiv(q, c64(16)), b.urem(q, c64(16))
        b_src.append(b.add(offs[1], b.add(b.mul(kr, c64(ldb)), b.add(n0, b.mul(ch, c64(8))))))
        b_dst.append(b.add(b.mul(kr, c64(256)), b.mul(b.xor(ch, b.and_(kr, c64(7))), c64(16))))

    def issue(stage, step):
        """cp.async of step `step`'s A and B tiles into `stage` (both i64 values)."""
        base = b.mul(stage, c64(STAGE_BYTES))
        k0 = b.mul(step, c64(BK))
        for src, dst in zip(a_src, a_dst):
            g = b.gep(a_g, [b.mul(b.add(src, k0), c64(2))])
            b.call(cp_async, [sh(a_sh, b.add(base, dst)), g])
        for src, dst in zip(b_src, b_dst):
            g = b.gep(b_g, [b.mul(b.add(src, b.mul(k0, c64(ldb))), c64(2))])
            b.call(cp_async, [sh(b_sh, b.add(base, dst)), g])

    steps = k // BK
    entry_block = b.block
    for s in range(STAGES - 1):
        if s < steps:
            issue(c64(s), c64(s))
        b.call(commit, [])
    head = fn.append_basic_block("k_loop")
    more = fn.append_basic_block("issue_next")
    latch = fn.append_basic_block("latch")
    done = fn.append_basic_block("epilogue")
    b.branch(head)
    b.position_at_end(head)
    step = b.phi(I64, "step")
    step.add_incoming(c64(0), entry_block)
    b.call(wait, [ir.Constant(I32, STAGES - 2)])
    b.call(barrier, [])
    base = b.mul(b.urem(step, c64(STAGES)), c64(STAGE_BYTES))
    g, tig = b.udiv(lane, c64(4)), b.urem(lane, c64(4))
    j = b.udiv(lane, c64(8))
    for ks in range(BK // 16):
        a_frag = []
        for mi in range(4):  # rows wm*64 + mi*16 + lane%8 + 8*(j%2), k chunk ks*2 + j/2
            row = b.add(b.add(b.mul(wm, c64(64)), c64(mi * 16)), b.add(b.urem(lane, c64(8)),
                                                                        b.mul(b.urem(j, c64(2)), c64(8))))
            ch = b.add(c64(ks * 2), b.udiv(j, c64(2)))
            off = b.add(b.mul(row, c64(64)), b.mul(b.xor(ch, b.and_(b.lshr(row, c64(1)), c64(3))), c64(16)))
            regs = b.call(ldm, [sh(a_sh, b.add(base, off))])
            a_frag.append([b.bitcast(b.extract_value(regs, t), H2) for t in range(4)])
        b_frag = []
        for nj in range(2):  # k rows ks*16 + lane%8 + 8*(j%2), n chunk (wn*32 + nj*16)/8 + j/2
            krow = b.add(c64(ks * 16), b.add(b.urem(lane, c64(8)), b.mul(b.urem(j, c64(2)), c64(8))))
            ch = b.add(b.add(b.mul(wn, c64(4)), c64(nj * 2)), b.udiv(j, c64(2)))
            off = b.add(b.mul(krow, c64(256)), b.mul(b.xor(ch, b.and_(krow, c64(7))), c64(16)))
            regs = b.call(ldm_t, [sh(b_sh, b.add(base, off))])
            r = [b.bitcast(b.extract_value(regs, t), H2) for t in range(4)]
            b_frag += [r[0:2], r[2:4]]
        for mi in range(4):
            for ni in range(4):
                slots = [b.gep(acc, [c64(0), c64((mi * 4 + ni) * 4 + t)]) for t in range(4)]
                d = b.call(mma, [*a_frag[mi], *b_frag[ni], *(b.load(p) for p in slots)])
                for t, p in enumerate(slots):
                    b.store(b.extract_value(d, t), p)
    nxt = b.add(step, c64(STAGES - 1))
    b.cbranch(b.icmp_unsigned("<", nxt, c64(steps)), more, latch)
    b.position_at_end(more)
    issue(b.urem(nxt, c64(STAGES)), nxt)
    b.branch(latch)
    b.position_at_end(latch)
    b.call(commit, [])  # an empty group past the end keeps wait_group's count right
    after = b.add(step, c64(1))
    step.add_incoming(after, latch)
    b.cbranch(b.icmp_unsigned("<", after, c64(steps)), head, done)

    b.position_at_end(done)
    for mi in range(4):
        for ni in range(4):
            r0 = b.add(m0, b.add(b.mul(wm, c64(64)), b.add(c64(mi * 16), g)))
            c0 = b.add(n0, b.add(b.mul(wn, c64(32)), b.add(c64(ni * 8), b.mul(tig, c64(2)))))
            for t in range(4):
                row = b.add(r0, c64(8 * (t // 2)))
                col = b.add(c0, c64(t % 2))
                off = b.add(offs[2], b.add(b.mul(row, c64(sc_m)), b.mul(col, c64(sc_n))))
                b.store(b.load(b.gep(acc, [c64(0), c64((mi * 4 + ni) * 4 + t)])), b.gep(c_ptr, [off]), align=4)
    b.ret_void()
    return count * tiles_m * tiles_n, THREADS
