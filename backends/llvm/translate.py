"""Translate a loop-level module (after convert-loop-to-hw) to LLVM IR.

The input is a `builtin.module` of `func.func`s over static, row-major
memrefs whose bodies hold `loop`, `hw`, `arith`, `math` and `func` ops. The
translation is one walk that emits `llvmlite.ir` instructions directly; it
does not rewrite the xDSL IR and does not go through xDSL's `llvm` dialect.

* Every `func.func` becomes an `internal` LLVM function taking one bare
  pointer per memref (`noalias`), unless `export_all` makes it external.
* `loop.for` becomes a rotated loop (header with the phi, body, latch); a
  GPU loop (`blockIdx.x`, `threadIdx.x`) too, each block and thread in turn,
  with the `gpu.limit` tail guard as its bound (cross.py `cuda_emulate`). A
  `parallel` loop with more than one thread is outlined into
  `void body(i8*)` and run through `GOMP_parallel`; every thread takes one
  static contiguous chunk of the iteration range. The buffers it captures come
  from that argument block, so each access to a kernel argument or allocation
  carries its buffer's `!alias.scope` and `!noalias` the others' (the
  `noalias` the kernel's parameters had): LLVM keeps a register block's
  accumulators in registers there as it does in the serial function.
* The entry function (`@main`) takes its memrefs, then the const-buffer slots
  and the arena; `<prefix>_entry(void** args)` unpacks the packed array.
* With `LLVMOptions.profile`, every `func.call` of the entry function reads
  `clock_gettime(CLOCK_MONOTONIC)` before and after the (`noinline`) call and
  adds the time to its site's counters in the global `<prefix>.profile`;
  `i64* <prefix>_profile()` returns them (layout in `LLVMOptions`).

```python
module = Parser(make_context(), text).parse_module()
llvm_module, info = translate_module(module, LLVMOptions(num_threads=2))
```
"""

from __future__ import annotations

import gc

from llvmlite import ir
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp, UnregisteredOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue

from ziggurat.backends.llvm import symbols as sym_values
from ziggurat.backends.llvm.arith_ops import ARITH_HANDLERS
from ziggurat.backends.llvm.lltypes import (
    I1, I8, I8P, I32, I64, VOID, Declarations, byte_size, element_size, llvm_type, memref_strides,
)
from ziggurat.backends.llvm.math_ops import MATH_HANDLERS
from ziggurat.backends.llvm.loops import for_handler, smin
from ziggurat.backends.llvm.memory import MEMORY_HANDLERS
from ziggurat.backends.llvm.x86_ops import X86_HANDLERS
from ziggurat.backends.llvm.options import LLVMOptions, ModuleInfo
from ziggurat.backends.entry_slots import EntrySlots
from ziggurat.dialects.sym import SYMBOLS_ATTR, is_symbolic_type, symbol_args
from ziggurat.errors import CompileError

PREFER_VECTOR_WIDTH = '"prefer-vector-width"="512"'
_BODY_TYPE = ir.FunctionType(VOID, [I8P])
_LOOP_HINTS = {"vectorized": ("llvm.loop.vectorize.enable", True), "unrolled": ("llvm.loop.unroll.full", False)}
MXCSR_FTZ_DAZ = 0x8040  # MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6)
PROFILE_FIELDS = 4  # i64 counters per timed call site: nanoseconds, calls, last start, last end
_CLOCK_MONOTONIC = 1  # Linux's clock id
_TIMESPEC = ir.LiteralStructType([I64, I64])  # struct timespec on LP64: tv_sec, tv_nsec


class FuncState:
    """Emission state of one LLVM function.

    `entry_b` appends to the entry block (allocas, scratch allocation,
    loads of captured values); `b` follows the body. A function outlined for
    a parallel loop has a `parent`: a parent value it uses is *captured*,
    i.e. the caller stores it into an argument block at a byte offset and the
    outlined function loads it in its entry block.
    """

    __slots__ = ("fn", "b", "entry_b", "start", "vals", "parent", "root", "captures", "cap_size",
                 "frees", "is_entry", "consts_arg", "arena_arg", "buffers", "accesses", "dyn_arg", "extents")

    def __init__(self, fn: ir.Function, parent: FuncState | None = None):
        self.fn = fn
        self.entry_b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.start = fn.append_basic_block("start")
        self.b = ir.IRBuilder(self.start)
        self.vals: dict[SSAValue, ir.Value] = {}
        self.parent = parent
        self.root: FuncState = self if parent is None else parent.root
        self.captures: list[tuple[ir.Value, int]] = []
        self.cap_size = 0
        # An outlined function: its distinct buffers (captured kernel arguments, which are `noalias`
        # there, and allocations) by loaded pointer, and its accesses to them, which get alias scopes
        # once the body is emitted (`Translator.scope_accesses`).
        self.buffers: dict[ir.Value, int] = {}
        self.accesses: list[tuple[ir.Instruction, int]] = []
        self.frees: list[ir.Value] = []
        self.is_entry = False
        self.consts_arg: ir.Value | None = None
        self.arena_arg: ir.Value | None = None
        # the entry's arena of buffers of symbolic size (backends/llvm/memory.py `_dynamic_alloc`)
        self.dyn_arg: ir.Value | None = None
        self.extents: dict = {}  # Sym -> its i64 value, computed in the entry block (backends/llvm/symbols.py)

    def get(self, v: SSAValue) -> ir.Value:
        """The LLVM value of an xDSL SSA value, capturing it from the parent if needed."""
        x = self.vals.get(v)
        if x is None:
            x = self._capture(v)
        return x

    def _capture(self, v: SSAValue) -> ir.Value:
        if self.parent is None:
            raise CompileError(f"llvm backend: value {v.name_hint or v} used before it is defined in @{self.fn.name}")
        x = self.parent.get(v)
        if isinstance(x, (ir.Constant, ir.GlobalValue)):
            self.vals[v] = x
            return x
        size = byte_size(x.type)
        align = 8 if size <= 8 else 64
        off = -(-self.cap_size // align) * align
        self.cap_size = off + size
        self.captures.append((x, off))
        eb = self.entry_b
        p = eb.bitcast(eb.gep(self.fn.args[0], [I64(off)], inbounds=True), x.type.as_pointer())
        y = self.vals[v] = eb.load(p, align=element_size(x.type))
        if _distinct_buffer(v):
            self.buffers[y] = len(self.buffers)
        return y

    def note_access(self, instr: ir.Instruction, base: ir.Value) -> None:
        """Records a load or store through `base` when it is one of this outlined function's
        distinct buffers (it then gets that buffer's alias scope)."""
        k = self.buffers.get(base)
        if k is not None:
            self.accesses.append((instr, k))


class Translator(EntrySlots):
    """Walks one module once and emits an `llvmlite.ir.Module`."""

    backend = "llvm"

    def __init__(self, options: LLVMOptions):
        self.options = options
        self.module = ir.Module(name="ziggurat")
        self.decl = Declarations(self.module)
        self.info = ModuleInfo()
        self.fast_math = tuple(options.fast_math)
        self.funcs: dict[str, ir.Function] = {}
        self.handlers = {**STRUCTURE_HANDLERS, **MEMORY_HANDLERS, **ARITH_HANDLERS, **MATH_HANDLERS, **X86_HANDLERS}
        self._fm_cache: dict[int, tuple[object, tuple[str, ...]]] = {}
        self._types: dict[int, tuple[Attribute, ir.Type]] = {}
        self._strides: dict[int, tuple[Attribute, tuple[int, ...]]] = {}
        self._entry: tuple[func.FuncOp, ir.Function] | None = None
        self.symbols: dict[str, SSAValue] = {}  # of the function being defined (backends/llvm/symbols.py)
        self.init_slots()
        self._outlined = 0
        self._hints: dict[str, ir.MDValue] = {}
        self._profile: ir.GlobalVariable | None = None
        self._clock_buf: ir.Value | None = None

    # -- module level ----------------------------------------------------------

    def run(self, module: ModuleOp) -> tuple[ir.Module, ModuleInfo]:
        funcs = []
        for op in module.ops:
            if not isinstance(op, func.FuncOp):
                raise CompileError(f"llvm backend: top-level op '{op.name}' is not supported; expected func.func")
            funcs.append(op)
        for fop in funcs:
            self._declare(fop)
        if self.options.profile and self._entry is not None:
            self._profile_counters(self._entry[0])
        for fop in funcs:
            if fop.body.blocks:
                self._define(fop)
        if self._entry is not None:
            self._entry_wrapper()
        elif not self.options.export_all:
            raise CompileError(
                f"llvm backend: the module has no entry function @{self.options.entry}; "
                "set LLVMOptions(export_all=True) to export every function under its own name")
        self.finish_slots()
        return self.module, self.info

    def _declare(self, fop: func.FuncOp) -> None:
        name = fop.sym_name.data
        ftype = fop.function_type
        args = [self.ty(t) for t in ftype.inputs.data]
        outs = ftype.outputs.data
        if len(outs) > 1:
            raise CompileError(f"llvm backend: @{name} returns {len(outs)} values; at most one is supported")
        ret = self.ty(outs[0]) if outs else VOID
        defined = bool(fop.body.blocks)
        is_entry = defined and name == self.options.entry
        if is_entry:
            n_syms = len(symbol_args(fop))
            bufs = ftype.inputs.data[:len(ftype.inputs.data) - n_syms]
            bad = [str(t) for t in bufs if not isinstance(t, MemRefType)]
            if bad or outs:
                raise CompileError(f"llvm backend: entry @{name} must take only memrefs (and the index "
                                   f"arguments of its {SYMBOLS_ATTR}) and return nothing")
            args += [I8P.as_pointer(), I8P]  # const-buffer slots, arena
            if _symbolic_allocs(fop):
                args.append(I8P)  # the arena of the buffers of symbolic size, sized by the caller
        fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        fn.attributes.add("nounwind")
        if defined:
            set.add(fn.attributes, PREFER_VECTOR_WIDTH)
            if not self.options.export_all:
                fn.linkage = "internal"
            else:
                self.info.exported.append(name)
        for a in fn.args:
            if isinstance(a.type, ir.PointerType):
                a.add_attribute("noalias")
        self.funcs[name] = fn
        if is_entry:
            self._entry = (fop, fn)

    def _define(self, fop: func.FuncOp) -> None:
        fn = self.funcs[fop.sym_name.data]
        f = FuncState(fn)
        block = fop.body.block
        self.symbols = symbol_args(fop)
        for arg, value in zip(block.args, fn.args):
            f.vals[arg] = value
        if self._entry is not None and self._entry[0] is fop:
            n = len(block.args)
            f.is_entry, f.consts_arg, f.arena_arg = True, fn.args[n], fn.args[n + 1]
            if len(fn.args) > n + 2:
                f.dyn_arg = fn.args[n + 2]
        self.block(f, block)
        if not f.b.block.is_terminated:
            self.ret(f, None)
        f.entry_b.branch(f.start)

    def _entry_wrapper(self) -> None:
        fop, fn = self._entry  # type: ignore[misc]
        name = f"{self.options.prefix}_entry"
        w = ir.Function(self.module, ir.FunctionType(VOID, [I8P.as_pointer()]), name)
        w.attributes.add("nounwind")
        b = ir.IRBuilder(w.append_basic_block("entry"))
        packed = w.args[0]
        n = len(fop.body.block.args)
        vals = []
        for i, a in enumerate(fn.args[:n]):
            slot = b.load(b.gep(packed, [I64(i)], inbounds=True), align=8)
            # a symbol's value travels in its slot as a pointer-sized integer
            vals.append(b.ptrtoint(slot, a.type) if isinstance(a.type, ir.IntType) else b.bitcast(slot, a.type))
        consts = b.gep(packed, [I64(n)], inbounds=True)
        if self._arena_end > 0:
            arena = b.load(b.gep(packed, [I64(n + len(self._const_slots))], inbounds=True), align=8)
        else:
            arena = ir.Constant(I8P, None)
        extra = []
        if len(fn.args) > n + 2:  # the symbolic buffers' arena: the slot after the static arena's
            at = n + len(self._const_slots) + (1 if self._arena_end > 0 else 0)
            extra.append(b.load(b.gep(packed, [I64(at)], inbounds=True), align=8))
        saved = self.flush_denormals(b)
        b.call(fn, vals + [consts, arena] + extra)
        self.restore_mxcsr(b, saved)
        b.ret_void()
        self.info.entry_symbol = name
        self.info.num_args = n
        self.info.symbols = list(symbol_args(fop))
        self.info.exported.append(name)

    # -- profiling (LLVMOptions.profile) ---------------------------------------

    def _profile_counters(self, entry: func.FuncOp) -> None:
        """The counters global, PROFILE_FIELDS per call in the entry function, and its accessor."""
        sites = max(1, sum(isinstance(op, func.CallOp) for op in entry.walk()))
        ty = ir.ArrayType(I64, PROFILE_FIELDS * sites)
        g = self._profile = ir.GlobalVariable(self.module, ty, f"{self.options.prefix}.profile")
        g.linkage = "internal"
        g.initializer = ir.Constant(ty, None)
        g.align = 64
        name = f"{self.options.prefix}_profile"
        fn = ir.Function(self.module, ir.FunctionType(I64.as_pointer(), []), name)
        fn.attributes.add("nounwind")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        b.ret(b.gep(g, [I64(0), I64(0)], inbounds=True))
        self.info.exported.append(name)

    def _clock_ns(self, f: FuncState) -> ir.Value:
        """Nanoseconds of CLOCK_MONOTONIC, read at `f.b`."""
        if self._clock_buf is None:
            self._clock_buf = f.entry_b.alloca(_TIMESPEC)
        clock = self.decl.function("clock_gettime", I32, [I32, _TIMESPEC.as_pointer()])
        b = f.b
        b.call(clock, [I32(_CLOCK_MONOTONIC), self._clock_buf])
        sec = b.load(b.gep(self._clock_buf, [I32(0), I32(0)], inbounds=True), align=8)
        nsec = b.load(b.gep(self._clock_buf, [I32(0), I32(1)], inbounds=True), align=8)
        return b.add(b.mul(sec, I64(1_000_000_000)), nsec)

    def timed_call(self, f: FuncState, callee: ir.Function, args: list[ir.Value]) -> ir.Value:
        """`callee(args)` between two clock reads; the next call site's counters get the time."""
        assert self._profile is not None
        site = len(self.info.profile_sites)
        self.info.profile_sites.append(callee.name)
        b = f.b
        start = self._clock_ns(f)
        r = b.call(callee, args, attrs=("noinline",))
        end = self._clock_ns(f)
        total, calls, last_start, last_end = (b.gep(self._profile, [I64(0), I64(PROFILE_FIELDS * site + k)], inbounds=True)
                                              for k in range(PROFILE_FIELDS))
        b.store(b.add(b.load(total, align=8), b.sub(end, start)), total, align=8)
        b.store(b.add(b.load(calls, align=8), I64(1)), calls, align=8)
        b.store(start, last_start, align=8)
        b.store(end, last_end, align=8)
        return r

    # -- helpers used by the op handlers ---------------------------------------

    def block(self, f: FuncState, block: Block) -> None:
        """Translate the ops of one block, in order, into `f` at its builder."""
        handlers = self.handlers
        op = None
        try:
            for op in block.ops:
                h = handlers.get(op.name)
                if h is None:
                    raise CompileError(
                        f"llvm backend: op '{_op_name(op)}' is not supported (in @{f.root.fn.name}); "
                        "lower it before the backend or add a translation in ziggurat/backends/llvm/")
                h(self, f, op)
        except CompileError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, AssertionError) as e:
            name = _op_name(op) if op is not None else "?"
            raise CompileError(f"llvm backend: cannot translate '{name}' in @{f.root.fn.name}: {e}") from e

    # xDSL attributes hash recursively on every lookup, so the per-module
    # caches below are keyed by object identity (each entry keeps its key alive).

    def ty(self, attr: Attribute) -> ir.Type:
        """The LLVM type of an xDSL type."""
        hit = self._types.get(id(attr))
        if hit is None:
            hit = self._types[id(attr)] = (attr, llvm_type(attr))
        return hit[1]

    def strides(self, memref: Attribute) -> tuple:
        """Row-major element strides of a memref type: ints, or `Sym` expressions for a symbolic one."""
        hit = self._strides.get(id(memref))
        if hit is None:
            found = sym_values.strides(memref) if is_symbolic_type(memref) else memref_strides(memref)  # type: ignore[arg-type]
            hit = self._strides[id(memref)] = (memref, found)
        return hit[1]

    def flags(self, op: Operation) -> tuple[str, ...]:
        """Fast-math flags for a float op: the options' set plus the op's own."""
        fm = op.properties.get("fastmath")
        if fm is None or not fm.data:  # type: ignore[attr-defined]
            return self.fast_math
        hit = self._fm_cache.get(id(fm))
        if hit is None:
            own = {f.value for f in fm.data}  # type: ignore[attr-defined]
            hit = self._fm_cache[id(fm)] = (fm, tuple(sorted(set(self.fast_math) | own)))
        return hit[1]

    def flush_denormals(self, b: ir.IRBuilder, allocas: ir.IRBuilder | None = None) -> ir.Value | None:
        """Per `LLVMOptions.flush_denormals`: saves MXCSR into a stack slot and sets (True) or clears
        (False) its flush-to-zero and denormals-are-zero bits; returns the slot (None: untouched)."""
        flush = self.options.flush_denormals
        if flush is None:
            return None
        fn = self.decl.function
        slot = (allocas or b).alloca(I32, name="mxcsr")
        new = (allocas or b).alloca(I32, name="mxcsr.ftz")
        b.call(fn("llvm.x86.sse.stmxcsr", VOID, [I8P]), [b.bitcast(slot, I8P)])
        old = b.load(slot)
        b.store(b.or_(old, I32(MXCSR_FTZ_DAZ)) if flush else b.and_(old, I32(~MXCSR_FTZ_DAZ & 0xFFFFFFFF)), new)
        b.call(fn("llvm.x86.sse.ldmxcsr", VOID, [I8P]), [b.bitcast(new, I8P)])
        return slot

    def restore_mxcsr(self, b: ir.IRBuilder, slot: ir.Value | None) -> None:
        if slot is not None:
            b.call(self.decl.function("llvm.x86.sse.ldmxcsr", VOID, [I8P]), [b.bitcast(slot, I8P)])

    def ret(self, f: FuncState, value: ir.Value | None) -> None:
        """Free the function's heap scratch and return."""
        if f.frees:
            free = self.decl.function("free", VOID, [I8P])
            for p in f.frees:
                f.b.call(free, [p])
        if value is None:
            f.b.ret_void()
        else:
            f.b.ret(value)

    # -- loops -----------------------------------------------------------------

    def loop_id(self, kind: str) -> ir.MDValue:
        """A fresh `!llvm.loop` node carrying the hint for a loop kind."""
        hint = self._hints.get(kind)
        if hint is None:
            name, flag = _LOOP_HINTS[kind]
            operands = [ir.MetaDataString(self.module, name)] + ([I1(1)] if flag else [])
            hint = self._hints[kind] = self.module.add_metadata(operands)
        # A loop ID must be unique and refer to itself; add_metadata would deduplicate.
        md = ir.MDValue(self.module, [hint], name=str(len(self.module.metadata)))
        md.operands = (md, hint)
        return md

    def serial_loop(self, f: FuncState, lo: ir.Value, hi: ir.Value, step: int, body: Block, guard: bool,
                    kind: str = "serial") -> None:
        """A rotated loop `for iv = lo; iv < hi; iv += step` around `body`.

        Without `guard` the caller knows the loop runs at least once.
        `vectorized` and `unrolled` loops carry the matching `llvm.loop` hint.
        """
        b = f.b
        pre = b.block
        header = f.fn.append_basic_block("loop")
        exit_ = f.fn.append_basic_block("loop.exit")
        if guard:
            b.cbranch(b.icmp_signed("<", lo, hi), header, exit_)
        else:
            b.branch(header)
        b.position_at_end(header)
        iv = b.phi(I64)
        iv.add_incoming(lo, pre)
        f.vals[body.args[0]] = iv
        self.block(f, body)
        nxt = b.add(iv, I64(step), flags=("nsw",))
        iv.add_incoming(nxt, b.block)
        br = b.cbranch(b.icmp_signed("<", nxt, hi), header, exit_)
        if kind in _LOOP_HINTS:
            br.set_metadata("llvm.loop", self.loop_id(kind))
        b.position_at_end(exit_)

    def parallel_loop(self, f: FuncState, body: Block, lb: int | SSAValue, step: int, trips: int,
                      ub: int | SSAValue | None = None) -> None:
        """Outline `body` and run it on `num_threads` threads through GOMP_parallel."""
        d = self.decl
        self.info.uses_openmp = True
        self._outlined += 1
        fn = ir.Function(self.module, _BODY_TYPE, f"{f.root.fn.name}.omp{self._outlined}")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        set.add(fn.attributes, PREFER_VECTOR_WIDTH)
        fn.args[0].add_attribute("noalias")
        g = FuncState(fn, parent=f)
        b = g.b
        tid = b.sext(b.call(d.function("omp_get_thread_num", I32, []), []), I64)
        nt = b.sext(b.call(d.function("omp_get_num_threads", I32, []), []), I64)
        if ub is None and not isinstance(lb, SSAValue):
            n: ir.Value = I64(trips)
        else:  # run-time bounds: the trip count from the captured values, at least 0
            lo_v = g.get(lb) if isinstance(lb, SSAValue) else I64(lb)
            hi_v = g.get(ub) if isinstance(ub, SSAValue) else I64(int(ub))  # type: ignore[arg-type]
            n = b.sdiv(b.add(b.sub(hi_v, lo_v), I64(step - 1)), I64(step))
            n = b.select(b.icmp_signed("<", n, I64(0)), I64(0), n)
        chunk = b.sdiv(b.add(nt, b.sub(n, I64(1))), nt)
        lo = smin(b, b.mul(tid, chunk), n)
        hi = smin(b, b.add(lo, chunk), n)
        if step != 1:
            lo, hi = b.mul(lo, I64(step)), b.mul(hi, I64(step))
        if isinstance(lb, SSAValue):
            base = g.get(lb)
            lo, hi = b.add(lo, base), b.add(hi, base)
        elif lb != 0:
            lo, hi = b.add(lo, I64(lb)), b.add(hi, I64(lb))
        saved = self.flush_denormals(b, g.entry_b)  # MXCSR is per thread; libgomp's workers keep their own
        self.serial_loop(g, lo, hi, step, body, guard=True)
        self.scope_accesses(g)
        self.restore_mxcsr(g.b, saved)
        self.ret(g, None)
        g.entry_b.branch(g.start)
        # Caller: store the captured values into an argument block, then fork.
        if g.cap_size:
            buf = f.entry_b.alloca(ir.ArrayType(I8, g.cap_size))
            buf.align = 64
            data = f.entry_b.bitcast(buf, I8P)
            for value, off in g.captures:
                p = f.b.bitcast(f.b.gep(data, [I64(off)], inbounds=True), value.type.as_pointer())
                f.b.store(value, p, align=element_size(value.type))
        else:
            data = ir.Constant(I8P, None)
        gomp = d.function("GOMP_parallel", VOID, [_BODY_TYPE.as_pointer(), I8P, I32, I32])
        f.b.call(gomp, [fn, data, I32(self.options.num_threads), I32(0)])

    def scope_accesses(self, g: FuncState) -> None:
        """Gives each load and store of outlined function `g` through one of its distinct buffers
        that buffer's alias scope, and `noalias` with the others: the pointers come from the
        argument block, so LLVM would otherwise assume any two may overlap (and keep, say, a
        register block's accumulators in memory across a reduction loop)."""
        if len(g.buffers) < 2 or not g.accesses:
            return
        m = self.module
        domain = m.add_metadata([ir.MetaDataString(m, f"{g.fn.name}.buffers")])
        scopes = [m.add_metadata([ir.MetaDataString(m, f"{g.fn.name}.buffer{k}"), domain])
                  for k in range(len(g.buffers))]
        own = [m.add_metadata([sc]) for sc in scopes]
        others = [m.add_metadata([sc for j, sc in enumerate(scopes) if j != k]) for k in range(len(scopes))]
        for instr, k in g.accesses:
            instr.set_metadata("alias.scope", own[k])
            instr.set_metadata("noalias", others[k])


def _symbolic_allocs(fop: func.FuncOp) -> bool:
    """Whether the entry allocates buffers of symbolic size (they share one caller-given arena)."""
    return any(op.name == "loop.alloc" and (is_symbolic_type(op.results[0].type) or "dyn_live" in op.attributes)
               for op in fop.body.block.ops)


def _distinct_buffer(v: SSAValue) -> bool:
    """A memref that no other memref of its kernel aliases: an argument of the kernel function
    (its LLVM parameters are `noalias`) or an allocation."""
    if not isinstance(v.type, MemRefType):
        return False
    if isinstance(v, BlockArgument):
        return isinstance(v.owner.parent_op(), func.FuncOp)  # type: ignore[union-attr]
    return isinstance(v.owner, Operation) and v.owner.name == "loop.alloc"


def _op_name(op: Operation) -> str:
    """The op's name; for an unregistered op, the name it was written with."""
    return op.op_name.data if isinstance(op, UnregisteredOp) else op.name


# -- structural op handlers ------------------------------------------------------


def _block(t: Translator, f: FuncState, op: Operation) -> None:
    body = op.regions[0].block
    for arg, bound in zip(body.args, op.operands):
        f.vals[arg] = f.get(bound)
    t.block(f, body)


def _call(t: Translator, f: FuncState, op: Operation) -> None:
    name = op.callee.root_reference.data  # type: ignore[attr-defined]
    callee = t.funcs.get(name)
    if callee is None:
        raise CompileError(f"llvm backend: call to unknown function @{name} in @{f.root.fn.name}")
    if t._entry is not None and callee is t._entry[1]:
        raise CompileError(f"llvm backend: the entry function @{name} cannot be called from @{f.root.fn.name}")
    args = [f.get(a) for a in op.operands]
    r = t.timed_call(f, callee, args) if f.is_entry and t.options.profile else f.b.call(callee, args)
    if op.results:
        f.vals[op.results[0]] = r


def _return(t: Translator, f: FuncState, op: Operation) -> None:
    if len(op.operands) > 1:
        raise CompileError(f"llvm backend: func.return of {len(op.operands)} values in @{f.fn.name}")
    t.ret(f, f.get(op.operands[0]) if op.operands else None)


STRUCTURE_HANDLERS = {
    "loop.for": for_handler,
    "loop.block": _block,
    "func.call": _call,
    "func.return": _return,
}


def translate_module(module: ModuleOp, options: LLVMOptions | None = None) -> tuple[ir.Module, ModuleInfo]:
    """Translate a loop-level module to an `llvmlite.ir.Module` and its ABI facts.

    The cyclic garbage collector is paused meanwhile: translation allocates
    many small objects and creates no garbage cycles worth collecting, and the
    collector's scans of a large xDSL module cost more than the walk itself.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return Translator(options or LLVMOptions()).run(module)
    finally:
        if was_enabled:
            gc.enable()
