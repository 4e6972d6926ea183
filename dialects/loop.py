"""The `loop` dialect: loop nests over buffers, *how* a kernel is computed.

The third of ziggurat's four levels. Values are buffers (builtin `memref`) and
scalars; kernels are `func.func`s in destination-passing style (outputs are
arguments). The dialect follows TVM's TensorIR rather than MLIR's `scf`:

* `loop.for` has bounds (constants, or run-time `index` values in a kernel
  over symbolic extents, dialects/sym.py) and a *kind* (`serial`, `parallel`,
  `vectorized`, `unrolled`) that schedule primitives set and later levels obey;
* `loop.block` is the unit of computation: it binds its own iteration
  variables, each spatial (`S`) or reduction (`R`), to expressions of the
  surrounding loop variables, so splitting or reordering loops rewrites the
  bindings and never the block body.

```mlir
func.func @relu_0(%x: memref<1x512xf32>, %y: memref<1x512xf32>) {
  loop.for %i = 0 to 1 serial {
    loop.for %j = 0 to 512 vectorized {
      loop.block "relu" [S %vi = %i, S %vj = %j] {
        %v = loop.load %x[%vi, %vj] : memref<1x512xf32>
        %c = arith.constant 0.000000e+00 : f32
        %r = arith.maximumf %v, %c : f32
        loop.store %r, %y[%vi, %vj] : memref<1x512xf32>
      }
    }
  }
  func.return
}
```
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, StringAttr, i64
from xdsl.ir import Block, Dialect, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

from ziggurat.dialects.access_syntax import parse_access, print_access, resolve_indices
from ziggurat.errors import CompileError

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled")
# A GPU loop's iterations are the grid's blocks or a block's threads (TVM's thread axes; `bind`,
# transforms/loop/primitives/bind.py): the CUDA backend reads the loop variable from %ctaid.x / %tid.x.
# A parallel loop's work estimate over a kernel's symbols (loop-dynamic-schedule writes it, the
# LLVM backend forks only where its value at the call reaches MIN_WORK: transforms/schedule/dynamic_work.py)
WORK_ATTR = "dyn.work"
MIN_WORK = 8192  # loop-parallelize-outer's `min-work` default

GPU_LOOP_KINDS = ("blockIdx.x", "threadIdx.x")
ALL_LOOP_KINDS = LOOP_KINDS + GPU_LOOP_KINDS
ITER_KINDS = ("S", "R")


def _require(cond: bool, op: IRDLOperation, message: str) -> None:
    if not cond:
        raise VerifyException(f"'{op.name}' op {message}")


class DynamicLoopError(CompileError):
    """A pass asked for the static bounds of a loop whose bounds are known only at run time."""


@irdl_op_definition
class ForOp(IRDLOperation):
    """A loop with a kind, and bounds that are constants or run-time `index` values.

    `kind` is `serial`, `parallel` (iterations may run on different threads),
    `vectorized` (the innermost loop becomes vector code in convert-loop-to-hw),
    `unrolled`, or a GPU thread axis (`blockIdx.x`, `threadIdx.x`: each
    iteration is one block of the grid, or one thread of a block). The step is
    printed only when it is not 1, and is always a constant.

    Either bound may be an SSA `index` value (a kernel over a symbolic extent,
    dialects/sym.py): such a loop is *dynamic*; `bounds` and `trip_count` then
    raise `DynamicLoopError`, so a pass written for static loops refuses it by
    name instead of reading a wrong count. The static `ub` of a dynamic upper
    bound is 0 (unknown).

    ```mlir
    loop.for %i = 0 to 64 step 4 parallel {
      "test.op"(%i) : (index) -> ()
    }
    loop.for %j = 0 to %n step 16 serial {
      "test.op"(%j) : (index) -> ()
    }
    ```
    """

    name = "loop.for"
    lb = prop_def(IntegerAttr)
    ub = prop_def(IntegerAttr)
    step = prop_def(IntegerAttr)
    kind = prop_def(StringAttr)
    dyn_lb = opt_operand_def(IndexType)
    dyn_ub = opt_operand_def(IndexType)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(self, lb: int | SSAValue, ub: int | SSAValue, step: int = 1, kind: str = "serial",
                 body: Region | None = None):
        if body is None:
            body = Region(Block(arg_types=[IndexType()]))
        super().__init__(
            operands=[[lb] if isinstance(lb, SSAValue) else [], [ub] if isinstance(ub, SSAValue) else []],
            properties={
                "lb": IntegerAttr(0 if isinstance(lb, SSAValue) else lb, i64),
                "ub": IntegerAttr(0 if isinstance(ub, SSAValue) else ub, i64),
                "step": IntegerAttr(step, i64),
                "kind": StringAttr(kind),
            },
            regions=[body],
        )

    @property
    def iv(self) -> SSAValue:
        return self.body.block.args[0]

    @property
    def is_dynamic(self) -> bool:
        return self.dyn_lb is not None or self.dyn_ub is not None

    @property
    def lower(self) -> int | SSAValue:
        return self.dyn_lb if self.dyn_lb is not None else self.lb.value.data

    @property
    def upper(self) -> int | SSAValue:
        return self.dyn_ub if self.dyn_ub is not None else self.ub.value.data

    @property
    def bounds(self) -> tuple[int, int, int]:
        if self.is_dynamic:
            raise DynamicLoopError(
                f"loop '{self.iv.name_hint or 'for'}' has a run-time bound; this pass needs static bounds "
                "(a kernel over a symbolic extent takes the dynamic schedule, loop-dynamic-schedule)")
        return self.lb.value.data, self.ub.value.data, self.step.value.data

    @property
    def trip_count(self) -> int:
        lb, ub, step = self.bounds
        return max(0, (ub - lb + step - 1) // step)

    def verify_(self) -> None:
        lb, ub, step = self.lb.value.data, self.ub.value.data, self.step.value.data
        _require(step > 0, self, f"step must be positive, got {step}")
        _require(self.is_dynamic or lb <= ub, self, f"lower bound {lb} exceeds upper bound {ub}")
        _require(self.kind.data in ALL_LOOP_KINDS, self,
                 f"kind must be one of {ALL_LOOP_KINDS}, got '{self.kind.data}'")
        args = self.body.block.args
        _require(len(args) == 1 and isinstance(args[0].type, IndexType), self, "body needs one index argument")

    def print(self, printer: Printer) -> None:
        step = self.step.value.data
        printer.print_string(" ")
        printer.print_ssa_value(self.iv)
        printer.print_string(" = ")
        for i, bound in enumerate((self.lower, self.upper)):
            if i:
                printer.print_string(" to ")
            if isinstance(bound, SSAValue):
                printer.print_ssa_value(bound)
            else:
                printer.print_string(str(bound))
        if step != 1:
            printer.print_string(f" step {step}")
        printer.print_string(f" {self.kind.data} ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        iv = parser.parse_argument(expect_type=False).resolve(IndexType())
        parser.parse_punctuation("=")

        def bound() -> int | SSAValue:
            operand = parser.parse_optional_unresolved_operand()
            if operand is not None:
                return parser.resolve_operand(operand, IndexType())
            return parser.parse_integer(allow_boolean=False)

        lb = bound()
        parser.parse_keyword("to")
        ub = bound()
        step = parser.parse_integer(allow_boolean=False) if parser.parse_optional_keyword("step") else 1
        kind = parser.parse_keyword_in(ALL_LOOP_KINDS, " (loop kind)")
        body = parser.parse_region([iv])
        op = cls(lb, ub, step, kind, body)
        op.attributes |= parser.parse_optional_attr_dict()
        return op


@irdl_op_definition
class BlockOp(IRDLOperation):
    """A named unit of computation with bound iteration variables.

    Each operand binds one block argument; `iter_kinds` says whether that
    variable is spatial (`S`) or a reduction (`R`). The body reads and writes
    buffers only through its own variables.

    ```mlir
    loop.block "dense" [S %vi = %i, S %vj = %j, R %vk = %k] {
      %a = loop.load %x[%vi, %vk] : memref<1x784xf32>
      "test.op"(%a) : (f32) -> ()
    }
    ```
    """

    name = "loop.block"
    block_name = prop_def(StringAttr)
    iter_kinds = prop_def(StringAttr)
    bindings = var_operand_def(IndexType)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())

    def __init__(self, name: str, kinds: str, bindings: Sequence[SSAValue], body: Region | None = None):
        if body is None:
            body = Region(Block(arg_types=[IndexType()] * len(bindings)))
        super().__init__(
            operands=[bindings],
            properties={"block_name": StringAttr(name), "iter_kinds": StringAttr(kinds)},
            regions=[body],
        )

    @property
    def vars(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args)

    def verify_(self) -> None:
        kinds = self.iter_kinds.data
        _require(all(k in ITER_KINDS for k in kinds), self, f"iteration kinds must be S or R, got '{kinds}'")
        _require(len(kinds) == len(self.bindings) == len(self.body.block.args), self, "needs one kind and one block argument per binding")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.block_name)
        printer.print_string(" [")
        triples = list(zip(self.iter_kinds.data, self.body.block.args, self.bindings))

        def print_binding(t) -> None:
            printer.print_string(f"{t[0]} ")
            printer.print_ssa_value(t[1])
            printer.print_string(" = ")
            printer.print_ssa_value(t[2])

        printer.print_list(triples, print_binding)
        printer.print_string("] ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> BlockOp:
        name = parser.parse_str_literal()

        def parse_binding():
            kind = parser.parse_keyword_in(ITER_KINDS, " (iteration kind)")
            arg = parser.parse_argument(expect_type=False).resolve(IndexType())
            parser.parse_punctuation("=")
            value = parser.resolve_operand(parser.parse_unresolved_operand(), IndexType())
            return kind, arg, value

        triples = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parse_binding)
        body = parser.parse_region([a for _, a, _ in triples])
        op = cls(name, "".join(k for k, _, _ in triples), [v for _, _, v in triples], body)
        op.attributes |= parser.parse_optional_attr_dict()
        return op


def _check_access(op: IRDLOperation, buf: SSAValue, indices: Sequence[SSAValue]) -> None:
    rank = len(buf.type.get_shape())  # type: ignore[attr-defined]
    _require(len(indices) == rank, op, f"needs {rank} indices for {buf.type}, has {len(indices)}")


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Loads one element of a buffer.

    ```mlir
    %v = loop.load %x[%i, %j] : memref<4x8xf32>
    ```
    """

    name = "loop.load"
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def()

    def __init__(self, buffer: SSAValue, indices: Sequence[SSAValue]):
        elt = buffer.type.element_type  # type: ignore[attr-defined]
        super().__init__(operands=[buffer, indices], result_types=[elt])

    def verify_(self) -> None:
        _check_access(self, self.buffer, self.indices)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        print_access(printer, self.buffer, self.indices)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.buffer.type)

    @classmethod
    def parse(cls, parser: Parser) -> LoadOp:
        buf, idx = parse_access(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        op = cls(parser.resolve_operand(buf, t), resolve_indices(parser, idx))
        op.attributes |= attrs
        return op


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Stores one element into a buffer.

    ```mlir
    loop.store %v, %y[%i, %j] : memref<4x8xf32>
    ```
    """

    name = "loop.store"
    value = operand_def()
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)

    def __init__(self, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue]):
        super().__init__(operands=[value, buffer, indices])

    def verify_(self) -> None:
        _check_access(self, self.buffer, self.indices)
        elt = self.buffer.type.element_type  # type: ignore[attr-defined]
        _require(self.value.type == elt, self, f"stores {self.value.type} into a buffer of {elt}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(", ")
        print_access(printer, self.buffer, self.indices)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.buffer.type)

    @classmethod
    def parse(cls, parser: Parser) -> StoreOp:
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        buf, idx = parse_access(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        op = cls(
            parser.resolve_operand(value, t.element_type),  # type: ignore[attr-defined]
            parser.resolve_operand(buf, t),
            resolve_indices(parser, idx),
        )
        op.attributes |= attrs
        return op


@irdl_op_definition
class AllocOp(IRDLOperation):
    """Allocates a buffer in a memory scope (`global`, `local`).

    In the model function a `global` buffer is a slot of the static arena; in a
    kernel it is scratch memory for the kernel's duration.

    ```mlir
    %t = loop.alloc "global" : memref<1x512xf32>
    ```
    """

    name = "loop.alloc"
    scope = prop_def(StringAttr)
    result = result_def(MemRefType)
    assembly_format = "$scope attr-dict `:` type($result)"

    def __init__(self, result_type: MemRefType, scope: str = "global"):
        super().__init__(properties={"scope": StringAttr(scope)}, result_types=[result_type])

    def verify_(self) -> None:
        _require(self.scope.data in ("global", "local"), self, f"scope must be global or local, got '{self.scope.data}'")


@irdl_op_definition
class ConstBufferOp(IRDLOperation):
    """A read-only buffer bound at run time to a named weight.

    ```mlir
    %w = loop.const_buffer "fc1.weight" : memref<512x784xf32>
    ```
    """

    name = "loop.const_buffer"
    ref = prop_def(StringAttr)
    result = result_def(MemRefType)
    assembly_format = "$ref attr-dict `:` type($result)"

    def __init__(self, ref: str, result_type: MemRefType):
        super().__init__(properties={"ref": StringAttr(ref)}, result_types=[result_type])


@irdl_op_definition
class CopyOp(IRDLOperation):
    """Copies a whole buffer into another of the same element count.

    Used where a model output is an input or a weight, or for a reshape that
    must materialize.

    ```mlir
    loop.copy %a, %b : memref<4x8xf32>, memref<32xf32>
    ```
    """

    name = "loop.copy"
    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    assembly_format = "$source `,` $dest attr-dict `:` type($source) `,` type($dest)"

    def __init__(self, source: SSAValue, dest: SSAValue):
        super().__init__(operands=[source, dest])

    def verify_(self) -> None:
        a, b = self.source.type, self.dest.type
        _require(a.element_count() == b.element_count(), self, "source and destination sizes differ")  # type: ignore[attr-defined]
        _require(a.element_type == b.element_type, self, "element types differ")  # type: ignore[attr-defined]


@irdl_op_definition
class RowsOp(IRDLOperation):
    """A block of rows of a buffer whose leading dims are symbolic, as a static buffer.

    The source's symbolic leading dims are read as one flat row index; the result is `rows`
    of them from row `start` on (the result's first dim), the trailing dims unchanged. What a
    kernel over symbolic rows (dialects/sym.py) hands to a static kernel of a fixed row count
    (transforms/te/te_row_blocks.py): no copy, an address.

    ```mlir
    %v = loop.rows %x[%r] : memref<?x?x768xf32, #sym.dims<"batch", "seq">> -> memref<64x768xf32>
    ```
    """

    name = "loop.rows"
    source = operand_def(MemRefType)
    start = operand_def(IndexType)
    result = result_def(MemRefType)
    assembly_format = "$source `[` $start `]` attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, start: SSAValue, result_type: MemRefType):
        super().__init__(operands=[source, start], result_types=[result_type])

    def verify_(self) -> None:
        src, dst = self.source.type.get_shape(), self.result.type.get_shape()  # type: ignore[attr-defined]
        lead = next((k for k, d in enumerate(src) if d >= 0), len(src))
        _require(lead >= 1 and all(d >= 0 for d in src[lead:]), self,
                 "the source's symbolic dims must lead and its other dims be static")
        _require(tuple(src[lead:]) == tuple(dst[1:]) and len(dst) >= 1 and dst[0] >= 1, self,
                 f"the result must be [rows] + the source's static dims {tuple(src[lead:])}")
        _require(self.source.type.element_type == self.result.type.element_type, self, "element types differ")  # type: ignore[attr-defined]


LOOP_OPS = [ForOp, BlockOp, LoadOp, StoreOp, AllocOp, ConstBufferOp, CopyOp, RowsOp]

Loop = Dialect("loop", LOOP_OPS, [])
