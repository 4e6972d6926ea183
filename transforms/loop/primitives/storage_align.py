"""storage_align: pad a kernel-local buffer so that the stride of one axis is
`offset` modulo `factor` elements (avoids cache-set conflicts of power-of-two
strides, or aligns rows for vector loads).

```mlir
%t = loop.alloc "local" : memref<64x64xf32>
loop.for %i = 0 to 64 serial { loop.for %j = 0 to 64 serial {
  loop.block "p" [S %a = %i, S %b = %j] { ... loop.store %v, %t[%a, %b] : memref<64x64xf32> } } }
```
storage_align("p", 0, axis=0, factor=16, offset=1) becomes
```mlir
%t = loop.alloc "local" : memref<64x65xf32>
loop.for %i = 0 to 64 serial { loop.for %j = 0 to 64 serial {
  loop.block "p" [S %a = %i, S %b = %j] { ... loop.store %v, %t[%a, %b] : memref<64x65xf32> } } }
```
Dimension `axis + 1` grows by the smallest padding that gives the stride of
`axis` the wanted residue; indices stay the same, so every access keeps its
element. Buffer `n` counts the distinct buffers the block stores. Legal only
for a `loop.alloc` of the kernel that is used by loads and stores alone.
"""

from __future__ import annotations

from math import prod

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, MemRefType, i64

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.cache_read import pick
from ziggurat.transforms.loop.primitives.regions import local_alloc, logical_shape, writes

W = "storage_align"


def storage_align(fn: func.FuncOp, blk: loop.BlockOp, n: int, axis: int, factor: int, offset: int) -> None:
    name = blk.block_name.data
    buf = pick(writes(blk), n, W, name, "writes")
    alloc = local_alloc(fn, buf, name, W)
    shape = list(buf.type.get_shape())  # type: ignore[attr-defined]
    if not 0 <= axis < len(shape) - 1:
        raise ScheduleError(f"{W}: axis {axis} of the {len(shape)}-d buffer of block '{name}' has no padded "
                            f"stride; use an axis from 0 to {len(shape) - 2}")
    if factor < 1 or not 0 <= offset < factor:
        raise ScheduleError(f"{W}: need factor >= 1 and 0 <= offset < factor, got factor {factor} offset {offset}")
    bad = [u.operation.name for u in buf.uses if not isinstance(u.operation, (loop.LoadOp, loop.StoreOp))
           or u.index != (0 if isinstance(u.operation, loop.LoadOp) else 1)]
    if bad:
        raise ScheduleError(f"{W}: the buffer of block '{name}' is used by '{bad[0]}'; padding would change it")
    inner = prod(shape[axis + 2:])
    pad = next((p for p in range(factor) if ((shape[axis + 1] + p) * inner) % factor == offset), None)
    if pad is None:
        raise ScheduleError(f"{W}: no padding of dimension {axis + 1} of the buffer of block '{name}' gives a "
                            f"stride of {offset} modulo {factor} (inner extent {inner})")
    shape[axis + 1] += pad
    new = loop.AllocOp(MemRefType(buf.type.element_type, shape), "local")  # type: ignore[attr-defined]
    new.attributes["logical_shape"] = ArrayAttr([IntegerAttr(x, i64) for x in logical_shape(buf)])
    alloc.parent_block().insert_op_before(new, alloc)
    buf.replace_all_uses_with(new.result)
    alloc.detach()
    alloc.erase()
