"""The plugin that docs/tutorial.md builds, as written there: a dialect, a pass and a lowering.

* the `act` dialect, with one op, `act.silu` (x * sigmoid(beta * x); SiLU, or
  swish, when beta is 1), an activation that ziggurat's graph dialect has no op for;
* the graph-level pass `raise-silu`, which finds `x * sigmoid(x)` and `x *
  sigmoid(x * c)` in graph IR (as the ONNX importer writes it), reads the value of
  the constant `c` from the module's weights and replaces the pattern with
  `act.silu` (beta = c);
* the lowering `convert-act-to-graph`, which expands `act.silu` back into graph
  ops (beta a new weight), so that ziggurat's own lowerings (graph -> te -> loop ->
  hw) take it from there.

Load it with `ziggurat-opt --load-plugin docs/examples/act_plugin.py ...`,
`ziggurat compile --load-plugin docs/examples/act_plugin.py ...`, or
`ziggurat.plugins.load_plugin("docs/examples/act_plugin.py")`. Below this docstring
the file is the tutorial's Python blocks (the plugin's), which
tests/unit/test_tutorial_snippets.py checks; tests/unit/test_plugins.py and
tests/filecheck/plugins/act-plugin.mlir run everything the tutorial shows.
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import FloatAttr, ModuleOp, TensorType, f32
from xdsl.ir import Dialect, SSAValue
from xdsl.irdl import IRDLOperation, VarConstraint, irdl_op_definition, operand_def, opt_attr_def, result_def, traits_def
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import Rewriter
from xdsl.traits import Pure
from xdsl.transforms.dead_code_elimination import dce

from ziggurat import plugins
from ziggurat.dialects import graph
from ziggurat.transforms.graph.weight_binding import weights_of


@irdl_op_definition
class SiluOp(IRDLOperation):
    """x * sigmoid(beta * x), elementwise, on f32 tensors (beta is 1 when absent)."""

    name = "act.silu"
    T: ClassVar = VarConstraint("T", TensorType.constr(f32))  # one type, of f32, for input and result
    input = operand_def(T)
    result = result_def(T)
    beta = opt_attr_def(FloatAttr)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($result)"

    def __init__(self, x: SSAValue, beta: FloatAttr | None = None):
        super().__init__(operands=[x], result_types=[x.type], attributes={"beta": beta})


Act = plugins.register_dialect(Dialect("act", [SiluOp]))


class RaiseSilu(RewritePattern):
    """x * sigmoid(x) -> act.silu(x); x * sigmoid(x * c), c a one-element constant -> act.silu(x) {beta = c}."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.MulOp, rewriter: PatternRewriter) -> None:
        for x, s in ((op.lhs, op.rhs), (op.rhs, op.lhs)):  # either operand order
            if isinstance(sig := s.owner, graph.SigmoidOp) and x.type == op.result.type:
                if sig.input == x:
                    return rewriter.replace(op, SiluOp(x))
                if isinstance(m := sig.input.owner, graph.MulOp) and m.lhs == x and isinstance(c := m.rhs.owner, graph.ConstantOp):
                    if (value := weights_of(op.get_toplevel_object())[c.ref.data]).size == 1:  # c's value
                        return rewriter.replace(op, SiluOp(x, FloatAttr(float(value.flat[0]), f32)))


@plugins.register_pass
@dataclass(frozen=True)
class RaiseSiluPass(ModulePass):
    """Raises `x * sigmoid(x)` and `x * sigmoid(x * c)` (c a one-element constant) to `act.silu`."""

    name = "raise-silu"
    needs_weights = True  # it reads constants' values: ziggurat-opt refuses to run it when none are bound

    def apply(self, ctx, op: ModuleOp) -> None:
        PatternRewriteWalker(RaiseSilu()).rewrite_module(op)
        dce(op)  # the sigmoid and the x * c it replaced, now unused


@plugins.register_pass
@dataclass(frozen=True)
class ConvertActToGraphPass(ModulePass):
    """Lowers the `act` dialect to graph ops: act.silu(x) {beta = b} -> x * sigmoid(x * b), b a new weight."""

    name = "convert-act-to-graph"

    def apply(self, ctx, op: ModuleOp) -> None:
        for silu in [o for o in op.walk() if isinstance(o, SiluOp)]:
            x, scale = silu.input, []
            if silu.beta is not None:
                ref = weights_of(op).add("act.beta", np.array(silu.beta.value.data, np.float32))
                scale = [c := graph.ConstantOp(ref, TensorType(f32, [])), graph.MulOp(x, c.result, x.type)]
            sig = graph.SigmoidOp(scale[-1].results[0] if scale else x)
            Rewriter.replace_op(silu, [*scale, sig, graph.MulOp(x, sig.result, x.type)])
