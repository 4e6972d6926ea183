"""Explicit zero padding over run-time extents (loop-dynamic-schedule): pad.py for symbolic kernels.

A padded conv over symbolic height and width reads its input as pad.py describes,
`select(c, load B[.., select(c_h, h', 0), select(c_w, w', 0), ..], 0.0)`, with the
in-bounds tests comparing against the kernel's symbol arguments
(`x_h < %height`). `pad_dynamic_reads` gives such a read a zero-padded copy `P`
of `B` whose extents are expressions of the symbols (`#sym.dims<"2 + height">`,
a kernel-local buffer the backend sizes at run time), filled in front of the
nest: the halo boxes with zeros, then `B` at offset `lo_d`; the read becomes
`P[.., x_d + lo_d, ..]` with no tests. The pads are constants: `lo_d` from the
least index (the loops start at constants), `hi_d` a bound of the greatest
index minus the extent over every binding (`upper_bound`: a strided conv's
`2 * {1 + width}//2 - width` is at most 1).

```mlir
loop.for %i = 0 to %h { loop.for %r = 0 to 3 { loop.block "conv" [S %a = %i, R %b = %r] {
  %x = (%a + %b) - 1 ; %c = (%x >= 0) & (%x < %h) ; %v = select(%c, B[select(%c, %x, 0)], 0.0) ...
```
becomes
```mlir
%p = loop.alloc "local" : memref<?xf32, #sym.dims<"2 + h">>
<zeros at 0 and at %h + 1> ; <B[q] to %p[q + 1] for q < %h>
loop.for %i = 0 to %h { loop.for %r = 0 to 3 { loop.block "conv" [..] { %v = %p[%x + 1] ... } } }
```
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith, func
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.dialects.sym import memref_of_shape, shape_of
from ziggurat.symbolic import Dim, Sym, derived_parts, is_derived
from ziggurat.transforms.loop.loop_simplify_index import bound_range
from ziggurat.transforms.loop.primitives.loops import get_loops
from ziggurat.dialects.sym import symbol_args
from ziggurat.transforms.loop.sym_index import index_of, symbol_dims
from ziggurat.transforms.schedule.pad import fill_padded, index_range, match_clamped_read, read_padded

def upper_bound(d: Dim) -> int | None:
    """A constant no binding exceeds (None where there is none to find): a derived `{P}//k` term
    whose coefficient `c` is a multiple of k is at most `(c/k) * P` (c > 0) or `(c/k) * (P - k + 1)`
    (c < 0), which cancels the strided conv's `2 * {1 + w}//2 - w` to 1."""
    if not isinstance(d, Sym):
        return int(d)
    total: Dim = 0
    for monomial, c in d.terms.items():
        if len(monomial) == 1 and is_derived(monomial[0]):
            name = monomial[0]
            inner, k = derived_parts(name)
            if c % k == 0:
                total = total + (c // k) * (inner if c > 0 else inner - (k - 1))
                continue
        total = total + Sym({monomial: c})
    if not isinstance(total, Sym):
        return total
    return total.bounds()[1]


def pad_dynamic_reads(fn: func.FuncOp, top: loop.ForOp, update: loop.BlockOp) -> int:
    """Rewrites the clamped, zero-selected reads of `update` (under the perfect or imperfect nest
    `top`, every loop from a constant with step 1) to read zero-padded copies filled in front of
    `top`; returns how many it rewrote."""
    args = symbol_args(fn)
    if not args:
        return 0
    syms = symbol_dims(fn)
    loops = get_loops(update)
    if not loops or loops[0] is not top:
        return 0
    ranges: dict[SSAValue, tuple[Dim, Dim]] = {}
    for var, bound in zip(update.vars, update.bindings):
        r = bound_range(bound, syms)
        if r is None or not isinstance(r[0], int):
            return 0  # the least index of a padded read must be a constant
        ranges[var] = r
    done = 0
    for read in [o for o in update.body.walk() if isinstance(o, loop.LoadOp)]:
        shape = list(shape_of(read.buffer.type))
        dims = [d if isinstance(d, int) else args.get(str(d)) for d in shape]
        if any(d is None for d in dims):
            continue
        m = match_clamped_read(read, dims)  # type: ignore[arg-type]
        if m is None:
            continue
        sel, clamped = m
        pads: dict[int, tuple[int, int]] = {}
        for d, x in clamped.items():
            r = index_range(x, ranges, syms)
            hi = upper_bound(r[1] - (shape[d] - 1)) if r is not None else None
            if r is None or not isinstance(r[0], int) or hi is None:
                break
            pads[d] = (max(0, -r[0]), max(0, hi))
        else:
            _pad(fn, top, update, read, sel, clamped, pads, shape, args)
            done += 1
    return done


def _pad(fn: func.FuncOp, top: loop.ForOp, update: loop.BlockOp, read: loop.LoadOp, sel: arith.SelectOp,
         clamped: dict[int, SSAValue], pads: dict[int, tuple[int, int]], shape: list[Dim],
         args: dict[str, SSAValue]) -> None:
    src = read.buffer
    elt = src.type.element_type  # type: ignore[attr-defined]
    padded = [s + sum(pads.get(d, (0, 0))) for d, s in enumerate(shape)]
    b = Builder(InsertPoint.before(top))
    buf = b.insert(loop.AllocOp(memref_of_shape(elt, padded), "local")).result
    tag = update.block_name.data

    def bound(r):
        lb, ub = r if isinstance(r, tuple) else (0, r)
        return index_of(b, lb, args), index_of(b, ub, args)

    fill_padded(b, src, buf, shape, pads, tag, bound)
    read_padded(read, sel, clamped, pads, buf, update)


__all__ = ["pad_dynamic_reads", "upper_bound"]
