"""The kernels the cost queries price: the te kernel a group of graph ops becomes
(`kernel_of_ops`, `price_op`), lowered and default-scheduled alone
(`lower_kernel`, with the pipeline builder's stages), and the cost attribute
written back onto the graph (`cost_attr`). The graph passes (annotate-costs,
fuse-ops, convert-layout) and the fusion and layout cost queries share them.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import builtin, func
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.database import WorkloadKey
from ziggurat.dialects import graph
from ziggurat.dtypes import signless_tensor
from ziggurat.errors import CompileError
from ziggurat.lowering.convert_graph_to_te import build_fused_kernel, build_kernel
from ziggurat.lowering.te_inline import inline_computes
from ziggurat.lowering.topi import COMPUTE_DEFS
from ziggurat.transforms.costs.cost_oracle import CostEstimate, CostOracle

COST_ATTR = "graph.cost"
_KERNEL = "kernel"


def kernel_of_ops(ops: list[Operation], name: str = _KERNEL) -> func.FuncOp:
    """The te kernel one `graph.fused` of `ops` (in block order, not outlined) would become:
    inputs are the group's external operands, the result is the last op's."""
    inside = set(ops)
    inputs: list[SSAValue] = []
    for op in ops:
        for v in op.operands:
            if v.owner not in inside and v not in inputs:
                inputs.append(v)
    block = Block(arg_types=[signless_tensor(v.type) for v in inputs])  # as convert-graph-to-te's kernels
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, block.args))
    b = Builder(InsertPoint.at_end(block))
    for op in ops:
        if type(op) not in COMPUTE_DEFS:
            raise CompileError(f"annotate-costs: no compute definition for '{op.name}' (at {op.location})")
        mapping[op.results[0]] = COMPUTE_DEFS[type(op)](op, b, mapping.__getitem__)
    last = ops[-1].results[0]
    b.insert(func.ReturnOp(mapping[last]))
    kernel = func.FuncOp(name, (list(block.arg_types), [signless_tensor(last.type)]), Region(block))
    inline_computes(kernel)
    return kernel


def lower_kernel(kernel: func.FuncOp, vector_width: int = 16,
                 keyed: bool = True) -> tuple[builtin.ModuleOp, WorkloadKey | None]:
    """A te kernel lowered and scheduled (te -> loop -> simplified index math -> default schedule -> innermost
    vectorization) in a module of its own, with its workload key (the unscheduled loop text; None with
    `keyed=False`, for a caller without a database to look it up in: printing is a tenth of the work)."""
    from ziggurat.dialects import make_context
    from ziggurat.lowering import pipelines
    from ziggurat.lowering.convert_te_to_loop import ConvertTeToLoopPass
    from ziggurat.target import Target
    from ziggurat.transforms.loop.loop_simplify_index import LoopSimplifyIndexPass
    from ziggurat.transforms.schedule.loop_default_schedule import LoopDefaultSchedulePass
    from ziggurat.transforms.schedule.loop_parallelize_outer import LoopParallelizeOuterPass
    from ziggurat.transforms.schedule.loop_vectorize_innermost import LoopVectorizeInnermostPass

    known = (ConvertTeToLoopPass, LoopSimplifyIndexPass, LoopDefaultSchedulePass, LoopParallelizeOuterPass,
             LoopVectorizeInnermostPass)
    # the lowering's te -> loop part, then the default schedule priced on one thread (no parallel loop);
    # int8 GEMMs as the default target runs them (int8-dot=auto)
    to_loop = pipelines.join(*pipelines.TO_LOOP[1:])
    schedule = pipelines.schedule_stage(3, Target.for_width(vector_width), skip=("loop-parallelize-outer",),
                                        options={"loop-default-schedule": {"int8-dot": "auto"}})
    ctx = make_context()
    module = builtin.ModuleOp([kernel])
    for p in pipelines.instantiate(to_loop, known):
        p.apply(ctx, module)
    key = WorkloadKey.from_text(str(module), kernel.sym_name.data) if keyed else None
    for p in pipelines.instantiate(schedule, known):
        p.apply(ctx, module)
    return module, key


def price_kernel(kernel: func.FuncOp, oracle: CostOracle, vector_width: int = 16) -> CostEstimate:
    """Lowers a te kernel in a module of its own and asks the oracle what it costs."""
    module, key = lower_kernel(kernel, vector_width)
    return oracle.cost(module, kernel.sym_name.data, key)


def is_kernel_op(op: Operation) -> bool:
    """An op that becomes one kernel: a `graph.fused` or a single compute op."""
    return isinstance(op, graph.FusedOp) or (type(op) in COMPUTE_DEFS and len(op.results) == 1)


def price_op(op: Operation, oracle: CostOracle, vector_width: int = 16) -> CostEstimate:
    """The cost of the kernel that a `graph.fused` or a single compute op lowers to."""
    if isinstance(op, graph.FusedOp):
        kernel = build_fused_kernel(op, _KERNEL)
    else:
        kernel, _ = build_kernel(op, _KERNEL)
    return price_kernel(kernel, oracle, vector_width)


def cost_attr(est: CostEstimate) -> graph.CostAttr:
    return graph.CostAttr(est.time * 1e6, round(est.flops), round(est.bytes), est.source)
