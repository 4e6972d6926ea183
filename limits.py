"""The memory budget: how many bytes a model may ask ziggurat to hold.

The ONNX loader and importer refuse, before allocating anything, a model
whose external data, weights or any single tensor (by its static shape) need
more bytes than the budget (`MemoryLimitError`). The budget is an explicit
`memory_limit=` where the API takes one, else `default_memory_limit()`: the
environment variable ZIGGURAT_MEMORY_LIMIT when set (bytes, or a size such as
'512M' or '4G'), else 80% of the machine's physical memory.
"""

from __future__ import annotations

import os
import re

from ziggurat.errors import MemoryLimitError

ENV_VAR = "ZIGGURAT_MEMORY_LIMIT"
DEFAULT_FRACTION = 0.8
"""The share of physical memory a model may use when no limit is given."""

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_memory_limit(value: int | str) -> int:
    """A memory limit in bytes, from an int or a string such as '1048576',
    '512M', '4G' or '1.5GiB' (K, M, G, T, P are powers of 1024). Refuses
    (MemoryLimitError) anything else, and limits that are not positive."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise MemoryLimitError(
            f"memory limit {value!r} is neither a number of bytes nor a size string; pass e.g. 4294967296 or '4G'."
        )
    if isinstance(value, int):
        limit = value
    else:
        match = _SIZE.match(value)
        if match is None:
            raise MemoryLimitError(
                f"cannot read memory limit '{value}'; write a number of bytes or a size such as '512M' or '4G' "
                "(units K, M, G, T, powers of 1024)."
            )
        limit = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    if limit <= 0:
        raise MemoryLimitError(f"memory limit {value!r} is not a positive number of bytes; pass e.g. '4G'.")
    return limit


def physical_memory() -> int | None:
    """The machine's physical memory in bytes, or None where the OS does not say."""
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * page_size if pages > 0 and page_size > 0 else None


def default_memory_limit() -> int:
    """ZIGGURAT_MEMORY_LIMIT when set, else DEFAULT_FRACTION of physical memory
    (unbounded where the OS does not tell it)."""
    text = os.environ.get(ENV_VAR, "").strip()
    if text:
        try:
            return parse_memory_limit(text)
        except MemoryLimitError as e:
            raise MemoryLimitError(f"environment variable {ENV_VAR}: {e}") from None
    total = physical_memory()
    return int(total * DEFAULT_FRACTION) if total is not None else 1 << 62


def resolve_memory_limit(limit: int | str | None) -> int:
    """`limit` in bytes; None means `default_memory_limit()`."""
    return default_memory_limit() if limit is None else parse_memory_limit(limit)


def format_bytes(count: int) -> str:
    """`count` bytes for a message: '1.5 GiB', '512 B'."""
    for unit, size in (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def over_budget(what: str, needed: int, limit: int, advice: str) -> MemoryLimitError:
    """The error for `what` needing `needed` bytes against `limit`."""
    return MemoryLimitError(
        f"{what} needs {format_bytes(needed)} ({needed} bytes), more than the memory limit of "
        f"{format_bytes(limit)} ({limit} bytes). {advice} The limit is memory_limit= or the "
        f"environment variable {ENV_VAR} (default {int(DEFAULT_FRACTION * 100)}% of physical memory)."
    )
