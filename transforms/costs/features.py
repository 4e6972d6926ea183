"""Numeric features of a scheduled loop-level kernel, for the cost model.

Features come from the IR the schedule produced (loop-level, or hw-level
after `convert-loop-to-hw`), never from knob values, so candidates of any
template or sketch share one feature space. `extract_features(func)` walks
`loop.for` / `loop.block` / `loop.load` / `loop.store` / `hw.*` / `arith` /
`math` ops once and returns a fixed-length float64 vector whose entries are
named by `FEATURE_NAMES`:

* loop structure: counts of serial / parallel / vectorized / unrolled loops,
  depth, the innermost loop's extent and kind, products of parallel,
  unrolled and vectorized extents on the heaviest loop nest;
* work: iterations, float ops (an FMA counts 2, a vector op its lanes),
  integer and `math` ops, all weighted by trip counts;
* memory: elements loaded and stored, bytes accessed, bytes of distinct data
  touched per buffer (from affine index analysis) and their ratio (reuse);
  the stride of each access in its innermost loop (0, 1 or other, in units of
  the access's vector width), weighted by how often it runs;
* cache: the working set of the heaviest nest relative to L1 (48 KiB) and L2
  (2 MiB), and how many inner loops of that nest fit in each.

Counts are `log2(1 + x)` so that trees and distances see orders of magnitude.
Extraction takes well under a millisecond for typical kernels (about 0.1 to
1 ms, see tests/unit/test_autotune_features.py).

```python
from ziggurat.autotune import FEATURE_NAMES, extract_features
vec = extract_features(module, "dense_0")          # np.ndarray, len(FEATURE_NAMES)
dict(zip(FEATURE_NAMES, vec))["log_flops"]
```
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, VectorType
from xdsl.ir import Block, Operation, SSAValue

from ziggurat.dialects import loop
from ziggurat.errors import TuningError
from ziggurat.transforms.schedule.plan import PACK_SUFFIX

L1_BYTES = 48 * 1024
L2_BYTES = 2 * 1024 * 1024
LOOP_KINDS = loop.LOOP_KINDS

FEATURE_NAMES: tuple[str, ...] = (
    "n_loops", "n_serial", "n_parallel", "n_vectorized", "n_unrolled", "max_depth",
    "log_parallel_extent", "log_unrolled_extent", "log_vectorized_extent", "outer_parallel",
    "log_innermost_extent", "innermost_serial", "innermost_parallel", "innermost_vectorized",
    "innermost_unrolled", "innermost_reduction",
    "log_iterations", "log_flops", "log_int_ops", "log_math_ops", "max_vector_width", "vector_op_frac",
    "log_loads", "log_stores", "log_bytes_accessed", "log_bytes_unique", "log_reuse", "log_arith_intensity",
    "stride0_frac", "stride1_frac", "strideN_frac",
    "log_ws_over_l1", "log_ws_over_l2", "l1_fit_loops", "l2_fit_loops",
    "n_buffers", "n_blocks", "n_reduction_blocks",
)
INDEX = {n: i for i, n in enumerate(FEATURE_NAMES)}

FLOAT_OPS = {"arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.maximumf", "arith.minimumf",
              "arith.negf", "arith.remf", "arith.cmpf", "arith.select"}
_VECTOR_LOADS = {"hw.vload", "hw.vmaskload"}
_VECTOR_STORES = {"hw.vstore", "hw.vmaskstore"}
_INT_OPS = {"arith.addi", "arith.subi", "arith.muli", "arith.divui", "arith.divsi", "arith.remui",
            "arith.remsi", "arith.floordivsi", "arith.ceildivsi", "arith.minsi", "arith.maxsi", "arith.minui",
            "arith.maxui", "arith.cmpi", "arith.andi", "arith.ori", "arith.xori"}


@dataclass(eq=False)
class _Loop:
    iv: SSAValue
    trip: int
    step: int
    kind: str


@dataclass
class Access:
    buffer: SSAValue
    shape: tuple[int, ...]
    elt_bytes: int
    width: int
    forms: list[dict[SSAValue, int]]
    loops: tuple[_Loop, ...]
    trips: int
    store: bool


@dataclass
class WalkState:
    loops: list[_Loop] = field(default_factory=list)
    accesses: list[Access] = field(default_factory=list)
    forms: dict[SSAValue, dict[SSAValue, int]] = field(default_factory=dict)
    reduction_ivs: set[SSAValue] = field(default_factory=set)
    flops: float = 0.0
    vector_flops: float = 0.0
    int_ops: float = 0.0
    math_ops: float = 0.0
    iterations: float = 0.0
    max_width: int = 1
    n_blocks: int = 0
    n_reduction_blocks: int = 0
    max_depth: int = 0
    copy_bytes: float = 0.0  # bytes read and written by pack nests (blocks named `*` + PACK_SUFFIX)
    dot_ops: float = 0.0  # the multiply-adds of tensorized dot steps (x86vec dots), 2 ops each


def _lanes(t) -> int:
    return int(np.prod(t.get_shape())) if isinstance(t, VectorType) else 1


def _form(st: WalkState, v: SSAValue) -> dict[SSAValue, int]:
    """Linear form of an index value over loop variables: {iv: coeff, None: const}; approximate if not affine."""
    got = st.forms.get(v)
    if got is not None:
        return got
    out: dict = {}
    owner = v.owner
    if isinstance(owner, Block):
        parent = owner.parent_op()
        if isinstance(parent, loop.ForOp):
            out = {v: 1}
        elif isinstance(parent, loop.BlockOp):
            out = _form(st, parent.bindings[v.index])  # type: ignore[attr-defined]
    elif isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        out = {None: owner.value.value.data}
    elif isinstance(owner, Operation) and owner.name in ("arith.addi", "arith.subi"):
        a, b = _form(st, owner.operands[0]), _form(st, owner.operands[1])
        sign = -1 if owner.name == "arith.subi" else 1
        out = dict(a)
        for k, c in b.items():
            out[k] = out.get(k, 0) + sign * c
    elif isinstance(owner, Operation) and owner.name == "arith.muli":
        a, b = _form(st, owner.operands[0]), _form(st, owner.operands[1])
        if set(b) <= {None}:
            a, b = b, a
        if set(a) <= {None}:
            c = a.get(None, 0)
            out = {k: c * x for k, x in b.items()}
        else:
            out = {k: 1 for k in (set(a) | set(b)) - {None}}
    elif isinstance(owner, Operation):  # div, rem, min, max, select...: depends on its operands' loops
        for o in owner.operands:
            for k in _form(st, o):
                if k is not None:
                    out[k] = 1
    st.forms[v] = out
    return out


def _trips(loops: list[_Loop]) -> int:
    return math.prod(lp.trip for lp in loops)


def _access(st: WalkState, op: Operation, buffer: SSAValue, indices, width: int, store: bool) -> None:
    t = buffer.type
    assert isinstance(t, MemRefType)
    elt = t.element_type
    st.accesses.append(Access(buffer, tuple(t.get_shape()), max(1, getattr(elt, "bitwidth", 32) // 8), width,
                               [_form(st, i) for i in indices], tuple(st.loops), _trips(st.loops), store))


def walk_loops(st: WalkState, ops) -> None:
    for op in ops:
        if isinstance(op, loop.ForOp):
            _, _, step = op.bounds
            kind = "vectorized" if "hw.vector_width" in op.attributes else op.kind.data  # after convert-loop-to-hw
            st.loops.append(_Loop(op.iv, op.trip_count, step, kind))
            st.max_depth = max(st.max_depth, len(st.loops))
            walk_loops(st, op.body.block.ops)
            st.loops.pop()
            continue
        trips = _trips(st.loops)
        name = op.name
        if isinstance(op, loop.BlockOp):
            st.n_blocks += 1
            st.iterations += trips
            if op.block_name.data.endswith(PACK_SUFFIX):  # a copy phase: B into panels before the compute
                for o in op.body.walk():
                    if isinstance(o, loop.StoreOp) or o.name in _VECTOR_STORES:
                        elt = o.buffer.type.element_type  # type: ignore[attr-defined]
                        lanes = _lanes(o.value.type)  # type: ignore[attr-defined]
                        st.copy_bytes += 2 * trips * lanes * max(1, getattr(elt, "bitwidth", 32) // 8)
            kinds = op.iter_kinds.data
            if "R" in kinds:
                st.n_reduction_blocks += 1
                for k, b in zip(kinds, op.bindings):
                    if k == "R":
                        st.reduction_ivs.update(iv for iv in _form(st, b) if iv is not None)
        elif isinstance(op, loop.LoadOp):
            _access(st, op, op.buffer, op.indices, 1, False)
        elif isinstance(op, loop.StoreOp):
            _access(st, op, op.buffer, op.indices, 1, True)
        elif name in _VECTOR_LOADS:
            _access(st, op, op.buffer, op.indices, _lanes(op.results[0].type), False)  # type: ignore[attr-defined]
        elif name in _VECTOR_STORES:
            _access(st, op, op.buffer, op.indices, _lanes(op.value.type), True)  # type: ignore[attr-defined]
        elif op.results:
            lanes = _lanes(op.results[0].type)
            st.max_width = max(st.max_width, lanes)
            if name.startswith("x86vec.") and isinstance(group := getattr(op, "GROUP", None), int):
                st.dot_ops += trips * 2 * lanes * group  # a dot step: `lanes` accumulators += `group` products
            if name == "hw.vfma" or name == "math.fma":
                n = 2 * lanes
            elif name == "hw.vreduce":
                n = _lanes(op.operands[0].type)
            elif name in FLOAT_OPS:
                n = lanes
            elif name.startswith("math."):
                st.math_ops += trips * lanes
                n = lanes
            else:
                n = 0
                if name in _INT_OPS:
                    st.int_ops += trips * lanes
            st.flops += trips * n
            if lanes > 1 or name in ("hw.vfma", "hw.vreduce"):
                st.vector_flops += trips * n
        for region in op.regions:
            for block in region.blocks:
                walk_loops(st, block.ops)


def _elements(a: Access, start: int) -> int:
    """Distinct elements `a` touches while the loops a.loops[start:] run (outer ones fixed)."""
    varying = {lp.iv: lp for lp in a.loops[start:]}
    total = 1
    for d, (form, size) in enumerate(zip(a.forms, a.shape)):
        ext = 1 + sum(abs(c) * (varying[k].trip - 1) * varying[k].step for k, c in form.items() if k in varying)
        if d == len(a.shape) - 1:
            ext += a.width - 1
        total *= min(ext, size)
    return total


def footprint(accesses: list[Access], prefix: tuple[_Loop, ...]) -> int:
    """Bytes of distinct data the accesses nested under `prefix` touch while the loops inside it run."""
    k = len(prefix)
    per_buffer: dict[SSAValue, int] = {}
    for a in accesses:
        if a.loops[:k] == prefix:
            per_buffer[a.buffer] = max(per_buffer.get(a.buffer, 0), _elements(a, k) * a.elt_bytes)
    return sum(per_buffer.values())


def _stride(a: Access) -> int:
    """Elements between consecutive iterations of the innermost loop, in units of the access width."""
    if not a.loops:
        return 0
    inner = a.loops[-1]
    strides = [math.prod(a.shape[d + 1:]) for d in range(len(a.shape))]
    s = sum(f.get(inner.iv, 0) * inner.step * st for f, st in zip(a.forms, strides))
    return abs(s) // a.width if abs(s) % a.width == 0 else abs(s)


def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, x))


def _vector(st: WalkState) -> np.ndarray:
    v = np.zeros(len(FEATURE_NAMES))

    def put(name: str, x: float) -> None:
        v[INDEX[name]] = x

    loops_seen: dict[SSAValue, _Loop] = {}
    for a in st.accesses:
        for lp in a.loops:
            loops_seen[lp.iv] = lp
    heavy = max(st.accesses, key=lambda a: (a.trips, len(a.loops)), default=None)
    nest = heavy.loops if heavy is not None else ()
    put("max_depth", st.max_depth)
    for kind in LOOP_KINDS:
        put(f"n_{kind}", sum(1 for lp in loops_seen.values() if lp.kind == kind))
    put("n_loops", len(loops_seen))
    for kind in ("parallel", "unrolled", "vectorized"):
        extents = [lp.trip for lp in nest if lp.kind == kind]
        put(f"log_{kind}_extent", math.log2(math.prod(extents)) if extents else 0.0)
    if nest:
        put("outer_parallel", float(nest[0].kind == "parallel"))
        inner = nest[-1]
        put("log_innermost_extent", _log(inner.trip))
        put(f"innermost_{inner.kind}", 1.0)
        put("innermost_reduction", float(inner.iv in st.reduction_ivs))
    put("log_iterations", _log(st.iterations))
    put("log_flops", _log(st.flops))
    put("log_int_ops", _log(st.int_ops))
    put("log_math_ops", _log(st.math_ops))
    widths = [a.width for a in st.accesses] + [st.max_width]
    put("max_vector_width", max(widths))
    put("vector_op_frac", st.vector_flops / st.flops if st.flops else 0.0)
    loads = sum(a.trips * a.width for a in st.accesses if not a.store)
    stores = sum(a.trips * a.width for a in st.accesses if a.store)
    accessed = sum(a.trips * a.width * a.elt_bytes for a in st.accesses)
    unique = footprint(st.accesses, ())
    put("log_loads", _log(loads))
    put("log_stores", _log(stores))
    put("log_bytes_accessed", _log(accessed))
    put("log_bytes_unique", _log(unique))
    put("log_reuse", math.log2(accessed / unique) if unique and accessed else 0.0)
    put("log_arith_intensity", _log(st.flops / unique) if unique else 0.0)
    weight = sum(a.trips for a in st.accesses)
    if weight:
        strides = [(_stride(a), a.trips) for a in st.accesses]
        put("stride0_frac", sum(w for s, w in strides if s == 0) / weight)
        put("stride1_frac", sum(w for s, w in strides if s == 1) / weight)
        put("strideN_frac", sum(w for s, w in strides if s > 1) / weight)
    if heavy is not None:
        ws = [footprint(st.accesses, nest[:k]) for k in range(len(nest) + 1)]  # ws[k]: loops k.. vary
        put("log_ws_over_l1", math.log2(max(ws[0], 1) / L1_BYTES))
        put("log_ws_over_l2", math.log2(max(ws[0], 1) / L2_BYTES))
        put("l1_fit_loops", sum(1 for k in range(len(nest)) if ws[k] <= L1_BYTES))
        put("l2_fit_loops", sum(1 for k in range(len(nest)) if ws[k] <= L2_BYTES))
    put("n_buffers", len({a.buffer for a in st.accesses}))
    put("n_blocks", st.n_blocks)
    put("n_reduction_blocks", st.n_reduction_blocks)
    return v


def kernel_function(module: ModuleOp | func.FuncOp, name: str | None) -> func.FuncOp:
    if isinstance(module, func.FuncOp):
        return module
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if name is not None:
        funcs = [f for f in funcs if f.sym_name.data == name]
    else:
        funcs = [f for f in funcs if f.sym_name.data != "main"] or funcs
    if not funcs:
        raise TuningError(f"no kernel function {'@' + name if name else ''} in the module to extract features from; "
                          "pass the kernel's name")
    return funcs[0]


def extract_features(module: ModuleOp | func.FuncOp, name: str | None = None) -> np.ndarray:
    """Features of kernel `name` (default: the first function that is not @main), ordered as FEATURE_NAMES."""
    st = WalkState()
    walk_loops(st, kernel_function(module, name).body.block.ops)
    return _vector(st)


@runtime_checkable
class FeatureExtractor(Protocol):
    names: tuple[str, ...]

    def extract(self, module: ModuleOp | func.FuncOp, name: str | None = None) -> np.ndarray: ...


class LoopFeatures:
    """The default extractor: `extract_features` with its names."""

    names = FEATURE_NAMES

    def extract(self, module: ModuleOp | func.FuncOp, name: str | None = None) -> np.ndarray:
        return extract_features(module, name)

    def extract_many(self, modules, name: str | None = None) -> np.ndarray:
        """A (len(modules), len(names)) matrix."""
        rows = [self.extract(m, name) for m in modules]
        return np.stack(rows) if rows else np.zeros((0, len(self.names)))
