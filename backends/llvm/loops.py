"""loop.for in the LLVM backend: static loops (inline for one trip, rotated serial loops, parallel
loops outlined and run through GOMP_parallel, GPU thread axes emulated one after another) and loops
with run-time bounds (guarded; a parallel one splits its run-time trip count over the threads and
runs in place for a single iteration). The loop builders themselves are `Translator.serial_loop`
and `Translator.parallel_loop` (translate.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.ir import Operation

from ziggurat.backends.llvm import symbols
from ziggurat.backends.llvm.lltypes import I64
from ziggurat.dialects.loop import GPU_LOOP_KINDS as GPU_KINDS
from ziggurat.dialects.loop import MIN_WORK, ForOp
from ziggurat.dialects.loop import WORK_ATTR as WORK
from ziggurat.symbolic import Sym

if TYPE_CHECKING:
    from ziggurat.backends.llvm.translate import FuncState, Translator


def smin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """The signed minimum of two i64 values."""
    return b.select(b.icmp_signed("<", x, y), x, y)


def _dynamic_for(t: Translator, f: FuncState, op: ForOp) -> None:
    """A loop with a run-time bound: guarded (it may run no iteration); a parallel one splits its
    run-time trip count over the threads."""
    step = op.step.value.data
    body = op.regions[0].block
    kind = op.kind.data
    lo = f.get(op.dyn_lb) if op.dyn_lb is not None else I64(op.lb.value.data)
    hi = f.get(op.dyn_ub) if op.dyn_ub is not None else I64(op.ub.value.data)
    if kind == "parallel" and t.options.num_threads > 1 and f.parent is None:
        _guarded_parallel(t, f, op, lo, hi)
        return
    t.serial_loop(f, lo, hi, step, body, guard=True, kind=kind if kind in ("vectorized", "unrolled") else "serial")


def _guarded_parallel(t: Translator, f: FuncState, op: ForOp, lo: ir.Value, hi: ir.Value) -> None:
    """A parallel loop that runs on threads only for two or more iterations and, where
    loop-dynamic-schedule estimated its work (`dyn.work`, transforms/schedule/dynamic_work.py),
    only where that reaches `MIN_WORK` at this call's extents; otherwise (a batch of 1, a single
    block of rows, a short sequence) it runs here, without the cost of a parallel region. The
    body is emitted for both paths."""
    step = op.step.value.data
    body = op.regions[0].block
    b = f.b
    go = b.icmp_signed(">", b.sub(hi, lo), I64(step))
    estimate = op.attributes.get(WORK)
    if estimate is not None:
        work = symbols.value(t, f, Sym.lift(Sym.parse(estimate.data)))  # type: ignore[attr-defined]
        go = b.and_(go, b.icmp_signed(">=", work, I64(MIN_WORK)))
    par, ser, done = (f.fn.append_basic_block(n) for n in ("par", "ser", "par.done"))
    b.cbranch(go, par, ser)
    b.position_at_end(par)
    if op.is_dynamic:
        t.parallel_loop(f, body, op.lower, step, 0, ub=op.upper)
    else:
        t.parallel_loop(f, body, op.lb.value.data, step, len(range(op.lb.value.data, op.ub.value.data, step)))
    f.b.branch(done)
    f.b.position_at_end(ser)
    t.serial_loop(f, lo, hi, step, body, guard=True)
    f.b.branch(done)
    f.b.position_at_end(done)


def for_handler(t: Translator, f: FuncState, op: Operation) -> None:
    """loop.for: a serial, parallel (outlined, GOMP) or GPU-emulating loop; one of a single trip inline."""
    if op.is_dynamic:  # type: ignore[attr-defined]
        _dynamic_for(t, f, op)  # type: ignore[arg-type]
        return
    p = op.properties
    lb, ub, step = p["lb"].value.data, p["ub"].value.data, p["step"].value.data  # type: ignore[attr-defined]
    trips = max(0, (ub - lb + step - 1) // step)
    body = op.regions[0].block
    if trips == 0:
        return
    if trips == 1:
        f.vals[body.args[0]] = I64(lb)
        t.block(f, body)
        return
    if p["kind"].data in GPU_KINDS:  # a GPU schedule emulated on the CPU: each block, then each thread, in turn
        hi: ir.Value = I64(ub)
        outer = op.parent_op()
        limit = outer.attributes.get("gpu.limit") if isinstance(outer, ForOp) else None
        if p["kind"].data == GPU_KINDS[1] and limit is not None:  # the tail guard of bind_threads
            rest = f.b.sub(I64(limit.value.data), f.b.mul(f.get(outer.regions[0].block.args[0]), I64(ub)))
            hi = smin(f.b, hi, rest)
        t.serial_loop(f, I64(lb), hi, step, body, guard=True)
        return
    if p["kind"].data == "parallel" and t.options.num_threads > 1 and f.parent is None:  # type: ignore[attr-defined]
        if WORK in op.attributes:  # in a kernel over symbols: threads where the call's work is enough
            _guarded_parallel(t, f, op, I64(lb), I64(ub))  # type: ignore[arg-type]
        else:
            t.parallel_loop(f, body, lb, step, trips)
        return
    t.serial_loop(f, I64(lb), I64(ub), step, body, guard=False, kind=p["kind"].data)  # type: ignore[attr-defined]
