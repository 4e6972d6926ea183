"""convert-loop-to-hw: vector code for innermost loops marked `vectorized`."""

from __future__ import annotations

from math import prod as product

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, builtin, math
from xdsl.dialects.builtin import (DenseIntOrFPElementsAttr, IndexType, IntegerAttr, MemRefType, StringAttr, UnitAttr,
                                   VectorType)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import hw, loop
from ziggurat.dialects.hw import ROWS_ATTR

# Scalar float ops that have a lane-wise vector form of the same op.
LANEWISE = (
    arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.NegfOp,
    arith.MaximumfOp, arith.MinimumfOp, arith.SelectOp, arith.CmpfOp,
    math.ExpOp, math.TanhOp, math.SqrtOp, math.ErfOp, math.AbsFOp, math.LogOp,
    math.RoundEvenOp, math.TruncOp, math.FloorOp, math.CeilOp,
    arith.AndIOp, arith.OrIOp, arith.AddiOp, arith.SubiOp, arith.MuliOp,
    # conversions: lanes keep their count and change their type (the quantize/dequantize
    # epilogues of int8 models: f32 -> u8 -> f32)
    arith.ExtFOp, arith.TruncFOp, arith.FPToUIOp, arith.FPToSIOp, arith.UIToFPOp, arith.SIToFPOp,
)
_NARROW_INTS = (builtin.i8, builtin.i16, builtin.i32)
_CONVERSIONS = {arith.FPToUIOp: "fptoui", arith.FPToSIOp: "fptosi", arith.UIToFPOp: "uitofp", arith.SIToFPOp: "sitofp"}
# Reductions that can run in vector lanes and be combined at the end.
SWAPPED = {"slt": "sgt", "sle": "sge", "sgt": "slt", "sge": "sle", "eq": "eq", "ne": "ne"}
REDUCTIONS = {arith.AddfOp: "add", arith.MulfOp: "mul", arith.MaximumfOp: "max", arith.MinimumfOp: "min"}
IDENTITY = {"add": 0.0, "mul": 1.0, "max": float("-inf"), "min": float("inf")}
ACCUMULATORS = 4  # partial vectors of a long vector reduction (rewrite)


class NotVectorizable(Exception):
    """Why a loop stays scalar; recorded on the loop as `hw.not_vectorized`."""


def _is_innermost(f: loop.ForOp) -> bool:
    return not any(isinstance(o, loop.ForOp) for o in f.body.walk() if o is not f)


@dataclass
class _Reduction:
    load: loop.LoadOp
    store: loop.StoreOp
    kind: str
    combine: Operation


class _Vectorizer:
    """Rewrites one innermost loop into a vector loop plus a scalar tail."""

    def __init__(self, f: loop.ForOp, width: int):
        self.f, self.width = f, width
        self.stride: dict[SSAValue, int | None] = {f.iv: 1}
        self.varying: set[SSAValue] = set()
        self.reductions: list[_Reduction] = []
        self.innermost = _is_innermost(f)
        # Per-lane index tests (cmpi of the loop variable), the clamped index
        # `select(test, i, c)` they guard, and the loads through such an index.
        self.lanecmp: dict[SSAValue, tuple[str, SSAValue, SSAValue, int]] = {}
        self.clamped: dict[SSAValue, tuple[SSAValue, SSAValue]] = {}
        self.masked_loads: set[loop.LoadOp] = set()
        self.gathers: dict[loop.LoadOp, int] = {}
        # Indices made from loaded lanes (`arith.index_cast` of i32 lanes: a table lookup's
        # index) and the loads through them (`hw.vlookup`).
        self.lane_index: dict[SSAValue, SSAValue] = {}
        self.lookups: dict[loop.LoadOp, tuple[SSAValue, int]] = {}  # (i32 lanes, flat stride of the rest)
        self.tail_mask: SSAValue | None = None

    # -- analysis --------------------------------------------------------------
    def analyse(self) -> None:
        step = self.f.step.value.data
        if step != 1:
            raise NotVectorizable(f"step {step} is not 1")
        # Correctness first: loops over float32 buffers, or over float64 buffers
        # only (half the lanes: the same register width), get vector code;
        # integers, bools (bit-packed in vectors) and mixed types stay scalar.
        # Loops over float32 buffers may also read and write 8-, 16- and 32-bit integers (an int8
        # model's quantized tensors and i32 accumulators), or over those integers alone: lanes of
        # at most 32 bits, as many as float32 lanes.
        elts = {op.buffer.type.element_type for op in self.f.body.walk()  # type: ignore[attr-defined]
                if isinstance(op, (loop.LoadOp, loop.StoreOp))}
        if not (elts <= {builtin.f32, *_NARROW_INTS} or elts <= {builtin.f64}):
            raise NotVectorizable(f"element types {', '.join(sorted(map(str, elts)))} are not vectorized")
        self.lane_bits = 64 if elts == {builtin.f64} else 32
        if elts == {builtin.f64}:
            self.width = max(1, self.width // 2)
        if not self.f.is_dynamic and self.f.trip_count < self.width and self.innermost:
            raise NotVectorizable(f"trip count {self.f.trip_count} is below the vector width {self.width}")
        for op in self.f.body.walk():
            if op is self.f:
                continue
            self._classify(op)
        # Accumulators live in vector lanes inside the loop.
        self.varying.update(r.load.result for r in self.reductions)

    def _s(self, v: SSAValue) -> int | None:
        return self.stride.get(v, 0)

    def _classify(self, op: Operation) -> None:
        if isinstance(op, loop.BlockOp):
            for var, bound in zip(op.vars, op.bindings):
                self.stride[var] = self._s(bound)
            return
        data = any(v in self.varying for v in op.operands)  # integer arithmetic on loaded lanes, not indices
        if isinstance(op, (arith.AddiOp, arith.SubiOp)) and not data:
            a, b = self._s(op.lhs), self._s(op.rhs)
            sign = 1 if isinstance(op, arith.AddiOp) else -1
            self.stride[op.result] = None if a is None or b is None else a + sign * b
            return
        if isinstance(op, arith.MuliOp) and not data:
            a, b = self._s(op.lhs), self._s(op.rhs)
            const = {v: const_int(v) for v in (op.lhs, op.rhs)}
            if a == 0 and b == 0:
                self.stride[op.result] = 0
            elif a is not None and b == 0 and const[op.rhs] is not None:
                self.stride[op.result] = a * const[op.rhs]  # type: ignore[operator]
            elif b is not None and a == 0 and const[op.lhs] is not None:
                self.stride[op.result] = b * const[op.lhs]  # type: ignore[operator]
            else:
                self.stride[op.result] = None
            return
        if not isinstance(op, loop.LoadOp) and any(v in self.lane_index for v in op.operands):
            raise NotVectorizable(f"'{op.name}' uses an index made from lanes (only a table read may)")
        if isinstance(op, loop.LoadOp):
            kind = self._access(op.indices, op)
            if kind == "vector":
                self.varying.add(op.result)
            return
        if isinstance(op, loop.StoreOp):
            kind = self._access(op.indices, op)
            if kind == "scalar" and op.value in self.varying:
                self.reductions.append(self._reduction(op))
            return
        if isinstance(op, loop.AllocOp):
            raise NotVectorizable("allocation inside the loop")
        if isinstance(op, arith.IndexCastOp) and op.input in self.varying:
            if op.input.type != builtin.i32:
                raise NotVectorizable(f"an index made from {op.input.type} lanes (i32 only)")
            self.lane_index[op.result] = op.input
            self.stride[op.result] = None
            return
        if isinstance(op, arith.CmpiOp) and self._lane_compare(op):
            return
        if isinstance(op, arith.SelectOp) and isinstance(op.result.type, IndexType) and op.cond in self.varying:
            if not self._s(op.lhs) or self._s(op.rhs) != 0:
                raise NotVectorizable("a per-lane index select is not a clamp of the loop variable")
            self.clamped[op.result] = (op.lhs, op.cond)
            self.stride[op.result] = None
            return
        if any(isinstance(v.type, IndexType) and self._s(v) != 0 for v in op.operands):
            if all(isinstance(r.type, IndexType) for r in op.results):
                self.stride.update((r, None) for r in op.results)
                return
            raise NotVectorizable(f"'{op.name}' uses the loop variable non-affinely")
        if any(v in self.varying for v in op.operands):
            if not isinstance(op, LANEWISE):
                raise NotVectorizable(f"'{op.name}' has no vector form here")
            if any(_bits(r.type) > self.lane_bits for r in op.results):
                raise NotVectorizable(f"'{op.name}' makes lanes wider than the loop's {self.lane_bits}-bit elements")
            self.varying.update(op.results)

    def _lane_compare(self, op: arith.CmpiOp) -> bool:
        """A compare of `i + lane` with a uniform bound becomes a lane mask."""
        a, b = self._s(op.lhs), self._s(op.rhs)
        if a == 0 and b == 0:
            return False
        pred = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
        if pred not in SWAPPED:
            raise NotVectorizable(f"unsigned index compare '{pred}' on the loop variable")
        if a and a > 0 and b == 0:
            self.lanecmp[op.result] = (pred, op.lhs, op.rhs, a)
        elif b and b > 0 and a == 0:
            self.lanecmp[op.result] = (SWAPPED[pred], op.rhs, op.lhs, b)
        else:
            raise NotVectorizable("an index compare is not affine with a positive stride in the loop variable")
        self.varying.add(op.result)
        return True

    def _access(self, indices, op: Operation) -> str:
        entry = [d for d, i in enumerate(indices) if i in self.lane_index] if isinstance(op, loop.LoadOp) else []
        if len(entry) == 1:  # a table read: the entry index made from lanes, in any dim of the table
            e = entry[0]
            outer = [self._s(i) for d, i in enumerate(indices) if d != e]
            if any(k is None for k in outer):
                raise NotVectorizable("a lookup's other indices are not affine in the loop variable")
            shape = op.buffer.type.get_shape()  # type: ignore[attr-defined]
            dims = [d for d in range(len(indices)) if d != e]
            flat = sum(k * product(shape[d + 1:]) for d, k in zip(dims, outer))  # per-lane tables
            self.lookups[op] = (self.lane_index[indices[e]], flat, e, product(shape[e + 1:]))
            return "vector"
        strides = [self._s(i) for i in indices]
        if all(s == 0 for s in strides):
            return "scalar"
        if strides and strides[-1] == 1 and all(s == 0 for s in strides[:-1]):
            return "vector"
        if isinstance(op, loop.LoadOp) and indices and all(s == 0 for s in strides[:-1]):
            last = indices[-1]
            step = self._s(self.clamped[last][0]) if last in self.clamped else strides[-1]
            if step == 1:
                self.masked_loads.add(op)
                return "vector"
            if step is not None and step > 1:
                self.gathers[op] = step
                return "vector"
        moving = [d for d, k in enumerate(strides) if k != 0]
        if isinstance(op, loop.LoadOp) and len(moving) == 1 and indices[moving[0]] not in self.clamped:
            d, k = moving[0], strides[moving[0]]
            inner = op.buffer.type.get_shape()[d + 1:]  # type: ignore[attr-defined]
            if k is not None and k > 0 and all(n > 0 for n in inner):
                self.gathers[op] = k * product(inner)  # a stride in an outer dim: its flat stride
                return "vector"
        raise NotVectorizable(f"'{op.name}' is not contiguous in the loop variable (strides {strides})")

    def _reduction(self, store: loop.StoreOp) -> _Reduction:
        comb = store.value.owner
        kind = REDUCTIONS.get(type(comb))  # type: ignore[arg-type]
        if kind is None:
            raise NotVectorizable("a varying value is stored to a loop-invariant address")
        for acc, _ in ((comb.operands[0], comb.operands[1]), (comb.operands[1], comb.operands[0])):
            ld = acc.owner
            if (isinstance(ld, loop.LoadOp) and ld.buffer == store.buffer
                    and list(ld.indices) == list(store.indices) and acc.has_one_use()):
                return _Reduction(ld, store, kind, comb)  # type: ignore[arg-type]
        raise NotVectorizable("a loop-invariant store is not a recognised reduction")

    # -- rewriting ---------------------------------------------------------------
    def rewrite(self) -> None:
        outer = Builder(InsertPoint.before(self.f))
        dynamic = self.f.is_dynamic
        w = self.width
        if dynamic:  # run-time bounds: the split points as index arithmetic before the loop
            lb, ub = index_value(outer, self.f.lower), index_value(outer, self.f.upper)
            n = outer.insert(arith.SubiOp(ub, lb)).result
            split = outer.insert(arith.SubiOp(ub, outer.insert(arith.RemSIOp(n, index_value(outer, w))).result)).result
        else:
            lb, ub, _ = self.f.bounds
            split = lb + (ub - lb) // w * w
        elt = self._element_type()
        vt = VectorType(elt, [w])
        # A reduction of many vectors keeps ACCUMULATORS partial vectors (one dependency chain each,
        # so the adds or maxes overlap their latency), combined after the loop.
        many = dynamic or (split - lb) // w >= 2 * ACCUMULATORS  # type: ignore[operator]
        nacc = ACCUMULATORS if self.reductions and many else 1
        accs, slots = {}, {}
        for red in self.reductions:
            buf = outer.insert(loop.AllocOp(MemRefType(elt, [w * nacc]), "local")).result
            ident = outer.insert(arith.ConstantOp(builtin.FloatAttr(IDENTITY[red.kind], elt))).result  # type: ignore[arg-type]
            splat = outer.insert(hw.VBroadcastOp(ident, vt)).result
            slots[red.store] = [outer.insert(arith.ConstantOp(IntegerAttr(j * w, IndexType()))).result
                                for j in range(nacc)]
            for at in slots[red.store]:
                outer.insert(hw.VStoreOp(splat, buf, [at]))
            accs[red.store] = (buf, slots[red.store][0])
        if nacc == 1:
            wide = lb
        elif dynamic:
            chunk = index_value(outer, w * nacc)
            wide = outer.insert(arith.AddiOp(lb, outer.insert(arith.MuliOp(
                outer.insert(arith.DivSIOp(n, chunk)).result, chunk)).result)).result
        else:
            wide = lb + (split - lb) // (w * nacc) * (w * nacc)  # type: ignore[operator]
        if nacc > 1:  # nacc vectors an iteration, each into its own accumulator
            uloop = outer.insert(loop.ForOp(lb, wide, w * nacc, "serial"))
            uloop.iv.name_hint = self.f.iv.name_hint
            uloop.attributes["hw.vector_width"] = IntegerAttr(w, builtin.i64)
            ub_ = Builder(InsertPoint.at_end(uloop.body.block))
            for j in range(nacc):
                iv = uloop.iv if j == 0 else ub_.insert(arith.AddiOp(uloop.iv, ub_.insert(
                    arith.ConstantOp(IntegerAttr(j * w, IndexType()))).result)).result
                acc_j = {s: (buf, slots[s][j]) for s, (buf, _) in accs.items()}
                self._emit_block(self.f.body.block, ub_, {self.f.iv: iv}, vt, acc_j)
        vloop = outer.insert(loop.ForOp(wide, split, w, "serial"))
        vloop.iv.name_hint = self.f.iv.name_hint
        vloop.attributes["hw.vector_width"] = IntegerAttr(w, builtin.i64)
        mapping: dict[SSAValue, SSAValue] = {self.f.iv: vloop.iv}
        self._emit_block(self.f.body.block, Builder(InsertPoint.at_end(vloop.body.block)), mapping, vt, accs)
        if not dynamic and split == wide:
            vloop.detach()
            vloop.erase()
        has_tail = dynamic or split < ub  # type: ignore[operator]
        if has_tail and not self.innermost:
            # A masked vector iteration covers the tail of an outer loop (none where it is empty).
            tail = outer.insert(loop.ForOp(split, ub if dynamic else split + w, w, "serial"))  # type: ignore[operator]
            tail.iv.name_hint = self.f.iv.name_hint
            tb = Builder(InsertPoint.at_end(tail.body.block))
            bound = ub if dynamic else tb.insert(arith.ConstantOp(IntegerAttr(ub, IndexType()))).result
            self.tail_mask = tb.insert(hw.VLaneCmpOp("slt", tail.iv, bound, w)).result  # type: ignore[arg-type]
            self._emit_block(self.f.body.block, tb, {self.f.iv: tail.iv}, vt, accs)
        for red in self.reductions:
            buf, zero = accs[red.store]
            v = outer.insert(hw.VLoadOp(buf, [zero], vt)).result
            for at in slots[red.store][1:]:
                v = outer.insert(type(red.combine)(v, outer.insert(hw.VLoadOp(buf, [at], vt)).result)).results[0]

            total = outer.insert(hw.VReduceOp(red.kind, v)).result
            idx = [self._rematerialize(i, outer, {}) for i in red.store.indices]
            old = outer.insert(loop.LoadOp(red.store.buffer, idx)).result
            new = outer.insert(type(red.combine)(old, total)).results[0]
            outer.insert(loop.StoreOp(new, red.store.buffer, idx))
        if has_tail and self.innermost and dynamic:  # the scalar tail: the loop itself, from split
            rest = outer.insert(loop.ForOp(split, ub, 1, "serial", self.f.body.clone()))
            rest.attributes |= self.f.attributes
            self.f.detach()
            self.f.erase()
        elif has_tail and self.innermost:
            self.f.properties["lb"] = IntegerAttr(split, builtin.i64)
            self.f.properties["kind"] = StringAttr("serial")
        else:
            self.f.detach()
            self.f.erase()

    def _element_type(self) -> Attribute:
        for op in self.f.body.walk():
            if isinstance(op, (loop.LoadOp, loop.StoreOp)):
                return op.buffer.type.element_type  # type: ignore[attr-defined]
        return builtin.f32

    def _rematerialize(self, v: SSAValue, b: Builder, memo: dict) -> SSAValue:
        """Recomputes a loop-invariant index outside the loop."""
        if v in memo:
            return memo[v]
        owner = v.owner
        if isinstance(v, BlockArgument) and isinstance(blk := v.block.parent_op(), loop.BlockOp):
            out = self._rematerialize(blk.bindings[v.index], b, memo)
        elif isinstance(owner, Operation) and self.f.is_ancestor(owner):
            new = owner.clone_without_regions({o: self._rematerialize(o, b, memo) for o in owner.operands})
            out = b.insert(new).results[0]
        else:
            out = v
        memo[v] = out
        return out

    def _vec(self, v: SSAValue, b: Builder, mapping, vt) -> SSAValue:
        mv = mapping.get(v, v)
        if v in self.varying:
            return mv
        lanes = vt if mv.type == vt.element_type else VectorType(mv.type, [self.width])
        return b.insert(hw.VBroadcastOp(mv, lanes)).result

    def _mask(self, b: Builder, mask: SSAValue | None) -> SSAValue | None:
        """`mask` and the tail mask, whichever apply."""
        if self.tail_mask is None or mask is None:
            return mask if mask is not None else self.tail_mask
        return b.insert(arith.AndIOp(mask, self.tail_mask)).result

    def _mask_or_all(self, b: Builder, mask: SSAValue | None) -> SSAValue:
        """`_mask`, or every lane set where no mask applies (a gather always takes one)."""
        mask = self._mask(b, mask)
        if mask is None:
            zero = b.insert(arith.ConstantOp(IntegerAttr(0, IndexType()))).result
            mask = b.insert(hw.VLaneCmpOp("sge", zero, zero, self.width)).result
        return mask

    def _unmasked(self, buf: SSAValue, idx) -> bool:
        """A local scratch buffer long enough for whole vectors needs no tail mask."""
        if not isinstance(buf.owner, loop.AllocOp) or self.f.is_dynamic:
            return False
        return buf.type.get_shape()[-1] >= self.f.bounds[1] + self.width  # type: ignore[attr-defined]

    def _emit_block(self, block, b: Builder, mapping, vt, accs) -> None:
        for op in block.ops:
            if isinstance(op, loop.ForOp):
                lb, ub, step = op.lower, op.upper, op.step.value.data
                kind = "serial" if op.kind.data == "vectorized" else op.kind.data
                inner = b.insert(loop.ForOp(mapping.get(lb, lb), mapping.get(ub, ub), step, kind))
                inner.iv.name_hint = op.iv.name_hint
                inner.attributes |= op.attributes
                mapping[op.iv] = inner.iv
                self._emit_block(op.body.block, Builder(InsertPoint.at_end(inner.body.block)), mapping, vt, accs)
                continue
            if op.results and op.results[0] in self.lanecmp:
                pred, base, bound, step = self.lanecmp[op.results[0]]
                cmp = b.insert(hw.VLaneCmpOp(pred, mapping.get(base, base), mapping.get(bound, bound), self.width))
                if step != 1:
                    cmp.attributes["stride"] = IntegerAttr(step, builtin.i64)
                mapping[op.results[0]] = cmp.result
                continue
            if op.results and (op.results[0] in self.clamped or op.results[0] in self.lane_index):
                continue
            if isinstance(op, loop.BlockOp):
                blk = b.insert(loop.BlockOp(op.block_name.data, op.iter_kinds.data, [mapping.get(v, v) for v in op.bindings]))
                mapping.update(zip(op.vars, blk.vars))
                self._emit_block(op.body.block, Builder(InsertPoint.at_end(blk.body.block)), mapping, vt, accs)
                continue
            red = next((r for r in self.reductions if op in (r.load, r.store)), None)
            if red is not None:
                buf, zero = accs[red.store]
                if op is red.load:
                    mapping[op.results[0]] = b.insert(hw.VLoadOp(buf, [zero], vt)).result
                else:
                    value = mapping[op.value]  # type: ignore[union-attr]
                    if self.tail_mask is not None:
                        value = b.insert(hw.VSelectOp(self.tail_mask, value, mapping[red.load.result])).result
                    b.insert(hw.VStoreOp(value, buf, [zero]))
                continue
            if isinstance(op, loop.LoadOp) and op in self.lookups:
                zero = b.insert(arith.ConstantOp(IntegerAttr(0, IndexType()))).result
                lanes, flat, e, entry_stride = self.lookups[op]
                idx = [zero if d == e else mapping.get(i, i) for d, i in enumerate(op.indices)]  # lane 0's table
                offsets = mapping[lanes]
                vi = VectorType(builtin.i32, [self.width])
                if entry_stride != 1:  # the entries `entry_stride` elements apart (a table dim after theirs)
                    step = b.insert(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(
                        vi, [entry_stride] * self.width))).result
                    offsets = b.insert(arith.MuliOp(offsets, step)).result
                if flat:  # lane l reads its own table, `flat` elements after lane l - 1's
                    iota = b.insert(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(
                        vi, [flat * k for k in range(self.width)]))).result
                    offsets = b.insert(arith.AddiOp(offsets, iota)).result
                mask = self._mask_or_all(b, None)
                mapping[op.result] = b.insert(hw.VLookupOp(op.buffer, idx, offsets, mask,
                                                           self._lanes(op.buffer))).result
            elif isinstance(op, loop.LoadOp) and op in self.gathers:
                last = op.indices[-1]
                base, cond = self.clamped.get(last, (last, None))
                idx = [mapping.get(i, i) for i in op.indices[:-1]] + [mapping.get(base, base)]
                mask = self._mask_or_all(b, mapping[cond] if cond is not None else None)
                gather = b.insert(hw.VGatherOp(op.buffer, idx, mask, self._lanes(op.buffer), self.gathers[op]))  # type: ignore[arg-type]
                last_dim = op.buffer.type.get_shape()[-1]  # type: ignore[attr-defined]
                if ROWS_ATTR in op.attributes and cond is None and last_dim > 0 and last_dim % self.width == 0:
                    gather.attributes["rows"] = UnitAttr()  # a transposed read in an unrolled strip (transpose_tiles.py)
                mapping[op.result] = gather.result
            elif isinstance(op, loop.LoadOp) and op in self.masked_loads:
                base, cond = self.clamped[op.indices[-1]]
                idx = [mapping.get(i, i) for i in op.indices[:-1]] + [mapping.get(base, base)]
                mask = self._mask(b, mapping[cond])
                mapping[op.result] = b.insert(hw.VMaskLoadOp(op.buffer, idx, mask, self._lanes(op.buffer))).result  # type: ignore[arg-type]
            elif isinstance(op, loop.LoadOp) and op.result in self.varying:
                idx = [mapping.get(i, i) for i in op.indices]
                if self.tail_mask is not None and not self._unmasked(op.buffer, idx):
                    mapping[op.result] = b.insert(hw.VMaskLoadOp(op.buffer, idx, self.tail_mask, self._lanes(op.buffer))).result
                else:
                    mapping[op.result] = b.insert(hw.VLoadOp(op.buffer, idx, self._lanes(op.buffer))).result
            elif isinstance(op, loop.StoreOp) and self._s(op.indices[-1]) == 1:
                idx = [mapping.get(i, i) for i in op.indices]
                value = self._vec(op.value, b, mapping, vt)
                if self.tail_mask is not None and not self._unmasked(op.buffer, idx):
                    b.insert(hw.VMaskStoreOp(value, op.buffer, idx, self.tail_mask))
                else:
                    b.insert(hw.VStoreOp(value, op.buffer, idx))
            elif any(r in self.varying for r in op.results):
                self._emit_lanewise(op, b, mapping, vt)
            else:
                b.insert(op.clone(value_mapper=mapping))

    def _lanes(self, buffer: SSAValue) -> VectorType:
        """The vector type of a load from `buffer`: its element type, the loop's lane count."""
        return VectorType(buffer.type.element_type, [self.width])  # type: ignore[attr-defined]

    def _emit_lanewise(self, op: Operation, b: Builder, mapping, vt) -> None:
        if isinstance(op, arith.AddfOp) and self._try_fma(op, b, mapping, vt):
            return
        if isinstance(op, arith.SelectOp) and op.cond in self.varying:
            a, c = (self._vec(v, b, mapping, vt) for v in (op.lhs, op.rhs))
            mapping[op.result] = b.insert(hw.VSelectOp(mapping[op.cond], a, c)).result
            return
        if isinstance(op, arith.CmpfOp):  # arith.cmpf has no vector result in xDSL: hw.vcmpf
            a, c = (self._vec(v, b, mapping, vt) for v in (op.lhs, op.rhs))
            predicate = hw.FLOAT_PREDICATES[op.predicate.value.data]
            mapping[op.result] = b.insert(hw.VCmpfOp(predicate, a, c)).result
            return
        if type(op) in _CONVERSIONS:  # xDSL's int <-> float casts are scalar only: hw.vconvert
            lanes = VectorType(op.results[0].type, [self.width])
            mapping[op.results[0]] = b.insert(hw.VConvertOp(_CONVERSIONS[type(op)], self._vec(op.operands[0], b, mapping, vt),
                                                            lanes)).result
            return
        operands = []
        for i, v in enumerate(op.operands):
            keep_scalar = isinstance(op, arith.SelectOp) and i == 0 and v not in self.varying
            operands.append(mapping.get(v, v) if keep_scalar else self._vec(v, b, mapping, vt))
        boolean = isinstance(op, arith.CmpfOp) or op.results[0].type == builtin.i1
        lanes = VectorType(builtin.i1 if boolean else op.results[0].type, [self.width])
        new = op.create(
            operands=operands,
            result_types=[lanes],
            properties=op.properties.copy(),
            attributes=op.attributes.copy(),
        )
        b.insert(new)
        mapping[op.results[0]] = new.results[0]

    def _try_fma(self, add: arith.AddfOp, b: Builder, mapping, vt) -> bool:
        """a*b + c -> hw.vfma(a, b, c) when the product has no other use."""
        for prod, other in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
            mul = prod.owner
            if not (isinstance(mul, arith.MulfOp) and prod in self.varying and prod.has_one_use()):
                continue
            vmul = mapping[prod].owner
            assert isinstance(vmul, arith.MulfOp)
            fma = b.insert(hw.VFmaOp(vmul.lhs, vmul.rhs, self._vec(other, b, mapping, vt)))
            vmul.detach()
            vmul.erase()
            mapping[add.result] = fma.result
            return True
        return False


def _bits(t) -> int:
    """Bits of a scalar lane type (1 for i1; 0 for index and others that are not lanes)."""
    return t.bitwidth if isinstance(t, builtin.IntegerType | builtin.AnyFloat) else 0


def _ancestors(op: Operation):
    p = op.parent_op()
    while p is not None:
        yield p
        p = p.parent_op()


def index_value(b: Builder, v: int | SSAValue) -> SSAValue:
    """`v` as an `index` value (a constant inserted at `b` for an int)."""
    if isinstance(v, SSAValue):
        return v
    return b.insert(arith.ConstantOp(IntegerAttr(v, IndexType()))).result


def const_int(v: SSAValue) -> int | None:
    """The value of an integer `arith.constant`, else None."""
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


@dataclass(frozen=True)
class ConvertLoopToHwPass(ModulePass):
    """Turns innermost `vectorized` loops into hw vector code.

    **Input:** loop-level functions; innermost `loop.for ... vectorized` loops
    with step 1.

    **Output:** each such loop becomes a `serial` loop with step
    `vector-width` (attribute `hw.vector_width`) whose body uses
    `hw.vload`/`hw.vstore` for accesses contiguous in the loop variable,
    `hw.vbroadcast` for loop-invariant values, lane-wise `arith`/`math` on
    vectors and `hw.vfma` for a product feeding an add; float <-> integer
    casts become `hw.vconvert` (lanes may narrow, f32 -> i8 -> f32 in an int8
    model's quantize/dequantize, never widen past the loop's elements). A reduction into a
    loop-invariant element accumulates in a vector (`loop.alloc "local"`) and
    is combined with `hw.vreduce` after the loop; over 8 or more vectors it
    keeps 4 partial vectors (a loop of 4 vectors per iteration, one
    dependency chain each, so the adds or maxes overlap their latency),
    combined lane-wise before the `hw.vreduce`. A scalar loop handles the
    remaining iterations.

    A `vectorized` loop that is not innermost (an outer vector loop, e.g. from
    loop-default-schedule) is vectorized as a whole: the loops inside it are
    kept (uniform across lanes) and their bodies become vector code, and one
    masked vector iteration (`hw.vlanecmp`, `hw.vmaskload`/`hw.vmaskstore`)
    covers the tail instead of a scalar loop. In any vectorized loop, an index
    test of the loop variable becomes a lane mask, a read through an index
    clamped by such a test (padding) a `hw.vmaskload`, a read with a constant
    stride > 1 a `hw.vgather` (`{rows}` for a read loop-default-schedule marked
    `hw.transpose_rows` whose last dim is whole vectors: the backend then loads
    the lanes' rows and transposes them in registers), a read through an index
    cast from i32 lanes (`graph.lookup`'s table) a `hw.vlookup`, and a select on
    a lane mask a `hw.vselect`. A loop that cannot be vectorized becomes `serial`
    with the reason in `hw.not_vectorized`.

    Loops over float32 buffers, or over float64 buffers only (with half the
    lanes), are vectorized; loops that touch integer, bool or float16 buffers
    stay scalar (`hw.not_vectorized` names the element types).

    **Options:** `vector-width` (lanes, default 16: 512-bit AVX-512 for f32).

    Example (width 16, trip count 20):
    ```mlir
    loop.for %j = 0 to 20 vectorized { ... loop.load %x[%i, %j] ... }
    ```
    becomes
    ```mlir
    loop.for %j = 0 to 16 step 16 serial { ... hw.vload %x[%i, %j] ... } {hw.vector_width = 16 : i64}
    loop.for %j = 16 to 20 serial { ... }
    ```
    """

    name = "convert-loop-to-hw"
    vector_width: int = 16

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        targets = [f for f in op.walk() if isinstance(f, loop.ForOp) and f.kind.data == "vectorized"
                   and not any(isinstance(a, loop.ForOp) and a.kind.data == "vectorized" for a in _ancestors(f))]
        while targets:
            f = targets.pop(0)
            v = _Vectorizer(f, self.vector_width)
            try:
                v.analyse()
            except NotVectorizable as why:
                f.properties["kind"] = StringAttr("serial")
                f.attributes["hw.not_vectorized"] = StringAttr(str(why))
                # The vectorized loops inside a loop that stays scalar get their turn.
                targets[:0] = [g for g in f.body.walk() if isinstance(g, loop.ForOp) and g.kind.data == "vectorized"
                               and not any(isinstance(a, loop.ForOp) and a.kind.data == "vectorized"
                                           for a in _ancestors(g))]
                continue
            v.rewrite()
