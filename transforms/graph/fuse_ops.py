"""fuse-ops: TVM's FuseOps on the graph dialect's op-pattern traits."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.ir import Block
from xdsl.passes import ModulePass

from ziggurat.transforms.graph.fusion import fuse_block

def _graph_blocks(module: builtin.ModuleOp) -> Iterable[Block]:
    for f in module.ops:
        if isinstance(f, func.FuncOp) and any(op.dialect_name() == "graph" for op in f.body.block.ops):
            yield f.body.block


@dataclass(frozen=True)
class FuseOpsPass(ModulePass):
    """Groups graph ops into `graph.fused` regions by TVM's op-pattern rules.

    **Input:** functions of graph ops (after import or the other graph passes).

    **Output:** every group of two or more ops becomes one `graph.fused`
    whose block arguments are the group's external inputs and whose
    `graph.yield` gives its result; `convert-graph-to-te` makes one kernel of
    it. The rules are TVM's FuseOps, decided on the post-dominator tree of the
    dataflow graph (an op fuses into its immediate post-dominator, together
    with every op on the paths between them, when the conditions hold):
    - ELEMWISE/BROADCAST ops fuse forward through injective paths, and may end
      in a reduction or an out-elementwise-fusable group;
    - OUT_ELEMWISE_FUSABLE ops (conv2d, matmul, pools) absorb consumers that are
      elementwise on their output (a broadcast op is elementwise on an operand
      of its result's shape: a bias add or batch norm), through broadcast ops;
    - INJECTIVE ops fuse in a second phase (so conv2d groups finish first)
      along injective paths, and into a reduction that consumes them;
    - a reduction does not take consumers, unless `allow-reduction-fusion`;
    - OPAQUE ops (softmax, `graph.constant`, calls, `graph.fused`) stay alone;
    - a value used outside the group (or returned) ends the group there.

    **Options:** `max-group-size` (int, default 256): most ops in one group;
    `allow-reduction-fusion` (bool, default false): let a reduction fuse with a
    later reduction through injective ops; `cost-guided` (bool, default
    false): re-decide the groups with the cost oracle (`transforms/costs/fusion_costs.py`:
    duplicate a shared injective group into the groups that read it, merge a
    reduction chain, split at a recomputed or shared producer), each changed
    kernel recording `graph.fusion_decision = "merged: 4 groups -> 1, cost
    19.40us -> 9.86us"` (or `duplicated:` / `split:`); `max-rounds` (4), and `peak-gflops`,
    `bandwidth-gbs`, `database` as for `annotate-costs`, too; `vector-width`
    (the target's f32 lanes, 8 with AVX2, 16 with AVX-512; the default
    pipelines pass their target's; 0, the default, takes the default target's,
    `Target.parse("llvm")`) schedules the priced kernels as the loop stage will
    (the register blocks, and so the costs, differ by width);
    `measure` (bool, default false): time every priced kernel that has no
    record once on this machine and record it (in `database`, else
    `~/.cache/ziggurat/fusion-<cpu>-w<lanes>.jsonl`), so the oracle answers from
    measurements. Both price a matmul's constant weight stored transposed
    (`transpose_b`) and stored in the column panels the schedule reads
    (`graph.matmul_panels`, `[N/w, K, w]` for `w` lanes, made at compile time)
    and keep the cheapest layout (a tie goes to the panels): the roofline tells
    them apart by L1 set conflicts (`transforms/costs/cost_oracle.py`, `_conflict_lines`:
    an unpacked reduction loop walking the weight down a column with a 4 KiB
    row stride) and by the copy phase of a schedule that packs B on every call
    (`copy_bytes`), measurements by time.

    Example:
    ```mlir
    %c = graph.conv2d %x, %w {...} : ... -> tensor<1x4x6x6xf32>
    %r = graph.relu %c : tensor<1x4x6x6xf32>
    ```
    becomes
    ```mlir
    %r = graph.fused (%x, %w) : (...) -> tensor<1x4x6x6xf32> {
    ^bb0(%x_1: ..., %w_1: ...):
      %c = graph.conv2d %x_1, %w_1 {...} : ... -> tensor<1x4x6x6xf32>
      %r_1 = graph.relu %c : tensor<1x4x6x6xf32>
      graph.yield %r_1 : tensor<1x4x6x6xf32>
    }
    ```
    """

    name = "fuse-ops"
    max_group_size: int = 256
    allow_reduction_fusion: bool = False
    cost_guided: bool = False
    peak_gflops: int = 0
    bandwidth_gbs: int = 0
    vector_width: int = 0
    max_rounds: int = 4
    database: str = ""
    measure: bool = False

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.cost_guided:
            self._apply_cost_guided(op)
            return
        for block in list(_graph_blocks(op)):
            fuse_block(block, self.max_group_size, self.allow_reduction_fusion)

    def _apply_cost_guided(self, op: builtin.ModuleOp) -> None:
        from ziggurat.transforms.costs.fusion_costs import fuse_block_cost_guided
        from ziggurat.transforms.costs.prices import make_price
        from ziggurat.transforms.graph.weight_binding import weights_of

        from ziggurat.errors import CompileError
        from ziggurat.target import Target

        if self.vector_width < 0:
            raise CompileError(f"fuse-ops: vector-width must be a positive number of f32 lanes (0: the default "
                               f"target's), got {self.vector_width}")
        width = self.vector_width or Target.parse("llvm").vector_width
        price = make_price(self.peak_gflops, self.bandwidth_gbs, self.database, width, self.measure)
        store = weights_of(op)
        for block in list(_graph_blocks(op)):
            fuse_block_cost_guided(block, self.max_group_size, self.allow_reduction_fusion, price, self.max_rounds,
                                   store, width, parallel=not self.measure)
