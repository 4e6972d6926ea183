"""Import-time evaluation of nodes whose inputs are all known.

A node whose inputs are all import-time constants (initializers, `Constant`
nodes, or results of earlier folded nodes) is evaluated here with ONNX's own
numpy reference semantics (`onnx.reference`), at the model's opset, and its
outputs stay import-time constants. `Shape` and `Size` need only the static
shape of their input, so they fold even on run-time tensors. Together this
makes the shape arithmetic that PyTorch and HuggingFace exports carry
(Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ConstantOfShape, Range,
Equal, Where, ...) disappear at import time: only tensor compute reaches the
`graph` IR.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import onnx
from onnx import helper

from ziggurat.errors import ZigguratError
from ziggurat.frontends.onnx.context import ConversionContext, attributes

NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)
"""Ops that must not be evaluated at import time even on known inputs."""

MAX_FOLDED_ELEMENTS = 1 << 24
"""Results larger than this stay run-time computations (guards against blow-ups)."""


def fold_node(ctx: ConversionContext, node: onnx.NodeProto) -> list[np.ndarray] | None:
    """The outputs of `node` evaluated at import time, or None when some input
    is only known at run time (or the op must not be folded)."""
    if node.op_type in ("Shape", "Size"):
        return [_shape_op(ctx, node)]
    if node.op_type in NONDETERMINISTIC or node.op_type == "Constant":
        return None
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        return None
    names = [name for name in node.input if name]
    arrays = [ctx.constant(name) for name in names]
    if any(a is None for a in arrays):
        return None
    if not has_reference_impl(node.op_type, ctx.opset):
        return None
    outputs = evaluate(ctx, node, dict(zip(names, arrays)))  # type: ignore[arg-type]
    if any(np.asarray(o).size > MAX_FOLDED_ELEMENTS for o in outputs):
        return None
    return outputs


def _shape_op(ctx: ConversionContext, node: onnx.NodeProto) -> np.ndarray:
    """Shape (start/end from opset 15) and Size of a value, constant or not."""
    shape = ctx.shape(node.input[0])
    if node.op_type == "Size":
        return np.array(int(np.prod(shape)), np.int64)
    attrs = attributes(node)
    rank = len(shape)
    start, end = attrs.get("start", 0), attrs.get("end", rank)
    start, end = [min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end)]
    return np.array(shape[start:end], np.int64)


@lru_cache(maxsize=None)
def has_reference_impl(op_type: str, opset: int) -> bool:
    """Whether `onnx.reference` can evaluate `op_type` at `opset`."""
    from onnx.reference.ops import load_op

    try:
        load_op("", op_type, opset)
    except Exception:  # noqa: BLE001 - onnx raises several types for unknown ops
        return False
    return True


def evaluate(ctx: ConversionContext, node: onnx.NodeProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Runs `node` alone on `inputs` with the ONNX reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    untyped = onnx.TypeProto()
    graph = helper.make_graph(
        [node], "fold",
        [helper.make_value_info(name, untyped) for name in inputs],
        [helper.make_value_info(name, untyped) for name in node.output if name],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ctx.opset)])
    try:
        results = ReferenceEvaluator(model).run(None, inputs)
    except ZigguratError:
        raise
    except Exception as e:  # noqa: BLE001 - the reference raises anything on bad input
        detail = " ".join(str(e).split())[:300]
        raise ctx.shape_error(f"evaluating it at import time on its constant inputs failed: {detail}") from None
    return _with_blanks(node, [np.asarray(r) for r in results])


def _with_blanks(node: onnx.NodeProto, results: Sequence[np.ndarray]) -> list[np.ndarray]:
    """One result per output slot of `node`, skipping the slots left empty."""
    it = iter(results)
    return [next(it) if name else np.zeros(0) for name in node.output]
