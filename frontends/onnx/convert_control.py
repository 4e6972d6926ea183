"""Control flow: If and Loop, resolved at import time.

* If: a condition known at import time (a constant, or folded from shapes)
  inlines the chosen branch; its nodes see the outer scope. A run-time
  condition converts both branches (they are side-effect free) and selects
  each output with `graph.where`; this needs both branches to give every
  output one static shape and element type, else the node is refused (the
  condition is then noted as a shape parameter, so specialization can bind it).
* Loop: a trip count and initial condition known at import time (constants,
  shapes, or bound shape parameters) unrolls the body once per iteration,
  at most MAX_LOOP_ITERATIONS times; the iteration number is a constant in
  each copy, and the body's condition output must fold to a constant.
  Scan outputs are stacked with `graph.concat`. Sequence values are
  compile-time lists and optionals are the element or EmptyOptional
  (convert_sequence.py): carried and returned as they are.

```mlir
// If %c then [1, 2] else %x, with %c a run-time bool
%t = graph.constant "if.then" : tensor<2xf32>
%y = graph.where %c, %t, %x : tensor<i1>, tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import numpy_helper
from xdsl.ir import SSAValue

import ziggurat.dtypes as dtypes
from ziggurat.dialects import graph
from ziggurat.errors import ModelLoadError
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, shape_of
from ziggurat.frontends.onnx.convert_scan import _stack
from ziggurat.frontends.onnx.convert_sequence import is_structured
from ziggurat.frontends.onnx.convert_window import like

MAX_LOOP_ITERATIONS = 16
"""Loops are unrolled; longer ones are refused to keep the IR compact."""


def _bound(ctx: ConversionContext, name: str) -> bool:
    try:
        ctx.lookup(name)
    except ModelLoadError:
        return False
    return True


def _check_tensor_outputs(ctx: ConversionContext, body: onnx.GraphProto, what: str) -> None:
    for info in (*body.input, *body.output):
        kind = info.type.WhichOneof("value")
        if kind not in (None, "tensor_type", "sequence_type", "optional_type"):  # compile-time structure
            raise ctx.unsupported(f"its {what} has {kind.replace('_type', '')} value '{info.name}'; "
                                  "only tensor values are supported in control flow")


def node_reads(node: onnx.NodeProto) -> tuple[str, ...]:
    """The names `node` reads: its inputs and those its subgraphs use (outer
    scope names among them), recursively."""
    names = [name for name in node.input if name]
    for attr in node.attribute:
        bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else \
            list(attr.graphs) if attr.type == onnx.AttributeProto.GRAPHS else []
        for body in bodies:
            for inner in body.node:
                names.extend(node_reads(inner))
    return tuple(dict.fromkeys(names))


def run_subgraph(ctx: ConversionContext, body: onnx.GraphProto, inputs: Sequence[Value], label: str) -> list[Value]:
    """Converts `body` with its inputs bound to `inputs` (its nodes also see
    the outer scope); returns the values of its outputs. Names the body
    defines are restored to their outer bindings afterwards."""
    from ziggurat.frontends.onnx.importer import _bind_outputs, _convert

    if len(inputs) != len(body.input):
        raise ctx.shape_error(f"the subgraph '{body.name}' takes {len(body.input)} inputs, given {len(inputs)}")
    initializers = {t.name: numpy_helper.to_array(t) for t in body.initializer}
    names = {i.name for i in body.input} | {o for n in body.node for o in n.output if o} | set(initializers)
    saved = {name: ctx.lookup(name) for name in names if _bound(ctx, name)}
    outer = (ctx.node, ctx.node_label)
    ctx.forget_materialized(names)
    try:
        for name, array in initializers.items():
            ctx.bind(name, array)
        for info, value in zip(body.input, inputs):
            ctx.bind(info.name, value)
        for index, inner in enumerate(body.node):
            ctx.begin_node(inner, f"{label}/{inner.op_type}#{index}")
            _bind_outputs(ctx, inner, _convert(ctx, inner), {})
        ctx.begin_node(*outer)
        return [ctx.lookup(o.name) for o in body.output]
    finally:
        ctx.begin_node(*outer)
        ctx.forget_materialized(names)
        for name, value in saved.items():
            ctx.bind(name, value)


def _as_ssa(ctx: ConversionContext, value: Value, label: str) -> SSAValue:
    if isinstance(value, np.ndarray):
        return ctx.add_constant(np.ascontiguousarray(value), f"{ctx.node_label}.{label}")
    return value


def _describe(value: Value) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{list(value.shape)}"
    return f"{dtypes.describe(element_type(value))}{list(shape_of(value))}"


def _same(a: Value, b: Value) -> bool:
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and \
        a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


def convert_if(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """If (opsets 1+): inlines the branch of an import-time condition; a
    run-time condition selects between both branches with graph.where."""
    attrs = attributes(node)
    then_body, else_body = attrs["then_branch"], attrs["else_branch"]
    for body, what in ((then_body, "then_branch"), (else_body, "else_branch")):
        _check_tensor_outputs(ctx, body, what)
        if len(body.output) != len(node.output):
            raise ctx.shape_error(f"{what} has {len(body.output)} outputs for {len(node.output)} node outputs")
    cond = ctx.constant(node.input[0])
    if cond is not None:
        if cond.size != 1:
            raise ctx.shape_error(f"the condition must hold one value, got shape {list(cond.shape)}")
        taken, what = (then_body, "then") if bool(cond.reshape(-1)[0]) else (else_body, "else")
        return run_subgraph(ctx, taken, [], f"{ctx.node_label}/{what}")
    condition = ctx.value(node.input[0])
    if int(np.prod(shape_of(condition))) != 1:
        raise ctx.shape_error(f"the condition must hold one value, got shape {list(shape_of(condition))}")
    then_values = run_subgraph(ctx, then_body, [], f"{ctx.node_label}/then")
    else_values = run_subgraph(ctx, else_body, [], f"{ctx.node_label}/else")
    outputs: list[Value] = []
    for index, (a, b) in enumerate(zip(then_values, else_values)):
        if is_structured(a) or is_structured(b):  # sequences, empty optionals: compile-time structure
            if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b)):
                outputs.append(a)
                continue
            ctx.shape_parameter(node.input[0])  # noted: specialization may bind the condition
            raise ctx.unsupported(f"its condition is known only at run time and output #{index} is a sequence "
                                  "or optional that differs between the branches; those are compile-time structure")
        if _same(a, b):
            outputs.append(a)
            continue
        if _shape(a) != _shape(b) or _as_type(a) != _as_type(b):
            ctx.shape_parameter(node.input[0])  # noted: specialization may bind the condition
            raise ctx.unsupported(
                f"its condition is known only at run time and output #{index} differs between the branches "
                f"(then: {_describe(a)}, else: {_describe(b)}); only branches with equal static shapes and "
                "element types can be selected at run time")
        x, y = _as_ssa(ctx, a, f"then{index}"), _as_ssa(ctx, b, f"else{index}")
        shape = shape_of(x)
        c = ctx.reshape(condition, [1] * len(shape))
        outputs.append(ctx.emit(graph.WhereOp(c, x, y, like(x, shape))))
    return outputs


def _shape(value: Value) -> tuple[int, ...]:
    return tuple(value.shape) if isinstance(value, np.ndarray) else shape_of(value)


def _as_type(value: Value):
    return dtypes.from_numpy(value.dtype) if isinstance(value, np.ndarray) else element_type(value)


def _scalar(ctx: ConversionContext, name: str | None, what: str) -> np.generic | None:
    """Loop's trip count or condition, which must be known at import time."""
    if name is None:
        return None
    return ctx.scalar_parameter(name, what, "Loop is unrolled at import time and needs it as a constant "
                                "(or bound by value)")


def convert_loop(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Loop (opsets 1+) with an import-time trip count and condition, unrolled
    for at most MAX_LOOP_ITERATIONS iterations."""
    body: onnx.GraphProto = attributes(node)["body"]
    _check_tensor_outputs(ctx, body, "body")
    trip = _scalar(ctx, ctx.input(node, 0), "trip count M")
    cond = _scalar(ctx, ctx.input(node, 1), "condition")
    n_carried = len(node.input) - 2
    if len(body.input) != n_carried + 2 or len(body.output) < n_carried + 1:
        raise ctx.shape_error(f"the body takes {len(body.input)} inputs and gives {len(body.output)} outputs "
                              f"for {n_carried} loop-carried values")
    k = len(body.output) - 1 - n_carried
    if trip is None and cond is None:
        raise ctx.unsupported("a loop without trip count and condition never ends")
    limit = int(trip) if trip is not None else None
    if limit is not None and limit > MAX_LOOP_ITERATIONS:
        raise ctx.unsupported(f"its trip count {limit} exceeds {MAX_LOOP_ITERATIONS}; loops are unrolled at "
                              "import time and longer ones are not supported")
    running = bool(cond) if cond is not None else True
    carried: list[Value] = [ctx.lookup(name) for name in node.input[2:]]
    collected: list[list[Value]] = [[] for _ in range(k)]
    i = 0
    while running and (limit is None or i < limit):
        if i >= MAX_LOOP_ITERATIONS:
            raise ctx.unsupported(f"it runs more than {MAX_LOOP_ITERATIONS} iterations; loops are unrolled at "
                                  "import time and longer ones are not supported")
        results = run_subgraph(ctx, body, [np.array(i, np.int64), np.array(running), *carried],
                               f"{ctx.node_label}/iter{i}")
        if not isinstance(results[0], np.ndarray) or results[0].size != 1:
            raise ctx.unsupported("the body's condition output is computed at run time; only loops whose "
                                  "condition is known at import time can be unrolled")
        running = bool(results[0].reshape(-1)[0])
        carried = results[1:1 + n_carried]
        for j in range(k):
            if is_structured(results[1 + n_carried + j]):
                raise ctx.unsupported(f"scan output #{j} is a sequence; only tensors can be stacked")
            collected[j].append(results[1 + n_carried + j])
        i += 1
    outputs: list[Value] = list(carried)
    for j in range(k):
        if not collected[j]:
            raise ctx.unsupported("it runs no iteration, so its scan outputs are empty; zero-size outputs are "
                                  "not supported")
        outputs.append(_stack(ctx, collected[j], 0))
    return outputs


CONTROL_CONVERTERS = {"If": convert_if, "Loop": convert_loop}
"""ONNX op type -> converter, merged into the importer's table."""
