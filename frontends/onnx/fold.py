"""Import-time evaluation of nodes whose inputs are all known.

A node whose inputs are all import-time constants (initializers, `Constant`
nodes, or results of earlier folded nodes) is evaluated here with ONNX's own
numpy reference semantics (`onnx.reference`), at the model's opset, and its
outputs stay import-time constants. `Shape`, `Size` and `EyeLike` need only
the static shape (and element type) of their input, so they fold even on
run-time tensors, and a zero-size run-time tensor is as known as a constant
(a reduction over an empty axis folds to the reduction's identity). Generator ops (`ConstantOfShape`, `Range`, the window
functions, `MelWeightMatrix`) have only shape-parameter inputs: given
run-time ones, they raise an error that names the graph inputs to bind
(`ctx.shape_parameter`, frontends/onnx/specialize.py), and a compile bound to
their values folds them. Together this
makes the shape arithmetic that PyTorch and HuggingFace exports carry
(Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ConstantOfShape, Range,
Equal, Where, ...) disappear at import time: only tensor compute reaches the
`graph` IR.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
import onnx
from onnx import helper

import ziggurat.dtypes as dtypes
from ziggurat.errors import ShapeError, ZigguratError
from ziggurat.frontends.onnx.context import ConversionContext, attributes
from ziggurat.frontends.onnx.fold_symbolic import fold as fold_symbolic
from ziggurat.frontends.onnx.fold_symbolic import fold_shape, is_symbolic_array, slice_constant
from ziggurat.symbolic import prod

NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)
"""Ops that must not be evaluated at import time even on known inputs."""

GENERATOR_OPS = frozenset(
    {"ConstantOfShape", "Range", "HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix"}
)
"""Ops whose every input is a shape parameter: their output (values and
shape) is fully decided by those values, so it is a compile-time constant."""

REFERENCE_UNRELIABLE = frozenset({"BatchNormalization", "GlobalMaxPool", "MaxPool", "AveragePool", "LpPool", "Pad",
                                  "Mean"})
"""Ops whose onnx.reference evaluation is wrong somewhere (found by tests/fuzz.py): BatchNormalization
before opset 14 uses the batch statistics, a 3-D GlobalMaxPool drops a dim, MaxPool with SAME_LOWER and
a stride above the kernel gives an empty result, Pad refuses negative pads, Mean adds in place into its
first input (a (1, 1) first input and a (2,) second fail to broadcast). On constant inputs they are
converted like any other node (and folded later by fold-constants with our own kernels' semantics)."""

MAX_FOLDED_ELEMENTS = 1 << 24
"""Results larger than this stay run-time computations (guards against blow-ups)."""


def fold_node(ctx: ConversionContext, node: onnx.NodeProto,
              convertible: Callable[[onnx.NodeProto], bool] | None = None) -> list[np.ndarray] | None:
    """The outputs of `node` evaluated at import time, or None when some input
    is only known at run time (or the op must not be folded). When onnx.reference
    fails on the constants and `convertible(node)` says the op converts to graph ops,
    None too: the node is converted and folded later by our own kernels (the reference
    raised on Softsign of a rank-0 tensor: fuzz seed 2031); otherwise its error stands."""
    if node.op_type in ("Shape", "Size"):
        return [_shape_op(ctx, node)]
    if node.op_type == "EyeLike" and ctx.constant(node.input[0]) is None:
        return evaluate(ctx, node, {node.input[0]: _placeholder(ctx, node.input[0])})
    if node.op_type in NONDETERMINISTIC or node.op_type == "Constant":
        return None
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        return None
    names = [name for name in node.input if name]
    if node.op_type in GENERATOR_OPS:
        if any(is_symbolic_array(ctx.constant(n)) for n in names):  # a symbolic size: its converter
            return None
        return _generate(ctx, node, names)
    arrays = [_known(ctx, name) for name in names]
    if any(a is None for a in arrays):
        return None
    if any(is_symbolic_array(a) for a in arrays):  # shape arithmetic on symbolic extents
        return fold_symbolic(ctx, node, arrays)  # type: ignore[arg-type]
    own = _OWN_FOLDS.get(node.op_type)
    if own is None and (node.op_type in REFERENCE_UNRELIABLE or not has_reference_impl(node.op_type, ctx.opset)):
        return None
    try:
        results = own(ctx, node, *arrays) if own is not None else evaluate(ctx, node, dict(zip(names, arrays)))
    except ShapeError:
        if own is None and convertible is not None and convertible(node):
            return None
        raise
    outputs = _as_declared(ctx, node, results)  # type: ignore[arg-type]
    if any(np.asarray(o).size > MAX_FOLDED_ELEMENTS for o in outputs):
        return None
    return outputs


def _shape_op(ctx: ConversionContext, node: onnx.NodeProto) -> np.ndarray:
    """Shape (start/end from opset 15) and Size of a value, constant or not."""
    shape = ctx.shape(node.input[0])
    if node.op_type == "Size":
        return fold_shape([prod(shape)]).reshape(())
    attrs = attributes(node)
    rank = len(shape)
    start, end = attrs.get("start", 0), attrs.get("end", rank)
    start, end = [min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end)]
    return fold_shape(shape[start:end])  # symbolic dims: an object array (fold_symbolic.py)


def _known(ctx: ConversionContext, name: str) -> np.ndarray | None:
    """The import-time value of `name`: a constant, or a zero-size run-time
    tensor (its value is its shape and type alone); None otherwise."""
    array = ctx.constant(name)
    if array is not None or 0 not in ctx.shape(name):
        return array
    return _placeholder(ctx, name)


def _placeholder(ctx: ConversionContext, name: str) -> np.ndarray:
    """Zeros of the static shape and element type of run-time tensor `name`
    (for ops that read only those)."""
    value = ctx.value(name)
    return np.zeros(ctx.shape(name), dtypes.to_numpy(dtypes.element_of(value.type)))


def _generate(ctx: ConversionContext, node: onnx.NodeProto, names: list[str]) -> list[np.ndarray]:
    """A generator op evaluated on its shape-parameter inputs; raises (noting
    the run-time ones for specialization) when some are not known."""
    arrays = [ctx.shape_parameter(name) for name in names]
    runtime = [name for name, array in zip(names, arrays) if array is None]
    if runtime:
        listed = ", ".join(f"'{n}'" for n in runtime)
        raise ctx.unsupported(
            f"its input(s) {listed} decide the output's shape and values, so they must be known at compile "
            "time (constants, shapes, or bound graph inputs); here they are run-time tensors"
        )
    if not has_reference_impl(node.op_type, ctx.opset):
        raise ctx.unsupported(f"it cannot be evaluated at import time at opset {ctx.opset}")
    outputs = evaluate(ctx, node, dict(zip(names, arrays)))  # type: ignore[arg-type]
    if any(np.asarray(o).size > MAX_FOLDED_ELEMENTS for o in outputs):
        raise ctx.unsupported(f"its output has more than {MAX_FOLDED_ELEMENTS} elements")
    return outputs


def _gather_elements(ctx: ConversionContext, node: onnx.NodeProto, data: np.ndarray,
                     indices: np.ndarray) -> list[np.ndarray]:
    """GatherElements on constants, with np.take_along_axis. onnx.reference's
    own (np.choose) takes at most 63 choices and falls back to a wrong 2-D
    path beyond, so a (1, 512) table gathered along axis 1 failed ("cannot
    reshape array of size 1 into shape (1,128)"). Refuses (ShapeError) a
    rank-0 table, indices of another rank or larger than the table off the
    axis, and indices outside [-n, n) for the axis' size n."""
    rank = data.ndim
    axis = attributes(node).get("axis", 0)
    if rank == 0 or indices.ndim != rank or not -rank <= axis < rank:
        raise ctx.shape_error(f"indices of shape {indices.shape} and axis {axis} do not fit data of shape {data.shape}")
    axis %= rank
    if any(indices.shape[d] > data.shape[d] for d in range(rank) if d != axis):
        raise ctx.shape_error(f"indices shape {indices.shape} does not fit data shape {data.shape} at axis {axis}")
    size = data.shape[axis]
    table = np.where(indices < 0, indices + size, indices).astype(np.int64)
    if table.size and (table.min() < 0 or table.max() >= size):
        raise ctx.shape_error(f"indices leave [-{size}, {size}) along axis {axis}")
    view = data[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(indices.shape))]
    return [np.take_along_axis(view, table, axis)]


_OWN_FOLDS = {"GatherElements": _gather_elements, "Slice": slice_constant}
"""Ops folded here rather than by onnx.reference (whose version is wrong for them)."""


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


def _as_declared(ctx: ConversionContext, node: onnx.NodeProto, outputs: list[np.ndarray]) -> list[np.ndarray]:
    """`outputs` in the element types ONNX type inference gives them: the
    reference evaluator lets numpy promote some (the sum of squares of an
    empty int32 tensor is int64 there; the spec keeps int32)."""
    typed = []
    for name, out in zip(node.output, outputs):
        elt = ctx.value_types.get(name) if name else None
        if elt is not None and out.dtype.kind in "biuf":
            try:
                want = dtypes.to_numpy(elt)
            except KeyError:
                want = out.dtype
            if want != out.dtype and np.dtype(want).kind in "biuf":
                out = out.astype(want)
        typed.append(out)
    return typed
