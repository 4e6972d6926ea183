"""The persistent compile cache: compiled models on disk, shared by every process.

`ziggurat.compile` looks a model up here (after its in-process cache, which
files builds under the same `compile_key`) before it imports anything, and
after a miss stores what it built. A hit costs a hash of the model file, one file
read and a link of object code: no ONNX import, no passes, no LLVM
optimization or code generation, and the same machine code as the first
compile (`backends/llvm/jit.py`: `JITModule.objects`, `load_objects`).

**Key**: `cache_key.compile_key`, a sha256 of the model as given, `bind`'s values, the
pipeline, the tuning database, the target and LLVM options, and the code (ziggurat's `.py`
files, Python, xdsl, llvmlite, numpy, onnx, loaded plugins); see cache_key.py.

Measured machine facts that the cost oracle reads (roofline peaks, fusion and
layout timings in the same cache folder) choose between correct programs, so
they are not in the key: after re-measuring them, `ziggurat cache clear`.
Instrumented builds (`LLVMOptions.profile`) and compiles with `after_pass`
never use the cache.

**Entry**: one file `<key>.zgc`: a fixed prefix (magic, header length, CRC-32
of the header and of the payload), a JSON header (signature, arena size,
entry symbol, stats, externals, section offsets, where it came from), then
64-byte aligned sections: the object code, the LLVM IR (zlib) and the
constants (weights after the graph passes) in argument order.

**Concurrency and damage**: an entry is written to a temporary file in the
same folder and renamed over its name (`os.replace`), so a reader sees a whole
entry or none, and processes storing the same key at once all succeed (the
last rename wins; the entries are equivalent). A reader checks the magic, the
size and both CRCs; an entry that fails is removed and counts as a miss.

**Size**: after each store the least recently used entries (a hit touches the
file's mtime) are removed until the folder holds at most `max_bytes()`.

**Settings** (environment): `ZIGGURAT_CACHE_DIR` (the root of ziggurat's cache
folder; entries go to its `compiled/`; default `$XDG_CACHE_HOME/ziggurat`, else
`~/.cache/ziggurat`), `ZIGGURAT_CACHE=0` (off unless `compile(cache=True)`),
`ZIGGURAT_CACHE_MAX_BYTES` (default 1 GiB; `512M`, `2G` are understood).
`ziggurat cache info` and `ziggurat cache clear` (cli/cache.py) inspect and empty it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ziggurat.cache_key import MAGIC, CacheKey, compile_key, package_version
from ziggurat.errors import CompileError
from ziggurat.signature import dtype_from_name, dtype_name

PREFIX = struct.Struct("<8sQII")  # magic, header bytes, CRC-32 of the header, CRC-32 of the payload
SUFFIX = ".zgc"
ALIGN = 64
DEFAULT_MAX_BYTES = 1 << 30
STALE_TMP_SECONDS = 3600  # a temporary file this old belongs to a writer that died
_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_OFF = ("0", "false", "no", "off")
# Folders of the source tree that the compiled code does not depend on.


def cache_root() -> Path:
    """ziggurat's cache folder: `$ZIGGURAT_CACHE_DIR`, else `$XDG_CACHE_HOME/ziggurat`, else `~/.cache/ziggurat`."""
    if os.environ.get("ZIGGURAT_CACHE_DIR"):
        return Path(os.environ["ZIGGURAT_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ziggurat"


def enabled(cache: bool | None = None) -> bool:
    """Whether compiles use the disk cache: `cache` when given, else unless `ZIGGURAT_CACHE` is 0/false/no/off."""
    if cache is not None:
        return bool(cache)
    return os.environ.get("ZIGGURAT_CACHE", "").strip().lower() not in _OFF


def max_bytes() -> int:
    """The size bound: `ZIGGURAT_CACHE_MAX_BYTES` (bytes, or with a K/M/G/T suffix), else 1 GiB."""
    text = os.environ.get("ZIGGURAT_CACHE_MAX_BYTES", "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    number, unit = (text[:-1], _UNITS.get(text[-1].lower())) if text[-1].isalpha() else (text, 1)
    if unit is None or not number.strip().isdigit():
        raise CompileError(f"ZIGGURAT_CACHE_MAX_BYTES={text!r} is not a size; write bytes or a number with "
                           "K, M, G or T (e.g. 536870912 or 512M)")
    return int(number) * unit


@dataclass
class Hit:
    """A compiled model read back: the fields of the compiler's build record (`jit` a
    `JITModule`, `constants`, entry symbol, arena, stats) and the model's signature."""

    built: dict[str, Any]
    inputs: list[Any]
    outputs: list[Any]


@dataclass(frozen=True)
class EntryInfo:
    """One entry as `ziggurat cache info` lists it (`header` None: unreadable)."""

    path: Path
    size: int
    last_used: float
    header: dict[str, Any] | None


class _Damaged(Exception):
    """An entry that is truncated, corrupt or of another format."""


class DiskCache:
    """The compiled models in `folder`, at most `limit` bytes of them."""

    def __init__(self, folder: str | os.PathLike, limit: int = DEFAULT_MAX_BYTES):
        self.folder = Path(folder)
        self.limit = limit

    @classmethod
    def default(cls) -> DiskCache:
        """The cache the environment configures (`cache_root()/compiled`, `max_bytes()`)."""
        return cls(cache_root() / "compiled", max_bytes())

    # -------------------------------------------------------------- keys

    def key(self, model: Any, bind: dict[str, Any] | None, pipeline: str, target: Any, options: Any,
            tuning_db: Any = None) -> CacheKey | None:
        """`compile_key`, or None for an instrumented build (never stored on disk)."""
        if getattr(options, "profile", False):
            return None
        return compile_key(model, bind, pipeline, target, options, tuning_db)

    def path(self, key: CacheKey) -> Path:
        return self.folder / f"{key.digest}{SUFFIX}"

    # -------------------------------------------------------------- read

    def load(self, key: CacheKey, options: Any) -> Hit | None:
        """The entry of `key` linked into this process (compiled for `options`), or None.
        A damaged entry is removed; one whose code cannot be linked here is a miss."""
        from ziggurat.backends.llvm.jit import load_objects
        from ziggurat.signature import TensorSpec

        path = self.path(key)
        try:
            f = open(path, "rb")
        except OSError:
            return None
        with f:
            try:
                header, buf = _read_entry(f)
                if header.get("key") != key.digest:
                    raise _Damaged("another key's entry")
                sections = header["sections"]
                objects = [_section(buf, s).tobytes() for s in sections["objects"]]
                llvm_ir = zlib.decompress(_section(buf, sections["llvm_ir"])).decode()
                constants = tuple(_section(buf, (c["offset"], c["nbytes"])).view(dtype_from_name(c["dtype"])).reshape(c["shape"])
                                  for c in header["constants"])
                inputs = [TensorSpec.from_json(s) for s in header["inputs"]]
                outputs = [TensorSpec.from_json(s) for s in header["outputs"]]
                fields = {k: tuple(v) if isinstance(v, list) else v for k, v in header["built"].items()}
                externals = [str(name) for name in header["externals"]]
            except (_Damaged, OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, ImportError,
                    zlib.error):
                _remove_if_same(path, f)
                return None
        try:
            jit = load_objects(objects, llvm_ir, options, externals)
        except (CompileError, RuntimeError, OSError, ValueError):
            return None  # e.g. a library this process cannot find: compile it here instead
        try:
            os.utime(path)  # least recently used goes first
        except OSError:
            pass
        return Hit({**fields, "jit": jit, "constants": constants}, inputs, outputs)

    def entries(self) -> list[EntryInfo]:
        """Every entry, most recently used first (headers read, payloads not checked)."""
        out = []
        for path, size, mtime in self._files():
            header = None
            try:
                with open(path, "rb") as f:
                    header = _read_header(f)
            except (_Damaged, OSError, ValueError):
                pass
            out.append(EntryInfo(path, size, mtime, header))
        return sorted(out, key=lambda e: -e.last_used)

    # -------------------------------------------------------------- write

    def store(self, key: CacheKey, built: Any, inputs: list[Any], outputs: list[Any]) -> bool:
        """Writes the build record `built` (the compiler's: `jit`, `constants`, entry symbol, arena,
        stats) under `key`, then keeps the folder under its bound; whether it was stored.
        A build that cannot be stored (no object code, a dtype the header cannot name, an
        unwritable folder) is simply not cached."""
        jit = built.jit
        if not getattr(jit, "objects", ()):
            return False
        tmp = None
        try:
            fields = {f.name: getattr(built, f.name) for f in dataclasses.fields(built) if f.name not in ("jit", "constants")}
            header, pieces = _layout(key, jit, built.constants, inputs, outputs, fields)
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = self.folder / f".{key.digest}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
            with open(tmp, "wb") as f:
                for piece in _framed(header, pieces):
                    f.write(piece)
            os.replace(tmp, self.path(key))
        except Exception:  # noqa: BLE001 - storing is an optimization: a failure only means no entry
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            return False
        self.evict()
        return True

    def evict(self, limit: int | None = None) -> int:
        """Removes least recently used entries until the folder holds at most `limit` bytes
        (default: this cache's bound), and temporary files of writers that died; bytes freed."""
        limit = self.limit if limit is None else limit
        files = sorted(self._files(), key=lambda e: e[2])
        total, freed = sum(size for _, size, _ in files), 0
        for path, size, _ in files:
            if total <= limit:
                break
            try:
                path.unlink()
                freed += size
            except OSError:
                pass  # removed by another process meanwhile
            total -= size
        self._remove_tmp(older_than=STALE_TMP_SECONDS)
        return freed

    def clear(self) -> tuple[int, int]:
        """Removes every entry (and temporary file); (entries, bytes) removed."""
        files = self._files()
        for path, _, _ in files:
            try:
                path.unlink()
            except OSError:
                pass  # removed meanwhile
        self._remove_tmp(older_than=-1.0)
        return len(files), sum(size for _, size, _ in files)

    def _remove_tmp(self, older_than: float) -> None:
        """Removes the temporary files last written more than `older_than` seconds ago."""
        now = time.time()
        try:
            scan = [e for e in os.scandir(self.folder) if e.name.endswith(".tmp")]
        except OSError:
            return
        for e in scan:
            try:
                if now - e.stat().st_mtime > older_than:
                    os.unlink(e.path)
            except OSError:
                pass  # renamed into place or removed meanwhile

    def _files(self) -> list[tuple[Path, int, float]]:
        out = []
        try:
            scan = list(os.scandir(self.folder))
        except OSError:
            return out
        for e in scan:
            if e.name.endswith(SUFFIX) and not e.name.startswith("."):
                try:
                    st = e.stat()
                except OSError:
                    continue  # removed meanwhile
                out.append((Path(e.path), st.st_size, st.st_mtime))
        return out


# ------------------------------------------------------------------ the file format


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _layout(key: CacheKey, jit: Any, constants: Any, inputs: list[Any], outputs: list[Any],
            fields: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """The header and the payload pieces (offsets relative to the payload's start)."""
    pieces: list[Any] = []
    offset = 0

    def add(data: Any) -> tuple[int, int]:
        nonlocal offset
        start = _align(offset)
        if start > offset:
            pieces.append(bytes(start - offset))
        view = memoryview(data).cast("B")
        pieces.append(view)
        offset = start + view.nbytes
        return start, view.nbytes

    sections = {"objects": [add(o) for o in jit.objects], "llvm_ir": add(zlib.compress(jit.llvm_ir.encode(), 1))}
    table = []
    for c in constants:
        array = np.asarray(c)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        start, nbytes = add(array.reshape(-1).view(np.uint8))
        table.append({"offset": start, "nbytes": nbytes, "dtype": dtype_name(array.dtype), "shape": list(array.shape)})
    header = {
        "key": key.digest,
        "model": key.label,
        "target": key.target,
        "created": time.time(),
        "ziggurat": package_version(),
        "sections": sections,
        "externals": list(jit.externals),
        "built": fields,
        "inputs": [s.to_json() for s in inputs],
        "outputs": [s.to_json() for s in outputs],
        "constants": table,
        "payload_bytes": offset,
    }
    return header, pieces


def _framed(header: dict[str, Any], pieces: list[Any]) -> list[Any]:
    """The whole file: prefix, header, padding to the payload, payload."""
    text = json.dumps(header, separators=(",", ":")).encode()
    crc = 0
    for piece in pieces:
        crc = zlib.crc32(piece, crc)
    head = PREFIX.pack(MAGIC, len(text), zlib.crc32(text), crc) + text
    return [head, bytes(_align(len(head)) - len(head)), *pieces]


def _read_header(f: Any) -> dict[str, Any]:
    prefix = f.read(PREFIX.size)
    if len(prefix) != PREFIX.size:
        raise _Damaged("truncated prefix")
    magic, n, header_crc, _ = PREFIX.unpack(prefix)
    if magic != MAGIC or n > os.fstat(f.fileno()).st_size:
        raise _Damaged("not an entry of this format")
    text = f.read(n)
    if len(text) != n or zlib.crc32(text) != header_crc:
        raise _Damaged("truncated or corrupt header")
    return json.loads(text)


def _read_entry(f: Any) -> tuple[dict[str, Any], np.ndarray]:
    """The header and the payload (in a 64-byte aligned buffer), both checked."""
    from ziggurat.runtime.executor import aligned_empty

    size = os.fstat(f.fileno()).st_size
    header = _read_header(f)
    start = _align(f.tell())
    n = int(header["payload_bytes"])
    if size != start + n:
        raise _Damaged(f"size {size}, expected {start + n}")
    f.seek(PREFIX.size - 4)
    (payload_crc,) = struct.unpack("<I", f.read(4))
    f.seek(start)
    buf = aligned_empty(n)
    if n and f.readinto(memoryview(buf)) != n:
        raise _Damaged("short read")
    if zlib.crc32(buf if n else b"") != payload_crc:
        raise _Damaged("payload checksum")
    return header, buf


def _section(buf: np.ndarray, where: Any) -> np.ndarray:
    start, n = (int(x) for x in where)
    if start < 0 or start + n > buf.size:
        raise _Damaged("section out of range")
    return buf[start:start + n]


def _remove_if_same(path: Path, f: Any) -> None:
    """Removes the damaged entry open as `f`, unless a writer has replaced it meanwhile."""
    try:
        if os.stat(path).st_ino == os.fstat(f.fileno()).st_ino:
            path.unlink()
    except OSError:
        pass
