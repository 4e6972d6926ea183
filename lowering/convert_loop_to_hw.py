"""convert-loop-to-hw: vector code for innermost loops marked `vectorized`."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, builtin, math
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, StringAttr, VectorType
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import hw, loop

# Scalar float ops that have a lane-wise vector form of the same op.
LANEWISE = (
    arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.NegfOp,
    arith.MaximumfOp, arith.MinimumfOp, arith.SelectOp, arith.CmpfOp,
    math.ExpOp, math.TanhOp, math.SqrtOp, math.ErfOp, math.AbsFOp, math.LogOp,
)
# Reductions that can run in vector lanes and be combined at the end.
REDUCTIONS = {arith.AddfOp: "add", arith.MulfOp: "mul", arith.MaximumfOp: "max", arith.MinimumfOp: "min"}
IDENTITY = {"add": 0.0, "mul": 1.0, "max": float("-inf"), "min": float("inf")}


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

    # -- analysis --------------------------------------------------------------
    def analyse(self) -> None:
        lb, ub, step = self.f.bounds
        if step != 1:
            raise NotVectorizable(f"step {step} is not 1")
        if ub - lb < self.width:
            raise NotVectorizable(f"trip count {ub - lb} is below the vector width {self.width}")
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
        if isinstance(op, (arith.AddiOp, arith.SubiOp)):
            a, b = self._s(op.lhs), self._s(op.rhs)
            sign = 1 if isinstance(op, arith.AddiOp) else -1
            self.stride[op.result] = None if a is None or b is None else a + sign * b
            return
        if isinstance(op, arith.MuliOp):
            a, b = self._s(op.lhs), self._s(op.rhs)
            const = {v: _const_int(v) for v in (op.lhs, op.rhs)}
            if a == 0 and b == 0:
                self.stride[op.result] = 0
            elif a is not None and b == 0 and const[op.rhs] is not None:
                self.stride[op.result] = a * const[op.rhs]  # type: ignore[operator]
            elif b is not None and a == 0 and const[op.lhs] is not None:
                self.stride[op.result] = b * const[op.lhs]  # type: ignore[operator]
            else:
                self.stride[op.result] = None
            return
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
        if any(isinstance(v.type, IndexType) and self._s(v) != 0 for v in op.operands):
            if all(isinstance(r.type, IndexType) for r in op.results):
                self.stride.update((r, None) for r in op.results)
                return
            raise NotVectorizable(f"'{op.name}' uses the loop variable non-affinely")
        if any(v in self.varying for v in op.operands):
            if not isinstance(op, LANEWISE):
                raise NotVectorizable(f"'{op.name}' has no vector form here")
            self.varying.update(op.results)

    def _access(self, indices, op: Operation) -> str:
        strides = [self._s(i) for i in indices]
        if all(s == 0 for s in strides):
            return "scalar"
        if strides and strides[-1] == 1 and all(s == 0 for s in strides[:-1]):
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
        lb, ub, _ = self.f.bounds
        split = lb + (ub - lb) // self.width * self.width
        outer = Builder(InsertPoint.before(self.f))
        elt = self._element_type()
        vt = VectorType(elt, [self.width])
        accs = {}
        for red in self.reductions:
            buf = outer.insert(loop.AllocOp(MemRefType(elt, [self.width]), "local")).result
            zero = outer.insert(arith.ConstantOp(IntegerAttr(0, IndexType()))).result
            ident = outer.insert(arith.ConstantOp(builtin.FloatAttr(IDENTITY[red.kind], elt))).result  # type: ignore[arg-type]
            splat = outer.insert(hw.VBroadcastOp(ident, vt)).result
            outer.insert(hw.VStoreOp(splat, buf, [zero]))
            accs[red.store] = (buf, zero)
        vloop = outer.insert(loop.ForOp(lb, split, self.width, "serial"))
        vloop.iv.name_hint = self.f.iv.name_hint
        vloop.attributes["hw.vector_width"] = IntegerAttr(self.width, builtin.i64)
        mapping: dict[SSAValue, SSAValue] = {self.f.iv: vloop.iv}
        self._emit_block(self.f.body.block, Builder(InsertPoint.at_end(vloop.body.block)), mapping, vt, accs)
        for red in self.reductions:
            buf, zero = accs[red.store]
            v = outer.insert(hw.VLoadOp(buf, [zero], vt)).result
            total = outer.insert(hw.VReduceOp(red.kind, v)).result
            idx = [self._rematerialize(i, outer, {}) for i in red.store.indices]
            old = outer.insert(loop.LoadOp(red.store.buffer, idx)).result
            new = outer.insert(type(red.combine)(old, total)).results[0]
            outer.insert(loop.StoreOp(new, red.store.buffer, idx))
        if split < ub:
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
        return b.insert(hw.VBroadcastOp(mv, vt)).result

    def _emit_block(self, block, b: Builder, mapping, vt, accs) -> None:
        for op in block.ops:
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
                    b.insert(hw.VStoreOp(mapping[op.value], buf, [zero]))  # type: ignore[union-attr]
                continue
            if isinstance(op, loop.LoadOp) and op.result in self.varying:
                idx = [mapping.get(i, i) for i in op.indices]
                mapping[op.result] = b.insert(hw.VLoadOp(op.buffer, idx, vt)).result
            elif isinstance(op, loop.StoreOp) and self._s(op.indices[-1]) == 1:
                idx = [mapping.get(i, i) for i in op.indices]
                b.insert(hw.VStoreOp(self._vec(op.value, b, mapping, vt), op.buffer, idx))
            elif any(r in self.varying for r in op.results):
                self._emit_lanewise(op, b, mapping, vt)
            else:
                b.insert(op.clone(value_mapper=mapping))

    def _emit_lanewise(self, op: Operation, b: Builder, mapping, vt) -> None:
        if isinstance(op, arith.AddfOp) and self._try_fma(op, b, mapping, vt):
            return
        operands = []
        for i, v in enumerate(op.operands):
            keep_scalar = isinstance(op, arith.SelectOp) and i == 0 and v not in self.varying
            operands.append(mapping.get(v, v) if keep_scalar else self._vec(v, b, mapping, vt))
        lanes = VectorType(builtin.i1, [self.width]) if isinstance(op, arith.CmpfOp) else vt
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


def _const_int(v: SSAValue) -> int | None:
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
    vectors and `hw.vfma` for a product feeding an add. A reduction into a
    loop-invariant element accumulates in a vector (`loop.alloc "local"`) and
    is combined with `hw.vreduce` after the loop. A scalar loop handles the
    remaining iterations. A loop that cannot be vectorized becomes `serial`
    with the reason in `hw.not_vectorized`.

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
        targets = [f for f in op.walk() if isinstance(f, loop.ForOp) and f.kind.data == "vectorized"]
        for f in targets:
            if not _is_innermost(f):
                f.properties["kind"] = StringAttr("serial")
                f.attributes["hw.not_vectorized"] = StringAttr("not an innermost loop")
                continue
            v = _Vectorizer(f, self.vector_width)
            try:
                v.analyse()
            except NotVectorizable as why:
                f.properties["kind"] = StringAttr("serial")
                f.attributes["hw.not_vectorized"] = StringAttr(str(why))
                continue
            v.rewrite()
