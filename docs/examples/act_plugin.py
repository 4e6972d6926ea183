"""The plugin that docs/tutorial.md builds: a dialect, a pass and a lowering.

* the `act` dialect, with one op, `act.silu` (x * sigmoid(x), also called
  swish), an activation that ziggurat's graph dialect has no op for;
* the graph-level pass `raise-silu`, which finds `x * sigmoid(x)` in graph IR
  (as the ONNX importer writes it) and replaces it with `act.silu`;
* the lowering `convert-act-to-graph`, which expands `act.silu` back into
  graph ops, so that ziggurat's own lowerings (graph -> te -> loop -> hw)
  take it from there.

Load it with `ziggurat-opt --load-plugin docs/examples/act_plugin.py ...`,
`ziggurat compile --load-plugin docs/examples/act_plugin.py ...`, or
`ziggurat.plugins.load_plugin("docs/examples/act_plugin.py")`.
tests/unit/test_plugins.py runs everything the tutorial shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import Float32Type, Float64Type, TensorType
from xdsl.ir import Dialect, SSAValue
from xdsl.irdl import IRDLOperation, VarConstraint, base, irdl_op_definition, operand_def, result_def, traits_def
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from ziggurat import plugins
from ziggurat.dialects import graph

# --- 1. the dialect -----------------------------------------------------------


@irdl_op_definition
class SiluOp(IRDLOperation):
    """x * sigmoid(x), elementwise, on float tensors.

    ```mlir
    %y = act.silu %x : tensor<4x8xf32>
    ```
    """

    name = "act.silu"
    T: ClassVar = VarConstraint("T", base(TensorType))  # one type for input and result
    input = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($result)"

    def __init__(self, x: SSAValue):
        super().__init__(operands=[x], result_types=[x.type])

    def verify_(self) -> None:
        if not isinstance(self.result.type.element_type, Float32Type | Float64Type):  # type: ignore[attr-defined]
            raise VerifyException(f"'act.silu' op is defined on f32 and f64 tensors, got {self.result.type}")


Act = Dialect("act", [SiluOp])


# --- 2. a pass: graph -> act --------------------------------------------------


class RaiseSilu(RewritePattern):
    """graph.mul(x, graph.sigmoid(x)) (either operand order) -> act.silu(x)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.MulOp, rewriter: PatternRewriter) -> None:
        for x, s in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            sig = s.owner
            if isinstance(sig, graph.SigmoidOp) and sig.input == x and x.type == op.result.type:
                rewriter.replace(op, SiluOp(x))
                if not sig.result.uses:
                    rewriter.erase(sig)
                return


@dataclass(frozen=True)
class RaiseSiluPass(ModulePass):
    """Raises `x * sigmoid(x)` to `act.silu`.

    **Input:** graph IR. **Output:** each `graph.mul` of a value and its own
    `graph.sigmoid` (same shape, no broadcasting) becomes `act.silu`; the
    sigmoid goes too when nothing else uses it.

    ```mlir
    %s = graph.sigmoid %x : tensor<4xf32>
    %y = graph.mul %x, %s : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
    becomes `%y = act.silu %x : tensor<4xf32>`.
    """

    name = "raise-silu"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        PatternRewriteWalker(RaiseSilu()).rewrite_module(op)


# --- 3. a lowering: act -> graph ----------------------------------------------


class LowerSilu(RewritePattern):
    """act.silu(x) -> graph.mul(x, graph.sigmoid(x))."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: SiluOp, rewriter: PatternRewriter) -> None:
        sig = graph.SigmoidOp(op.input)
        rewriter.replace(op, [sig, graph.MulOp(op.input, sig.result, op.result.type)])


@dataclass(frozen=True)
class ConvertActToGraphPass(ModulePass):
    """Lowers the `act` dialect to graph ops.

    **Input:** IR with `act.silu`. **Output:** the same computation in graph
    ops, which `convert-graph-to-te` lowers further.

    ```mlir
    %y = act.silu %x : tensor<4xf32>
    ```
    becomes
    ```mlir
    %0 = graph.sigmoid %x : tensor<4xf32>
    %y = graph.mul %x, %0 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
    """

    name = "convert-act-to-graph"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        PatternRewriteWalker(LowerSilu()).rewrite_module(op)


# --- 4. registration ----------------------------------------------------------

plugins.register_dialect(Act)
plugins.register_pass(RaiseSiluPass)
plugins.register_pass(ConvertActToGraphPass)
