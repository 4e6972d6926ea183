"""The `amx` dialect: Intel AMX tile registers and tile dot products.

Part of the hardware-intrinsic level. AMX has 8 tile registers (`tmm0` to
`tmm7`) of at most 16 rows of 64 bytes; a 64-byte configuration (palette 1)
fixes each tile's rows and bytes per row before use. These ops are the direct
form of LLVM's AMX intrinsics: tile numbers are immediates, as in
`../shared/docs/codegen-notes.md` section 5. Verifiers check the hardware
limits; `tile_config` must come first and `tile_release` last.

```mlir
amx.tile_config array<i64: 16, 64, 16, 64, 16, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>
amx.tile_zero 0
amx.tile_load 1, %a[%i, %k] : memref<16x32xbf16>
amx.tile_load 2, %b[%k2, %j] : memref<16x32xbf16>
amx.tdp "bf16ps" 0, 1, 2
amx.tile_store 0, %c[%i, %j] : memref<16x16xf32>
amx.tile_release
```

A kernel that uses these ops needs the CPU features `amx-tile` (plus
`amx-bf16` or `amx-int8`) and, on Linux, the per-process permission that
`ziggurat.backends.llvm.amx_runtime.require_amx()` requests before the first
tile instruction runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import I64, DenseArrayBase, IndexType, IntegerAttr, MemRefType, StringAttr, i64
from xdsl.ir import Dialect, SSAValue
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, var_operand_def
from xdsl.utils.exceptions import VerifyException

NUM_TILES = 8
MAX_ROWS = 16
MAX_COLSB = 64
# Kind of `amx.tdp` -> (LLVM intrinsic suffix, CPU feature, element bytes of A/B, of C).
TDP_KINDS: dict[str, tuple[str, str, int, int]] = {
    "bf16ps": ("tdpbf16ps", "amx-bf16", 2, 4),
    "bssd": ("tdpbssd", "amx-int8", 1, 4),
    "bsud": ("tdpbsud", "amx-int8", 1, 4),
    "busd": ("tdpbusd", "amx-int8", 1, 4),
    "buud": ("tdpbuud", "amx-int8", 1, 4),
}


def _tile(op: IRDLOperation, value: int, what: str = "tile") -> None:
    if not 0 <= value < NUM_TILES:
        raise VerifyException(f"'{op.name}' op {what} {value} is not a tile register (0..{NUM_TILES - 1})")


@irdl_op_definition
class TileConfigOp(IRDLOperation):
    """Loads the tile configuration: (rows, bytes per row) for each of the 8 tiles.

    An unused tile has shape (0, 0). Each used tile has 1 to 16 rows and 4 to
    64 bytes per row, a multiple of 4.

    ```mlir
    amx.tile_config array<i64: 16, 64, 16, 64, 16, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>
    ```
    """

    name = "amx.tile_config"
    shapes = prop_def(DenseArrayBase)

    def __init__(self, shapes: Sequence[tuple[int, int]] | DenseArrayBase):
        if not isinstance(shapes, DenseArrayBase):
            flat = [x for rc in shapes for x in rc] + [0] * (2 * (NUM_TILES - len(shapes)))
            shapes = DenseArrayBase.from_list(i64, flat)
        super().__init__(properties={"shapes": shapes})

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.shapes)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> TileConfigOp:
        shapes = parser.parse_attribute()
        if not isinstance(shapes, DenseArrayBase):
            parser.raise_error("amx.tile_config expects array<i64: rows, bytes per row, ...>")
        op = cls(shapes)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def tile_shapes(self) -> list[tuple[int, int]]:
        flat = list(self.shapes.get_values())
        return [(int(flat[2 * t]), int(flat[2 * t + 1])) for t in range(len(flat) // 2)]

    def verify_(self) -> None:
        if len(self.shapes.get_values()) != 2 * NUM_TILES:
            raise VerifyException(f"'{self.name}' op needs {2 * NUM_TILES} values: (rows, bytes per row) per tile")
        for t, (rows, colsb) in enumerate(self.tile_shapes()):
            if (rows, colsb) == (0, 0):
                continue
            if not 1 <= rows <= MAX_ROWS:
                raise VerifyException(f"'{self.name}' op tile {t} has {rows} rows; AMX tiles hold 1 to {MAX_ROWS}")
            if not 4 <= colsb <= MAX_COLSB or colsb % 4:
                raise VerifyException(
                    f"'{self.name}' op tile {t} has {colsb} bytes per row; AMX rows hold 4 to {MAX_COLSB} "
                    "bytes, a multiple of 4")


@irdl_op_definition
class TileZeroOp(IRDLOperation):
    """Sets every element of a tile to zero.

    ```mlir
    amx.tile_zero 0
    ```
    """

    name = "amx.tile_zero"
    tile = prop_def(IntegerAttr[I64])
    assembly_format = "$tile attr-dict"

    def __init__(self, tile: int):
        super().__init__(properties={"tile": IntegerAttr(tile, i64)})

    def verify_(self) -> None:
        _tile(self, self.tile.value.data)


class _TileAccess(IRDLOperation):
    tile = prop_def(IntegerAttr[I64])
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    assembly_format = "$tile `,` $buffer `[` $indices `]` attr-dict `:` type($buffer)"

    def __init__(self, tile: int, buffer: SSAValue, indices: Sequence[SSAValue]):
        super().__init__(operands=[buffer, indices], properties={"tile": IntegerAttr(tile, i64)})

    def verify_(self) -> None:
        _tile(self, self.tile.value.data)
        mt = self.buffer.type
        assert isinstance(mt, MemRefType)
        if len(mt.get_shape()) < 2:
            raise VerifyException(f"'{self.name}' op needs a buffer of rank 2 or more (rows of a tile), got {mt}")
        if len(self.indices) != len(mt.get_shape()):
            raise VerifyException(f"'{self.name}' op needs {len(mt.get_shape())} indices, has {len(self.indices)}")


@irdl_op_definition
class TileLoadOp(_TileAccess):
    """Loads a tile from rows of a buffer starting at an element; the row stride
    is the buffer's stride of its second-to-last dimension.

    ```mlir
    amx.tile_load 1, %a[%i, %k] : memref<16x32xbf16>
    ```
    """

    name = "amx.tile_load"


@irdl_op_definition
class TileStoreOp(_TileAccess):
    """Stores a tile into rows of a buffer starting at an element.

    ```mlir
    amx.tile_store 0, %c[%i, %j] : memref<16x16xf32>
    ```
    """

    name = "amx.tile_store"


@irdl_op_definition
class TdpOp(IRDLOperation):
    """Tile dot product: `dst += a * b` with the pairs (bf16) or quads (int8) of
    a row of `a` against the matching pairs or quads of `b`'s rows.

    Kinds: `bf16ps` (bf16 into f32), `bssd`, `bsud`, `busd`, `buud` (signed or
    unsigned int8 into i32).

    ```mlir
    amx.tdp "bf16ps" 0, 1, 2
    ```
    """

    name = "amx.tdp"
    kind = prop_def(StringAttr)
    dst = prop_def(IntegerAttr[I64])
    lhs = prop_def(IntegerAttr[I64])
    rhs = prop_def(IntegerAttr[I64])
    assembly_format = "$kind $dst `,` $lhs `,` $rhs attr-dict"

    def __init__(self, kind: str, dst: int, lhs: int, rhs: int):
        super().__init__(properties={"kind": StringAttr(kind), "dst": IntegerAttr(dst, i64),
                                     "lhs": IntegerAttr(lhs, i64), "rhs": IntegerAttr(rhs, i64)})

    def verify_(self) -> None:
        if self.kind.data not in TDP_KINDS:
            raise VerifyException(f"'{self.name}' op kind '{self.kind.data}' is unknown; known: {', '.join(TDP_KINDS)}")
        ids = [self.dst.value.data, self.lhs.value.data, self.rhs.value.data]
        for what, v in zip(("dst", "lhs", "rhs"), ids):
            _tile(self, v, what)
        if len(set(ids)) != 3:
            raise VerifyException(f"'{self.name}' op needs three different tiles, got {ids}")


@irdl_op_definition
class TileReleaseOp(IRDLOperation):
    """Returns the tile registers to their init state (`tilerelease`).

    ```mlir
    amx.tile_release
    ```
    """

    name = "amx.tile_release"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


AMX = Dialect("amx", [TileConfigOp, TileZeroOp, TileLoadOp, TileStoreOp, TdpOp, TileReleaseOp], [])
