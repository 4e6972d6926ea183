"""tensorize: replace a loop sub-nest that computes what a tensor intrinsic
describes with the intrinsic's implementation.

The match is structural, against the intrinsic's description (a loop-level
function, see lowering/tensor_intrin.py):
- the nest rooted at the given loop has as many perfectly nested loops as the
  description, with the same trip counts, starting at 0 with step 1, and
  holds one `loop.block` (index arithmetic may sit between the loops);
- the block's compute ops (everything but index arithmetic) match the
  description's one for one: same op names, types and properties, same
  data flow, the same constants; description buffers map to target buffers;
- every access has the same element strides in the nest's loops as its
  description access (after row-major flattening), and varies only along the
  last dimension of its buffer (the implementation loads vectors from it);
- each loop feeds the same kind of block variable (spatial or reduction) as
  its description loop.
The nest is then replaced by the implementation, given for each buffer the
indices of the element the nest touches at loop offset 0. Anything that does
not match raises ScheduleError saying what differs.

Before (`x86_vnni_u8s8_16x4`; A is u8, B packed `[k/4][N*4]` s8):

```mlir
loop.for %ji = 0 to 16 serial {
  loop.for %ki = 0 to 4 serial {
    loop.block "qmm" [S %i = %i0, S %j = %jj, R %ko = %r0, R %k = %ki] {
      %x = loop.load %A[%i, %k4] : memref<8x64xi8>       // k4 = 4*ko + k
      %w = loop.load %B[%ko, %jk] : memref<16x128xi8>    // jk = 4*j + k
      ... extui, extsi, muli, load C, addi, store C ...
    }
  }
}
```

After:

```mlir
%a4 = hw.vload %A[%i0, %k0] : memref<8x64xi8> -> vector<4xi8>
%q = x86vec.bcast_group %a4 : vector<4xi8> -> vector<64xi8>
%bv = hw.vload %B[%r0, %j0] : memref<16x128xi8> -> vector<64xi8>
%cv = hw.vload %C[%i0, %jo16] : memref<8x32xi32> -> vector<16xi32>
%r = x86vec.dpbusd %cv, %q, %bv : vector<16xi32>, vector<64xi8>, vector<64xi8>
hw.vstore %r, %C[%i0, %jo16] : vector<16xi32>, memref<8x32xi32>
```
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.lowering.intrinsics import get_intrin
from ziggurat.lowering.tensor_intrin import Access, TensorIntrin
from ziggurat.transforms.loop.primitives.loops import describe, uses
from ziggurat.transforms.loop.primitives.regions import affine, emit


def _nest(top: loop.ForOp, depth: int, who: str) -> tuple[list[loop.ForOp], loop.BlockOp]:
    """`depth` perfectly nested loops from `top` and the one block inside them."""
    loops = [top]
    while True:
        f = loops[-1]
        inner = [o for o in f.body.block.ops if not _is_index_op(o)]
        if len(loops) < depth:
            if len(inner) != 1 or not isinstance(inner[0], loop.ForOp):
                raise ScheduleError(f"{who}: {describe(f)} must hold exactly one loop (the description has {depth} loops)")
            loops.append(inner[0])
            continue
        if len(inner) != 1 or not isinstance(inner[0], loop.BlockOp):
            raise ScheduleError(f"{who}: the description has {depth} loops, so the innermost one, {describe(f)}, "
                                f"must hold exactly one loop.block; it holds {[o.name for o in inner]}")
        return loops, inner[0]


def _is_index_op(o: Operation) -> bool:
    return isinstance(o, (arith.ConstantOp, arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.DivUIOp,
                          arith.RemUIOp)) and all(isinstance(r.type, IndexType) for r in o.results)


def _compute_ops(blk: loop.BlockOp) -> list[Operation]:
    return [o for o in blk.body.block.ops if not _is_index_op(o)]


def _strides(acc: loop.LoadOp | loop.StoreOp, ivs: list[SSAValue], who: str,
             top: loop.ForOp | None = None) -> tuple[list[int], list[dict]]:
    """Row-major element strides of an access in each loop of `ivs`, and each index's affine form."""
    mt = acc.buffer.type
    assert isinstance(mt, MemRefType)
    shape = mt.get_shape()
    row = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        row[d] = row[d + 1] * shape[d + 1]
    out = [0] * len(ivs)
    forms = []
    for d, idx in enumerate(acc.indices):
        form = affine(idx)
        if form is None:
            if any(uses(idx, iv, {}) for iv in ivs):
                raise ScheduleError(f"{who}: index {d} of the access to {_name(acc.buffer)} is not affine in the nest's loops")
            if top is not None and isinstance(idx.owner, Operation) and top.is_ancestor(idx.owner):
                raise ScheduleError(f"{who}: index {d} of the access to {_name(acc.buffer)} is not affine")
            form = {idx: 1}  # loop-invariant, not affine: kept as it is
        for n, iv in enumerate(ivs):
            c = form.get(iv, 0)
            if c and d != len(shape) - 1:
                raise ScheduleError(f"{who}: the access to {_name(acc.buffer)} varies along dimension {d}; the "
                                    "intrinsic needs it to vary only along the last dimension (pack the buffer first)")
            out[n] += c * row[d]
        forms.append(form)
    return out, forms


def _name(buf: SSAValue) -> str:
    return f"%{buf.name_hint}" if buf.name_hint else "a buffer"


def _same_op(d: Operation, t: Operation) -> bool:
    if d.name != t.name or [r.type for r in d.results] != [r.type for r in t.results]:
        return False
    if isinstance(d, (loop.LoadOp, loop.StoreOp)):
        return d.buffer.type.element_type == t.buffer.type.element_type  # type: ignore[union-attr]
    return d.properties == t.properties


def match(top: loop.ForOp, intrin: TensorIntrin) -> tuple[list[loop.ForOp], dict[str, tuple[SSAValue, list[dict]]]]:
    """Checks that the nest at `top` computes what `intrin` describes.

    Returns the target loops and, per description buffer, the target buffer
    and the affine form of each of its indices.
    """
    who = f"tensorize '{intrin.name}'"
    desc = intrin.desc_func()
    d_top = next(o for o in desc.body.block.ops if isinstance(o, loop.ForOp))
    d_loops, d_blk = _nest(d_top, 1 + sum(1 for o in d_top.walk() if isinstance(o, loop.ForOp) and o is not d_top), who)
    t_loops, t_blk = _nest(top, len(d_loops), who)
    for d, t in zip(d_loops, t_loops):
        if t.bounds != (0, d.bounds[1], 1) or t.kind.data != "serial":
            raise ScheduleError(f"{who}: {describe(t)} ({t.kind.data}) must be a serial loop from 0 to {d.bounds[1]} step 1")
    d_ivs, t_ivs = [f.iv for f in d_loops], [f.iv for f in t_loops]
    for n, (div, tiv) in enumerate(zip(d_ivs, t_ivs)):
        dk = {d_blk.iter_kinds.data[i] for i, v in enumerate(d_blk.bindings) if uses(v, div, {})}
        tk = {t_blk.iter_kinds.data[i] for i, v in enumerate(t_blk.bindings) if uses(v, tiv, {})}
        if dk != tk:
            raise ScheduleError(f"{who}: {describe(t_loops[n])} feeds block variables of kind {sorted(tk)}, "
                                f"the description's loop {n} feeds {sorted(dk)}")
    d_ops, t_ops = _compute_ops(d_blk), _compute_ops(t_blk)
    if len(d_ops) != len(t_ops):
        raise ScheduleError(f"{who}: block '{t_blk.block_name.data}' computes {len(t_ops)} ops, the description {len(d_ops)}")
    value_map: dict[SSAValue, SSAValue] = {}
    buffers: dict[str, tuple[SSAValue, list[dict]]] = {}
    d_args = list(desc.body.block.args)
    for d, t in zip(d_ops, t_ops):
        if not _same_op(d, t):
            raise ScheduleError(f"{who}: '{t.name}' in block '{t_blk.block_name.data}' does not match the description's '{d.name}'")
        for dv, tv in zip(d.results, t.results):
            value_map[dv] = tv
        if isinstance(d, (loop.LoadOp, loop.StoreOp)):
            name = d.buffer.name_hint or f"arg{d_args.index(d.buffer)}"
            d_str, _ = _strides(d, d_ivs, who)
            t_str, forms = _strides(t, t_ivs, who, top)  # type: ignore[arg-type]
            if d_str != t_str:
                raise ScheduleError(f"{who}: the access to {_name(t.buffer)} steps {t_str} elements per loop, "  # type: ignore[union-attr]
                                    f"the description's access to %{name} steps {d_str}")
            seen = buffers.get(name)
            if seen is not None and seen[0] is not t.buffer:  # type: ignore[union-attr]
                raise ScheduleError(f"{who}: description buffer %{name} maps to two different buffers")
            buffers[name] = (t.buffer, forms)  # type: ignore[union-attr]
        operands = [o for o in d.operands if not isinstance(o.type, (IndexType, MemRefType))]
        t_operands = [o for o in t.operands if not isinstance(o.type, (IndexType, MemRefType))]
        for do, to in zip(operands, t_operands):
            if do in value_map:
                if value_map[do] is not to:
                    raise ScheduleError(f"{who}: the operands of '{t.name}' flow differently from the description")
            elif isinstance(do.owner, arith.ConstantOp):
                if not (isinstance(to.owner, arith.ConstantOp) and to.owner.value == do.owner.value):
                    raise ScheduleError(f"{who}: '{t.name}' uses a different constant than the description")
            else:
                raise ScheduleError(f"{who}: '{t.name}' reads a value the description does not compute")
    return t_loops, buffers


def tensorize(fn: func.FuncOp, top: loop.ForOp, intrin: TensorIntrin | str) -> None:
    """Replaces the nest rooted at `top` in `fn` by `intrin`'s implementation."""
    it = get_intrin(intrin) if isinstance(intrin, str) else intrin
    t_loops, buffers = match(top, it)
    nest_ivs = {f.iv for f in t_loops}
    b = Builder(InsertPoint.before(top))
    accesses: dict[str, Access] = {}
    for name, (buf, forms) in buffers.items():
        idx = []
        for form in forms:
            base = {k: c for k, c in form.items() if k not in nest_ivs}
            if any(uses(k, iv, {}) for k in base if k != 1 for iv in nest_ivs):
                raise ScheduleError(f"tensorize '{it.name}': an index of {_name(buf)} depends on the nest in a non-affine way")
            idx.append(emit(b, base))
        accesses[name] = (buf, idx)
    missing = set(it.buffer_names()) - set(accesses)
    if missing:
        raise ScheduleError(f"tensorize '{it.name}': the nest never accesses the description's buffers {sorted(missing)}")
    it.implement(b, accesses)
    top.detach()
    top.erase()
