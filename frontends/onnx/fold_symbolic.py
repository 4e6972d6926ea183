"""Import-time shape arithmetic on symbolic extents (a compile for every shape, issue 22).

In a symbolic import (`import_onnx(symbolic=True)`), `Shape` of a tensor with
dynamic axes is an int64 array of dtype `object` holding ints and `Sym`s
(symbolic.py). The shape arithmetic that exports carry on it (Gather,
Unsqueeze, Concat, Slice, Cast, Reshape, Add, Sub, Mul, Div, Equal, Where,
Expand, ...) folds here with numpy's object arrays, so Reshape, Expand and
Slice get symbolic targets and the arithmetic never reaches the IR. An
array whose entries all became ints again is an ordinary int64 constant.

What cannot fold is refused by name (`SymbolicError`, which makes the
caller compile per shape): a comparison whose answer depends on the
symbols' values (`Equal(batch, 1)`; `Equal(batch, -1)` is known false since
a dim is at least 1), a division that is not exact, a float of a symbol.

    shape = fold_shape((Sym.of("batch"), Sym.of("sequence"), 768))   # array([batch, sequence, 768], dtype=object)
    fold(ctx, gather_node, [shape, np.array(1)])                     # [array(sequence, dtype=object)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx

from ziggurat.frontends.onnx.context import ConversionContext, attributes
from ziggurat.symbolic import Sym, SymbolicError


def is_symbolic_array(a: object) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == object


def plain(a: np.ndarray) -> np.ndarray:
    """`a` as an int64 array where no entry is symbolic any more, else as it is."""
    if a.dtype == object and not any(isinstance(v, Sym) for v in a.reshape(-1)):
        return np.asarray(a.tolist() if a.ndim else a.item(), np.int64).reshape(a.shape)
    return a


def fold_shape(shape: Sequence) -> np.ndarray:
    return plain(np.array(list(shape), dtype=object))


def _ints(ctx: ConversionContext, node: onnx.NodeProto, i: int) -> list[int] | None:
    name = node.input[i] if i < len(node.input) else ""
    if not name:
        return None
    a = ctx.constant(name)
    if a is None or is_symbolic_array(a):
        raise SymbolicError(f"{node.op_type} node '{ctx.node_label}': input '{name}' must be a compile-time integer list")
    return [int(v) for v in a.reshape(-1)]


def _axes(ctx: ConversionContext, node: onnx.NodeProto) -> list[int] | None:
    attrs = attributes(node)
    return list(attrs["axes"]) if "axes" in attrs else _ints(ctx, node, 1)


def _unsqueeze(ctx, node, data, *_):
    axes = _axes(ctx, node) or []
    rank = data.ndim + len(axes)
    out = data
    for a in sorted(a % rank for a in axes):
        out = np.expand_dims(out, a)
    return [out]


def _squeeze(ctx, node, data, *_):
    axes = _axes(ctx, node)
    if axes is None:
        return [np.squeeze(data)]
    return [np.squeeze(data, axis=tuple(a % data.ndim for a in axes))]


def _gather(ctx, node, data, indices):
    axis = attributes(node).get("axis", 0) % max(data.ndim, 1)
    idx = np.asarray(indices)
    if is_symbolic_array(idx):
        raise SymbolicError(f"Gather node '{ctx.node_label}': symbolic indices")
    n = data.shape[axis]
    return [np.take(data, np.where(idx < 0, idx + n, idx).astype(np.int64), axis=axis)]


def _concat(ctx, node, *arrays):
    axis = attributes(node)["axis"]
    return [np.concatenate([np.asarray(a, dtype=object) for a in arrays], axis=axis)]


def slice_constant(ctx: ConversionContext, node: onnx.NodeProto, data: np.ndarray, *_: np.ndarray) -> list[np.ndarray]:
    """Slice on a constant with ONNX's clamping (`convert_tensor.slice_window`, as the run-time
    converter): onnx.reference slices with Python, which takes nothing where ONNX clamps a start
    still negative after adding the dim to 0 for a negative step. fold.py folds constant Slices with
    it; here it also slices symbolic arrays (their entries only move)."""
    from ziggurat.frontends.onnx.convert_tensor import slice_window

    def ints(i: int) -> list[int] | None:
        name = node.input[i] if i < len(node.input) else ""
        return None if not name else [int(v) for v in np.asarray(ctx.constant(name)).reshape(-1)]

    if ctx.opset < 10:
        attrs = attributes(node)
        starts, ends, axes, steps = list(attrs["starts"]), list(attrs["ends"]), attrs.get("axes"), None
    else:
        starts, ends, axes, steps = ints(1), ints(2), ints(3), ints(4)
    axes = list(range(len(starts))) if axes is None else list(axes)  # type: ignore[arg-type]
    steps = [1] * len(starts) if steps is None else steps  # type: ignore[arg-type]
    if not len(starts) == len(ends) == len(axes) == len(steps):  # type: ignore[arg-type]
        raise ctx.shape_error(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):  # type: ignore[arg-type]
        if step == 0 or not -data.ndim <= axis < data.ndim:
            raise ctx.shape_error(f"step {step} or axis {axis} is out of range for a rank-{data.ndim} input")
        first, step, count = slice_window(data.shape[axis], start, end, step)
        stop = first + step * count
        index[axis % data.ndim] = slice(first, stop if stop >= 0 else None, step)
    return [data[tuple(index)]]


def _slice(ctx, node, data, *params):
    """A slice of a symbolic array at constant positions; a slice at symbolic positions (of a
    constant table: position ids up to `sequence`) is the converter's, at run time."""
    if any(is_symbolic_array(p) for p in params):
        return None
    return slice_constant(ctx, node, data)


def _cast(ctx, node, data):
    to = attributes(node)["to"]
    if to in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
        return [data]
    raise SymbolicError(f"Cast node '{ctx.node_label}': a symbolic extent cast to "
                        f"{onnx.TensorProto.DataType.Name(to)}")


def _reshape(ctx, node, data, shape):
    target = [int(v) for v in np.asarray(shape).reshape(-1)]
    target = [data.shape[i] if v == 0 else v for i, v in enumerate(target)]
    return [data.reshape(target)]


def _flatten(ctx, node, data):
    axis = attributes(node).get("axis", 1) % max(data.ndim, 1)
    lead = int(np.prod(data.shape[:axis], dtype=np.int64))
    return [data.reshape(lead, -1)]


def _arith(fn: Callable) -> Callable:
    def run(ctx, node, a, b):
        return [fn(np.asarray(a, dtype=object), np.asarray(b, dtype=object))]

    return run


def _exact_div(a, b):
    if isinstance(b, Sym) or isinstance(a, Sym):
        return a // b
    q = abs(int(a)) // abs(int(b))  # ONNX integer division truncates toward zero
    return q if (int(a) >= 0) == (int(b) >= 0) else -q


def _equal(ctx, node, a, b):
    def eq(x, y):
        order = Sym.lift(x).compare(y) if isinstance(x, Sym) or isinstance(y, Sym) else (0 if x == y else 1)
        if order is None:
            raise SymbolicError(f"Equal node '{ctx.node_label}': whether '{x}' equals '{y}' depends on the "
                                "input shapes")
        return order == 0

    return [np.vectorize(eq, otypes=[bool])(np.asarray(a, dtype=object), np.asarray(b, dtype=object))]


def _where(ctx, node, cond, a, b):
    if is_symbolic_array(cond):
        raise SymbolicError(f"Where node '{ctx.node_label}': a symbolic condition")
    return [np.where(cond.astype(bool), np.asarray(a, dtype=object), np.asarray(b, dtype=object))]


def _expand(ctx, node, data, shape):
    target = [int(v) for v in np.asarray(shape).reshape(-1)]
    return [np.broadcast_to(data, np.broadcast_shapes(data.shape, tuple(target))).copy()]


def _identity(ctx, node, data):
    return [data]


FOLDS: dict[str, Callable[..., list[np.ndarray]]] = {
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Gather": _gather,
    "Concat": _concat,
    "Slice": _slice,
    "Cast": _cast,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Add": _arith(np.add),
    "Sub": _arith(np.subtract),
    "Mul": _arith(np.multiply),
    "Div": _arith(np.vectorize(_exact_div, otypes=[object])),
    "Neg": lambda ctx, node, a: [np.negative(np.asarray(a, dtype=object))],
    "Equal": _equal,
    "Where": _where,
    "Expand": _expand,
    "Identity": _identity,
}
"""The ops folded on symbolic arrays; tests/unit/test_symbolic_import.py checks each against numpy
on ints."""


def fold(ctx: ConversionContext, node: onnx.NodeProto, arrays: Sequence[np.ndarray]) -> list[np.ndarray] | None:
    """`node` on import-time arrays of which some are symbolic; None where the op has no symbolic
    fold here (its converter then takes the symbolic values as shape parameters)."""
    run = FOLDS.get(node.op_type)
    if run is None:
        return None
    results = run(ctx, node, *arrays)
    if results is None:
        return None
    return [plain(np.asarray(r, dtype=object) if not isinstance(r, np.ndarray) else r) for r in results]
