"""Loading an ONNX model safely: from a proto, bytes or a path.

Loading never runs code from the file: the bytes are parsed as a protobuf
`ModelProto`, nothing else. Tensors kept in external files are read only from
inside the model's own folder; a `location` that leads elsewhere (an absolute
path, `..`, a symlink out) is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx.external_data_helper import ExternalDataInfo

from ziggurat.errors import ModelLoadError

ModelSource = onnx.ModelProto | bytes | str | os.PathLike[str]


def load_model(source: ModelSource) -> tuple[onnx.ModelProto, str]:
    """The model held by `source`, with external data read in, and a label for messages."""
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
        data = path.read_bytes()
    except FileNotFoundError:
        raise ModelLoadError(f"cannot load ONNX model {label}: no such file. Check the path.") from None
    except OSError as e:
        raise ModelLoadError(
            f"cannot read ONNX model {label}: {e.strerror}. Check the path and its permissions."
        ) from None
    model = _parse(data, label)
    _load_external_data(model, path.parent, label)
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


def _tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """The tensors of the main graph: initializers and the values of Constant nodes."""
    yield from model.graph.initializer
    for node in model.graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.TENSOR:
                yield attribute.t


def _refuse_external_data(model: onnx.ModelProto, label: str) -> None:
    for tensor in _tensors(model):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            raise ModelLoadError(
                f"{label} keeps tensor '{tensor.name}' in an external file, which cannot be "
                "located without the model's path. Pass the path of the .onnx file instead."
            )


def _load_external_data(model: onnx.ModelProto, folder: Path, label: str) -> None:
    """Reads external tensor data in place, only from files inside `folder`."""
    root = folder.resolve()
    for tensor in _tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        try:
            info = ExternalDataInfo(tensor)
        except ValueError as e:
            raise ModelLoadError(f"{label}: bad external data entry for tensor '{tensor.name}': {e}") from None
        file = (root / info.location).resolve()
        if not info.location or not file.is_relative_to(root):
            raise ModelLoadError(
                f"{label}: tensor '{tensor.name}' refers to external data '{info.location}' outside "
                "the model's folder; ziggurat only reads external data stored next to the model. "
                "Move the data file into the model's folder and re-save the model."
            )
        tensor.raw_data = _read_slice(file, info.offset or 0, info.length, tensor, label)
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]


def _read_slice(file: Path, offset: int, length: int | None, tensor: onnx.TensorProto, label: str) -> bytes:
    expected = int(np.prod(tensor.dims)) * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    try:
        with file.open("rb") as f:
            f.seek(offset)
            data = f.read(expected if length is None else length)
    except OSError as e:
        raise ModelLoadError(
            f"{label}: cannot read external data '{file.name}' of tensor '{tensor.name}': {e.strerror}. "
            "Keep the data file next to the model."
        ) from None
    if len(data) != expected:
        raise ModelLoadError(
            f"{label}: external data '{file.name}' of tensor '{tensor.name}' holds {len(data)} bytes, "
            f"expected {expected}. The data file is truncated or does not belong to this model."
        )
    return data
