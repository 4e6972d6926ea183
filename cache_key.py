"""The key of a compile in the compile caches: what a cached build depends on.

`compile_key` is computed before the model is imported; the compiler's
in-process cache and the disk cache (cache.py) both file builds under it.

**Key**: a sha256 of

* the model as given: the bytes of the ONNX file (plus those of the
  external-data files it names), of the given bytes, of the serialized
  ModelProto, or the graph IR and weights of an `ImportedModel`; `bind`'s values;
* the pipeline string, the content of the tuning database, the Target and the
  `LLVMOptions` (CPU, features, threads, opt level, fast-math flags, ...);
* the code: ziggurat's version and a sha256 of the package's `.py` files
  (read once per process, about 5 ms), Python's version, the installed xdsl,
  llvmlite (which bundles LLVM), numpy and onnx (the name, version and RECORD
  of their dist-info: a hash of every installed file), and the source files
  of loaded plugins' passes and dialects. A stale entry after a code change
  would be a wrong program, so every `.py` file counts, not a version string.

Measured machine facts that the cost oracle reads (roofline peaks, fusion and
layout timings in the same cache folder) choose between correct programs, so
they are not in the key: after re-measuring them, `ziggurat cache clear`.
Instrumented builds (`LLVMOptions.profile`) and compiles with `after_pass`
never use the cache.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"ZGCACHE1"  # the disk format's magic, also in every key: a new format gets new keys
DEPENDENCIES = ("xdsl", "llvmlite", "numpy", "onnx")  # the packages whose code shapes a compile
_NOT_CODE = {"tests", "docs", "benchmarks", "build", "dist", "__pycache__"}
_MAX_FOLDER_FILES = 1000  # files of a model's folder searched for its external data
_CHUNK = 1 << 20  # bytes hashed at a time


@dataclass(frozen=True)
class CacheKey:
    """The key of one compile, and what to call the model in `ziggurat cache info`."""

    digest: str
    label: str
    target: str = ""


def compile_key(model: Any, bind: dict[str, Any] | None, pipeline: str, target: Any, options: Any,
                tuning_db: Any = None) -> CacheKey | None:
    """The key of compiling `model` (path, bytes, ModelProto or ImportedModel), computed before
    importing it; the compiler's in-process cache and the disk cache both file builds under it.
    None for a model that cannot be keyed (external data that cannot be listed, an unreadable
    plugin or tuning database)."""
    model_part = model_digest(model)
    bind_part = _bind_digest(bind)
    plugins = _plugin_stamp()
    if model_part is None or bind_part is None or plugins is None:
        return None
    h = hashlib.sha256(MAGIC + code_stamp())
    for part in (model_part, bind_part, pipeline, repr(target), str(target), repr(options), plugins):
        h.update(f"|{part}".encode())
    if tuning_db is not None:
        try:
            h.update(_file_digest(Path(tuning_db)).encode())
        except OSError:
            return None
    threads = getattr(options, "num_threads", "?")
    return CacheKey(h.hexdigest(), _label(model), f"{target} (cpu {getattr(options, 'cpu', '?')}, {threads} thread(s))")


@cache
def code_stamp() -> bytes:
    """A digest of the code a compile runs: ziggurat's version and `.py` files, Python's version
    and the installed xdsl, llvmlite (with its LLVM), numpy and onnx. Computed once per process
    (about 5 ms)."""
    package = _package()
    h = hashlib.sha256(f"ziggurat {package.__version__}|python {sys.version}|".encode())
    for name in DEPENDENCIES:
        h.update(f"|{name}:{_installed(name)}".encode())
    root = os.path.dirname(os.path.realpath(package.__file__))
    for path in _source_files(root):
        h.update(f"|{os.path.relpath(path, root)}|".encode())
        with open(path, "rb") as f:
            h.update(f.read())
    return h.digest()


def _installed(name: str) -> str:
    """What is installed of package `name`: its dist-info folder's name (name and version) and a
    digest of its RECORD, which lists a hash of every installed file. Read without importing the
    package or importlib.metadata (together 50 ms of a 100 ms cache hit)."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return "not installed"
    site = os.path.dirname(os.path.dirname(spec.origin))
    try:
        infos = sorted(d for d in os.listdir(site) if d.endswith(".dist-info") and d.lower().startswith(f"{name}-"))
        h = hashlib.sha256()
        for info in infos:
            with open(os.path.join(site, info, "RECORD"), "rb") as f:
                h.update(info.encode() + f.read())
    except OSError:
        return f"at {spec.origin}, no metadata"
    return f"{','.join(infos)}:{h.hexdigest()}" if infos else f"at {spec.origin}, no metadata"


def package_version() -> str:
    """ziggurat's version."""
    return _package().__version__


def _package() -> Any:
    """The `ziggurat` package (imported before any of its modules; not imported here, which
    would close a cycle through `ziggurat.compile`)."""
    return sys.modules[__name__.rpartition(".")[0]]


def _source_files(root: str) -> list[str]:
    """The package's .py files, without tests, docs, benchmarks and virtual environments."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _NOT_CODE and not d.startswith(".") and not d.endswith(".egg-info")
                   and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))]
        out.extend(os.path.join(folder, name) for name in files if name.endswith(".py"))
    return sorted(out)


def model_digest(model: Any) -> str | None:
    """A digest of the model as given (see the module docstring), or None when it cannot be
    keyed before importing it (a file whose external data cannot be listed)."""
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        try:
            h, external = _model_file_digest(path)
        except OSError:
            return None  # the import says what is wrong
        if external:  # external data entries name their files under the key "location"
            try:
                data = path.read_bytes()
            except OSError:
                return None
            files = _named_files(path.parent, data)
            if files is None:
                return None
            for rel, file in files:
                try:
                    h.update(f"|{rel}:{_file_digest(file)}".encode())
                except OSError:
                    return None
        return "onnx-file:" + h.hexdigest()
    if isinstance(model, (bytes, bytearray, memoryview)):
        return "onnx-bytes:" + hashlib.sha256(model).hexdigest()
    if hasattr(model, "SerializeToString"):  # a ModelProto (onnx is not imported for it)
        return "onnx-proto:" + hashlib.sha256(model.SerializeToString()).hexdigest()
    if hasattr(model, "module") and hasattr(model, "weights"):  # an ImportedModel
        h = hashlib.sha256()
        hash_imported(h, model)
        return "imported:" + h.hexdigest()
    return None


def hash_imported(h: Any, imported: Any) -> None:
    """Feeds an `ImportedModel`'s graph IR and weights to the hash `h`."""
    h.update(str(imported.module).encode())
    for name in sorted(imported.weights):
        array = imported.weights[name]
        h.update(f"|{name}:{array.dtype}:{array.shape}|".encode())
        data = np.ascontiguousarray(array)
        h.update(data.data if data.dtype.kind != "V" else data.reshape(-1).view(np.uint8).data)  # ml_dtypes types


def _model_file_digest(path: Path) -> tuple[Any, bool]:
    """The sha256 of the file at `path`, read in chunks (a model's bytes are never all in memory
    at once), and whether the bytes contain `location` (the key of external data entries)."""
    key = b"location"
    h, found, tail = hashlib.sha256(), False, b""
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            found = found or key in tail + chunk[:len(key) - 1] or key in chunk  # also across chunks
            tail = chunk[1 - len(key):]
    return h, found


def _named_files(folder: Path, data: bytes) -> list[tuple[str, Path]] | None:
    """The files under `folder` whose relative path the model's bytes contain (its external
    data, and perhaps a few others); None for a folder too large to search."""
    found, seen = [], 0
    for sub, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            seen += 1
            if seen > _MAX_FOLDER_FILES:
                return None
            path = Path(sub, name)
            rel = path.relative_to(folder).as_posix()
            if rel.encode() in data:
                found.append((rel, path))
    return found


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _bind_digest(bind: dict[str, Any] | None) -> str | None:
    if not bind:
        return ""
    h = hashlib.sha256()
    for name in sorted(bind):
        array = np.ascontiguousarray(np.asarray(bind[name]))
        if array.dtype.hasobject:
            return None
        h.update(f"|{name}:{array.dtype.str}:{array.shape}|".encode())
        h.update(array.reshape(-1).view(np.uint8).data)
    return h.hexdigest()


def _plugin_stamp() -> str | None:
    """The source of every loaded plugin's passes and dialects ("" without plugins); None when
    a plugin's source file cannot be read."""
    from ziggurat import registry

    classes = [factory() for factory in registry.plugin_passes().values()]
    for factory in registry.plugin_dialects().values():
        dialect = factory()
        classes.extend([*dialect.operations, *dialect.attributes])
    files = sorted({getattr(sys.modules.get(c.__module__), "__file__", None) or "" for c in classes})
    if not files:
        return ""
    h = hashlib.sha256()
    for name in files:
        try:
            h.update(f"|{name}|".encode() + Path(name).read_bytes())
        except OSError:
            return None
    return h.hexdigest()


def _label(model: Any) -> str:
    if isinstance(model, (str, os.PathLike)):
        return str(Path(model).resolve())
    if isinstance(model, (bytes, bytearray, memoryview)):
        return "<bytes>"
    graph = getattr(model, "graph", None)
    if graph is not None:
        return f"<ModelProto {graph.name}>"
    return "<ImportedModel>"
