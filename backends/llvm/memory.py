"""Buffer ops: loop.load/store/alloc/const_buffer/copy and hw.vload/vstore.

A bool (`i1`) element is one byte in memory, numpy's layout: a scalar load
reads the byte and tests it against 0, a store writes 0 or 1.

Addresses are `getelementptr inbounds` on the bare element pointer with a
row-major linear index; constant index terms are folded. Every access is
aligned to the element size only: numpy buffers are 16-byte aligned at best
(views like `a[1:]` only 4), and a vector access without an explicit `align`
would get the vector's ABI alignment and fault.

Allocation: in the entry function a `loop.alloc` is a slot of the static
arena (its `arena_offset` attribute, else the next 64-byte-aligned offset);
elsewhere it is function-entry scratch, an `alloca` up to 16 KiB and
`aligned_alloc(64, ...)` above, freed before the function returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.ir import Operation, SSAValue

from ziggurat.backends.llvm import symbols
from ziggurat.backends.llvm.lltypes import I1, I8, I8P, I32, I64, VOID, byte_size, element_size, suffix
from ziggurat.errors import CompileError
from ziggurat.symbolic import Sym

if TYPE_CHECKING:
    from ziggurat.backends.llvm.translate import FuncState, Translator

STACK_LIMIT = 16 * 1024


def address(t: Translator, f: FuncState, buf: SSAValue, indices) -> ir.Value:
    """Pointer to element `buf[indices]` of a row-major memref (strides static, or computed from
    the symbols of a `#sym.dims` layout)."""
    base = f.get(buf)
    strides = t.strides(buf.type)
    b = f.b
    const = 0
    lin = None
    for idx, s in zip(indices, strides):
        x = f.get(idx)
        if isinstance(s, Sym):
            term = b.mul(x, symbols.value(t, f, s), flags=("nsw",))
        elif isinstance(x, ir.Constant):
            const += x.constant * s
            continue
        else:
            term = x if s == 1 else b.mul(x, I64(s), flags=("nsw",))
        lin = term if lin is None else b.add(lin, term, flags=("nsw",))
    if lin is None:
        if const == 0:
            return base
        lin = I64(const)
    elif const:
        lin = b.add(lin, I64(const), flags=("nsw",))
    return b.gep(base, [lin], inbounds=True)


def _lane_address(t: Translator, f: FuncState, buf: SSAValue, indices, vt: ir.VectorType) -> ir.Value:
    """Vector pointer to `buf[indices]` for a masked access: no `inbounds`,
    since masked-off lanes (and so the base) may lie outside the buffer."""
    base = f.get(buf)
    b = f.b
    lin = None
    for idx, s in zip(indices, t.strides(buf.type)):
        x = f.get(idx)
        term = x if s == 1 else b.mul(x, symbols.value(t, f, s))
        lin = term if lin is None else b.add(lin, term)
    p = base if lin is None else b.gep(base, [lin])
    return b.bitcast(p, vt.as_pointer())


def _vmaskload(t: Translator, f: FuncState, op: Operation) -> None:
    ops = op.operands
    res = op.results[0]
    vt = t.ty(res.type)
    p = _lane_address(t, f, ops[0], ops[1:-1], vt)
    mask = f.get(ops[-1])
    fn = t.decl.function(f"llvm.masked.load.{suffix(vt)}.p0", vt, [vt.as_pointer(), I32, mask.type, vt])
    zero = ir.Constant(vt, [ir.Constant(vt.element, 0)] * vt.count)
    f.vals[res] = f.b.call(fn, [p, I32(element_size(vt)), mask, zero])


def _masked_gather(t: Translator, f: FuncState, op: Operation, ptrs: ir.Value) -> None:
    """One `llvm.masked.gather` of `op`'s result from the lanes' pointers `ptrs`; masked-off lanes are
    0 and not read."""
    vt = t.ty(op.results[0].type)
    mask = f.get(op.operands[-1])
    fn = t.decl.function(f"llvm.masked.gather.{suffix(vt)}.v{vt.count}p0", vt, [ptrs.type, I32, mask.type, vt])
    zero = ir.Constant(vt, [ir.Constant(vt.element, 0)] * vt.count)
    f.vals[op.results[0]] = f.b.call(fn, [ptrs, I32(element_size(vt.element)), mask, zero])


def _vgather(t: Translator, f: FuncState, op: Operation) -> None:
    """hw.vgather: lane l at `buf[indices] + stride * l` elements: a splat of the base plus constant
    i64 byte offsets, which x86 selects as one `vgatherdps` (as a vector GEP, LLVM hoists it into a
    vector of pointers, which made qword gathers); stride 1 is a masked load (a plain load where
    every lane is on)."""
    stride = op.attributes["stride"].value.data  # type: ignore[attr-defined]
    if stride == 1:  # consecutive elements (a [C, 1, 1] per-channel constant read along C): one masked load
        _vmaskload(t, f, op)
        return
    if "rows" in op.attributes:  # a transposed read in an unrolled strip: rows and an in-register transpose
        _vgather_rows(t, f, op, stride)
        return
    vt = t.ty(op.results[0].type)
    b, lanes = f.b, vt.count
    p = b.ptrtoint(_lane_address(t, f, op.operands[0], op.operands[1:-1], vt), I64)
    it = ir.VectorType(I64, lanes)
    undef = ir.Constant(it, ir.Undefined)
    splat = b.shuffle_vector(b.insert_element(undef, p, I32(0)), undef, ir.Constant(ir.VectorType(I32, lanes), [I32(0)] * lanes))
    offsets = ir.Constant(it, [I64(i * element_size(vt.element) * stride) for i in range(lanes)])
    _masked_gather(t, f, op, b.inttoptr(b.add(splat, offsets), ir.VectorType(vt.element.as_pointer(), lanes)))


def _vgather_rows(t: Translator, f: FuncState, op: Operation, stride: int) -> None:
    """hw.vgather {rows}: the lanes' rows, each read as one vector from the start of the aligned
    block of `lanes` elements that holds the gathered one (`buf`'s last index rounded down; the
    last dim is a multiple of the lanes, so the block is in bounds), transposed in registers
    (`transpose_vectors`), and the column of the last index's offset in its block taken. In an
    unrolled strip of `lanes` consecutive last indices (transpose_tiles.py) the offset is a
    constant in each copy, and LLVM shares the loads and the transpose between the copies:
    `lanes` vector loads and lanes x log2(lanes) shuffles for `lanes` gathers."""
    vt = t.ty(op.results[0].type)
    b, lanes = f.b, vt.count
    last = f.get(op.operands[-2])
    k = b.and_(last, I64(lanes - 1))
    base = b.gep(address(t, f, op.operands[0], op.operands[1:-1]), [b.sub(I64(0), k)])
    rows = [b.load(b.bitcast(b.gep(base, [I64(r * stride)]), vt.as_pointer()), align=element_size(vt.element))
            for r in range(lanes)]
    cols = transpose_vectors(b, rows)
    out = cols[-1]
    for c in range(lanes - 2, -1, -1):  # a select chain on the offset: one column once k is a constant
        out = b.select(b.icmp_unsigned("==", k, I64(c)), cols[c], out)
    f.vals[op.results[0]] = out


def transpose_vectors(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """The columns of the square matrix whose rows are `rows` (n vectors of n lanes, n a power of
    two): log2(n) stages, each swapping the off-diagonal d x d blocks of every 2d x 2d block with
    two-vector shuffles (d = 1, 2, 4, ...; at 8 f32 lanes LLVM selects unpack, shufps and
    vperm2f128)."""
    n = len(rows)
    v = list(rows)
    d = 1
    while d < n:
        for i in range(n):
            if i & d:
                continue
            lo = [j if not j & d else n + j - d for j in range(n)]  # a's even blocks, b's even blocks
            hi = [j + d if not j & d else n + j for j in range(n)]  # a's odd blocks, b's odd blocks
            a, c = v[i], v[i + d]
            v[i] = b.shuffle_vector(a, c, ir.Constant(ir.VectorType(I32, n), lo))
            v[i + d] = b.shuffle_vector(a, c, ir.Constant(ir.VectorType(I32, n), hi))
        d *= 2
    return v


def _vlookup(t: Translator, f: FuncState, op: Operation) -> None:
    """hw.vlookup: lane l at `buf[indices] + offsets[l]` elements: one vector GEP of the scalar base
    with the i32 offsets, which keeps the base uniform, so x86 selects one `vgatherdps` with dword
    indices (a splat of the base plus i64 byte offsets made two `vgatherqps` at 16 lanes). llvmlite's
    builder types a GEP from scalar indices only, so the vector GEP is made as an instruction here."""
    vt = t.ty(op.results[0].type)
    base = f.b.bitcast(_lane_address(t, f, op.operands[0], op.operands[1:-2], vt), vt.element.as_pointer())
    ptrs = ir.instructions.GEPInstr(f.b.block, base, [f.get(op.operands[-2])], False, "", source_etype=vt.element)
    ptrs.type = ir.VectorType(vt.element.as_pointer(), vt.count)  # one pointer per lane
    f.b._insert(ptrs)
    _masked_gather(t, f, op, ptrs)


def _vmaskstore(t: Translator, f: FuncState, op: Operation) -> None:
    ops = op.operands
    value = f.get(ops[0])
    vt = value.type
    p = _lane_address(t, f, ops[1], ops[2:-1], vt)
    mask = f.get(ops[-1])
    fn = t.decl.function(f"llvm.masked.store.{suffix(vt)}.p0", VOID, [vt, vt.as_pointer(), I32, mask.type])
    f.b.call(fn, [value, p, I32(element_size(vt)), mask])


_LANE_PRED = {"slt": "<", "sle": "<=", "sgt": ">", "sge": ">=", "eq": "==", "ne": "!="}


def _vlanecmp(t: Translator, f: FuncState, op: Operation) -> None:
    """(base + l) pred bound  <=>  l pred (bound - base), on i32 lanes."""
    b = f.b
    lanes = op.results[0].type.get_shape()[0]  # type: ignore[attr-defined]
    st = op.attributes.get("stride")
    stride = st.value.data if st is not None else 1  # type: ignore[attr-defined]
    d = b.sub(f.get(op.operands[1]), f.get(op.operands[0]))
    lim = 1 << 30
    d = b.select(b.icmp_signed("<", d, I64(-lim)), I64(-lim), d)
    d = b.trunc(b.select(b.icmp_signed(">", d, I64(lim)), I64(lim), d), I32)
    vt = ir.VectorType(I32, lanes)
    undef = ir.Constant(vt, ir.Undefined)
    splat = b.shuffle_vector(b.insert_element(undef, d, I32(0)), undef, ir.Constant(vt, [I32(0)] * lanes))
    iota = ir.Constant(vt, [I32(i * stride) for i in range(lanes)])
    pred = _LANE_PRED[op.properties["predicate"].data]  # type: ignore[attr-defined]
    f.vals[op.results[0]] = b.icmp_signed(pred, iota, splat)


def _load(t: Translator, f: FuncState, op: Operation) -> None:
    ops = op.operands
    p = address(t, f, ops[0], ops[1:])
    if p.type.pointee == I1:  # a bool is one byte in memory (numpy's layout); any nonzero byte is true
        byte = f.b.load(f.b.bitcast(p, I8.as_pointer()), align=1)
        f.vals[op.results[0]] = f.b.icmp_unsigned("!=", byte, I8(0))
        return
    f.vals[op.results[0]] = f.b.load(p, align=element_size(p.type.pointee))
    f.note_access(f.vals[op.results[0]], f.get(ops[0]))


def _store(t: Translator, f: FuncState, op: Operation) -> None:
    ops = op.operands
    p = address(t, f, ops[1], ops[2:])
    if p.type.pointee == I1:  # stored as the byte 0 or 1
        f.b.store(f.b.zext(f.get(ops[0]), I8), f.b.bitcast(p, I8.as_pointer()), align=1)
        return
    f.note_access(f.b.store(f.get(ops[0]), p, align=element_size(p.type.pointee)), f.get(ops[1]))


def _vload(t: Translator, f: FuncState, op: Operation) -> None:
    ops = op.operands
    res = op.results[0]
    vt = t.ty(res.type)
    p = f.b.bitcast(address(t, f, ops[0], ops[1:]), vt.as_pointer())
    f.vals[res] = f.b.load(p, align=element_size(vt))
    f.note_access(f.vals[res], f.get(ops[0]))


def _vstore(t: Translator, f: FuncState, op: Operation) -> None:
    ops = op.operands
    value = f.get(ops[0])
    p = f.b.bitcast(address(t, f, ops[1], ops[2:]), value.type.as_pointer())
    f.note_access(f.b.store(value, p, align=element_size(value.type)), f.get(ops[1]))


def _define_in_root(f: FuncState, res: SSAValue, value: ir.Value) -> None:
    """Bind a value computed in the entry block of the root function; outlined
    functions then capture it like any other value."""
    f.root.vals[res] = value
    if f is not f.root:
        f.vals[res] = f.get(res)


def _alloc(t: Translator, f: FuncState, op: Operation) -> None:
    res = op.results[0]
    pty = t.ty(res.type)
    count = symbols.element_count(res.type)
    if isinstance(count, Sym) or (f.root.is_entry and "dyn_live" in op.attributes):  # placed per binding
        _dynamic_alloc(t, f, res, count * byte_size(pty.pointee))
        return
    nbytes = count * byte_size(pty.pointee)
    root = f.root
    if root.is_entry:
        off = t.arena_slot(op, nbytes)
        eb = root.entry_b
        p = eb.gep(root.arena_arg, [I64(off)], inbounds=True) if off else root.arena_arg
        _define_in_root(f, res, eb.bitcast(p, pty))
        return
    eb = f.entry_b
    size = max(64, -(-nbytes // 64) * 64)
    if size <= STACK_LIMIT:
        raw = eb.alloca(ir.ArrayType(I8, size))
        raw.align = 64
    else:
        size_t = I32 if t.options.target.arch == "wasm32" else I64  # C's size_t: wasm32 pointers are 32-bit
        aligned_alloc = t.decl.function("aligned_alloc", I8P, [size_t, size_t])
        raw = eb.call(aligned_alloc, [size_t(64), size_t(size)])
        f.frees.append(raw)
    f.vals[res] = eb.bitcast(raw, pty)


def _dynamic_alloc(t: Translator, f: FuncState, res: SSAValue, nbytes: Sym | int) -> None:
    """A buffer sized by symbols (or one of fixed size placed with them). In the entry function:
    in the arena the caller passes for them,
    at the offset its table (the arena's first 8 bytes per buffer) gives: `ModuleInfo.dynamic_buffers`
    lists each buffer's size (an expression) and live range (plan-memory's `dyn_live`), and the
    executor places them per binding (arena.py) as plan-memory places static ones. In a kernel:
    `aligned_alloc` at the function's entry (the symbols are its arguments, so the size is known
    there), freed before it returns."""
    if t.options.target.arch == "wasm32":
        raise CompileError("llvm backend: a buffer of symbolic size on wasm32 is not supported yet")
    root = f.root
    if f is root and root.dyn_arg is not None:  # the entry's: at the offset the caller's table gives it
        eb = root.entry_b
        k = len(t.info.dynamic_buffers)
        table = eb.bitcast(root.dyn_arg, I64.as_pointer())
        off = eb.load(eb.gep(table, [I64(k)], inbounds=True), align=8)
        p = eb.gep(root.dyn_arg, [off], inbounds=True)
        live = res.owner.attributes.get("dyn_live")  # type: ignore[union-attr]  # plan-memory's live range
        start, end = live.get_values() if live is not None else (0, 1 << 30)  # type: ignore[union-attr]
        t.info.dynamic_buffers.append([str(nbytes), int(start), int(end)])
        root.vals[res] = eb.bitcast(p, t.ty(res.type))
        return
    eb = f.entry_b
    size = symbols.value(t, f, nbytes + 63)
    size = eb.mul(eb.sdiv(size, I64(64)), I64(64))
    size = eb.select(eb.icmp_signed("<", size, I64(64)), I64(64), size)
    aligned_alloc = t.decl.function("aligned_alloc", I8P, [I64, I64])
    raw = eb.call(aligned_alloc, [I64(64), size])
    f.frees.append(raw)
    f.vals[res] = eb.bitcast(raw, t.ty(res.type))


def _const_buffer(t: Translator, f: FuncState, op: Operation) -> None:
    name = op.properties["ref"].data  # type: ignore[attr-defined]
    root = f.root
    if not root.is_entry:
        raise CompileError(
            f"llvm backend: loop.const_buffer \"{name}\" in @{root.fn.name}: only the entry function "
            f"@{t.options.entry} binds weights; kernels take them as memref arguments")
    slot = t.const_slot(name)
    eb = root.entry_b
    raw = eb.load(eb.gep(root.consts_arg, [I64(slot)], inbounds=True), align=8)
    _define_in_root(f, op.results[0], eb.bitcast(raw, t.ty(op.results[0].type)))


def _copy(t: Translator, f: FuncState, op: Operation) -> None:
    src, dst = op.operands
    nbytes = symbols.element_count(src.type) * byte_size(t.ty(src.type).pointee)  # type: ignore[attr-defined]
    memcpy = t.decl.function("llvm.memcpy.p0.p0.i64", VOID, [I8P, I8P, I64, I1])
    b = f.b
    b.call(memcpy, [b.bitcast(f.get(dst), I8P), b.bitcast(f.get(src), I8P), symbols.value(t, f, nbytes), I1(0)])


def _rows(t: Translator, f: FuncState, op: Operation) -> None:
    """loop.rows: the source's address plus `start` rows of its static trailing dims."""
    src, start = op.operands
    shape = src.type.get_shape()  # type: ignore[attr-defined]
    row = 1
    for d in shape:
        row = row * d if d >= 0 else 1  # the static trailing dims (the symbolic ones lead)
    b = f.b
    offset = f.get(start) if row == 1 else b.mul(f.get(start), I64(row), flags=("nsw",))
    p = b.gep(f.get(src), [offset], inbounds=True)
    f.vals[op.results[0]] = b.bitcast(p, t.ty(op.results[0].type))


MEMORY_HANDLERS = {
    "loop.load": _load,
    "loop.store": _store,
    "loop.alloc": _alloc,
    "loop.const_buffer": _const_buffer,
    "loop.copy": _copy,
    "loop.rows": _rows,
    "hw.vload": _vload,
    "hw.vstore": _vstore,
    "hw.vmaskload": _vmaskload,
    "hw.vmaskstore": _vmaskstore,
    "hw.vlanecmp": _vlanecmp,
    "hw.vgather": _vgather,
    "hw.vlookup": _vlookup,
}
