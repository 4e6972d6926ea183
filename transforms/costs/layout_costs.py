"""Prices a layout region both ways for `convert-layout{cost-guided=true}`.

A region (connected ops that `convert-layout` would move to NCHW[x]c) is
priced as the sum of its kernels in NCHW (each op on its own) against the
sum of its kernels in the blocked layout, boundary transforms included
(weight and bias transforms are free: they run at compile time). Each kernel
is lowered and scheduled as `annotate-costs` does (`lower_kernel`) and
priced by the cost oracle (`transforms/costs/cost_oracle.py`).

The roofline counts the same flops and bytes for a convolution in either
layout, so it cannot see what the blocked layout buys (full vector lanes
over output channels instead of a masked tail over a short output row).
With `measure=true` every kernel without a record is compiled and timed
once on this machine (single thread, in process) and the time is committed
as a tuning record; the oracle then answers from the database. Records go
to the `database` file, else to `~/.cache/ziggurat/layout-<cpu>.jsonl`.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.transforms.costs.cost_oracle import DefaultCostOracle, Peaks, oracle_from_options
from ziggurat.database import JSONDatabase, TuningRecord
from ziggurat.dialects import graph
from ziggurat.dialects.graph_layout import LayoutTransformOp
from ziggurat.errors import CompileError
from ziggurat.lowering.convert_graph_to_te import build_kernel
from ziggurat.lowering.topi import COMPUTE_DEFS
from ziggurat.transforms.graph.layout_rewrite import Rewriter
from ziggurat.transforms.costs.kernels import lower_kernel
from ziggurat.weights import WeightStore

TRACE = "default-schedule"


def default_database_path() -> Path:
    """The cache of this machine's layout timings, named by the default target's CPU (the kernels are
    timed here, compiled for the default target)."""
    from ziggurat.target import Target

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "ziggurat" / f"layout-{Target.parse('llvm').llvm_cpu}.jsonl"


def time_kernel(module: builtin.ModuleOp, name: str, vector_width: int, min_ms: float = 2.0) -> list[float]:
    """Seconds per call of loop-level kernel `name` (default-scheduled), 5 repeats, one thread."""
    from ziggurat.backends.llvm import LLVMOptions
    from ziggurat.backends.llvm.jit import compile_module
    from ziggurat.dialects import make_context
    from ziggurat.lowering.convert_loop_to_hw import ConvertLoopToHwPass

    m = module.clone()
    ConvertLoopToHwPass(vector_width=vector_width).apply(make_context(), m)
    jit = compile_module(m, LLVMOptions(num_threads=1, export_all=True))
    fn = next(f for f in m.ops if isinstance(f, func.FuncOp) and f.sym_name.data == name)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(t.get_shape()).astype(np.float32) for t in fn.function_type.inputs
              if isinstance(t, MemRefType)]
    call = jit.cfunc(name, None, *[ctypes.c_void_p] * len(arrays))
    ptrs = [a.ctypes.data for a in arrays]
    call(*ptrs)
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            call(*ptrs)
        dt = time.perf_counter() - t0
        if dt * 1e3 >= min_ms or number >= 1 << 16:
            break
        number *= 4
    costs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(number):
            call(*ptrs)
        costs.append((time.perf_counter() - t0) / number)
    del jit
    return costs


class _Pricer:
    def __init__(self, oracle: DefaultCostOracle, db: JSONDatabase | None, measure: bool, width: int):
        self.oracle, self.db, self.measure, self.width = oracle, db, measure, width

    def op(self, op: Operation) -> float:
        kernel, _ = build_kernel(op, "kernel")
        module, key = lower_kernel(kernel, self.width)
        if self.measure and self.db is not None and self.db.best(key, "llvm") is None:
            self.db.commit(TuningRecord(key, "llvm", TRACE, costs=time_kernel(module, "kernel", self.width)))
        return self.oracle.cost(module, "kernel", key).time


def _is_compile_time(op: Operation) -> bool:
    """A transform or reshape of a constant: folded into the weight store at compile time."""
    if isinstance(op, graph.ConstantOp):
        return True
    return isinstance(op, (LayoutTransformOp, graph.ReshapeOp)) and _is_compile_time(op.operands[0].owner)  # type: ignore[arg-type]


def _scratch(region: list[Operation]) -> tuple[func.FuncOp, list[Operation]]:
    """A function holding clones of `region` (and the constants it reads); values used
    outside the region are its results, other external values its arguments."""
    inside = set(region)
    ext: list[SSAValue] = []
    consts: list[Operation] = []
    for op in region:
        for v in op.operands:
            if v.owner in inside:
                continue
            if isinstance(v.owner, graph.ConstantOp):
                if v.owner not in consts:
                    consts.append(v.owner)  # type: ignore[arg-type]
            elif v not in ext:
                ext.append(v)
    block = Block(arg_types=[v.type for v in ext])
    mapping: dict[SSAValue, SSAValue] = dict(zip(ext, block.args))
    b = Builder(InsertPoint.at_end(block))
    for c in consts:
        mapping[c.results[0]] = b.insert(c.clone()).results[0]
    clones = []
    for op in region:
        clones.append(b.insert(op.clone(value_mapper=mapping)))
        mapping[op.results[0]] = clones[-1].results[0]
    outs = [mapping[op.results[0]] for op in region if any(u.operation not in inside for u in op.results[0].uses)]
    b.insert(func.ReturnOp(*outs))
    fn = func.FuncOp("scratch", ([v.type for v in ext], [v.type for v in outs]), Region(block))
    return fn, clones


def price_region(region: list[Operation], block: int, opts, store: WeightStore | None = None) -> tuple[bool, float, float]:
    """(keep the blocked layout?, NCHW cost in us, blocked cost in us) of one region. `store` holds the
    weights the region reads (a grouped conv's blocked twin repacks its weight): the blocked twin is
    built on a scratch store of those, so pricing adds nothing to the module's store."""
    db = None
    if opts.measure:
        path = Path(opts.database) if opts.database else default_database_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = JSONDatabase(path, fsync=False)
        except OSError as err:
            raise CompileError(f"convert-layout{{measure=true}}: cannot open the record file '{path}' ({err}); "
                               "give a writable file with database=\"FILE\" or leave measure off") from None
        peaks = Peaks(opts.peak_gflops, opts.bandwidth_gbs) if opts.peak_gflops > 0 else None
        oracle = DefaultCostOracle(database=db, peaks=peaks)
    else:
        oracle = oracle_from_options(opts.peak_gflops, opts.bandwidth_gbs, opts.database)
    pricer = _Pricer(oracle, db, opts.measure, block)
    before = sum(pricer.op(op) for op in region)
    fn, clones = _scratch(region)
    scratch = None
    if store is not None:
        refs = {op.ref.data for op in fn.body.block.ops if isinstance(op, graph.ConstantOp)}
        scratch = WeightStore({r: store[r] for r in refs if r in store})
    rw = Rewriter(block, scratch)
    for op in clones:
        rw.rewrite(op)
    rw.finish()
    after = sum(pricer.op(op) for op in fn.body.block.ops
                if type(op) in COMPUTE_DEFS and not _is_compile_time(op))
    if db is not None:
        db.close()
    return after < before, before * 1e6, after * 1e6
