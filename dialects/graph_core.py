"""The core ops the ONNX frontend decomposes onto: more elementwise math,
comparisons, where, gather_elements, slice, concat, reductions and
broadcast_to (dialects/graph.py registers and re-exports them).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    BoolAttr,
    DenseArrayBase,
    IntegerAttr,
    StringAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    TensorType,
    i1,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure

from ziggurat.dialects.graph_base import BinaryOp, OpPattern, PatternKind, UnaryOp, broadcast_shapes, int_array, ints_of, require, shape_of


# ---------------------------------------------------------------------------
# Core ops the ONNX frontend decomposes onto (slicing, concatenation,
# reductions, broadcasting, more elementwise math)
# ---------------------------------------------------------------------------


@irdl_op_definition
class AbsOp(UnaryOp):
    """|x|, elementwise.

    ```mlir
    %y = graph.abs %x : tensor<4xf32>
    ```
    """

    name = "graph.abs"


@irdl_op_definition
class LogOp(UnaryOp):
    """Natural logarithm, elementwise.

    ```mlir
    %y = graph.log %x : tensor<4xf32>
    ```
    """

    name = "graph.log"


@irdl_op_definition
class FloorOp(UnaryOp):
    """floor(x), elementwise.

    ```mlir
    %y = graph.floor %x : tensor<4xf32>
    ```
    """

    name = "graph.floor"


@irdl_op_definition
class CeilOp(UnaryOp):
    """ceil(x), elementwise.

    ```mlir
    %y = graph.ceil %x : tensor<4xf32>
    ```
    """

    name = "graph.ceil"


@irdl_op_definition
class SinOp(UnaryOp):
    """sin(x), elementwise (radians).

    ```mlir
    %y = graph.sin %x : tensor<4xf32>
    ```
    """

    name = "graph.sin"


@irdl_op_definition
class CosOp(UnaryOp):
    """cos(x), elementwise (radians).

    ```mlir
    %y = graph.cos %x : tensor<4xf32>
    ```
    """

    name = "graph.cos"


@irdl_op_definition
class AtanOp(UnaryOp):
    """atan(x), elementwise, in (-pi/2, pi/2).

    ```mlir
    %y = graph.atan %x : tensor<4xf32>
    ```
    """

    name = "graph.atan"


@irdl_op_definition
class RoundOp(UnaryOp):
    """x rounded to the nearest integer, halves to even (ONNX Round).

    ```mlir
    %y = graph.round %x : tensor<4xf32>
    ```
    """

    name = "graph.round"


@irdl_op_definition
class PowOp(BinaryOp):
    """lhs ** rhs with broadcasting.

    ```mlir
    %z = graph.pow %x, %y : tensor<4xf32>, tensor<1xf32> -> tensor<4xf32>
    ```
    """

    name = "graph.pow"


@irdl_op_definition
class MaxOp(BinaryOp):
    """max(lhs, rhs) with broadcasting (NaN propagates).

    ```mlir
    %z = graph.max %x, %y : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
    """

    name = "graph.max"


@irdl_op_definition
class MinOp(BinaryOp):
    """min(lhs, rhs) with broadcasting (NaN propagates).

    ```mlir
    %z = graph.min %x, %y : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
    """

    name = "graph.min"


COMPARE_KINDS = ("lt", "le", "gt", "ge", "eq", "ne")


@irdl_op_definition
class CompareOp(IRDLOperation):
    """lhs `kind` rhs with broadcasting, as a float mask: 1.0 where it holds, else
    0.0 (`ne` also holds for NaN; the others do not). Masks feed `graph.where`
    and mask arithmetic (and = mul, or = max, not = 1 - m).

    ```mlir
    %m = graph.compare %x, %y {kind = "lt"} : tensor<4xf32>, tensor<1xf32> -> tensor<4xf32>
    ```
    """

    name = "graph.compare"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    kind = prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.BROADCAST))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, kind: str, result_type: Attribute):
        super().__init__(operands=[lhs, rhs], properties={"kind": StringAttr(kind)}, result_types=[result_type])

    def verify_(self) -> None:
        require(self.kind.data in COMPARE_KINDS, self, f"kind must be one of {COMPARE_KINDS}, got '{self.kind.data}'")
        a, b, r = shape_of(self.lhs), shape_of(self.rhs), shape_of(self.result)
        require(broadcast_shapes(a, b) == r, self, f"result shape {r} is not the broadcast shape of {a} and {b}")
        elt = self.lhs.type.element_type  # type: ignore[attr-defined]
        require(self.rhs.type.element_type == elt, self, "operands must have the same element type")  # type: ignore[attr-defined]
        out = self.result.type.element_type  # type: ignore[attr-defined]
        require(out == i1 or (out == elt and isinstance(elt, (Float16Type, Float32Type, Float64Type))), self,
                 f"result elements must be i1 (bool) or the operands' float type (a 1.0/0.0 mask), got {out}")


@irdl_op_definition
class WhereOp(IRDLOperation):
    """Elementwise `cond != 0 ? lhs : rhs`, the three operands broadcast together
    (`cond` is a float mask, as `graph.compare` makes).

    ```mlir
    %y = graph.where %m, %x, %ninf : tensor<4x4xf32>, tensor<4x4xf32>, tensor<1xf32> -> tensor<4x4xf32>
    ```
    """

    name = "graph.where"
    cond = operand_def(TensorType)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.BROADCAST))
    assembly_format = (
        "$cond `,` $lhs `,` $rhs attr-dict `:` type($cond) `,` type($lhs) `,` type($rhs) `->` type($result)"
    )

    def __init__(self, cond: SSAValue, lhs: SSAValue, rhs: SSAValue, result_type: Attribute):
        super().__init__(operands=[cond, lhs, rhs], result_types=[result_type])

    def verify_(self) -> None:
        c, a, b, r = shape_of(self.cond), shape_of(self.lhs), shape_of(self.rhs), shape_of(self.result)
        ab = broadcast_shapes(a, b)
        out = broadcast_shapes(c, ab) if ab is not None else None
        require(out == r, self, f"result shape {r} is not the broadcast shape of {c}, {a} and {b}")
        elt = self.result.type.element_type  # type: ignore[attr-defined]
        require(self.lhs.type.element_type == elt == self.rhs.type.element_type, self,  # type: ignore[attr-defined]
                 "both branches and the result must have one element type")
        cond = self.cond.type.element_type  # type: ignore[attr-defined]
        require(cond == i1 or isinstance(cond, (Float16Type, Float32Type, Float64Type)), self,
                 f"the condition must be i1 (bool) or a float mask, got {cond}")


@irdl_op_definition
class GatherElementsOp(IRDLOperation):
    """result[i] = input[i with dim `axis` replaced by indices[i]] (ONNX
    GatherElements). `indices` holds exact non-negative integers in float32
    (exact below 2^24) and has the result's shape; every index must be smaller
    than the input's extent along `axis`.

    ```mlir
    %y = graph.gather_elements %x, %idx {axis = 1 : i64} : tensor<3x5xf32>, tensor<3x2xf32> -> tensor<3x2xf32>
    ```
    """

    name = "graph.gather_elements"
    input = operand_def(TensorType)
    indices = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.INJECTIVE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input `,` $indices attr-dict `:` type($input) `,` type($indices) `->` type($result)"

    def __init__(self, x: SSAValue, indices: SSAValue, axis: int, result_type: Attribute):
        super().__init__(operands=[x, indices], properties={"axis": IntegerAttr(axis, i64)}, result_types=[result_type])

    def verify_(self) -> None:
        x, idx, r = shape_of(self.input), shape_of(self.indices), shape_of(self.result)
        a = self.axis.value.data
        require(0 <= a < len(x), self, f"axis {a} out of range for rank {len(x)}")
        require(idx == r and len(r) == len(x), self, f"indices {idx} and result {r} must have one shape of the input's rank")
        require(all(r[d] <= x[d] for d in range(len(x)) if d != a), self,
                 f"result {r} exceeds the input {x} outside axis {a}")
        ie = self.indices.type.element_type  # type: ignore[attr-defined]
        require(ie == Float32Type() or (isinstance(ie, IntegerType) and ie.width.data > 1), self,
                 f"indices must be integers (or exact float32), got {ie}")
        require(self.input.type.element_type == self.result.type.element_type, self,  # type: ignore[attr-defined]
                 "input and result element types differ")


@irdl_op_definition
class SliceOp(IRDLOperation):
    """A strided window: result[i] = input[starts + i * steps], dim by dim.

    The result type gives the number of elements taken along each dim; `steps`
    may be negative (walking backwards from `starts`). Every index read must lie
    inside the input.

    ```mlir
    %y = graph.slice %x {starts = array<i64: 0, 4>, steps = array<i64: 1, 2>} : tensor<2x16xf32> -> tensor<2x4xf32>
    ```
    """

    name = "graph.slice"
    input = operand_def(TensorType)
    starts = prop_def(DenseArrayBase)
    steps = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.INJECTIVE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, x: SSAValue, starts: Sequence[int], steps: Sequence[int], result_type: Attribute):
        props = {"starts": int_array(starts), "steps": int_array(steps)}
        super().__init__(operands=[x], properties=props, result_types=[result_type])

    def verify_(self) -> None:
        x, r = shape_of(self.input), shape_of(self.result)
        starts, steps = ints_of(self.starts), ints_of(self.steps)
        require(len(starts) == len(x) == len(steps) == len(r), self, f"needs one start and step per dim of {x}")
        for d, (n, start, step, size) in enumerate(zip(x, starts, steps, r)):
            require(step != 0, self, f"step of dim {d} is 0")
            last = start + (size - 1) * step
            require(size >= 1 and 0 <= start < n and 0 <= last < n, self,
                     f"dim {d}: {size} elements from {start} by {step} leave the input extent {n}")
        require(self.input.type.element_type == self.result.type.element_type, self, "element types differ")  # type: ignore[attr-defined]


@irdl_op_definition
class ConcatOp(IRDLOperation):
    """Joins tensors along `axis`; all other dims agree.

    ```mlir
    %y = graph.concat %a, %b {axis = 1 : i64} : tensor<2x3xf32>, tensor<2x5xf32> -> tensor<2x8xf32>
    ```
    """

    name = "graph.concat"
    inputs = var_operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.INJECTIVE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$inputs attr-dict `:` type($inputs) `->` type($result)"

    def __init__(self, inputs: Sequence[SSAValue], axis: int, result_type: Attribute):
        super().__init__(operands=[inputs], properties={"axis": IntegerAttr(axis, i64)}, result_types=[result_type])

    def verify_(self) -> None:
        shapes, r = [shape_of(v) for v in self.inputs], shape_of(self.result)
        a = self.axis.value.data
        require(len(shapes) >= 1, self, "needs at least one input")
        require(0 <= a < len(r), self, f"axis {a} out of range for rank {len(r)}")
        for s in shapes:
            require(len(s) == len(r) and s[:a] + s[a + 1:] == r[:a] + r[a + 1:], self,
                     f"input shape {s} does not match result {r} outside axis {a}")
        total = sum(s[a] for s in shapes)
        require(total == r[a], self, f"result dim {a} is {r[a]}, the inputs sum to {total}")


REDUCE_KINDS = ("sum", "mean", "max", "min", "prod")


@irdl_op_definition
class ReduceOp(IRDLOperation):
    """Reduces `axes` (sorted, non-negative) with `kind` in sum, mean, max, min, prod;
    `keepdims` keeps them as size-1 dims.

    ```mlir
    %y = graph.reduce %x {kind = "mean", axes = array<i64: 2>, keepdims = true} : tensor<1x32x128xf32> -> tensor<1x32x1xf32>
    ```
    """

    name = "graph.reduce"
    input = operand_def(TensorType)
    kind = prop_def(StringAttr)
    axes = prop_def(DenseArrayBase)
    keepdims = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.COMM_REDUCE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, x: SSAValue, kind: str, axes: Sequence[int], keepdims: bool, result_type: Attribute):
        props: dict[str, Attribute] = {"kind": StringAttr(kind), "axes": int_array(axes)}
        if keepdims:
            props["keepdims"] = BoolAttr.from_bool(True)
        super().__init__(operands=[x], properties=props, result_types=[result_type])

    @property
    def keeps_dims(self) -> bool:
        return self.keepdims is not None and bool(self.keepdims.value.data)

    def verify_(self) -> None:
        x, r, axes = shape_of(self.input), shape_of(self.result), ints_of(self.axes)
        require(self.kind.data in REDUCE_KINDS, self, f"kind must be one of {REDUCE_KINDS}, got '{self.kind.data}'")
        require(list(axes) == sorted(set(axes)) and all(0 <= a < len(x) for a in axes), self,
                 f"axes {axes} must be sorted, distinct and in [0, {len(x)})")
        if self.keeps_dims:
            expected = tuple(1 if d in axes else n for d, n in enumerate(x))
        else:
            expected = tuple(n for d, n in enumerate(x) if d not in axes)
        require(r == expected, self, f"result shape {r} should be {expected}")


@irdl_op_definition
class BroadcastToOp(IRDLOperation):
    """Repeats the input to a larger shape under numpy broadcasting (ONNX Expand).

    ```mlir
    %y = graph.broadcast_to %x : tensor<1x128xf32> -> tensor<4x128xf32>
    ```
    """

    name = "graph.broadcast_to"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.BROADCAST))
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, x: SSAValue, result_type: Attribute):
        super().__init__(operands=[x], result_types=[result_type])

    def verify_(self) -> None:
        x, r = shape_of(self.input), shape_of(self.result)
        require(broadcast_shapes(x, r) == r, self, f"input shape {x} does not broadcast to {r}")


CORE_OPS: list[type[IRDLOperation]] = [
    AbsOp,
    LogOp,
    FloorOp,
    CeilOp,
    SinOp,
    CosOp,
    AtanOp,
    RoundOp,
    PowOp,
    MaxOp,
    MinOp,
    CompareOp,
    WhereOp,
    GatherElementsOp,
    SliceOp,
    ConcatOp,
    ReduceOp,
    BroadcastToOp,
]
