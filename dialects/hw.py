"""The `hw` dialect: vector registers and target instructions.

The lowest of ziggurat's four levels. Its ops say *which instructions* run:
vector loads and stores at the target's vector width, broadcasts, fused
multiply-adds and horizontal reductions. Plain vector arithmetic uses `arith`
and `math` on builtin `vector<...>` types. It resembles MLIR's `vector`
dialect restricted to 1-D registers, with limits checked against the hardware
(at most 512 bits per register, the AVX-512 width).

```mlir
%a = hw.vload %x[%i, %j] : memref<4x64xf32> -> vector<16xf32>
%s = hw.vbroadcast %w : f32 -> vector<16xf32>
%r = hw.vfma %a, %s, %acc : vector<16xf32>
hw.vstore %r, %y[%i, %j] : vector<16xf32>, memref<4x64xf32>
```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import AnyFloat, IndexType, IntegerAttr, IntegerType, MemRefType, StringAttr, VectorType, i1, i32, i64
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from ziggurat.dialects.access_syntax import parse_access, print_access, resolve_indices

MAX_VECTOR_BITS = 512
REDUCE_KINDS = ("add", "mul", "max", "min")


def _require(cond: bool, op: IRDLOperation, message: str) -> None:
    if not cond:
        raise VerifyException(f"'{op.name}' op {message}")


def _check_register(op: IRDLOperation, vt: Attribute) -> None:
    _require(isinstance(vt, VectorType) and len(vt.get_shape()) == 1, op, f"needs a 1-D vector, got {vt}")
    assert isinstance(vt, VectorType)
    bits = vt.get_shape()[0] * vt.element_type.bitwidth  # type: ignore[attr-defined]
    _require(bits <= MAX_VECTOR_BITS, op, f"{vt} is {bits} bits; registers hold at most {MAX_VECTOR_BITS}")


class _VectorAccess(IRDLOperation):
    def _check_access(self, vt: Attribute) -> None:
        _check_register(self, vt)
        mt = self.buffer.type  # type: ignore[attr-defined]
        rank = len(mt.get_shape())
        _require(len(self.indices) == rank, self, f"needs {rank} indices, has {len(self.indices)}")  # type: ignore[attr-defined]
        _require(vt.element_type == mt.element_type, self, "vector and buffer element types differ")  # type: ignore[attr-defined]
        width = vt.get_shape()[0]  # type: ignore[attr-defined]
        last = mt.get_shape()[-1] if rank else 0
        _require(rank >= 1 and (last < 0 or last >= width), self,  # a symbolic dim (`?`): checked by the schedule
                 f"the buffer's last dim is shorter than the vector width {width}")


@irdl_op_definition
class VLoadOp(_VectorAccess):
    """Loads consecutive elements along the last dim into a vector register.

    ```mlir
    %v = hw.vload %x[%i, %j] : memref<4x64xf32> -> vector<16xf32>
    ```
    """

    name = "hw.vload"
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(VectorType)

    def __init__(self, buffer: SSAValue, indices: Sequence[SSAValue], vector_type: VectorType):
        super().__init__(operands=[buffer, indices], result_types=[vector_type])

    def verify_(self) -> None:
        self._check_access(self.result.type)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        print_access(printer, self.buffer, self.indices)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.buffer.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> VLoadOp:
        buf, idx = parse_access(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        mt = parser.parse_type()
        parser.parse_punctuation("->")
        vt = parser.parse_type()
        op = cls(parser.resolve_operand(buf, mt), resolve_indices(parser, idx), vt)  # type: ignore[arg-type]
        op.attributes |= attrs
        return op


@irdl_op_definition
class VStoreOp(_VectorAccess):
    """Stores a vector register to consecutive elements along the last dim.

    ```mlir
    hw.vstore %v, %y[%i, %j] : vector<16xf32>, memref<4x64xf32>
    ```
    """

    name = "hw.vstore"
    value = operand_def(VectorType)
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)

    def __init__(self, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue]):
        super().__init__(operands=[value, buffer, indices])

    def verify_(self) -> None:
        self._check_access(self.value.type)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(", ")
        print_access(printer, self.buffer, self.indices)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.value.type)
        printer.print_string(", ")
        printer.print_attribute(self.buffer.type)

    @classmethod
    def parse(cls, parser: Parser) -> VStoreOp:
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        buf, idx = parse_access(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        vt = parser.parse_type()
        parser.parse_punctuation(",")
        mt = parser.parse_type()
        op = cls(
            parser.resolve_operand(value, vt),
            parser.resolve_operand(buf, mt),
            resolve_indices(parser, idx),
        )
        op.attributes |= attrs
        return op


@irdl_op_definition
class VBroadcastOp(IRDLOperation):
    """Splats a scalar into every lane of a vector register.

    ```mlir
    %s = hw.vbroadcast %w : f32 -> vector<16xf32>
    ```
    """

    name = "hw.vbroadcast"
    scalar = operand_def()
    result = result_def(VectorType)
    traits = traits_def(Pure())
    assembly_format = "$scalar attr-dict `:` type($scalar) `->` type($result)"

    def __init__(self, scalar: SSAValue, vector_type: VectorType):
        super().__init__(operands=[scalar], result_types=[vector_type])

    def verify_(self) -> None:
        _check_register(self, self.result.type)
        _require(self.result.type.element_type == self.scalar.type, self, "scalar and lane types differ")  # type: ignore[attr-defined]


@irdl_op_definition
class VFmaOp(IRDLOperation):
    """Fused multiply-add on vector registers: a * b + c, one rounding.

    ```mlir
    %r = hw.vfma %a, %b, %c : vector<16xf32>
    ```
    """

    name = "hw.vfma"
    T: ClassVar = VarConstraint("T", base(VectorType))
    a = operand_def(T)
    b = operand_def(T)
    c = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$a `,` $b `,` $c attr-dict `:` type($result)"

    def __init__(self, a: SSAValue, b: SSAValue, c: SSAValue):
        super().__init__(operands=[a, b, c], result_types=[a.type])

    def verify_(self) -> None:
        _check_register(self, self.result.type)


@irdl_op_definition
class VReduceOp(IRDLOperation):
    """Horizontal reduction of all lanes (add, mul, max, min) to a scalar.

    ```mlir
    %s = hw.vreduce "add" %v : vector<16xf32> -> f32
    ```
    """

    name = "hw.vreduce"
    kind = prop_def(StringAttr)
    vector = operand_def(VectorType)
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$kind $vector attr-dict `:` type($vector) `->` type($result)"

    def __init__(self, kind: str, vector: SSAValue):
        elt = vector.type.element_type  # type: ignore[attr-defined]
        super().__init__(operands=[vector], properties={"kind": StringAttr(kind)}, result_types=[elt])

    def verify_(self) -> None:
        _check_register(self, self.vector.type)
        _require(self.kind.data in REDUCE_KINDS, self, f"kind must be one of {REDUCE_KINDS}")
        _require(self.result.type == self.vector.type.element_type, self, "result must be the lane type")  # type: ignore[attr-defined]


LANE_PREDICATES = ("slt", "sle", "sgt", "sge", "eq", "ne")


@irdl_op_definition
class VLaneCmpOp(IRDLOperation):
    """Per-lane compare of `base + lane` with a scalar bound, a vector mask.

    Lane `l` of the result is `(base + stride * l) <pred> bound` (attribute
    `stride`, default 1); it is how a loop
    vectorized along `base` tests index bounds (the tail of the iteration
    range, or an out-of-bounds read of a padded operand).

    ```mlir
    %m = hw.vlanecmp "slt" %i, %n : vector<16xi1>
    ```
    """

    name = "hw.vlanecmp"
    predicate = prop_def(StringAttr)
    base = operand_def(IndexType)
    bound = operand_def(IndexType)
    result = result_def(VectorType)
    traits = traits_def(Pure())
    assembly_format = "$predicate $base `,` $bound attr-dict `:` type($result)"

    def __init__(self, predicate: str, base: SSAValue, bound: SSAValue, lanes: int):
        super().__init__(operands=[base, bound], properties={"predicate": StringAttr(predicate)},
                         result_types=[VectorType(i1, [lanes])])

    def verify_(self) -> None:
        _require(self.predicate.data in LANE_PREDICATES, self, f"predicate must be one of {LANE_PREDICATES}")
        vt = self.result.type
        _require(isinstance(vt, VectorType) and len(vt.get_shape()) == 1 and vt.element_type == i1,
                 self, f"result must be a 1-D vector of i1, got {vt}")


@irdl_op_definition
class VSelectOp(IRDLOperation):
    """Per-lane choice: lane `l` is `a[l]` where the mask bit is set, else `b[l]`.

    ```mlir
    %r = hw.vselect %m, %a, %b : vector<16xi1>, vector<16xf32>
    ```
    """

    name = "hw.vselect"
    T: ClassVar = VarConstraint("T", base(VectorType))
    mask = operand_def(VectorType)
    a = operand_def(T)
    b = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$mask `,` $a `,` $b attr-dict `:` type($mask) `,` type($result)"

    def __init__(self, mask: SSAValue, a: SSAValue, b: SSAValue):
        super().__init__(operands=[mask, a, b], result_types=[a.type])

    def verify_(self) -> None:
        _check_register(self, self.result.type)
        m = self.mask.type
        _require(isinstance(m, VectorType) and m.element_type == i1
                 and m.get_shape() == self.result.type.get_shape(), self,  # type: ignore[attr-defined]
                 f"mask must be a vector of i1 with as many lanes as the result, got {m}")


class _MaskedAccess(IRDLOperation):
    def _check_masked(self, vt: Attribute) -> None:
        _check_register(self, vt)
        mt = self.buffer.type  # type: ignore[attr-defined]
        rank = len(mt.get_shape())
        _require(len(self.indices) == rank, self, f"needs {rank} indices, has {len(self.indices)}")  # type: ignore[attr-defined]
        _require(vt.element_type == mt.element_type, self, "vector and buffer element types differ")  # type: ignore[attr-defined]
        mask = self.mask.type  # type: ignore[attr-defined]
        _require(isinstance(mask, VectorType) and mask.element_type == i1
                 and mask.get_shape() == vt.get_shape(), self,  # type: ignore[attr-defined]
                 f"mask must be a vector of i1 with {vt.get_shape()[0]} lanes, got {mask}")  # type: ignore[attr-defined]


@irdl_op_definition
class VMaskLoadOp(_MaskedAccess):
    """Loads the lanes of consecutive elements whose mask bit is set; other
    lanes are 0.0 and their addresses are never touched (they may lie outside
    the buffer).

    ```mlir
    %v = hw.vmaskload %x[%i, %j], %m : memref<4x20xf32>, vector<16xi1> -> vector<16xf32>
    ```
    """

    name = "hw.vmaskload"
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    mask = operand_def(VectorType)
    result = result_def(VectorType)
    assembly_format = "$buffer `[` $indices `]` `,` $mask attr-dict `:` type($buffer) `,` type($mask) `->` type($result)"

    def __init__(self, buffer: SSAValue, indices: Sequence[SSAValue], mask: SSAValue, vector_type: VectorType):
        super().__init__(operands=[buffer, indices, mask], result_types=[vector_type])

    def verify_(self) -> None:
        self._check_masked(self.result.type)


@irdl_op_definition
class VMaskStoreOp(_MaskedAccess):
    """Stores the lanes whose mask bit is set to consecutive elements.

    ```mlir
    hw.vmaskstore %v, %y[%i, %j], %m : vector<16xf32>, memref<4x20xf32>, vector<16xi1>
    ```
    """

    name = "hw.vmaskstore"
    value = operand_def(VectorType)
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    mask = operand_def(VectorType)
    assembly_format = "$value `,` $buffer `[` $indices `]` `,` $mask attr-dict `:` type($value) `,` type($buffer) `,` type($mask)"

    def __init__(self, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue], mask: SSAValue):
        super().__init__(operands=[value, buffer, indices, mask])

    def verify_(self) -> None:
        self._check_masked(self.value.type)


ROWS_ATTR = "hw.transpose_rows"
"""Unit attribute of a `loop.load` read transposed in an unrolled strip (loop-default-schedule's
transpose_tiles.py): convert-loop-to-hw makes its gather a `hw.vgather {rows}`."""


@irdl_op_definition
class VGatherOp(_MaskedAccess):
    """Loads lanes `l` from `x[..., j + stride * l]` where the mask bit is set
    (other lanes are 0.0 and never touched): a strided vector read.

    With the unit attribute `rows` (every lane on, `x`'s last dim a multiple of the lanes, the
    stride in an outer dim) the backend reads the lanes' rows from the aligned block that holds
    `j` and transposes them in registers: in a strip of consecutive `j` unrolled by the lanes
    (transpose_tiles.py marks its read `ROWS_ATTR`), one load per row for all the strip's gathers.

    ```mlir
    %v = hw.vgather %x[%i, %j], %m {stride = 2 : i64} : memref<4x64xf32>, vector<16xi1> -> vector<16xf32>
    ```
    """

    name = "hw.vgather"
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    mask = operand_def(VectorType)
    result = result_def(VectorType)
    assembly_format = "$buffer `[` $indices `]` `,` $mask attr-dict `:` type($buffer) `,` type($mask) `->` type($result)"

    def __init__(self, buffer: SSAValue, indices: Sequence[SSAValue], mask: SSAValue, vector_type: VectorType,
                 stride: int):
        super().__init__(operands=[buffer, indices, mask], result_types=[vector_type],
                         attributes={"stride": IntegerAttr(stride, i64)})

    def verify_(self) -> None:
        self._check_masked(self.result.type)
        st = self.attributes.get("stride")
        _require(isinstance(st, IntegerAttr), self, "needs an integer `stride` attribute")


@irdl_op_definition
class VLookupOp(_MaskedAccess):
    """Loads lane `l` from `x[..., j + offsets[l]]` where the mask bit is set
    (other lanes are 0.0): a gather through per-lane element offsets, as a
    table lookup (`graph.lookup`) reads its table.

    ```mlir
    %v = hw.vlookup %t[%c0], %k, %m : memref<256xf32>, vector<16xi32>, vector<16xi1> -> vector<16xf32>
    ```
    """

    name = "hw.vlookup"
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    offsets = operand_def(VectorType)
    mask = operand_def(VectorType)
    result = result_def(VectorType)
    assembly_format = ("$buffer `[` $indices `]` `,` $offsets `,` $mask attr-dict `:` type($buffer) `,` type($offsets) "
                       "`,` type($mask) `->` type($result)")

    def __init__(self, buffer: SSAValue, indices: Sequence[SSAValue], offsets: SSAValue, mask: SSAValue,
                 vector_type: VectorType):
        super().__init__(operands=[buffer, indices, offsets, mask], result_types=[vector_type])

    def verify_(self) -> None:
        self._check_masked(self.result.type)
        ot = self.offsets.type
        _require(isinstance(ot, VectorType) and ot.element_type == i32 and ot.get_shape() == self.result.type.get_shape(),
                 self, f"offsets must be a vector of i32 with the result's lanes, got {ot}")


FLOAT_PREDICATES = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord",
                    "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true")
"""arith.cmpf's predicates, in its numbering."""


@irdl_op_definition
class VCmpfOp(IRDLOperation):
    """Per-lane float compare of two vectors, a vector mask (the vector form of
    `arith.cmpf`, whose xDSL result is a scalar i1 only).

    ```mlir
    %m = hw.vcmpf "olt" %a, %b : vector<16xf32> -> vector<16xi1>
    ```
    """

    name = "hw.vcmpf"
    T: ClassVar = VarConstraint("T", base(VectorType))
    predicate = prop_def(StringAttr)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(VectorType)
    traits = traits_def(Pure())
    assembly_format = "$predicate $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"

    def __init__(self, predicate: str, lhs: SSAValue, rhs: SSAValue):
        lanes = lhs.type.get_shape()[0]  # type: ignore[attr-defined]
        super().__init__(operands=[lhs, rhs], properties={"predicate": StringAttr(predicate)},
                         result_types=[VectorType(i1, [lanes])])

    def verify_(self) -> None:
        _require(self.predicate.data in FLOAT_PREDICATES, self, f"predicate must be one of {FLOAT_PREDICATES}")
        _check_register(self, self.lhs.type)
        _require(self.lhs.type == self.rhs.type, self, "operands must have one vector type")
        r = self.result.type
        _require(isinstance(r, VectorType) and r.element_type == i1
                 and r.get_shape() == self.lhs.type.get_shape(), self,  # type: ignore[attr-defined]
                 f"result must be a vector of i1 with as many lanes as the operands, got {r}")


CONVERSIONS = ("fptoui", "fptosi", "uitofp", "sitofp")
"""hw.vconvert's kinds: arith's integer <-> float conversions."""


@irdl_op_definition
class VConvertOp(IRDLOperation):
    """Per-lane conversion between float and integer lanes, as many lanes in as out (the vector
    form of `arith.fptoui`/`fptosi`/`uitofp`/`sitofp`, which xDSL defines on scalars only). As
    for those, a float lane out of the integer range is poison: the te builder clamps first.

    ```mlir
    %q = hw.vconvert "fptoui" %x : vector<16xf32> -> vector<16xi8>
    ```
    """

    name = "hw.vconvert"
    kind = prop_def(StringAttr)
    input = operand_def(VectorType)
    result = result_def(VectorType)
    traits = traits_def(Pure())
    assembly_format = "$kind $input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, kind: str, x: SSAValue, result_type: VectorType):
        super().__init__(operands=[x], properties={"kind": StringAttr(kind)}, result_types=[result_type])

    def verify_(self) -> None:
        kind = self.kind.data
        _require(kind in CONVERSIONS, self, f"kind must be one of {CONVERSIONS}, got '{kind}'")
        src, dst = self.input.type, self.result.type
        _require(src.get_shape() == dst.get_shape(), self,  # type: ignore[attr-defined]
                 f"operand and result must have as many lanes, got {src} and {dst}")
        to_int = kind.startswith("fpto")
        a, b = (src.element_type, dst.element_type) if to_int else (dst.element_type, src.element_type)  # type: ignore[attr-defined]
        _require(isinstance(a, AnyFloat) and isinstance(b, IntegerType), self,
                 f"'{kind}' converts {'float to integer' if to_int else 'integer to float'} lanes, got {src} -> {dst}")
        _check_register(self, src)
        _check_register(self, dst)


HW_OPS = [VLoadOp, VStoreOp, VBroadcastOp, VFmaOp, VReduceOp, VLaneCmpOp, VMaskLoadOp, VMaskStoreOp, VSelectOp, VGatherOp,
          VLookupOp, VCmpfOp, VConvertOp]

HW = Dialect("hw", HW_OPS, [])
