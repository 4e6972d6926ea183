"""convert-graph-to-te: give every graph op its tensor-expression kernel."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from ziggurat.dialects import graph
from ziggurat.dtypes import signless_tensor
from ziggurat.errors import CompileError, ZigguratError
from ziggurat.lowering.locations import at, name_source, op_names, set_kernel_nodes
from ziggurat.lowering.te_inline import inline_computes
from ziggurat.lowering.topi import COMPUTE_DEFS

# Ops that stay in the model function as they are.
_KEPT = (graph.ConstantOp, graph.CallKernelOp)


def _unique_name(base: str, taken: set[str]) -> str:
    n = 0
    while f"{base}_{n}" in taken:
        n += 1
    name = f"{base}_{n}"
    taken.add(name)
    return name


def _compute(op: Operation, b: Builder, lookup) -> SSAValue:
    """`op`'s compute definition; an error it raises names `op` and its source node."""
    try:
        return COMPUTE_DEFS[type(op)](op, b, lookup)
    except ZigguratError as err:
        raise name_source(err, op) from None


def build_kernel(op: Operation, name: str) -> tuple[func.FuncOp, list[SSAValue]]:
    """A te function computing `op`'s result from its distinct operands."""
    operands: list[SSAValue] = []
    for v in op.operands:
        if v not in operands:
            operands.append(v)
    block = Block(arg_types=[signless_tensor(v.type) for v in operands])
    for i, arg in enumerate(block.args):
        arg.name_hint = f"in{i}"
    mapping = dict(zip(operands, block.args))
    b = Builder(InsertPoint.at_end(block))
    result = _compute(op, b, mapping.__getitem__)
    b.insert(func.ReturnOp(result))
    kernel = func.FuncOp(name, (list(block.arg_types), [signless_tensor(op.results[0].type)]), Region(block))
    return kernel, operands


def build_fused_kernel(fused: graph.FusedOp, name: str) -> func.FuncOp:
    """One te function holding the definitions of every op of a `graph.fused` body.

    The definitions chain through the lookup: an op's operand that an earlier
    op of the group defines maps to that op's te value. Chains of te.compute
    are then inlined into their consumers (`lowering/te_inline.py`).
    """
    body = fused.body.block
    if len(fused.outputs) != 1:
        raise CompileError(
            f"convert-graph-to-te: graph.fused{at(fused)} has {len(fused.outputs)} results; "
            "only single-result groups lower to a kernel call"
        )
    block = Block(arg_types=[signless_tensor(v.type) for v in fused.inputs])
    for i, arg in enumerate(block.args):
        arg.name_hint = f"in{i}"
    mapping: dict[SSAValue, SSAValue] = dict(zip(body.args, block.args))
    b = Builder(InsertPoint.at_end(block))
    for gop in body.ops:
        if isinstance(gop, graph.YieldOp):
            results = [mapping[v] for v in gop.values]
            b.insert(func.ReturnOp(*results))
            break
        if type(gop) not in COMPUTE_DEFS:
            raise CompileError(
                f"convert-graph-to-te: no compute definition for '{gop.name}' inside graph.fused "
                f"{at(gop)}; add one to lowering/topi.py or do not fuse the op"
            )
        mapping[gop.results[0]] = _compute(gop, b, mapping.__getitem__)
    kernel = func.FuncOp(name, (list(block.arg_types), [signless_tensor(r.type) for r in fused.outputs]), Region(block))
    inline_computes(kernel)
    return kernel


def _fused_name(fused: graph.FusedOp) -> str:
    names = [op.name.split(".")[1] for op in fused.body.block.ops if not isinstance(op, graph.YieldOp)]
    return "fused_" + "_".join(names[:4])


def _copy_returned_arguments(fn: func.FuncOp) -> None:
    """Copies each output of a model function (one with `graph.output_names`)
    that is a graph input (`graph.broadcast_to` to its own type), as the importer
    does: every output gets its own buffer. A graph pass can leave one behind
    (simplify-graph turns `x / 1` into `x`), and a model function that returned
    its argument reached the LLVM backend with tensor types."""
    ret = fn.body.block.last_op
    if not isinstance(ret, func.ReturnOp) or "graph.output_names" not in fn.attributes:
        return
    operands = list(ret.operands)
    for i, v in enumerate(operands):
        if isinstance(v, BlockArgument) and isinstance(v.type, builtin.TensorType):
            copy = graph.BroadcastToOp(v, v.type)
            fn.body.block.insert_op_before(copy, ret)
            operands[i] = copy.results[0]
    ret.operands = operands


@dataclass(frozen=True)
class ConvertGraphToTePass(ModulePass):
    """Outlines each compute op of the graph into a te kernel function.

    **Input:** functions with `graph` ops on tensors (the importer's output).

    **Output:** every op with a compute definition (`lowering/topi.py`) is
    replaced by `graph.call_kernel @<op>_<n>(...)`, and a new `func.func
    @<op>_<n>` over tensors holds its `te.compute`/`te.reduce` definition.
    `graph.constant` and existing calls stay. An op with no compute definition
    is an error that names it. Kernel signatures are signless (`ui8` tensors
    become `i8`): the compute definitions chose the unsigned instructions.

    A `graph.fused` group becomes ONE kernel `@fused_<ops>_<n>` with the
    definitions of all its ops, chained; a te.compute read exactly once (by a
    te.read without padding in another compute or reduce body) is inlined
    into its reader (so a conv2d+add+relu group is one reduction and one
    elementwise epilogue).

    **Invariants:** one kernel per op or per fused group; the model function
    keeps its signature.

    Example:
    ```mlir
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %y = graph.relu %x : tensor<4xf32>
      func.return %y : tensor<4xf32>
    }
    ```
    becomes
    ```mlir
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %y = graph.call_kernel @relu_0(%x) : (tensor<4xf32>) -> tensor<4xf32>
      func.return %y : tensor<4xf32>
    }
    func.func @relu_0(%in0: tensor<4xf32>) -> tensor<4xf32> {
      %0 = te.compute "relu" (%i) : tensor<4xf32> {
        %v = te.read %in0[%i] : tensor<4xf32>
        ...
      }
      func.return %0 : tensor<4xf32>
    }
    ```
    """

    name = "convert-graph-to-te"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        taken = {f.sym_name.data for f in op.ops if isinstance(f, func.FuncOp)}
        rewriter = Rewriter()
        for model in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            _copy_returned_arguments(model)
            for gop in list(model.body.block.ops):  # ops inside graph.fused go with their group
                if gop.dialect_name() != "graph" and any(isinstance(r.type, builtin.TensorType) for r in gop.results):
                    raise CompileError(
                        f"convert-graph-to-te: '{gop.name}'{at(gop)} is not a graph op; "
                        "lower its dialect to graph ops first (a plugin dialect's lowering pass goes "
                        "before convert-graph-to-te, see docs/tutorial.md)"
                    )
                if gop.dialect_name() != "graph" or isinstance(gop, _KEPT):
                    continue
                if isinstance(gop, graph.FusedOp):
                    fused = build_fused_kernel(gop, _unique_name(_fused_name(gop), taken))
                    set_kernel_nodes(fused, op_names(gop))
                    op.body.block.add_op(fused)
                    call = graph.CallKernelOp(fused.sym_name.data, list(gop.inputs), gop.outputs[0].type)
                    rewriter.replace_op(gop, call)
                    continue
                if type(gop) not in COMPUTE_DEFS:
                    raise CompileError(
                        f"convert-graph-to-te: no compute definition for '{gop.name}' "
                        f"{at(gop)}; "
                        "add one to lowering/topi.py or decompose the op first"
                    )
                kernel, operands = build_kernel(gop, _unique_name(gop.name.split(".")[1], taken))
                set_kernel_nodes(kernel, op_names(gop))
                op.body.block.add_op(kernel)
                call = graph.CallKernelOp(kernel.sym_name.data, operands, gop.results[0].type)
                rewriter.replace_op(gop, call)
