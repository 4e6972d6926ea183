"""The cost oracle: what does one kernel cost on this machine?

The feedback channel (design.md, section 4) prices graph-level alternatives
(a fused group, its parts, a single op) by lowering each to a scheduled
loop-level kernel and asking a `CostOracle`. `DefaultCostOracle` answers from,
in this order:

1. the tuning database (`database.py`), where a measured record for
   the kernel's workload key exists (key: `WorkloadKey.from_text` of the
   kernel's loop-level text before scheduling);
2. the learned cost model (`autotune/cost_model.py`), once it is trained: it
   predicts normalized throughput (the fraction of the best achievable), so
   the time is the roofline bound divided by it;
3. an analytic roofline estimate: `max(flops / peak, bytes / bandwidth)`,
   with flops and bytes counted on the loop-level IR (`count_work`; a float
   op outside every vectorized loop counts `SCALAR_SLOWDOWN` times, since
   the peak is one of vector FMAs) and the
   peaks measured once per machine (`measure_peaks`, two tiny generated LLVM
   kernels, well under 2 s) and cached as JSON in
   `~/.cache/ziggurat/roofline-<cpu>.json` (`$XDG_CACHE_HOME` is honoured).

Every answer is a `CostEstimate` that says which source gave it.

```python
oracle = DefaultCostOracle(peaks=Peaks(gflops=100.0, bandwidth_gbs=20.0))  # fixed peaks
est = oracle.cost(loop_module, "fused_exp_matmul_0")
est.time, est.flops, est.bytes, est.source   # seconds, counts, "roofline"
```
"""

from __future__ import annotations

import ctypes
import json
import os
import time
from dataclasses import asdict, dataclass
from math import gcd, prod
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, VectorType
from xdsl.ir import Operation

from ziggurat.database import Database, WorkloadKey
from ziggurat.transforms.costs.features import FLOAT_OPS, Access, kernel_function, footprint, WalkState, walk_loops, extract_features
from ziggurat.dialects import loop
from ziggurat.errors import TuningError
from ziggurat.target import Target

SOURCES = ("database", "model", "roofline")
# A `math` op (exp, tanh, ...) costs about this many float ops (a polynomial).
MATH_OP_FLOPS = 10
# A scalar float op issues at the vector rate, so it costs this many lanes of the peak
# (`measure_peaks` times <8 x float> FMAs): scalar loops the vectorizer left are priced so.
SCALAR_SLOWDOWN = 8
# L1 set conflicts (`_conflict_lines`): an L1 data cache of LINE_BYTES lines in L1_SETS sets
# (32 KiB, 8 ways on Zen 3/4; 48 KiB, 12 ways on recent Intel keep the same 4 KiB way) maps the
# lines of a walk with a stride of s lines to L1_SETS / gcd(s, L1_SETS) sets. A loop whose
# trips outnumber what those sets hold (L1_WAYS lines each) misses L1 on every line it reads,
# and waits on L2 about CONFLICT_LINE_S / sets per line. Fitted on a Zen 3 host with 8-lane
# register-blocked matmuls whose unpacked reduction loop walks B down a column (one 64-byte
# line of B per trip): one set (rows of 1024, 2048, 4096 floats; 128x128 by 128x1024 and
# four more shapes) took 4.0-5.6 ns per line, 1.8-2.5x the same product with B transposed;
# two sets (rows of 512 or 1536 floats) 2.0-3.9 ns per line.
LINE_BYTES = 64
L1_SETS = 64
L1_WAY_BYTES = L1_SETS * LINE_BYTES
L1_WAYS = 8
CONFLICT_LINE_S = 5e-9


@dataclass(frozen=True)
class CostEstimate:
    """The cost of one kernel: seconds, float ops, bytes of distinct data touched, and its source."""

    time: float
    flops: float
    bytes: float
    source: str

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"unknown cost source '{self.source}'; known: {SOURCES}")


@dataclass(frozen=True)
class Peaks:
    """A machine's roofline figures for one thread: vector-FMA GFLOP/s and memory GB/s."""

    gflops: float
    bandwidth_gbs: float

    def time(self, flops: float, nbytes: float, scalar_flops: float = 0.0, scalar_index_ops: float = 0.0,
             conflict_lines: float = 0.0, copy_bytes: float = 0.0) -> float:
        """Roofline seconds; `scalar_flops` (part of `flops`) and `scalar_index_ops` (integer
        divisions run lane by lane) issue one lane at a time, SCALAR_SLOWDOWN times slower;
        `conflict_lines` (lines that loads fetch past L1 on set conflicts) wait CONFLICT_LINE_S
        each, a third bound next to compute and traffic. `copy_bytes` (a pack nest's reads and
        writes) is a phase of its own before the compute: its traffic time adds to the rest."""
        compute = flops + (SCALAR_SLOWDOWN - 1) * min(scalar_flops, flops) + SCALAR_SLOWDOWN * scalar_index_ops
        return max(compute / (self.gflops * 1e9), nbytes / (self.bandwidth_gbs * 1e9),
                   conflict_lines * CONFLICT_LINE_S) + copy_bytes / (self.bandwidth_gbs * 1e9)


@dataclass(frozen=True)
class Work:
    """What a loop-level kernel does: float ops (math ops weighted), distinct bytes touched,
    how many of the float ops are scalar (outside every vectorized loop), and the scalarized
    index divisions inside vectorized loops (`INDEX_DIV_OPS` per lane), and the cache lines
    that loads fetch past L1 on set conflicts (`_conflict_lines`), and the bytes a pack nest
    copies (`copy_bytes`: B into panels, a phase before the compute), and the ops of tensorized
    dot steps (`dot_ops`: an int8 GEMM's multiply-adds, which `flops` leaves out)."""

    flops: float
    bytes: float
    scalar_flops: float = 0.0
    scalar_index_ops: float = 0.0
    conflict_lines: float = 0.0
    copy_bytes: float = 0.0
    dot_ops: float = 0.0  # multiply-adds of tensorized dot steps (int8 GEMMs), 2 ops each; not in flops


def _op_flops(op: Operation) -> float:
    name = op.name
    if name in ("hw.vfma", "math.fma"):
        return 2.0
    if name.startswith("math."):
        return 1.0 + MATH_OP_FLOPS  # as `count_work` counts it: the op, then its polynomial
    return 1.0 if name in FLOAT_OPS else 0.0


_INDEX_DIVS = {"arith.divui", "arith.divsi", "arith.remui", "arith.remsi", "arith.floordivsi", "arith.ceildivsi"}
# An integer division of a vectorized loop's index (a reshape's or transpose's coordinates
# of a gathered load) by anything but a power of two has no vector instruction for 64-bit
# lanes: its lanes run scalar, about this many scalar ops each (fitted on this host: a
# 12288-element reshape-transpose gathering through 3 such divisions per element takes
# 17 us, where its traffic alone would take 2 us).
INDEX_DIV_OPS = 6


def _scalar_flops(ops, trips: int = 1, varying: set | None = None, index: list[float] | None = None) -> float:
    """Float ops (math ops weighted) of scalar type outside every vectorized loop, times their
    trips; `index[0]` accumulates the scalarized lanes of index divisions inside one."""
    index = [0.0] if index is None else index
    total = 0.0
    varying = set() if varying is None else varying  # values that differ between the lanes
    for op in ops:
        if isinstance(op, loop.ForOp):
            vec = op.kind.data == "vectorized" or "hw.vector_width" in op.attributes
            if vec:
                varying.add(op.iv)
            if vec:
                index[0] += _index_divs(op.body.block.ops, trips * op.trip_count, varying)
            else:
                total += _scalar_flops(op.body.block.ops, trips * op.trip_count, varying, index)
            continue
        if op.results and not isinstance(op.results[0].type, VectorType):
            total += trips * _op_flops(op)
        for region in op.regions:
            for block in region.blocks:
                total += _scalar_flops(block.ops, trips, varying, index)
    return total


def _power_of_two(v) -> bool:
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        c = owner.value.value.data
        return c > 0 and c & (c - 1) == 0
    return False


def _index_divs(ops, trips: int, varying: set) -> float:
    """INDEX_DIV_OPS per lane of each integer division whose operand varies across the lanes."""
    total = 0.0
    for op in ops:
        if isinstance(op, loop.BlockOp):
            for arg, bound in zip(op.body.block.args, op.bindings):
                if bound in varying:
                    varying.add(arg)
        if isinstance(op, loop.ForOp):
            total += _index_divs(op.body.block.ops, trips * op.trip_count, varying)
            continue
        if any(v in varying for v in op.operands):
            varying.update(op.results)
            if op.name in _INDEX_DIVS and not _power_of_two(op.operands[1]):
                total += trips * INDEX_DIV_OPS  # (by a power of two it is a shift or a mask)
        for region in op.regions:
            for block in region.blocks:
                total += _index_divs(block.ops, trips, varying)
    return total


def _conflict_lines(accesses: list[Access]) -> float:
    """Cache lines that loads fetch past L1 on set conflicts, each divided by the number
    of L1 sets its walk spreads over. A load conflicts when its innermost enclosing loop
    is not vectorized and steps its address by a nonzero multiple of LINE_BYTES whose
    lines fall into only `sets = L1_SETS / gcd(step / LINE_BYTES, L1_SETS)` sets, fewer
    than the loop's trips fill (trips > sets x L1_WAYS): a reduction loop walking a matrix
    column whose rows are 1024 floats maps every trip to one set; rows of 512 floats, to
    two. Such a walk misses L1 on every line; the misses of different sets overlap, so a
    line costs CONFLICT_LINE_S / sets (fitted). A load inside vectorized loops fetches,
    per trip of the other loops, the 64-byte lines its lanes cover (fractions add up: two
    8-float halves of one line count one line; lanes that are not contiguous one line
    each); loads with the same buffer and index forms count once per trip (the compiled
    kernel loads them once)."""
    seen: set = set()
    total = 0.0
    for a in accesses:
        if a.store or not a.loops:
            continue
        inner = a.loops[-1]
        if inner.kind == "vectorized" or inner.trip <= L1_WAYS:
            continue
        strides = [prod(a.shape[d + 1:]) for d in range(len(a.shape))]
        step = abs(sum(f.get(inner.iv, 0) * inner.step * s for f, s in zip(a.forms, strides))) * a.elt_bytes
        if step == 0 or step % LINE_BYTES:
            continue
        sets = L1_SETS // gcd(step // LINE_BYTES, L1_SETS)
        if inner.trip <= sets * L1_WAYS:
            continue
        key = (a.buffer, tuple(frozenset(f.items()) for f in a.forms))
        if key in seen:
            continue
        seen.add(key)
        vec = [lp for lp in a.loops if lp.kind == "vectorized"]
        lanes = prod(lp.trip for lp in vec) * a.width
        contiguous = all(f.get(lp.iv, 0) == (1 if d == len(a.forms) - 1 else 0)
                         for lp in vec for d, f in enumerate(a.forms))
        per_trip = lanes * a.elt_bytes / LINE_BYTES if contiguous else lanes
        total += a.trips * a.width / lanes * per_trip / sets
    return total


def count_work(module: ModuleOp | func.FuncOp, name: str | None = None) -> Work:
    """Float ops (FMA = 2, a vector op its lanes, a math op MATH_OP_FLOPS) weighted by trip
    counts, bytes of distinct data touched (the DRAM traffic of a cold run), the scalar
    part of the float ops, and the lines loads fetch past L1 on set conflicts, of kernel `name`."""
    st = WalkState()
    fn = kernel_function(module, name)
    walk_loops(st, fn.body.block.ops)
    index: list[float] = [0.0]
    scalar = _scalar_flops(fn.body.block.ops, index=index)
    return Work(float(st.flops + MATH_OP_FLOPS * st.math_ops), float(footprint(st.accesses, ())), scalar, index[0],
                _conflict_lines(st.accesses), st.copy_bytes, st.dot_ops)


# ---------------------------------------------------------------- peak measurement

_FMA_IR = """
define void @fma_peak(i64 %n, ptr %out) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
{phis}
{body}
  %i1 = add i64 %i, 1
  %c = icmp ult i64 %i1, %n
  br i1 %c, label %loop, label %exit
exit:
{sum}
  store <8 x float> %s{last}, ptr %out, align 4
  ret void
}
declare <8 x float> @llvm.fma.v8f32(<8 x float>, <8 x float>, <8 x float>)
"""

_STREAM_IR = """
define float @stream_peak(ptr %p, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %a0 = phi <8 x float> [zeroinitializer, %entry], [%b0, %loop]
  %a1 = phi <8 x float> [zeroinitializer, %entry], [%b1, %loop]
  %q0 = getelementptr float, ptr %p, i64 %i
  %v0 = load <8 x float>, ptr %q0, align 4
  %j = add i64 %i, 8
  %q1 = getelementptr float, ptr %p, i64 %j
  %v1 = load <8 x float>, ptr %q1, align 4
  %b0 = fadd <8 x float> %a0, %v0
  %b1 = fadd <8 x float> %a1, %v1
  %i1 = add i64 %i, 16
  %c = icmp ult i64 %i1, %n
  br i1 %c, label %loop, label %exit
exit:
  %s = fadd <8 x float> %b0, %b1
  %e = extractelement <8 x float> %s, i64 0
  ret float %e
}
"""

_ACC = 10  # independent FMA chains: enough to cover latency x throughput on current cores


def _fma_ir() -> str:
    phis = "\n".join(f"  %a{k} = phi <8 x float> [<float 1.0, float 1.0, float 1.0, float 1.0, float 1.0, "
                     f"float 1.0, float 1.0, float 1.0>, %entry], [%b{k}, %loop]" for k in range(_ACC))
    mul = "<float 0.5, float 0.5, float 0.5, float 0.5, float 0.5, float 0.5, float 0.5, float 0.5>"
    add = "<float 0.25, float 0.25, float 0.25, float 0.25, float 0.25, float 0.25, float 0.25, float 0.25>"
    body = "\n".join(f"  %b{k} = call <8 x float> @llvm.fma.v8f32(<8 x float> %a{k}, <8 x float> {mul}, "
                     f"<8 x float> {add})" for k in range(_ACC))
    sums = ["  %s0 = fadd <8 x float> %b0, %b1"]
    for k in range(2, _ACC):
        sums.append(f"  %s{k - 1} = fadd <8 x float> %s{k - 2}, %b{k}")
    return (_FMA_IR.replace("{phis}", phis).replace("{body}", body).replace("{sum}", "\n".join(sums))
            .replace("{last}", str(_ACC - 2)))


def _best(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_peaks() -> Peaks:
    """Measures one thread's vector-FMA GFLOP/s and streaming-read GB/s (about 0.3-1 s)."""
    import llvmlite.binding as llvm

    from ziggurat.backends.llvm.jit import create_target_machine

    host = Target.parse("llvm")  # the peaks of this machine: code for the default target
    # MCJIT owns the machine: keep it (and the module) alive with the engine
    tm = create_target_machine(host.llvm_cpu, host.llvm_features)
    mod = llvm.parse_assembly(_fma_ir() + _STREAM_IR)
    mod.verify()
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    fma = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(engine.get_function_address("fma_peak"))
    stream = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("stream_peak"))
    out = np.zeros(8, dtype=np.float32)
    n_iter = 2_000_000
    t = _best(lambda: fma(n_iter, out.ctypes.data), 5)
    gflops = n_iter * _ACC * 8 * 2 / t / 1e9
    data = np.ones(16 * 1024 * 1024, dtype=np.float32)  # 64 MiB: far beyond the caches
    t = _best(lambda: stream(data.ctypes.data, data.size), 3)
    gbs = data.nbytes / t / 1e9
    del engine, mod, tm
    return Peaks(round(gflops, 2), round(gbs, 2))


def cache_path(cpu: str | None = None) -> Path:
    """The cache file of the peaks measured on CPU `cpu` (None: the default target's, this machine)."""
    if cpu is None:
        cpu = Target.parse("llvm").llvm_cpu
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "ziggurat" / f"roofline-{cpu}.json"


def machine_peaks(path: str | os.PathLike | None = None) -> Peaks:
    """The host's peaks: read from the cache file, else measured once and cached."""
    p = Path(path) if path is not None else cache_path()
    try:
        d = json.loads(p.read_text())
        if d.get("gflops", 0) > 0 and d.get("bandwidth_gbs", 0) > 0:
            return Peaks(float(d["gflops"]), float(d["bandwidth_gbs"]))
    except (OSError, ValueError, TypeError):
        pass
    peaks = measure_peaks()
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(asdict(peaks)))
    except OSError:
        pass  # an unwritable cache only costs a re-measurement next time
    return peaks


# ---------------------------------------------------------------- the oracle


@runtime_checkable
class CostOracle(Protocol):
    def cost(self, module: ModuleOp, name: str, key: WorkloadKey | None = None) -> CostEstimate:
        """The cost of loop-level kernel `name` in `module`; `key` finds its tuning records."""
        ...


class DefaultCostOracle:
    """Database, else learned model, else roofline (see the module docstring).

    `peaks` fixes the roofline figures (deterministic tests); None measures
    them lazily (cached per machine). `model` needs `predict(features)`
    returning normalized throughput in (0, 1] (`GBTCostModel`); a prediction
    of 0 (an untrained model) falls through to the roofline.
    """

    def __init__(self, database: Database | None = None, model: object | None = None,
                 peaks: Peaks | None = None, target: str = "llvm"):
        self.database = database
        self.model = model
        self.target = target
        self._peaks = peaks

    @property
    def peaks(self) -> Peaks:
        if self._peaks is None:
            self._peaks = machine_peaks()
        return self._peaks

    def cost(self, module: ModuleOp, name: str, key: WorkloadKey | None = None) -> CostEstimate:
        work = count_work(module, name)
        if self.database is not None and key is not None:
            rec = self.database.best(key, self.target)
            if rec is not None and rec.ok:
                return CostEstimate(rec.mean_cost, work.flops, work.bytes, "database")
        bound = self.peaks.time(work.flops, work.bytes, work.scalar_flops, work.scalar_index_ops, work.conflict_lines,
                                work.copy_bytes)
        if self.model is not None:  # an untrained model predicts 0: fall through to the roofline
            pred = float(self.model.predict(extract_features(module, name))[0])  # type: ignore[union-attr]
            if pred > 0:
                return CostEstimate(bound / min(1.0, max(pred, 0.05)), work.flops, work.bytes, "model")
        return CostEstimate(bound, work.flops, work.bytes, "roofline")


def oracle_from_options(peak_gflops: float, bandwidth_gbs: float, database: str = "") -> DefaultCostOracle:
    """The oracle a pass uses: fixed peaks when both options are positive, else the machine's;
    the tuning records of the JSON-lines file `database` (read only) when given."""
    if (peak_gflops > 0) != (bandwidth_gbs > 0):
        raise TuningError("give both peak-gflops and bandwidth-gbs (or neither, to use the measured peaks)")
    db = None
    if database:
        from ziggurat.database import JSONDatabase

        if not Path(database).is_file():
            raise TuningError(f"tuning database '{database}' does not exist; give the path of a JSON-lines "
                              "record file (written by the tuner) or leave the option out")
        db = JSONDatabase(database, fsync=False)
    return DefaultCostOracle(database=db, peaks=Peaks(peak_gflops, bandwidth_gbs) if peak_gflops > 0 else None)
