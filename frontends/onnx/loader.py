"""Loading an ONNX model safely: from a proto, bytes or a path.

Loading never runs code from the file: the bytes are parsed as a protobuf
`ModelProto`, nothing else. Tensors kept in external files are read only from
inside the model's own folder; a `location` that leads elsewhere (an absolute
path, `..`, a symlink out) is refused.

Nothing is read before it is known to fit: a model file larger than the memory
limit (ziggurat/limits.py), external data whose entries together need more
than it, and an entry whose offset or length runs past the end of its file,
or whose length disagrees with its tensor's dims and element type, are refused
(MemoryLimitError, ModelLoadError) before any tensor data is read.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx.external_data_helper import ExternalDataInfo

from ziggurat.errors import ModelLoadError
from ziggurat.limits import format_bytes, over_budget, resolve_memory_limit

ModelSource = onnx.ModelProto | bytes | str | os.PathLike[str]

_BITS = {onnx.TensorProto.INT4: 4, onnx.TensorProto.UINT4: 4, onnx.TensorProto.FLOAT4E2M1: 4,
         onnx.TensorProto.INT2: 2, onnx.TensorProto.UINT2: 2,
         onnx.TensorProto.FLOAT6E2M3: 6, onnx.TensorProto.FLOAT6E3M2: 6}
"""Element types packed below one byte in raw data (and external files)."""


def is_known_type(data_type: int) -> bool:
    """Whether `data_type` is an element type code this onnx defines (UNDEFINED is not)."""
    return data_type != onnx.TensorProto.UNDEFINED and data_type in onnx.TensorProto.DataType.values()


def type_name(data_type: int) -> str:
    """The ONNX name of an element type code, or the bare number when it has none."""
    return onnx.TensorProto.DataType.Name(data_type) if is_known_type(data_type) else str(data_type)


def packed_bits(data_type: int) -> int | None:
    """The bits of one element of a sub-byte type (4-, 2- and 6-bit types share bytes), else None."""
    return _BITS.get(data_type)


def tensor_nbytes(data_type: int, count: int, packed: bool = False) -> int | None:
    """Bytes of `count` elements of `data_type`: as raw data (`packed`: 4-, 2-
    and 6-bit types share bytes) or as a numpy array (one byte each); None
    for strings and unknown types, whose size the type does not tell."""
    if not is_known_type(data_type) or data_type == onnx.TensorProto.STRING:
        return None
    if packed and data_type in _BITS:
        return math.ceil(count * _BITS[data_type] / 8)
    return count * onnx.helper.tensor_dtype_to_np_dtype(data_type).itemsize


def load_model(source: ModelSource, memory_limit: int | str | None = None) -> tuple[onnx.ModelProto, str]:
    """The model held by `source`, with external data read in, and a label for messages.

    `memory_limit` (bytes or a size such as '4G'; None: limits.default_memory_limit())
    bounds the model file and its external data, checked before reading them.
    """
    limit = resolve_memory_limit(memory_limit)
    if isinstance(source, onnx.ModelProto):
        _refuse_external_data(source, "the given ModelProto")
        return source, "the given ModelProto"
    if isinstance(source, bytes):
        model = _parse(source, "the given bytes")
        _refuse_external_data(model, "the given bytes")
        return model, "the given bytes"
    path = Path(source)
    label = f"'{path}'"
    try:
        size = path.stat().st_size
        if size > limit:
            raise over_budget(f"ONNX model {label}", size, limit, "Load it on a machine with more memory.")
        data = path.read_bytes()
    except FileNotFoundError:
        raise ModelLoadError(f"cannot load ONNX model {label}: no such file. Check the path.") from None
    except OSError as e:
        raise ModelLoadError(
            f"cannot read ONNX model {label}: {e.strerror}. Check the path and its permissions."
        ) from None
    model = _parse(data, label)
    _load_external_data(model, path.parent, label, limit)
    return model, label


def _parse(data: bytes, label: str) -> onnx.ModelProto:
    """Parses protobuf bytes, refusing anything that does not look like an ONNX model."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except DecodeError as e:
        raise ModelLoadError(
            f"{label} is not an ONNX model (protobuf decoding failed: {e}). "
            "Pass a binary .onnx file, e.g. one written by onnx.save or torch.onnx.export."
        ) from None
    if not model.HasField("graph") or not model.opset_import:
        raise ModelLoadError(
            f"{label} is not an ONNX model (it has no graph or no opset_import). "
            "Pass a binary .onnx file, e.g. one written by onnx.save or torch.onnx.export."
        )
    return model


def graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """The tensors of `graph` and its subgraphs (If branches, Loop and Scan
    bodies): initializers and the tensor attributes of nodes (Constant values)."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.TENSOR:
                yield attribute.t
            elif attribute.type == onnx.AttributeProto.TENSORS:
                yield from attribute.tensors
            elif attribute.type == onnx.AttributeProto.GRAPH:
                yield from graph_tensors(attribute.g)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for body in attribute.graphs:
                    yield from graph_tensors(body)


def _tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    return graph_tensors(model.graph)


def _refuse_external_data(model: onnx.ModelProto, label: str) -> None:
    for tensor in _tensors(model):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            raise ModelLoadError(
                f"{label} keeps tensor '{tensor.name}' in an external file, which cannot be "
                "located without the model's path. Pass the path of the .onnx file instead."
            )


@dataclass
class _Entry:
    """One external data entry, checked: `size` bytes at `offset` of `file`."""

    tensor: onnx.TensorProto
    file: Path
    offset: int
    size: int


def _load_external_data(model: onnx.ModelProto, folder: Path, label: str, limit: int) -> None:
    """Reads external tensor data in place, only from files inside `folder`,
    once every entry is checked and their total fits `limit`."""
    root = folder.resolve()
    entries = [_entry(tensor, root, label) for tensor in _tensors(model)
               if tensor.data_location == onnx.TensorProto.EXTERNAL]
    total = sum(entry.size for entry in entries)
    if total > limit:
        biggest = max(entries, key=lambda e: e.size)
        raise over_budget(
            f"the external data of {label} ({len(entries)} tensor(s), the largest '{biggest.tensor.name}' "
            f"of {format_bytes(biggest.size)})", total, limit, "Load it on a machine with more memory.")
    for entry in entries:
        entry.tensor.raw_data = _read_slice(entry, label)
        entry.tensor.data_location = onnx.TensorProto.DEFAULT
        del entry.tensor.external_data[:]


def _entry(tensor: onnx.TensorProto, root: Path, label: str) -> _Entry:
    """The checked external data entry of `tensor`: the file lies inside
    `root`, and offset and length fit the file and the tensor's dims."""
    where = f"{label}: tensor '{tensor.name}'"
    try:
        info = ExternalDataInfo(tensor)
    except ValueError as e:
        raise ModelLoadError(f"{label}: bad external data entry for tensor '{tensor.name}': {e}") from None
    file = (root / info.location).resolve()
    if not info.location or not file.is_relative_to(root):
        raise ModelLoadError(
            f"{where} refers to external data '{info.location}' outside "
            "the model's folder; ziggurat only reads external data stored next to the model. "
            "Move the data file into the model's folder and re-save the model."
        )
    if any(d < 0 for d in tensor.dims):
        raise ModelLoadError(f"{where} has negative dims {list(tensor.dims)}. Re-export the model.")
    expected = tensor_nbytes(tensor.data_type, math.prod(tensor.dims), packed=True)
    if expected is None:
        raise ModelLoadError(
            f"{where} keeps element type {type_name(tensor.data_type)} in external data, which ziggurat cannot "
            "size; store the tensor inside the model."
        )
    offset = info.offset or 0
    try:
        file_size = file.stat().st_size
    except OSError as e:
        raise ModelLoadError(
            f"{label}: cannot read external data '{info.location}' of tensor '{tensor.name}': {e.strerror}. "
            "Keep the data file next to the model."
        ) from None
    if info.length is not None and info.length != expected:
        raise ModelLoadError(
            f"{where} declares {info.length} bytes of external data in '{info.location}', but its dims "
            f"{list(tensor.dims)} of {type_name(tensor.data_type)} need {expected}. The entry is corrupt; "
            "re-save the model."
        )
    if offset < 0 or offset + expected > file_size:
        raise ModelLoadError(
            f"{where} reads bytes {offset} to {offset + expected} of external data '{info.location}', which "
            f"holds {file_size} bytes. The data file is truncated or does not belong to this model."
        )
    return _Entry(tensor, file, offset, expected)


def _read_slice(entry: _Entry, label: str) -> bytes:
    try:
        with entry.file.open("rb") as f:
            f.seek(entry.offset)
            data = f.read(entry.size)
    except OSError as e:
        raise ModelLoadError(
            f"{label}: cannot read external data '{entry.file.name}' of tensor '{entry.tensor.name}': "
            f"{e.strerror}. Keep the data file next to the model."
        ) from None
    if len(data) != entry.size:
        raise ModelLoadError(
            f"{label}: external data '{entry.file.name}' of tensor '{entry.tensor.name}' holds {len(data)} "
            f"bytes, expected {entry.size}. The data file is truncated or does not belong to this model."
        )
    return data
