"""pack-weight-panels: constant matmul weights stored in column panels, without pricing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import TensorType
from xdsl.passes import ModulePass

from ziggurat.dialects import graph
from ziggurat.dialects.graph_layout import MatmulPanelsOp, pack_panels
from ziggurat.errors import CompileError
from ziggurat.symbolic import Sym
from ziggurat.transforms.graph.weight_binding import weights_of


@dataclass(frozen=True)
class PackWeightPanelsPass(ModulePass):
    """Stores each constant 2-D matmul weight `B[K, N]` (or `B[N, K]` with `transpose_b`) in
    `[N / width, K, width]` column panels: `graph.matmul_panels`, which the register-blocked
    schedule streams without packing B on every call.

    **Input:** graph-level functions whose weights are bound (`graph.weights_file` or a compile).
    **Output:** every `graph.matmul` whose rhs is a constant 2-D weight with N a multiple of
    `width` and whose lhs has more than one row (or symbolic rows) becomes `graph.matmul_panels`
    over a new packed constant `<weight>.p<width>`. fuse-ops{cost-guided=true} makes the same
    choice by pricing each kernel (transforms/costs/fusion_costs.py); a model compiled for every
    shape has no static kernel to price, and the panels take ties there (docs/feedback.md), so
    the symbolic pipeline (lowering/pipelines.py `SYMBOLIC_GRAPH`) runs this pass instead.

    **Options:** `width` (lanes of a panel, the target's vector width; default 16).

    Example (width 16):
    ```mlir
    %y = graph.matmul %x, %w : tensor<?x768xf32, #sym.dims<"n">>, tensor<768x768xf32> -> ...
    ```
    becomes
    ```mlir
    %p = graph.constant "w.p16" : tensor<48x768x16xf32>
    %y = graph.matmul_panels %x, %p : ...
    ```
    """

    name = "pack-weight-panels"
    width: int = 16

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.width <= 0:
            raise CompileError(f"pack-weight-panels: width must be positive, got {self.width}")
        store = weights_of(op)
        if store is None:
            return
        for fn in [f for f in op.ops if isinstance(f, func.FuncOp) and f.body.blocks]:
            for mm in [o for o in fn.walk() if isinstance(o, graph.MatmulOp)]:
                self._pack(mm, store)

    def _pack(self, mm: graph.MatmulOp, store) -> None:
        w = mm.operands[1].owner
        if not isinstance(w, graph.ConstantOp) or len(w.results[0].type.get_shape()) != 2:
            return
        rows = 1
        for d in graph.shape_of(mm.operands[0])[:-1]:
            rows = rows * d
        if not isinstance(rows, Sym) and rows <= 1:  # a matrix-vector product keeps its dot-product kernel
            return
        tb = mm.is_transpose_b
        shape = w.results[0].type.get_shape()
        k, n = (shape[1], shape[0]) if tb else (shape[0], shape[1])
        if n % self.width:
            return
        array = store[w.ref.data]
        plain = np.ascontiguousarray(array.T) if tb else array
        packed = graph.ConstantOp(store.add(f"{w.ref.data}.p{self.width}", pack_panels(plain, self.width)),
                                  TensorType(w.results[0].type.element_type, [n // self.width, k, self.width]))
        replace_weight(mm, packed, MatmulPanelsOp(mm.operands[0], packed.results[0], mm.results[0].type))


def replace_weight(op, weight: graph.ConstantOp, new) -> None:
    """`new` (reading the rewritten constant `weight`) in place of matmul `op`: both inserted before
    it at its location, its name and uses taken over; `op` goes, and its old weight where nothing
    else reads it (fuse-ops' layout choices rewrite weights the same way)."""
    old = op.operands[1].owner
    weight.location = new.location = op.location  # the same source node
    block = op.parent_block()
    assert block is not None
    block.insert_op_before(weight, op)
    block.insert_op_before(new, op)
    new.results[0].name_hint = op.results[0].name_hint
    op.results[0].replace_all_uses_with(new.results[0])
    op.detach()
    op.erase()
    if not old.results[0].uses:  # the weight as it was: no longer read, not carried to the kernels
        old.detach()
        old.erase()
