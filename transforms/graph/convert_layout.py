"""convert-layout: convolution chains in the blocked layout NCHW[x]c, transforms only at region boundaries."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from ziggurat.dialects import graph
from ziggurat.transforms.graph.weight_binding import weights_of
from ziggurat.transforms.graph.layout_rewrite import DECISION_ATTR, Rewriter, find_members, regions_of

def _decision(region: list[Operation], choice: str, before_us: float, after_us: float) -> StringAttr:
    convs = sum(isinstance(o, graph.Conv2dOp) for o in region)
    return StringAttr(f"{choice}: {convs} conv{'s' if convs != 1 else ''}, {len(region)} ops, "
                      f"cost NCHW {before_us:.2f}us, blocked {after_us:.2f}us")


@dataclass(frozen=True)
class ConvertLayoutPass(ModulePass):
    """Moves convolution chains to the blocked layout NCHW[x]c (x = the vector width).

    **Input:** graph-level IR (NCHW activations, OIHW weights), usually after
    simplify-graph (BatchNorm folded into conv + bias add) and fold-constants.

    **Output:** every `graph.conv2d` without groups, with a constant weight and
    C_out a multiple of `block` or above it (the last block then padded: zero
    weights beyond C_out, and beyond C_in for the next conv; constants padded
    with 0, or 1 for Mul/Div, so padding lanes stay finite; Log, Sqrt and a
    division by a computed value stay out of a padded region), becomes `graph.conv2d_nchwc` (input
    `NCHW<bi>c`, bi = `block` or, for a first layer such as C_in = 3, the
    largest divisor of C_in up to `block`; weight `OIHW<bi>i<block>o`; result
    `NCHW<block>c`). A depthwise conv (groups = C_in = C_out, weight in the
    weight store) becomes `graph.depthwise_conv2d_nchwc` (weight
    `[C/block, KH, KW, block]`: the lanes are 16 channels, each its own filter),
    and a grouped conv whose group width divides `block` (C_in = C_out, RegNet's
    width 8) `graph.grouped_conv2d_nchwc` (weight `[C/block, KH, KW, block, block]`,
    block-diagonal: each output block reads its own input block). Its consumers stay in the blocked layout while they can:
    elementwise unary ops, add/sub/mul/div/max/min whose other operand is
    blocked too (a residual add), a full NCHW tensor (transformed in) or a
    per-channel/scalar broadcast (a bias, a folded BatchNorm scale), and
    `max_pool2d` (as `graph.max_pool2d_nchwc`), and `graph.global_avg_pool` or
    a `graph.reduce` over H and W with kept dims (a squeeze-excite pool: a
    reduce of the blocked tensor, `[1, C/block, 1, 1, block]`).
    `graph.layout_transform` appears only at the boundaries of such a region:
    where a value enters it, and where a value leaves it for an op that needs
    NCHW (flatten, a model output). Weights and constant broadcast operands
    are transformed at compile time into new weight-store entries
    (`<name>.OIHW16i16o`, `<name>.NCHW16c`), and the original `graph.constant`
    goes when only such copies read it; without a weight store (a bare
    text file) the pass emits `graph.layout_transform` on the constant.
    A padded conv whose NCHW input enters the region and feeds nothing else
    gets its padding from the transform instead (`graph.layout_transform`
    with `pads`, zeros outside the input) and keeps pads 0: the conv kernel
    then reads its input without bounds tests or a padded copy of its own.

    **Options:** `block` (int: the target's f32 lanes per register, 8 with
    AVX2, 16 with AVX-512; the default pipelines pass their target's; 0, the
    default, takes the default target's, `Target.parse("llvm")`);
    `cost-guided` (default false): price each region both ways with the cost
    oracle (`transforms/costs/cost_oracle.py`: tuning database, learned model,
    roofline; `peak-gflops`, `bandwidth-gbs` and `database` as in
    annotate-costs; with `measure=true` the conv kernels of both layouts are
    timed once per machine and the times cached as tuning records, so the
    oracle answers from measurements) and keep the blocked layout only where
    it is cheaper, including its boundary transforms. Each decision is
    recorded as `graph.layout_decision` on the region's first blocked op, or
    on the conv that stays NCHW.

    Example (`block=16`, a bias from a folded BatchNorm, then ReLU):
    ```mlir
    %w = graph.constant "w" : tensor<32x32x3x3xf32>
    %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x32x8x8xf32>, tensor<32x32x3x3xf32> -> tensor<1x32x8x8xf32>
    %y = graph.relu %c : tensor<1x32x8x8xf32>
    func.return %y : tensor<1x32x8x8xf32>
    ```
    becomes
    ```mlir
    %0 = graph.layout_transform %x {src = "NCHW", dst = "NCHW16c", pads = array<i64: 1, 1, 1, 1>} : tensor<1x32x8x8xf32> -> tensor<1x2x10x10x16xf32>
    %1 = graph.constant "w.OIHW16i16o" : tensor<2x2x3x3x16x16xf32>
    %c = graph.conv2d_nchwc %0, %1 {..., pads = array<i64: 0, 0, 0, 0>, ...} : tensor<1x2x10x10x16xf32>, tensor<2x2x3x3x16x16xf32> -> tensor<1x2x8x8x16xf32>
    %y = graph.relu %c : tensor<1x2x8x8x16xf32>
    %y_1 = graph.layout_transform %y {src = "NCHW16c", dst = "NCHW"} : tensor<1x2x8x8x16xf32> -> tensor<1x32x8x8xf32>
    func.return %y_1 : tensor<1x32x8x8xf32>
    ```
    """

    name = "convert-layout"
    block: int = 0
    cost_guided: bool = False
    peak_gflops: int = 0
    bandwidth_gbs: int = 0
    database: str = ""
    measure: bool = False

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        from ziggurat.errors import CompileError

        if self.block < 0:
            raise CompileError(f"convert-layout: block must be a positive number of lanes (0: the default target's), "
                               f"got {self.block}")
        if self.block == 0:
            from dataclasses import replace

            from ziggurat.target import Target

            return replace(self, block=Target.parse("llvm").vector_width).apply(ctx, op)
        store = weights_of(op)
        for f in list(op.ops):
            if not isinstance(f, func.FuncOp) or not f.body.blocks:
                continue
            members = find_members(list(f.body.block.ops), self.block, grouped=store is not None)
            if not members:
                continue
            regions = regions_of(members)
            decisions: dict[int, tuple[bool, float, float]] = {}
            if self.cost_guided:
                from ziggurat.transforms.costs.layout_costs import price_region

                for k, region in enumerate(regions):
                    decisions[k] = price_region(region, self.block, self, store)
            for k, region in enumerate(regions):
                keep, before, after = decisions.get(k, (True, 0.0, 0.0))
                if not keep:
                    region[0].attributes[DECISION_ATTR] = _decision(region, "kept NCHW", before, after)
                    continue
                rw = Rewriter(self.block, store)
                twins = [rw.rewrite(m) for m in region]
                rw.finish()
                if self.cost_guided:
                    twins[0].attributes[DECISION_ATTR] = _decision(region, f"NCHW{self.block}c", before, after)
