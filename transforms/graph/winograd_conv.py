"""winograd-conv: 3x3 convolutions with stride 1 as Winograd F(2x2, 3x3) (input transform, batched GEMM, output transform)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import Float32Type, TensorType
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import graph
from ziggurat.dialects.graph_winograd import WinogradInputOp, WinogradOutputOp, transform_weight
from ziggurat.errors import CompileError
from ziggurat.lowering.locations import carry
from ziggurat.weights import WeightStore
from ziggurat.transforms.graph.weight_binding import weights_of


def eligible(conv: graph.Conv2dOp, store: WeightStore | None, min_channels: int, min_pixels: int) -> bool:
    """A float32 3x3 conv, stride 1, no dilation, no groups, a constant weight the store holds, an
    even output of at least `min_pixels` pixels and at least `min_channels` channels in and out."""
    x, w, r = (op.type.get_shape() for op in (conv.input, conv.weight, conv.result))  # type: ignore[attr-defined]
    if store is None or not isinstance(conv.weight.owner, graph.ConstantOp) or conv.weight.owner.ref.data not in store:
        return False
    if not isinstance(conv.result.type.element_type, Float32Type):  # type: ignore[attr-defined]
        return False
    if tuple(w[2:]) != (3, 3) or conv.groups.value.data != 1:
        return False
    if graph.ints_of(conv.strides) != (1, 1) or graph.ints_of(conv.dilations) != (1, 1):
        return False
    return (r[2] % 2 == 0 and r[3] % 2 == 0 and r[2] * r[3] >= min_pixels
            and x[1] >= min_channels and w[0] >= min_channels)


def rewrite(conv: graph.Conv2dOp, store: WeightStore) -> None:
    """Replaces `conv` by winograd_input, a batched matmul with the transformed weight, and
    winograd_output."""
    n, c = conv.input.type.get_shape()[:2]  # type: ignore[attr-defined]
    o = conv.weight.type.get_shape()[0]  # type: ignore[attr-defined]
    h, w = conv.result.type.get_shape()[2:]  # type: ignore[attr-defined]
    tiles = n * (h // 2) * (w // 2)
    f32 = Float32Type()
    b = Builder(InsertPoint.before(conv))
    v = b.insert(WinogradInputOp(conv.input, graph.ints_of(conv.pads), TensorType(f32, [16, c, tiles]))).result
    ref = conv.weight.owner.ref.data  # type: ignore[union-attr]
    name = store.add(f"{ref}.winograd", transform_weight(store[ref]))
    u = b.insert(graph.ConstantOp(name, TensorType(f32, [16, o, c]))).results[0]
    m = b.insert(graph.MatmulOp(u, v, TensorType(f32, [16, o, tiles]))).results[0]
    y = b.insert(WinogradOutputOp(m, conv.result.type)).result
    y.name_hint = conv.result.name_hint
    made = v.owner
    while made is not conv and made is not None:  # the new ops compute the conv's source node
        carry(made, conv)  # type: ignore[arg-type]
        made = made.next_op  # type: ignore[union-attr]
    conv.result.replace_all_uses_with(y)
    weight = conv.weight.owner
    conv.detach()
    conv.erase()
    if isinstance(weight, graph.ConstantOp) and not weight.results[0].uses:  # only the transformed copy is read
        weight.detach()
        weight.erase()


@dataclass(frozen=True)
class WinogradConvPass(ModulePass):
    """Rewrites 3x3 stride-1 convolutions into Winograd F(2x2, 3x3): 2.25x fewer multiplies.

    **Input:** graph-level IR whose constant weights are bound (a weight store).

    **Output:** each eligible `graph.conv2d` (float32, 3x3, stride 1, no
    dilation or groups, constant weight, even output of at least
    `min-pixels` pixels, at least `min-channels` channels in and out) becomes
    `graph.winograd_input` (the 4x4 input tiles, stride 2, times `B^T . B`),
    a batched `graph.matmul` with the weight transformed at compile time
    (`G g G^T`, a new weight `<name>.winograd` of shape `[16, O, C]`), and
    `graph.winograd_output` (`A^T . A`, back to NCHW); the original weight's
    `graph.constant` goes when nothing else reads it. Other convolutions
    are left for `convert-layout`. Per output pixel and input channel the
    multiplies drop from 9 to 4; the transforms add 3-4% of the direct
    conv's work. The float32 results differ from the direct conv by rounding
    (about 1e-6 relative on conv3x3 1x64x56x56).

    **Options:** `min-channels` (default 256), `min-pixels` (default 784: a 28 x 28 output).
    At 64 and 128 channels the direct NCHW[x]c conv measured as fast or faster on an AVX-512
    host at 16 and 8 lanes (2026-11-28: conv3x3 1x64x56x56 a tie; resnet10t at 1x224 and
    8x224, 1 and 2 threads, 11-22% faster without Winograd, whose convs also need layout
    transforms between NCHW and the blocked layout around them); 256 channels and up were not
    measured either way.

    Example (`%w` a bound 16x16x3x3 weight):
    ```mlir
    %y = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x16x8x8xf32>, tensor<16x16x3x3xf32> -> tensor<1x16x8x8xf32>
    ```
    becomes
    ```mlir
    %v = graph.winograd_input %x {pads = array<i64: 1, 1, 1, 1>} : tensor<1x16x8x8xf32> -> tensor<16x16x16xf32>
    %u = graph.constant "w.winograd" : tensor<16x16x16xf32>
    %m = graph.matmul %u, %v : tensor<16x16x16xf32>, tensor<16x16x16xf32> -> tensor<16x16x16xf32>
    %y = graph.winograd_output %m : tensor<16x16x16xf32> -> tensor<1x16x8x8xf32>
    ```
    """

    name = "winograd-conv"
    min_channels: int = 256
    min_pixels: int = 784

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.min_channels < 1 or self.min_pixels < 4:
            raise CompileError(f"winograd-conv: min-channels must be >= 1 and min-pixels >= 4, "
                               f"got {self.min_channels} and {self.min_pixels}")
        store = weights_of(op)
        for f in op.ops:
            if not isinstance(f, func.FuncOp):
                continue
            for conv in [o for o in f.walk() if isinstance(o, graph.Conv2dOp)]:
                if eligible(conv, store, self.min_channels, self.min_pixels):
                    rewrite(conv, store)  # type: ignore[arg-type]
