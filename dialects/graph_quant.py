"""Quantized ops of the `graph` dialect: the int8 GEMM that VNNI runs.

These ops belong to the `graph` dialect (`dialects/graph.py` imports them and
lists them in `GRAPH_OPS`). The ONNX frontend decomposes MatMulInteger,
QLinearMatMul, ConvInteger and QLinearConv onto `graph.qgemm` plus ordinary
graph ops (casts, integer arithmetic, pad, reshape, transpose, reductions)
for the zero points, the packing of B and the requantization.
`graph.lookup` is the table that `quantized-lookup` folds an elementwise chain
of a quantized value into (transforms/graph/quantized_lookup.py).
"""

from __future__ import annotations

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, IntegerType, Signedness, TensorType, UnitAttr, i64
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from ziggurat.dialects.graph_base import OpPattern, PatternKind, require, shape_of


def _elt(v) -> object:
    return v.type.element_type


@irdl_op_definition
class QGemmOp(IRDLOperation):
    """`C (i32) = A (ui8) x B (i8)` with B packed for `vpdpbusd`.

    `a` is `[batch..., M, K]` unsigned bytes, `b` is `[batch..., K/4, 4*N]`
    signed bytes holding `B[k, j]` at `[k // 4, 4 * j + k % 4]` (a batch of
    rank 0 broadcasts), and `result[..., i, j] = sum_k a[..., i, k] * B[k, j]`
    in i32 (wrapping, as the instruction does). K must be a multiple of 4
    and N of 16: the frontend pads with zeros. `loop-default-schedule`
    tensorizes its 16 x 4 steps onto `x86_vnni_u8s8_16x4` where the target
    has AVX512-VNNI; on AVX2 its 8 x 4 steps onto `x86_avx2_u8s8_8x4` where
    the op is marked `pairs16`: each pair of consecutive-k products is summed
    in int16 with saturation first, as `vpmaddubsw` does (te block `qgemm_s16`).
    The frontend marks it where no pair can leave int16 (the constant weight's
    check: exact), or where the target accepts onnxruntime's saturation
    (`Target.int8_pairs`). A `pairs16` op may also hold `a` as signed bytes
    and `b` as unsigned ones (the weight plus 128): the same sum with the
    instruction's operands swapped (te block `qgemm_x16`, `x86_avx2_s8u8_8x4`),
    whose pairs stay small where the activations sit near 128.

    The wide form holds the same 8-bit values widened to i16: `a` `[..., M, K]`
    i16 and `b` `[..., K/2, 2*N]` i16 (`B[k, j]` at `[k // 2, 2 * j + k % 2]`),
    the layout of `vpmaddwd`: AVX2's exact int8 GEMM for weights that would
    saturate `vpmaddubsw` (te block `qgemm_w16`, tensorized onto
    `x86_avx2_s16_8x2` on any target with AVX2).

    b's rows may be longer than `g * N` (the result's N): lanes past it are padding, never read (the
    frontend pads AVX2's packed rows to an odd number of 64-byte lines, so that the k steps of one
    column panel do not share an L1 set).

    ```mlir
    %c = graph.qgemm %a, %b : tensor<8x64xui8>, tensor<16x128xi8> -> tensor<8x32xi32>
    %d = graph.qgemm %a, %b {pairs16} : tensor<8x64xui8>, tensor<16x128xi8> -> tensor<8x32xi32>
    %s = graph.qgemm %as, %bu {pairs16} : tensor<8x64xi8>, tensor<16x128xui8> -> tensor<8x32xi32>
    %e = graph.qgemm %a16, %b16 : tensor<8x64xi16>, tensor<32x64xi16> -> tensor<8x32xi32>
    ```
    """

    name = "graph.qgemm"
    a = operand_def(TensorType)
    b = operand_def(TensorType)
    result = result_def(TensorType)
    pairs16 = opt_prop_def(UnitAttr)
    traits = traits_def(Pure(), OpPattern(PatternKind.OPAQUE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$a `,` $b attr-dict `:` type($a) `,` type($b) `->` type($result)"

    def __init__(self, a, b, result_type, pairs16: bool = False):
        super().__init__(operands=[a, b], result_types=[result_type],
                         properties={"pairs16": UnitAttr()} if pairs16 else {})

    @property
    def group(self) -> int:
        """k values per packed lane of b: 4 bytes (vpdpbusd, vpmaddubsw) or 2 int16 (vpmaddwd)."""
        return 2 if _elt(self.a) == IntegerType(16) else 4

    def verify_(self) -> None:
        a, b, r = shape_of(self.a), shape_of(self.b), shape_of(self.result)
        g = self.group
        if g == 2:
            require(_elt(self.b) == IntegerType(16), self, f"b must hold i16 with an i16 a, got {self.b.type}")
            require(self.pairs16 is None, self, "pairs16 applies to 8-bit operands only")
        else:
            u8, s8 = IntegerType(8, Signedness.UNSIGNED), IntegerType(8)
            if self.pairs16 is not None and _elt(self.a) == s8:
                require(_elt(self.b) == u8, self, f"b must hold ui8 with a signed 8-bit a, got {self.b.type}")
            else:
                require(_elt(self.a) == u8, self, f"a must hold ui8 (or i16; i8 with pairs16), got {self.a.type}")
                require(_elt(self.b) == s8, self, f"b must hold i8 (signed), got {self.b.type}")
        require(_elt(self.result) == IntegerType(32), self, f"the result must hold i32, got {self.result.type}")
        require(len(a) >= 2 and len(b) >= 2, self, "a and b need at least 2 dims")
        m, k = a[-2:]
        kq, ng = b[-2:]
        require(k % 4 == 0 and kq * g == k, self, f"a's K = {k} must be a multiple of 4 and equal {g} x b's dim -2 ({kq})")
        require(ng % (16 * g) == 0, self, f"b's last dim {ng} must be {g} x N (plus padding) with N a multiple of 16")
        batch_b = b[:-2]
        require(len(batch_b) == 0 or batch_b == a[:-2], self, f"b's batch dims {batch_b} must be empty or equal a's {a[:-2]}")
        require(len(r) == len(a) and r[:-1] == (*a[:-2], m), self, f"result shape {r} should be {(*a[:-2], m)} x N")
        n = r[-1]
        require(n % 16 == 0 and g * n <= ng, self, f"result N = {n} must be a multiple of 16 and at most b's last dim / {g} "
                f"({ng // g})")


@irdl_op_definition
class LookupOp(IRDLOperation):
    """`result[i] = table[i[d0], i[d1], .., clamp(x[i] - offset, 0, n - 1)]`, elementwise: a table lookup.

    `x` holds integers, or floats with integer values (an int8 model's quantized
    values after simplify-graph turned the casts into float rounding); `table`
    holds n entries of the result's element type per position of the result
    dims `dims` (none: one table of n; `[1]`: one per channel of NCHW; `[1, 4]`:
    per channel block and lane of NCHW16c). The entries are the table's last dim
    unless `entry` says which: `[C/16, n, 16]` with `entry = 1` keeps a vector's
    16 lanes (channels) in one 64-byte line where they read the same entry, as
    layout-rewrite lays per-channel tables out. The index is truncated toward zero
    and clamped into the table (NaN reads entry 0), so no input reads outside
    it. `quantized-lookup` makes these from elementwise chains whose only
    varying input takes at most 256 integer values.

    ```mlir
    %y = graph.lookup %q, %t {offset = 0 : i64} : tensor<1x8x4x4xf32>, tensor<256xf32> -> tensor<1x8x4x4xf32>
    %z = graph.lookup %q, %u {offset = 0 : i64, dims = array<i64: 1>} : tensor<1x8x4x4xf32>, tensor<8x256xf32> -> tensor<1x8x4x4xf32>
    %b = graph.lookup %p, %v {offset = 0 : i64, dims = array<i64: 1, 4>, entry = 1 : i64} : tensor<1x2x4x4x16xf32>, tensor<2x256x16xf32> -> tensor<1x2x4x4x16xf32>
    ```
    """

    name = "graph.lookup"
    input = operand_def(TensorType)
    table = operand_def(TensorType)
    offset = prop_def(IntegerAttr)
    dims = opt_prop_def(DenseArrayBase)
    entry = opt_prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.ELEMWISE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input `,` $table attr-dict `:` type($input) `,` type($table) `->` type($result)"

    def __init__(self, x, table, offset: int, result_type, dims: tuple[int, ...] = (), entry: int | None = None):
        props = {"offset": IntegerAttr(offset, i64)}
        if dims:
            props["dims"] = DenseArrayBase.from_list(i64, list(dims))
        if entry is not None and entry != len(dims):
            props["entry"] = IntegerAttr(entry, i64)
        super().__init__(operands=[x, table], result_types=[result_type], properties=props)

    @property
    def table_dims(self) -> tuple[int, ...]:
        """The result dims that select a table (empty: one table)."""
        return tuple(self.dims.get_values()) if self.dims is not None else ()

    @property
    def entry_dim(self) -> int:
        """The table dim that holds the entries (default: the last)."""
        return self.entry.value.data if self.entry is not None else len(self.table_dims)

    def table_index(self, selectors: list, entry):
        """The table's index list: the selectors (one per `dims`) with the entry index at `entry_dim`."""
        out = list(selectors)
        out.insert(self.entry_dim, entry)
        return out

    def verify_(self) -> None:
        t, r = shape_of(self.table), shape_of(self.result)
        dims = self.table_dims
        e = self.entry_dim
        require(0 <= e <= len(dims), self, f"entry dim {e} must be within the table's {len(dims) + 1} dims")
        require(len(t) == len(dims) + 1 and t[e] >= 1, self,
                f"the table must have {len(dims) + 1} dims (one per entry of `dims`, and the entries), got shape {t}")
        selectors = [n for j, n in enumerate(t) if j != e]
        for j, d in enumerate(dims):
            require(0 <= d < len(r) and selectors[j] == r[d], self,
                    f"table dim {j + (j >= e)} ({selectors[j]}) must equal result dim {d}")
        require(shape_of(self.result) == shape_of(self.input), self,
                f"result shape {shape_of(self.result)} should be the input's {shape_of(self.input)}")
        require(_elt(self.result) == _elt(self.table), self, "result and table element types differ")


QUANT_OPS = [QGemmOp, LookupOp]
