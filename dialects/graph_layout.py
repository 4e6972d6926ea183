"""Blocked-layout ops of the `graph` dialect (NCHW[x]c), used by `convert-layout`.

These ops belong to the `graph` dialect (`dialects/graph.py` imports them and
lists them in `GRAPH_OPS`); they live in their own module to keep graph.py
readable. A layout is a string:

* `NCHW`: activations as ONNX has them;
* `NCHW<b>c` (e.g. `NCHW16c`): activations `[N, ceil(C/b), H, W, b]`, channel
  `C = cb * b + c` (TVM's NCHW[x]c); when `b` does not divide C the last
  block's lanes beyond C are padding (zero from a transform, finite junk
  after elementwise ops; blocked convolutions give them zero weights);
* `OIHW`: convolution weights as ONNX has them;
* `OIHW<i>i<o>o` (e.g. `OIHW16i16o`): weights `[ceil(O/o), ceil(I/i), KH, KW, i, o]`
  (zeros beyond O and I).

graph.py imports this module at its end, so import `ziggurat.dialects.graph`
before this module (importing this one first is a circular import).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import DenseArrayBase, StringAttr, TensorType
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

from ziggurat.dialects.graph_nn import pool_output_size
from ziggurat.dialects.graph_base import OpPattern, PatternKind, int_array, ints_of, require, shape_of

_ACT = re.compile(r"^NCHW(?:(\d+)c)?$")
_WEIGHT = re.compile(r"^OIHW(?:(\d+)i(\d+)o)?$")


def parse_layout(layout: str) -> tuple[str, tuple[int, ...]]:
    """('NCHW', (b,)) / ('NCHW', ()) / ('OIHW', (i, o)) / ('OIHW', ()); ValueError otherwise."""
    m = _ACT.match(layout)
    if m:
        return "NCHW", (int(m[1]),) if m[1] else ()
    m = _WEIGHT.match(layout)
    if m:
        return "OIHW", (int(m[1]), int(m[2])) if m[1] else ()
    raise ValueError(f"unknown layout '{layout}' (known: NCHW, NCHW<b>c, OIHW, OIHW<i>i<o>o)")


def blocked_shape(shape: Sequence[int], layout: str) -> tuple[int, ...] | None:
    """The shape of a plain NCHW/OIHW `shape` in `layout` (None when `shape` is not 4-d). A channel
    count the block does not divide is padded up to a whole block: `C = 440` in `NCHW16c` is 28
    blocks, the last 8 lanes of the last block beyond the tensor."""
    kind, blocks = parse_layout(layout)
    if len(shape) != 4 or not blocks:
        return tuple(shape) if len(shape) == 4 else None
    a, b, h, w = shape
    if kind == "NCHW":
        (c,) = blocks
        return (a, -(-b // c), h, w, c)
    i, o = blocks
    return (-(-a // o), -(-b // i), h, w, i, o)


def padded_blocked_shape(shape: Sequence[int], layout: str, pads: Sequence[int]) -> tuple[int, ...] | None:
    """`blocked_shape` of an NCHW `shape` with H and W grown by `pads` ([top, left, bottom, right])."""
    blocked = blocked_shape(shape, layout)
    if blocked is None or not any(pads):
        return blocked
    n, cb, h, w, c = blocked
    return (n, cb, h + pads[0] + pads[2], w + pads[1] + pads[3], c)


def layout_rank(layout: str) -> int:
    """The rank of a tensor in `layout` (4 plain, 5 for NCHW<b>c, 6 for OIHW<i>i<o>o)."""
    kind, blocks = parse_layout(layout)
    return 4 + len(blocks)


def plain_shape(shape: Sequence[int], layout: str) -> tuple[int, ...]:
    """The inverse of `blocked_shape`."""
    kind, blocks = parse_layout(layout)
    if not blocks:
        return tuple(shape)
    if kind == "NCHW":
        n, cb, h, w, c = shape
        return (n, cb * c, h, w)
    ob, ib, h, w, i, o = shape
    return (ob * o, ib * i, h, w)


@irdl_op_definition
class LayoutTransformOp(IRDLOperation):
    """Reorders a tensor from layout `src` to layout `dst` (the same family: NCHW or OIHW).

    `NCHW -> NCHW16c` is `out[n, cb, h, w, c] = in[n, cb*16 + c, h, w]`;
    `OIHW -> OIHW16i16o` is `out[ob, ib, y, x, i, o] = in[ob*16 + o, ib*16 + i, y, x]`.
    Channels beyond the input's (a block that does not divide C) are 0; the
    transform back to a plain layout drops them.
    `convert-layout` puts these only at the boundaries of a layout region;
    weight transforms are evaluated at compile time.

    Optional `pads` ([top, left, bottom, right], `NCHW -> NCHW<b>c` only)
    zero-pad the blocked result's H and W: `out[n, cb, h, w, c] =
    in[n, cb*b + c, h - top, w - left]` inside, 0 outside. `convert-layout`
    moves a boundary conv's padding here, so the conv reads a padded input
    without tests or a padded copy of its own.

    ```mlir
    %b = graph.layout_transform %x {src = "NCHW", dst = "NCHW16c"} : tensor<1x32x8x8xf32> -> tensor<1x2x8x8x16xf32>
    %p = graph.layout_transform %x {src = "NCHW", dst = "NCHW16c", pads = array<i64: 1, 1, 1, 1>} : tensor<1x32x8x8xf32> -> tensor<1x2x10x10x16xf32>
    ```
    """

    name = "graph.layout_transform"
    input = operand_def(TensorType)
    src = prop_def(StringAttr)
    dst = prop_def(StringAttr)
    pads = opt_prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.INJECTIVE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input, src: str, dst: str, result_type, pads: Sequence[int] | None = None):
        props = {"src": StringAttr(src), "dst": StringAttr(dst)}
        if pads is not None and any(pads):
            props["pads"] = int_array(pads)
        super().__init__(operands=[input], properties=props, result_types=[result_type])

    def padding(self) -> tuple[int, ...]:
        """[top, left, bottom, right] (zeros without `pads`)."""
        return ints_of(self.pads) or (0, 0, 0, 0)

    def verify_(self) -> None:
        try:
            (ks, _), (kd, _) = parse_layout(self.src.data), parse_layout(self.dst.data)
        except ValueError as err:
            require(False, self, str(err))
        require(ks == kd, self, f"cannot transform {self.src.data} to {self.dst.data} (different families)")
        x, r = shape_of(self.input), shape_of(self.result)
        require(len(x) == layout_rank(self.src.data), self, f"input shape {x} does not fit {self.src.data}")
        want = blocked_shape(plain_shape(x, self.src.data), self.dst.data)
        if self.pads is not None:
            p = self.padding()
            require(len(p) == 4 and min(p) >= 0, self, f"pads must be 4 values >= 0 [top, left, bottom, right], got {list(p)}")
            require(ks == "NCHW" and parse_layout(self.src.data)[1] == () and parse_layout(self.dst.data)[1] != (),
                     self, f"pads apply to NCHW -> NCHW<b>c only, not {self.src.data} -> {self.dst.data}")
            want = padded_blocked_shape(x, self.dst.data, p)
        elif parse_layout(self.src.data)[1] and not parse_layout(self.dst.data)[1]:  # blocked -> plain: drops padding
            require(len(r) == 4 and blocked_shape(r, self.src.data) == x, self,
                    f"result shape {r} does not fill the blocks of {x} ({self.src.data} -> {self.dst.data})")
            return
        require(want == r, self, f"result shape {r} should be {want} for {self.src.data} -> {self.dst.data}")


class BlockedConvBase(IRDLOperation):
    """Operands, properties and syntax of the blocked convolutions: `%x, %w {strides, pads, dilations}`."""

    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.OUT_ELEMWISE_FUSABLE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input `,` $weight attr-dict `:` type($input) `,` type($weight) `->` type($result)"

    def __init__(self, input, weight, result_type, strides, pads, dilations):
        super().__init__(operands=[input, weight], result_types=[result_type],
                         properties={"strides": int_array(strides), "pads": int_array(pads),
                                     "dilations": int_array(dilations)})


@irdl_op_definition
class Conv2dNchwcOp(BlockedConvBase):
    """2-D convolution in the blocked layout: input `NCHW<bi>c`, weight `OIHW<bi>i<bo>o`, result `NCHW<bo>c`.

    `out[n, ob, y, x, o] = sum(in[n, ib, y*sh + ky*dh - pt, x*sw + kx*dw - pl, i] * w[ob, ib, ky, kx, i, o])`
    over `ib, ky, kx, i` (zero padding). `pads` is [top, left, bottom, right].
    No groups: `convert-layout` keeps grouped convolutions in NCHW.

    ```mlir
    %y = graph.conv2d_nchwc %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32>, tensor<2x2x3x3x16x16xf32> -> tensor<1x2x8x8x16xf32>
    ```
    """

    name = "graph.conv2d_nchwc"

    def verify_(self) -> None:
        x, w, r = shape_of(self.input), shape_of(self.weight), shape_of(self.result)
        require(len(x) == 5 and len(w) == 6, self, "expects an NCHW<b>c input and an OIHW<i>i<o>o weight")
        s, p, d = ints_of(self.strides), ints_of(self.pads), ints_of(self.dilations)
        require(len(s) == 2 and len(d) == 2 and len(p) == 4, self, "needs 2 strides, 2 dilations, 4 pads")
        require(w[1] == x[1] and w[4] == x[4], self, f"weight {w} does not match the input channel blocks of {x}")
        oh = (x[2] + p[0] + p[2] - d[0] * (w[2] - 1) - 1) // s[0] + 1
        ow = (x[3] + p[1] + p[3] - d[1] * (w[3] - 1) - 1) // s[1] + 1
        want = (x[0], w[0], oh, ow, w[5])
        require(r == want, self, f"result shape {r} should be {want}")


class BlockLocalConvOp(BlockedConvBase):
    """Base of the blocked convolutions in which each output channel block reads only its own input
    block (input and result `NCHW<b>c` with the same blocks); subclasses name the weight layout."""

    WEIGHT: ClassVar[str] = ""  # the weight layout, for messages

    def kernel_of(self, w: tuple[int, ...], x: tuple[int, ...]) -> tuple[int, int] | None:
        """(KH, KW) of weight shape `w` when it fits input `x`'s blocks, else None."""
        raise NotImplementedError

    def verify_(self) -> None:
        x, w, r = shape_of(self.input), shape_of(self.weight), shape_of(self.result)
        k = self.kernel_of(w, x) if len(x) == 5 else None
        require(k is not None, self, f"expects an NCHW<b>c input and a {self.WEIGHT} weight matching its "
                                     f"channel blocks, got {x} and {w}")
        s, p, d = ints_of(self.strides), ints_of(self.pads), ints_of(self.dilations)
        require(len(s) == 2 and len(d) == 2 and len(p) == 4, self, "needs 2 strides, 2 dilations, 4 pads")
        oh = (x[2] + p[0] + p[2] - d[0] * (k[0] - 1) - 1) // s[0] + 1  # type: ignore[index]
        ow = (x[3] + p[1] + p[3] - d[1] * (k[1] - 1) - 1) // s[1] + 1  # type: ignore[index]
        want = (x[0], x[1], oh, ow, x[4])
        require(r == want, self, f"result shape {r} should be {want}")


@irdl_op_definition
class DepthwiseConv2dNchwcOp(BlockLocalConvOp):
    """Depthwise 2-D convolution in the blocked layout: input and result `NCHW<b>c`, weight `[C/b, KH, KW, b]`.

    `out[n, cb, y, x, c] = sum(in[n, cb, y*sh + ky*dh - pt, x*sw + kx*dw - pl, c] * w[cb, ky, kx, c])`
    over `ky, kx` (zero padding): each channel its own filter (ONNX Conv with group = C_in = C_out),
    the lanes of a vector 16 channels side by side.

    ```mlir
    %y = graph.depthwise_conv2d_nchwc %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32>, tensor<2x3x3x16xf32> -> tensor<1x2x8x8x16xf32>
    ```
    """

    name = "graph.depthwise_conv2d_nchwc"
    WEIGHT: ClassVar[str] = "[C/b, KH, KW, b]"

    def kernel_of(self, w: tuple[int, ...], x: tuple[int, ...]) -> tuple[int, int] | None:
        return (w[1], w[2]) if len(w) == 4 and w[0] == x[1] and w[3] == x[4] else None


@irdl_op_definition
class GroupedConv2dNchwcOp(BlockLocalConvOp):
    """Grouped 2-D convolution in the blocked layout whose groups sit inside channel blocks (group
    width dividing b, C_in = C_out): input and result `NCHW<b>c`, weight `[C/b, KH, KW, b, b]`, the
    block-diagonal `b x b` (input lane, output lane) matrix of each channel block.

    `out[n, cb, y, x, o] = sum(in[n, cb, y*sh + ky*dh - pt, x*sw + kx*dw - pl, i] * w[cb, ky, kx, i, o])`
    over `ky, kx, i` (zero padding): each output block reads its own input block only (RegNet's
    group width 8 in 16 lanes: two groups per block, half of each weight matrix zero).

    ```mlir
    %y = graph.grouped_conv2d_nchwc %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32>, tensor<2x3x3x16x16xf32> -> tensor<1x2x8x8x16xf32>
    ```
    """

    name = "graph.grouped_conv2d_nchwc"
    WEIGHT: ClassVar[str] = "[C/b, KH, KW, b, b]"

    def kernel_of(self, w: tuple[int, ...], x: tuple[int, ...]) -> tuple[int, int] | None:
        return (w[1], w[2]) if len(w) == 5 and w[0] == x[1] and w[3] == w[4] == x[4] else None


@irdl_op_definition
class MaxPool2dNchwcOp(IRDLOperation):
    """Max pooling over the spatial dims of an `NCHW<b>c` tensor (padding never wins).

    ```mlir
    %y = graph.max_pool2d_nchwc %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x2x8x8x16xf32> -> tensor<1x2x4x4x16xf32>
    ```
    """

    name = "graph.max_pool2d_nchwc"
    input = operand_def(TensorType)
    kernel = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.OUT_ELEMWISE_FUSABLE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input, result_type, kernel, strides, pads, dilations):
        super().__init__(operands=[input], result_types=[result_type],
                         properties={"kernel": int_array(kernel), "strides": int_array(strides),
                                     "pads": int_array(pads), "dilations": int_array(dilations)})

    def verify_(self) -> None:
        x, r = shape_of(self.input), shape_of(self.result)
        require(len(x) == 5, self, "expects an NCHW<b>c input")
        k, s, p, d = ints_of(self.kernel), ints_of(self.strides), ints_of(self.pads), ints_of(self.dilations)
        require(len(k) == 2 and len(s) == 2 and len(d) == 2 and len(p) == 4, self, "needs 2-D kernel/strides/dilations and 4 pads")
        oh = pool_output_size(x[2], k[0], s[0], p[0], p[2], d[0], False)
        ow = pool_output_size(x[3], k[1], s[1], p[1], p[3], d[1], False)
        require(r == (x[0], x[1], oh, ow, x[4]), self, f"result shape {r} should be {(x[0], x[1], oh, ow, x[4])}")


@irdl_op_definition
class MatmulPanelsOp(IRDLOperation):
    """A matmul whose 2-d weight is stored as column panels: `rhs` is `[N/w, K, w]`, `B[k, j] = rhs[j // w, k, j % w]`.

    `y[..., m, j] = sum(x[..., m, k] * rhs[j // w, k, j % w])` over `k`. This is the layout the
    loop-level schedule packs a matmul's `B` into on every call (`plan.k_block_and_pack`);
    cost-guided `fuse-ops` stores a constant weight this way once, at compile time, where the
    oracle prices the kernel lower (`w`: the target's vector lanes).

    ```mlir
    %y = graph.matmul_panels %x, %wp : tensor<128x256xf32>, tensor<128x256x8xf32> -> tensor<128x1024xf32>
    ```
    """

    name = "graph.matmul_panels"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.OUT_ELEMWISE_FUSABLE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs, rhs, result_type):
        super().__init__(operands=[lhs, rhs], result_types=[result_type])

    def verify_(self) -> None:
        a, b, r = shape_of(self.lhs), shape_of(self.rhs), shape_of(self.result)
        require(len(a) >= 2 and len(b) == 3, self, "expects a lhs of rank >= 2 and a [N/w, K, w] rhs")
        require(a[-1] == b[1], self, f"contracting dims differ: {a[-1]} vs {b[1]}")
        want = (*a[:-1], b[0] * b[2])
        require(r == want, self, f"result shape {r} should be {want}")


def pack_panels(weight, lanes: int):
    """`B[K, N]` (numpy) as `[N/lanes, K, lanes]` column panels (`MatmulPanelsOp`'s rhs)."""
    k, n = weight.shape
    return weight.reshape(k, n // lanes, lanes).transpose(1, 0, 2).copy()


LAYOUT_OPS: list[type[IRDLOperation]] = [LayoutTransformOp, Conv2dNchwcOp, DepthwiseConv2dNchwcOp,
                                          GroupedConv2dNchwcOp, MaxPool2dNchwcOp, MatmulPanelsOp]
