"""Graph ops that only a model compiled for every shape needs (symbolic extents, dialects/sym.py).

In a static import, `Range` and the shape arithmetic fold to constants; over a
symbolic extent they are run-time tensors:

* `graph.iota`: `start + step * i` for `i` in `[0, n)`, `n` the result's (symbolic)
  extent: ONNX `Range` up to a symbol (the position ids of a sequence);
* `graph.dims`: a small int64 tensor whose entries are symbolic expressions (a
  shape value read as data, `Mul(ids, Gather(Shape(x), 1))`).

```mlir
%pos = graph.iota {start = 0 : i64, step = 1 : i64} : tensor<?xi64, #sym.dims<"sequence">>
%n = graph.dims ["sequence"] : tensor<i64>
```
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, StringAttr, TensorType, i64
from xdsl.ir import Attribute
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def, result_def, traits_def
from xdsl.traits import Pure

from ziggurat.dialects.graph_base import OpPattern, PatternKind, require, shape_of
from ziggurat.symbolic import Dim, Sym


@irdl_op_definition
class IotaOp(IRDLOperation):
    """`start + step * i` along the one dim of the result (ONNX Range over a symbolic extent).

    ```mlir
    %pos = graph.iota start 0 : i64 step 1 : i64 : tensor<?xi64, #sym.dims<"sequence">>
    ```
    """

    name = "graph.iota"
    start = prop_def(IntegerAttr)
    step = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.INJECTIVE))
    assembly_format = "`start` $start `step` $step attr-dict `:` type($result)"

    def __init__(self, start: int, step: int, result_type: Attribute):
        super().__init__(properties={"start": IntegerAttr(start, i64), "step": IntegerAttr(step, i64)},
                         result_types=[result_type])

    def verify_(self) -> None:
        require(len(shape_of(self.result)) == 1, self, "the result must be 1-D")


@irdl_op_definition
class DimsOp(IRDLOperation):
    """An int64 tensor of symbolic extents, in row-major order (a shape read as data).

    ```mlir
    %n = graph.dims ["sequence", "2*batch"] : tensor<2xi64>
    ```
    """

    name = "graph.dims"
    values = prop_def(ArrayAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.INJECTIVE))
    assembly_format = "$values attr-dict `:` type($result)"

    def __init__(self, values: Sequence[Dim], result_type: Attribute):
        super().__init__(properties={"values": ArrayAttr([StringAttr(str(v)) for v in values])},
                         result_types=[result_type])

    @property
    def dims(self) -> list[Dim]:
        return [Sym.parse(s.data) for s in self.values.data]  # type: ignore[union-attr]

    def verify_(self) -> None:
        n = 1
        for d in shape_of(self.result):
            n *= d
        require(n == len(self.values.data), self, f"holds {len(self.values.data)} values for {n} elements")


SYMBOLIC_OPS: list[type[IRDLOperation]] = [IotaOp, DimsOp]
