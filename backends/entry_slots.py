"""The entry function's static layout, which every backend lays out the same way: the arena
offsets of the entry's allocations and the argument slots of the named constant buffers
(the ABI of runtime/executor.py: inputs, outputs, constants, arena)."""

from __future__ import annotations

from typing import Any

from xdsl.ir import Operation

from ziggurat.errors import CompileError


class EntrySlots:
    """Mixin of a backend's translator: `arena_slot` and `const_slot` fill `info.arena_offsets`,
    `arena_size` and `const_names` (`finish_slots`). The class names its backend in `backend`."""

    backend = "?"
    info: Any

    def init_slots(self) -> None:
        self._arena_end = 0
        self._const_slots: dict[str, int] = {}

    def arena_slot(self, op: Operation, nbytes: int) -> int:
        """Byte offset of an entry-function allocation in the static arena (its `arena_offset`
        from plan-memory, else the next 64-byte boundary)."""
        attr = op.attributes.get("arena_offset")
        if attr is not None:
            off = attr.value.data  # type: ignore[attr-defined]
            if off < 0:
                raise CompileError(f"{self.backend} backend: negative arena_offset {off} on loop.alloc")
        else:
            off = -(-self._arena_end // 64) * 64
        self._arena_end = max(self._arena_end, off + nbytes)
        self.info.arena_offsets.append(off)
        return off

    def const_slot(self, name: str) -> int:
        """Index of a named const buffer among the const slots of the entry ABI."""
        slot = self._const_slots.get(name)
        if slot is None:
            slot = self._const_slots[name] = len(self._const_slots)
        return slot

    def finish_slots(self) -> None:
        """The arena size (64-byte multiple) and the constants' names in slot order, into `info`."""
        self.info.arena_size = -(-self._arena_end // 64) * 64
        self.info.const_names = sorted(self._const_slots, key=self._const_slots.__getitem__)
