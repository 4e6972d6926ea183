"""annotate-costs: write the cost oracle's estimate onto each graph kernel."""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.passes import ModulePass

from ziggurat.transforms.costs.cost_oracle import oracle_from_options
from ziggurat.dialects import graph
from ziggurat.transforms.costs.kernels import COST_ATTR, cost_attr, is_kernel_op, price_op

DECISION_ATTR = "graph.fusion_decision"
_DECISION = re.compile(r"(merged|split|duplicated|transposed|packed): (\d+) groups? -> (\d+), cost ([0-9.]+)us -> ([0-9.]+)us")


def cost_guided_pipeline(graph_pipeline: str) -> str:
    """`graph_pipeline` with its rule-based `fuse-ops` made cost-guided."""
    return re.sub(r"fuse-ops(?!\{)", "fuse-ops{cost-guided=true}", graph_pipeline)


def fusion_decisions(module: builtin.ModuleOp) -> list[dict[str, object]]:
    """One row per kernel that `fuse-ops{cost-guided=true}` decided differently from the rules."""
    rows: list[dict[str, object]] = []
    for f in module.ops:
        if not isinstance(f, func.FuncOp):
            continue
        for op in f.body.block.ops:
            attr = op.attributes.get(DECISION_ATTR)
            m = _DECISION.match(attr.data) if isinstance(attr, builtin.StringAttr) else None
            if m is None:
                continue
            inner = op.body.block.ops if isinstance(op, graph.FusedOp) else [op]
            rows.append({
                "function": f.sym_name.data, "value": op.results[0].name_hint or "?",
                "ops": " ".join(o.name.split(".")[1] for o in inner if not isinstance(o, graph.YieldOp)),
                "decision": m[1], "rule_kernels": int(m[2]), "guided_kernels": int(m[3]),
                "rule_us": float(m[4]), "guided_us": float(m[5]),
            })
    return rows


def format_fusion_table(rows: list[dict[str, object]]) -> str:
    """The rows of `fusion_decisions` as a text table (rule-based vs cost-guided, both costs)."""
    if not rows:
        return "fusion: the cost-guided choice equals the rule-based one everywhere"
    def kernels(n: object) -> str:
        return f"{n} kernel{'s' if n != 1 else ''}"

    head = ("value", "decision", "rule-based", "cost-guided", "rule us", "guided us", "ops")
    body = [(f"@{r['function']} %{r['value']}", str(r["decision"]), kernels(r["rule_kernels"]),
             kernels(r["guided_kernels"]), f"{r['rule_us']:.2f}", f"{r['guided_us']:.2f}", str(r["ops"]))
            for r in rows]
    widths = [max(len(x[i]) for x in (head, *body)) for i in range(len(head) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line[:-1], widths)) + "  " + line[-1] for line in (head, *body)]
    return "\n".join(lines)


@dataclass(frozen=True)
class AnnotateCostsPass(ModulePass):
    """Prices each graph kernel with the cost oracle and records it as `#graph.cost`.

    **Input:** functions of graph ops, usually after `fuse-ops`.

    **Output:** the same IR; each `graph.fused` and each single compute op
    (everything `convert-graph-to-te` makes a kernel of) carries a
    `graph.cost = #graph.cost<time_us, flops, bytes, source>` attribute. The
    op is lowered on a copy (te, loop, default schedule, innermost
    vectorization) and priced by `transforms/costs/cost_oracle.py`: tuning database,
    else learned model, else roofline. Constants and calls get none.

    **Options:** `peak-gflops`, `bandwidth-gbs` (int, default 0: use the
    machine's peaks, measured once and cached); give both to fix the
    roofline (deterministic output); `vector-width` (int, default 16);
    `database` (path, default none): a tuning record file; a kernel whose
    workload key (`lower_kernel`) has a measured record gets that time.

    Example:
    ```mlir
    %y = graph.relu %x : tensor<4096xf32>
    ```
    becomes, with `annotate-costs{peak-gflops=100 bandwidth-gbs=20}`,
    ```mlir
    %y = graph.relu %x {graph.cost = #graph.cost<time_us = 1.6384, flops = 4096, bytes = 32768, source = "roofline">} : tensor<4096xf32>
    ```
    """

    name = "annotate-costs"
    peak_gflops: int = 0
    bandwidth_gbs: int = 0
    vector_width: int = 16
    database: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        oracle = oracle_from_options(self.peak_gflops, self.bandwidth_gbs, self.database)
        for f in list(op.ops):
            if not isinstance(f, func.FuncOp) or not any(o.dialect_name() == "graph" for o in f.body.block.ops):
                continue
            for gop in f.body.block.ops:
                if is_kernel_op(gop):
                    gop.attributes[COST_ATTR] = cost_attr(price_op(gop, oracle, self.vector_width))
