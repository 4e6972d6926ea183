"""Convolutions as implicit GEMMs: recognizing the nest, for gpu-gemm's `gpu.igemm` mark.

A convolution's te block reads its input at affine indices of the loop
variables, guarded where the padding reaches outside:
```mlir
loop.block "conv2d" [S %n, S %co, S %oh, S %ow, R %ci, R %kh, R %kw] {
  %h = (%oh * 2 + %kh) - 1 ;  %hv = 0 <= %h < 28 ;  %hc = select %hv, %h, 0   (the same for w)
  %x = loop.load %in0[%n, %ci, %hc, %wc] ;  %xm = select (%hv and %wv), %x, 0.0
  %w = loop.load %in1[%co, %ci, %kh, %kw]
  C[%n, %co, %oh, %ow] += %xm * %w }
```
`match_implicit_gemm` reads that as a product of an M x K matrix (the operand
without C's innermost variable: the weights, rows `co`, columns `(ci, kh, kw)`)
and a K x N matrix (the input, gathered: rows `(ci, kh, kw)`, columns
`(n, oh, ow)`), with every index an affine function of the variables and the
guards kept: the GEMM template (backends/cuda/implicit.py addressing) then
decomposes a tile's row, column and k into the variables and computes each
element's address and guard as the block does. Each spatial variable must be
read by exactly one of the two operands (no batch variables: grouped and
depthwise convolutions stay a thread per output), each reduction variable by
both, and C indexed by the spatial variables alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith, builtin, func
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, StringAttr, f32, i64
from xdsl.ir import Attribute, Operation, SSAValue

from ziggurat.backends.llvm.lltypes import memref_strides
from ziggurat.dialects import loop
from ziggurat.lowering.convert_loop_to_hw import const_int

IGEMM_ATTR = "gpu.igemm"
# k per step of the GEMM template (both marks): 8 (16 KB of shared memory at tile 128, double-buffered); with
# gpu-gemm's `deep-k`, 32 for 64-wide tiles (32 KB): a quarter of the steps and barriers for a small
# product's latency-bound blocks
K_STEP, DEEP_K_STEP = 8, {64: 32}


def role_size(roles: str, extents: list[int], role: str) -> int:
    """The product of the extents of the variables with `role` (`m`, `n` or `k`)."""
    return math.prod(e for r, e in zip(roles, extents) if r == role)


# Blocks below which the 64x64 tile is taken (a GPU has about 100 multiprocessors: one 128x128 tile each
# would leave most of them idle on a small product).
MIN_BLOCKS_128 = 256
# 64x64 blocks below which a convolution is not an implicit GEMM (gpu-rfactor factors it, else a thread per
# output): on the H100 (session 36), implicit GEMMs of 2 to 8 blocks ran 1.4x to 3.6x slower than those
# paths, of 15 to 49 blocks 1.1x to 2.2x faster.
MIN_IGEMM_BLOCKS = 12
SGE, SLT = 5, 2  # arith.cmpi predicates


def k_step(tile: int, deep_k: bool) -> int:
    return DEEP_K_STEP.get(tile, K_STEP) if deep_k else K_STEP


def template_blocks(batch: int, m: int, n: int, tile: int = 64) -> int:
    """The GEMM template's blocks (tiles of C) for a product of `batch` x m x n."""
    return batch * -(-m // tile) * -(-n // tile)


@dataclass
class Access:
    """One buffer access: the kernel argument, and per memref dimension its element stride, extent,
    guard (0 <= index < extent is checked) and index as coefficients per variable plus a constant."""

    pos: int
    dims: list[tuple[int, int, bool, list[int], int]]  # (stride, extent, guarded, coeffs, const)

    def flat(self) -> list[int]:
        out: list[int] = []
        for stride, extent, guarded, coeffs, const in self.dims:
            out += [stride, extent, int(guarded), const, *coeffs]
        return out


@dataclass
class ImplicitSpec:
    """The product: each variable's role (`m`, `n` or `k`) and extent in loop order, and the accesses."""

    roles: str
    extents: list[int]
    a: Access
    b: Access
    c: Access

    def size(self, role: str) -> int:
        return role_size(self.roles, self.extents, role)

    def blocks(self, tile: int = 64) -> int:
        return template_blocks(1, self.size("m"), self.size("n"), tile)

    def attr(self, tile: int = 0, deep_k: bool = False) -> DictionaryAttr:
        def ints(v: list[int]) -> Attribute:
            return builtin.ArrayAttr([IntegerAttr(x, i64) for x in v])

        tile = tile or (128 if self.blocks(128) >= MIN_BLOCKS_128 else 64)
        return DictionaryAttr({
            "roles": StringAttr(self.roles), "extents": ints(self.extents),
            "a": IntegerAttr(self.a.pos, i64), "b": IntegerAttr(self.b.pos, i64), "c": IntegerAttr(self.c.pos, i64),
            "a_dims": ints(self.a.flat()), "b_dims": ints(self.b.flat()), "c_dims": ints(self.c.flat()),
            "tile": IntegerAttr(tile, i64), "bk": IntegerAttr(k_step(tile, deep_k), i64)})


def read_igemm(attr: DictionaryAttr) -> dict[str, object]:
    """The fields of a `gpu.igemm` attribute as Python values."""
    out: dict[str, object] = {}
    for key, v in attr.data.items():
        if isinstance(v, builtin.ArrayAttr):
            out[key] = [x.value.data for x in v.data]  # type: ignore[attr-defined]
        elif isinstance(v, StringAttr):
            out[key] = v.data
        else:
            out[key] = v.value.data  # type: ignore[attr-defined]
    return out


def match_implicit_gemm(f: func.FuncOp, top: loop.ForOp, args_only: bool = True) -> ImplicitSpec | None:
    """The ImplicitSpec of `top` (see the module docstring), else None."""
    spatial, cur = [], top
    while isinstance(cur, loop.ForOp) and _plain(cur):
        ops = list(cur.body.block.ops)
        spatial.append(cur)
        if len(ops) == 1 and isinstance(ops[0], loop.ForOp):
            cur = ops[0]
            continue
        break
    if not spatial:
        return None
    body = list(spatial[-1].body.block.ops)
    if len(body) != 2 or not isinstance(body[0], loop.BlockOp) or not isinstance(body[1], loop.ForOp):
        return None
    init, reds, cur = body[0], [], body[1]
    while isinstance(cur, loop.ForOp) and _plain(cur):
        reds.append(cur)
        ops = list(cur.body.block.ops)
        if len(ops) != 1:
            return None
        cur = ops[0]
    if not isinstance(cur, loop.BlockOp):
        return None
    upd, ivs = cur, [lp.iv for lp in spatial + reds]
    ns = len(spatial)
    if list(upd.bindings) != ivs or upd.iter_kinds.data != "S" * ns + "R" * len(reds):
        return None
    if list(init.bindings) != ivs[:ns] or init.iter_kinds.data != "S" * ns:
        return None
    var_of = {a: i for i, a in enumerate(upd.body.block.args)}
    ist = [o for o in init.body.block.ops if isinstance(o, loop.StoreOp)]
    if len(ist) != 1 or len(list(init.body.block.ops)) != 2 or not const_float(ist[0].operands[0], 0.0):
        return None
    st = list(upd.body.block.ops)[-1]
    if not isinstance(st, loop.StoreOp) or not isinstance(st.operands[0].owner, arith.AddfOp):
        return None
    add = st.operands[0].owner
    lc, mul = (add.operands[0].owner, add.operands[1].owner)
    if isinstance(lc, arith.MulfOp):
        lc, mul = mul, lc
    if not (isinstance(lc, loop.LoadOp) and isinstance(mul, arith.MulfOp) and lc.operands[0] is st.operands[1]):
        return None
    if list(lc.operands[1:]) != list(st.operands[2:]):
        return None
    c_buf = st.operands[1]
    if ist[0].operands[1] is not c_buf or _elt(c_buf) != f32:
        return None
    init_vars = {a: i for i, a in enumerate(init.body.block.args)}
    if [init_vars.get(v) for v in ist[0].operands[2:]] != [var_of.get(v) for v in st.operands[2:]]:
        return None
    c = _access(f, st.operands[1], list(st.operands[2:]), var_of, len(ivs), args_only)
    ops = [_operand(f, v, var_of, len(ivs), args_only) for v in mul.operands]
    if c is None or None in ops or any(d[2] or d[4] or sorted(d[3]) != [0] * (len(ivs) - 1) + [1] for d in c.dims):
        return None
    if sorted(d[3].index(1) for d in c.dims) != list(range(ns)):  # C: each spatial variable once
        return None
    x, y = ops  # type: ignore[misc]
    used = [{i for d in acc.dims for i, co in enumerate(d[3]) if co} for acc in (x, y)]  # type: ignore[union-attr]
    svars, rvars = set(range(ns)), set(range(ns, len(ivs)))
    if used[0] & used[1] & svars or not rvars <= used[0] & used[1] or svars - used[0] - used[1]:
        return None
    last = c.dims[-1][3].index(1)  # C's innermost variable goes with B (its columns: coalesced stores)
    a, b = (y, x) if last in used[0] else (x, y)
    roles = "".join("k" if i in rvars else ("n" if i in (used[0] if b is x else used[1]) else "m")
                    for i in range(len(ivs)))
    if "m" not in roles or "n" not in roles:
        return None
    return ImplicitSpec(roles, [lp.trip_count for lp in spatial + reds], a, b, c)  # type: ignore[arg-type]


def _plain(lp: loop.ForOp) -> bool:
    return lp.kind.data == "serial" and lp.bounds[0] == 0 and lp.bounds[2] == 1


def _elt(v: SSAValue) -> Attribute:
    return v.type.element_type  # type: ignore[attr-defined]


def const_float(v: SSAValue, value: float) -> bool:
    """`v` is a float `arith.constant` of `value`."""
    o = v.owner
    return isinstance(o, arith.ConstantOp) and isinstance(o.value, builtin.FloatAttr) and o.value.value.data == value


def _affine(v: SSAValue, var_of: dict, nvars: int) -> tuple[list[int], int] | None:
    """`v` as sum(coeffs[i] * var_i) + const, from constants, variables, addi, subi and muli by a constant."""
    if v in var_of:
        co = [0] * nvars
        co[var_of[v]] = 1
        return co, 0
    k = const_int(v)
    if k is not None:
        return [0] * nvars, k
    o = v.owner
    if isinstance(o, (arith.AddiOp, arith.SubiOp)):
        p, q = (_affine(x, var_of, nvars) for x in o.operands)
        if p is None or q is None:
            return None
        sign = 1 if isinstance(o, arith.AddiOp) else -1
        return [a + sign * b for a, b in zip(p[0], q[0])], p[1] + sign * q[1]
    if isinstance(o, arith.MuliOp):
        p, q = (_affine(x, var_of, nvars) for x in o.operands)
        if p is None or q is None:
            return None
        if any(q[0]):
            p, q = q, p
        if any(q[0]):
            return None
        return [a * q[1] for a in p[0]], p[1] * q[1]
    return None


def _range_guard(cond: SSAValue, x: SSAValue, extent: int) -> bool:
    """`cond` is `x >= 0 and x < extent` (arith.cmpi sge / slt, in either order)."""
    o = cond.owner
    if not isinstance(o, arith.AndIOp):
        return False
    preds = set()
    for c in o.operands:
        p = c.owner
        if not isinstance(p, arith.CmpiOp) or p.operands[0] is not x:
            return False
        preds.add((p.predicate.value.data, const_int(p.operands[1])))
    return preds == {(SGE, 0), (SLT, extent)}


def _access(f: func.FuncOp, buf: SSAValue, idx: list[SSAValue], var_of: dict, nvars: int, args_only: bool,
            guards: list | None = None) -> Access | None:
    args = list(f.body.block.args)
    if args_only and buf not in args:
        return None
    shape = buf.type.get_shape()  # type: ignore[attr-defined]
    strides = memref_strides(buf.type)  # type: ignore[arg-type]
    dims = []
    for d, v in enumerate(idx):
        o, guarded = v.owner, False
        if isinstance(o, arith.SelectOp) and const_int(o.operands[2]) == 0 and guards is not None \
                and _range_guard(o.operands[0], o.operands[1], shape[d]):
            guards.append(o.operands[0])
            v, guarded = o.operands[1], True
        aff = _affine(v, var_of, nvars)
        if aff is None:
            return None
        dims.append((strides[d], shape[d], guarded, aff[0], aff[1]))
    return Access(args.index(buf) if buf in args else -1, dims)


def _operand(f: func.FuncOp, v: SSAValue, var_of: dict, nvars: int, args_only: bool) -> Access | None:
    """A factor of the product: a load, or a load masked to 0.0 exactly where its guarded indices leave
    their range."""
    o, mask = v.owner, None
    if isinstance(o, arith.SelectOp) and const_float(o.operands[2], 0.0):
        mask, o = o.operands[0], o.operands[1].owner
    if not isinstance(o, loop.LoadOp) or _elt(o.operands[0]) != f32:
        return None
    guards: list = []
    acc = _access(f, o.operands[0], list(o.operands[1:]), var_of, nvars, args_only, guards)
    if acc is None or (mask is None) != (not guards):
        return None
    if mask is not None and set(_and_leaves(mask)) != set(guards):
        return None
    return acc


def _and_leaves(v: SSAValue) -> list[SSAValue]:
    o = v.owner
    if isinstance(o, arith.AndIOp) and not _is_range(o):
        return _and_leaves(o.operands[0]) + _and_leaves(o.operands[1])
    return [v]


def _is_range(o: Operation) -> bool:
    """An andi of two comparisons: a range guard (a leaf of a mask)."""
    return all(isinstance(c.owner, arith.CmpiOp) for c in o.operands)

