"""int8 GEMM on AVX512-VNNI: the tensor expression, the packed layout and the schedule.

`C[i, j] (i32) = sum_k A[i, k] (u8) * B[k, j] (s8)`, with B packed at compile
time as `Bp[k // 4, 4 * j + k % 4]` (the `[K/4][N][4]` layout of
`vpdpbusd`, 4 consecutive k of one column in one 32-bit lane). The schedule
tiles C into MR x (16 * NV) register blocks, keeps the k loop outside the
block (so the accumulators stay in registers), unrolls the block and
tensorizes each 16-column x 4-k step with `x86_vnni_u8s8_16x4`:

```python
module = qgemm_module(M, N, K)           # te level
lower_and_schedule(module, mr=8, nv=2)   # loop level, tensorized
```

Shapes need M % MR == 0, N % (16 NV) == 0 and K % 4 == 0; `padded_shape`
gives the padded sizes and `pack_b` pads B with zeros.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.parser import Parser

from ziggurat.dialects import make_context
from ziggurat.errors import ScheduleError

INTRIN = "x86_vnni_u8s8_16x4"


def qgemm_te(m: int, n: int, k: int, name: str = "qmm") -> str:
    """te-level text of the int8 GEMM over a packed B (k must be a multiple of 4)."""
    if k % 4:
        raise ScheduleError(f"qgemm: K = {k} must be a multiple of 4 (pad it with zeros)")
    ko = k // 4
    return f"""
func.func @{name}(%a: tensor<{m}x{k}xi8>, %b: tensor<{ko}x{4 * n}xi8>) -> tensor<{m}x{n}xi32> {{
  %y = te.reduce "{name}" add init 0 : i32 (%i, %j) reduce (%ko : {ko}, %ki : 4) : tensor<{m}x{n}xi32> {{
    %c4 = arith.constant 4 : index
    %m = arith.muli %ko, %c4 : index
    %k = arith.addi %m, %ki : index
    %j4 = arith.muli %j, %c4 : index
    %jk = arith.addi %j4, %ki : index
    %x = te.read %a[%i, %k] : tensor<{m}x{k}xi8>
    %w = te.read %b[%ko, %jk] : tensor<{ko}x{4 * n}xi8>
    %xe = arith.extui %x : i8 to i32
    %we = arith.extsi %w : i8 to i32
    %p = arith.muli %xe, %we : i32
    te.yield %p : i32
  }}
  func.return %y : tensor<{m}x{n}xi32>
}}"""


def qgemm_module(m: int, n: int, k: int, name: str = "qmm") -> builtin.ModuleOp:
    """The int8 GEMM as a te-level module."""
    return Parser(make_context(), qgemm_te(m, n, k, name)).parse_module()


def lower_and_schedule(module: builtin.ModuleOp, mr: int = 8, nv: int = 2, parallel: bool = False,
                       name: str = "qmm"):
    """Lowers the te module to loops and applies the VNNI schedule; returns the Schedule (with its trace)."""
    from ziggurat.lowering.convert_te_to_loop import ConvertTeToLoopPass
    from ziggurat.transforms.loop.primitives.api import Schedule

    ConvertTeToLoopPass().apply(Context(), module)
    s = Schedule(module, name)
    i = s.get_loops(name)[0]
    s.decompose_reduction(name, i)
    i, j, ko, ki = s.get_loops(name)
    io, ii = s.split(i, mr)
    jo, jr = s.split(j, 16 * nv)
    jv, jl = s.split(jr, 16)
    s.reorder(jo, io, ko, ii, jv, jl, ki)
    jo, io, ko, ii, jv, jl, ki = s.get_loops(name)
    if parallel:
        s.parallel(jo)
    s.unroll(ii)
    s.unroll(jv)
    s.tensorize(jl, INTRIN)
    return s


def padded_shape(m: int, n: int, k: int, mr: int = 8, nv: int = 2) -> tuple[int, int, int]:
    """(M, N, K) rounded up to the register block and to 4 in K."""
    def up(x: int, q: int) -> int:
        return -(-x // q) * q

    return up(m, mr), up(n, 16 * nv), up(k, 4)


def pack_b(b: np.ndarray, n_pad: int | None = None, k_pad: int | None = None) -> np.ndarray:
    """B (K x N, int8) as the packed `[K/4][N*4]` layout, zero-padded to (k_pad, n_pad)."""
    k, n = b.shape
    kp, np_ = k_pad or -(-k // 4) * 4, n_pad or n
    full = np.zeros((kp, np_), np.int8)
    full[:k, :n] = b
    return np.ascontiguousarray(full.reshape(kp // 4, 4, np_).transpose(0, 2, 1).reshape(kp // 4, 4 * np_))


EXACT16_BLOCK = "qgemm_s16"
"""The te/loop block of a `graph.qgemm {pairs16}` (u8 a, s8 b): AVX2's `vpmaddubsw` may run it,
its int16 pairs saturating (exact where the weight keeps them in range); a plain `qgemm` block
stays scalar on AVX2."""
SWAP16_BLOCK = "qgemm_x16"
"""The same with the operands' signs swapped (s8 a, u8 b: the weight plus 128): `vpmaddubsw`
with the packed weight as its unsigned operand (`x86_avx2_s8u8_8x4`)."""
WIDE16_BLOCK = "qgemm_w16"
"""The te/loop block of a `graph.qgemm` over int16 operands (8-bit values widened, B packed
`[K/2][2 N]`): AVX2's exact int8 GEMM for weights that would saturate `vpmaddubsw`, 8 lanes of
`vpmaddwd` (`x86_avx2_s16_8x2`) on any target with AVX2."""
QGEMM_BLOCKS = ("qgemm", EXACT16_BLOCK, SWAP16_BLOCK, WIDE16_BLOCK)
WIDE16_DOT = ("x86_avx2_s16_8x2", 8, 4)
SWAP16_DOT = ("x86_avx2_s8u8_8x4", 8, 4)

DOTS = {"vnni": (INTRIN, 16, 8), "avx2": ("x86_avx2_u8s8_8x4", 8, 4)}
"""int8-dot kind -> (tensor intrinsic, i32 lanes, largest register-block rows): AVX2 has 16
vector registers, so its blocks are 4 rows x 2 vectors (8 accumulators), VNNI's 8 x 2."""
PARALLEL_MACS = 1 << 18
"""An int8 GEMM of at least this many multiply-adds (about 10 us on one core) runs its outermost
loop with two or more trips `parallel` (loop-parallelize-outer sees no work in a tensorized nest,
so it would stay serial); with one thread the backend runs it serially."""
A_PART_MIN_BYTES = 4 << 20
A_PART_BYTES = 128 << 10
"""A GEMM whose A operand holds `A_PART_MIN_BYTES` or more runs it in parts of at most
`A_PART_BYTES` rows, each part across all column panels (segformer's decode head: 4096 x 1024
int16, 8 MB, streamed from memory once per 16-column panel); smaller A stays whole (the whole
int8 models ran 0.965-1.021x with parts for every GEMM)."""
B_PANEL_BYTES = 16 << 10
"""A column panel of B (2 vectors of columns) over K is cut into k blocks of at most this many
bytes, half an L1, where it holds more: every row block re-reads the panel."""


def no_pair_saturates(b: np.ndarray, a_max: int = 255) -> bool:
    """Whether AVX2's `vpmaddubsw` is exact for weights `b` (K x N int8) against unsigned bytes up
    to `a_max`: every pair of consecutive k (from an even k) keeps a_max * (its positive sum) and
    a_max * (its negative sum) within int16. True for 7-bit weights (onnxruntime's
    `reduce_range`), rarely for full-range ones."""
    w = _k_pairs(b)
    pos = np.maximum(w, 0).sum(1) * a_max
    neg = np.minimum(w, 0).sum(1) * a_max
    return bool(pos.max(initial=0) <= 32767 and neg.min(initial=0) >= -32768)


def _k_pairs(b: np.ndarray, shift: int = 0) -> np.ndarray:
    """Weights `b` (K x N int8) plus `shift` as int32 `[K/2, 2, N]`: the pairs of consecutive k
    that `vpmaddubsw` sums; an odd K's last pair takes a zero (its padding, which pairs a zero
    activation)."""
    k = b.shape[0]
    w = np.zeros((k + k % 2, b.shape[1]), np.int32)
    w[:k] = b.astype(np.int32) + shift
    return w.reshape(-1, 2, b.shape[1])


TYPICAL_STEPS = 48
"""How far (in quantization steps) from its zero point `pairs_at` takes an activation to sit
typically: onnxruntime's min-max calibration maps the extremes to 0 and 255, and a layer's
values crowd around the zero point."""


def pairs_at(b: np.ndarray, values: Sequence[int], swap: bool = False) -> int:
    """How many (pair of consecutive k, column) of weights `b` (K x N int8) leave int16 in
    `vpmaddubsw` when both activations of the pair equal one of `values` (unsigned bytes): as
    u8 activation x s8 weight, or `swap`, as (activation - 128) x (weight + 128)."""
    pair = _k_pairs(b, 128 if swap else 0).sum(1)
    count = 0
    for v in values:
        p = pair * ((v - 128) if swap else v)
        count += int(np.count_nonzero((p > 32767) | (p < -32768)))
    return count


def saturating_form(b: np.ndarray, zero_point: int) -> str:
    """'pairs16' (u8 activation x s8 weight) or 'swap16' (s8 x u8: both shifted by 128), the
    form of AVX2's saturating `vpmaddubsw` GEMM in which no pair of weights `b` saturates while
    the activations (zero point `zero_point`) stay within `TYPICAL_STEPS` of it; '' where
    neither form keeps such pairs in range (the exact wide form then). Activations near 0
    (after a ReLU) favour the first, near 128 (after a LayerNorm) the second."""
    near = sorted({max(0, zero_point - TYPICAL_STEPS), min(255, zero_point + TYPICAL_STEPS)})
    plain, swapped = pairs_at(b, near), pairs_at(b, near, swap=True)
    if plain == 0 and swapped == 0:  # the form whose activation operand sits nearer 0
        return "swap16" if abs(zero_point - 128) < zero_point else "pairs16"
    return "pairs16" if plain == 0 else ("swap16" if swapped == 0 else "")


def schedule_qgemm(fn, block: str = "qgemm", dot: str | None = None) -> bool:
    """The default schedule of a lowered `graph.qgemm` kernel: register blocks and tensorized
    int8 dot steps. `dot` is the target's int8 dot product (`Target.int8_dot`: 'vnni', 16 lanes of
    `vpdpbusd`; 'avx2', 8 lanes of `vpmaddubsw` + `vpmaddwd`; 'none'; a `WIDE16_BLOCK` takes
    `vpmaddwd` on int16 pairs, and a `SWAP16_BLOCK` `vpmaddubsw` with swapped operands, wherever
    the target has one of them); the default pipelines pass
    `loop-default-schedule{int8-dot=...}` from the target; None asks the default target
    (`Target.parse("llvm")`). Returns False (leaving the plain
    nest, which is correct but scalar) for a target without one. A GEMM of `PARALLEL_MACS` or
    more runs its outermost loop with two or more trips `parallel`."""
    from ziggurat.target import Target

    if dot is None:
        dot = Target.parse("llvm").int8_dot
    if block in (WIDE16_BLOCK, SWAP16_BLOCK):  # int16 operands (vpmaddwd), s8 x u8 pairs (vpmaddubsw): AVX2's
        # instructions, which VNNI and AMX hosts have too
        return dot != "none" and _tensorize(fn, block, *(WIDE16_DOT if block == WIDE16_BLOCK else SWAP16_DOT))
    if dot == "amx":  # whole C blocks in AMX tiles over all of K (lowering/qgemm_amx.py)
        from ziggurat.lowering.qgemm_amx import schedule_qgemm_amx

        schedule_qgemm_amx(fn, block, PARALLEL_MACS)
        return True
    if dot not in DOTS or (dot == "avx2" and block != EXACT16_BLOCK):  # vpmaddubsw saturates pairs
        return False
    return _tensorize(fn, block, *DOTS[dot])


def _row_part(blocks: int, block_bytes: int) -> int:
    """Row blocks per part of A for a GEMM whose A (`blocks` register blocks of rows of
    `block_bytes` each) is `A_PART_MIN_BYTES` or more, else 0: the largest divisor of `blocks`
    whose part fits `A_PART_BYTES`. Each part then crosses all column panels while it stays in
    L2, where the whole A would stream from memory once per panel."""
    if blocks * block_bytes < A_PART_MIN_BYTES:
        return 0
    part = _divisor_within(blocks, A_PART_BYTES // block_bytes)
    return part if part < blocks else 0


def _k_block(steps: int, step_bytes: int) -> int:
    """k groups per block where one column panel of B over all `steps` (`step_bytes` each) holds
    more than `B_PANEL_BYTES`, else 0: the largest divisor of `steps` whose panel fits, so the
    panel stays in L1 while the row blocks cross it."""
    if steps * step_bytes <= B_PANEL_BYTES:
        return 0
    return _divisor_within(steps, B_PANEL_BYTES // step_bytes)


def _divisor_within(n: int, cap: int) -> int:
    """The largest divisor of `n` up to `cap` (1 at least)."""
    return max(d for d in range(1, min(n, max(1, cap)) + 1) if n % d == 0)


def _elt_bytes(group_loop) -> int:
    """Bytes of one element of the operands A and B (one type, narrower than the i32 C the block
    also reads): the narrowest element the block in `group_loop` (the innermost loop) reads."""
    from ziggurat import dtypes
    from ziggurat.dialects import loop

    return min(dtypes.to_numpy(o.buffer.type.element_type).itemsize
               for o in group_loop.walk() if isinstance(o, loop.LoadOp))


def _tensorize(fn, block: str, intrin: str, lanes: int, max_rows: int) -> bool:
    """Register blocks of at most `max_rows` rows x 2 vectors of `lanes` columns, the k groups
    outside them, each step tensorized onto `intrin` (its group: the innermost k loop)."""
    from ziggurat.transforms.loop.primitives.api import Schedule

    s = Schedule(fn)
    nb = len(s.get_loops(block)) - 4
    s.decompose_reduction(block, s.get_loops(block)[0])
    cur = s.get_loops(block)
    m, n = cur[nb].op.trip_count, cur[nb + 1].op.trip_count
    steps, group = cur[-2].op.trip_count, cur[-1].op.trip_count  # k groups, the group
    elt = _elt_bytes(cur[-1].op)
    mr = next(f for f in (8, 6, 4, 3, 2, 1) if m % f == 0 and f <= max_rows)
    nv = 2 if n % (2 * lanes) == 0 else 1
    if mr > 1:
        s.split(s.get_loops(block)[nb], mr)  # io, ii
    p_j = nb + (2 if mr > 1 else 1)
    has_jo = n > lanes * nv
    if has_jo:
        s.split(s.get_loops(block)[p_j], lanes * nv)  # jo, jr
    p_jr = p_j + (1 if has_jo else 0)
    if nv > 1:
        s.split(s.get_loops(block)[p_jr], lanes)  # jv, jl
    part = _row_part(m // mr, mr * steps * group * elt) if has_jo else 0
    if part:
        s.split(s.get_loops(block)[nb], part)  # ip (parts of A), io
    kc = _k_block(steps, nv * lanes * group * elt)
    if kc:
        s.split(s.get_loops(block)[-2], kc)  # kb, the k groups
    cur = s.get_loops(block)
    off = 1 if part else 0
    ip, io = (cur[nb] if part else None), cur[nb + off]
    ii = cur[nb + off + 1] if mr > 1 else None
    jo = cur[p_j + off] if has_jo else None
    jv = cur[p_jr + off] if nv > 1 else None
    jl = cur[p_jr + off + (1 if nv > 1 else 0)]
    kb = cur[-3] if kc else None
    # batch, part of A, column panel, k block, row block, k groups, then the register block (rows,
    # vectors), lanes, the group
    order = [x for x in (*cur[:nb], ip, jo, kb, io, cur[-2], ii, jv, jl, cur[-1]) if x is not None]
    s.reorder(*order)
    at = {id(x): i for i, x in enumerate(order)}  # positions after the reorder
    loops = s.get_loops(block)
    if m * n * steps * group >= PARALLEL_MACS:  # never the k blocks (a reduction)
        outer = [loops[at[id(x)]] for x in (*cur[:nb], ip, jo, io) if x is not None]
        first = next((lp for lp in outer if lp.op.trip_count >= 2), None)
        if first is not None:
            s.parallel(first)
    for x in (ii, jv):
        if x is not None:
            s.unroll(s.get_loops(block)[at[id(x)]])
    s.tensorize(s.get_loops(block)[at[id(jl)]], intrin)
    return True
