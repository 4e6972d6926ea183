"""fold-constants: evaluate graph ops whose inputs are all constants at compile time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from ziggurat.dialects import graph
from ziggurat.dialects.sym import is_symbolic_type
from ziggurat.weights import WeightStore
from ziggurat.transforms.graph.graph_reference import evaluate, supports
from ziggurat.transforms.graph.weight_binding import bodies_with_weights


def _foldable(op: Operation, max_elements: int) -> bool:
    if not supports(op) or len(op.results) != 1 or not op.operands:
        return False
    t = op.results[0].type
    if not isinstance(t, TensorType) or is_symbolic_type(t) or t.element_count() > max_elements:
        return False  # a symbolic extent (dialects/sym.py): a run-time size, not a constant
    return all(isinstance(v.owner, graph.ConstantOp) for v in op.operands)


def fold_block_ops(ops: list[Operation], store: WeightStore, max_elements: int) -> int:
    """Folds `ops` in order (so chains of constant ops fold through); returns how many."""
    rewriter = Rewriter()
    folded = 0
    for op in ops:
        if not _foldable(op, max_elements):
            continue
        args = [store[v.owner.ref.data] for v in op.operands]  # type: ignore[attr-defined]
        with np.errstate(all="ignore"):
            value = evaluate(op, args)
        hint = op.results[0].name_hint or op.name.split(".")[1]
        ref = store.add(f"folded.{hint}", value)
        const = graph.ConstantOp(ref, op.results[0].type)  # type: ignore[arg-type]
        const.results[0].name_hint = op.results[0].name_hint
        rewriter.replace_op(op, const)
        folded += 1
    return folded


@dataclass(frozen=True)
class FoldConstantsPass(ModulePass):
    """Replaces graph ops whose operands are all `graph.constant` by new constants.

    **Input:** graph-level IR and a weight store for its constants
    (`transforms/graph/weight_binding.py`: the compiler binds the import's store; on
    the command line a `graph.weights_file` module attribute names an `.npz`).

    **Output:** each such op (with a reference semantics in
    `transforms/graph/graph_reference.py`) is evaluated with numpy at compile time;
    its result goes into the weight store under `folded.<name>` and the op
    becomes `graph.constant "folded.<name>"`. Folding goes in program order, so
    chains of constant ops fold to one constant. Dead constants are left to
    `dce`. Without a weight store the pass changes nothing.

    **Options:** `max-elements` (int, default 16777216): larger results stay
    ops (a folded constant costs memory in the store).

    Example:
    ```mlir
    %w = graph.constant "w" : tensor<4x8xf32>
    %t = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
    ```
    becomes
    ```mlir
    %w = graph.constant "w" : tensor<4x8xf32>
    %t = graph.constant "folded.t" : tensor<8x4xf32>
    ```
    """

    name = "fold-constants"
    max_elements: int = 1 << 24

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for f, store in bodies_with_weights(op):
            fold_block_ops(list(f.body.block.ops), store, self.max_elements)
