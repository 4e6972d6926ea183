"""Mutated model files: bit flips, truncations, insertions and protobuf-level edits.

A case takes a valid seed model (built here with onnx.helper; in the
on-demand fuzzer also /work/shared/models/**/*.onnx when that folder exists),
applies 1-3 mutations drawn from a seeded RNG and feeds the bytes to
`ziggurat.compile` in the worker. Acceptable: a ZigguratError, or a model that
compiles, runs and (when onnxruntime runs it too) matches onnxruntime.
Anything else (another exception type, a crash, a hang) is a finding.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPS = ["Relu", "Add", "Conv", "MatMul", "Gemm", "Reshape", "Gather", "Softmax", "MaxPool", "Concat", "Transpose",
       "Flatten", "Slice", "Identity", "Cast", "Where", "ReduceMean", "LSTM", "Loop", "If", "Split", "Resize",
       "NoSuchOp", "", "Scan", "TopK", "Einsum", "Pad", "Expand", "Tile"]
INTS = [0, 1, 2, 3, -1, -2, 5, 7, 100, -100, 2**31 - 1, 2**31, -(2**31), 2**62, -(2**63)]
FLOATS = [0.0, -1.0, 1e-30, 1e30, float("inf"), float("nan"), -0.0, 3.5]


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.3).astype(np.float32)


def _model(nodes, inputs, outputs, inits, opset: int = 17) -> bytes:
    graph = helper.make_graph(nodes, "seed", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def seed_models() -> dict[str, bytes]:
    """The built-in valid models that mutations start from."""
    rng = np.random.default_rng(0)
    f = TensorProto.FLOAT
    cnn = _model(
        [helper.make_node("Conv", ["x", "k1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Conv", ["p1", "k2"], ["c2"], group=2, strides=[1, 1]),
         helper.make_node("GlobalAveragePool", ["c2"], ["g"]),
         helper.make_node("Flatten", ["g"], ["fl"]),
         helper.make_node("Gemm", ["fl", "fw", "fb"], ["logits"], transB=1),
         helper.make_node("Softmax", ["logits"], ["y"], axis=1)],
        [helper.make_tensor_value_info("x", f, [1, 2, 8, 8])],
        [helper.make_tensor_value_info("y", f, [1, 5])],
        {"k1": _w(rng, 4, 2, 3, 3), "b1": _w(rng, 4), "k2": _w(rng, 6, 2, 3, 3), "fw": _w(rng, 5, 6), "fb": _w(rng, 5)})
    mlp = _model(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]),
         helper.make_node("Add", ["h", "b1"], ["hb"]),
         helper.make_node("Tanh", ["hb"], ["t"]),
         helper.make_node("Gemm", ["t", "w2", "b2"], ["o"], alpha=0.5),
         helper.make_node("Sigmoid", ["o"], ["y"])],
        [helper.make_tensor_value_info("x", f, [2, 6])],
        [helper.make_tensor_value_info("y", f, [2, 3])],
        {"w1": _w(rng, 6, 8), "b1": _w(rng, 8), "w2": _w(rng, 8, 3), "b2": _w(rng, 3)})
    gather = _model(
        [helper.make_node("Gather", ["emb", "ids"], ["e"], axis=0),
         helper.make_node("Reshape", ["e", "shape"], ["r"]),
         helper.make_node("Transpose", ["r"], ["tr"], perm=[1, 0, 2]),
         helper.make_node("Concat", ["tr", "x"], ["cat"], axis=2),
         helper.make_node("ReduceMean", ["cat"], ["m"], axes=[2], keepdims=1),
         helper.make_node("Slice", ["cat", "st", "en", "ax"], ["sl"]),
         helper.make_node("Mul", ["sl", "m"], ["y"])],
        [helper.make_tensor_value_info("x", f, [3, 2, 4]), helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info("y", f, [3, 2, 3])],
        {"emb": _w(rng, 5, 4), "shape": np.array([2, 3, 4], np.int64), "st": np.array([1], np.int64),
         "en": np.array([4], np.int64), "ax": np.array([2], np.int64)})
    logic = _model(
        [helper.make_node("Greater", ["x", "zero"], ["pos"]),
         helper.make_node("Where", ["pos", "x", "neg"], ["w"]),
         helper.make_node("Cast", ["w"], ["i"], to=TensorProto.INT32),
         helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
         helper.make_node("Clip", ["fi", "lo", "hi"], ["y"]),
         helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0)],
        [helper.make_tensor_value_info("x", f, [4, 5])],
        [helper.make_tensor_value_info("y", f, [4, 5]), helper.make_tensor_value_info("s", f, [4])],
        {"zero": np.zeros((), np.float32), "neg": np.full((5,), -3.0, np.float32), "lo": np.array(-2.0, np.float32),
         "hi": np.array(1.0, np.float32), "axes": np.array([1], np.int64)})
    return {"cnn": cnn, "mlp": mlp, "gather": gather, "logic": logic}


def shared_models(root: str = "/work/shared/models", limit_bytes: int = 8 << 20) -> dict[str, bytes]:
    """The .onnx files under `root` (on-demand mode only; empty when the folder does not exist)."""
    base = Path(root)
    if not base.is_dir():
        return {}
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*.onnx"))
            if p.stat().st_size <= limit_bytes}


# -- byte-level mutations -----------------------------------------------------------------
def bit_flip(data: bytes, r: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(r.randint(1, 8)):
        i = r.randrange(len(b))
        b[i] ^= 1 << r.randrange(8)
    return bytes(b)


def truncate(data: bytes, r: random.Random) -> bytes:
    return data[: r.randrange(len(data))]


def insert_bytes(data: bytes, r: random.Random) -> bytes:
    i = r.randrange(len(data) + 1)
    return data[:i] + bytes(r.randrange(256) for _ in range(r.randint(1, 16))) + data[i:]


def duplicate_chunk(data: bytes, r: random.Random) -> bytes:
    i = r.randrange(len(data))
    j = min(len(data), i + r.randint(1, 64))
    return data[:j] + data[i:j] + data[j:]


# -- protobuf-level mutations (on a parsed ModelProto) ------------------------------------
def _value_infos(m: onnx.ModelProto):
    return list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info)


def edit_dims(m, r) -> None:
    dims = [t.type.tensor_type.shape.dim for t in _value_infos(m) if t.type.tensor_type.shape.dim]
    dims += [t.dims for t in m.graph.initializer if len(t.dims)]
    if not dims:
        return
    d = r.choice(dims)
    i = r.randrange(len(d))
    value = r.choice([0, 1, 2, 3, 7, -1, 64, 2**31, 2**40, -(2**40)])
    if isinstance(d[i], int):
        d[i] = value
    elif r.random() < 0.2:
        d[i].dim_param = r.choice(["N", "batch", ""])
    else:
        d[i].dim_value = value


def edit_attribute(m, r) -> None:
    attrs = [a for n in m.graph.node for a in n.attribute]
    if not attrs:
        return
    a = r.choice(attrs)
    kind = r.randrange(6)
    if kind == 0 and a.ints:
        a.ints[r.randrange(len(a.ints))] = r.choice(INTS)
    elif kind == 1 and a.ints:
        if r.random() < 0.5:
            a.ints.append(r.choice(INTS))
        else:
            a.ints.pop()
    elif kind == 2:
        a.i = r.choice(INTS)
    elif kind == 3:
        a.f = r.choice(FLOATS)
    elif kind == 4:
        a.type = r.randrange(0, 15)
    else:
        a.name = r.choice(["axis", "pads", "group", "perm", "strides", "kernel_shape", "to", "bogus", ""])


def edit_op_type(m, r) -> None:
    n = r.choice(m.graph.node)
    if r.random() < 0.15:
        n.domain = r.choice(["ai.onnx.ml", "com.microsoft", "bogus"])
    else:
        n.op_type = r.choice(OPS)


def edit_data_type(m, r) -> None:
    code = r.choice(list(range(0, 27)) + [-1, 99])
    targets = [t.type.tensor_type for t in _value_infos(m)] + list(m.graph.initializer)
    t = r.choice(targets)
    if isinstance(t, onnx.TensorProto):
        t.data_type = code
    else:
        t.elem_type = code
    for n in m.graph.node:
        for a in n.attribute:
            if a.name == "to" and r.random() < 0.5:
                a.i = code


def edit_name(m, r) -> None:
    names = {i for n in m.graph.node for i in list(n.input) + list(n.output)} | {t.name for t in m.graph.initializer}
    n = r.choice(m.graph.node)
    slots = [(n.input, i) for i in range(len(n.input))] + [(n.output, i) for i in range(len(n.output))]
    field, i = r.choice(slots)
    field[i] = r.choice(sorted(names) + ["", "missing", "x"])
    if r.random() < 0.2:
        m.graph.output[0].name = r.choice(sorted(names))


def edit_structure(m, r) -> None:
    g = m.graph
    kind = r.randrange(7)
    if kind == 0 and len(g.node) > 1:
        i, j = r.sample(range(len(g.node)), 2)
        a, b = onnx.NodeProto(), onnx.NodeProto()
        a.CopyFrom(g.node[i])
        b.CopyFrom(g.node[j])
        g.node[i].CopyFrom(b)
        g.node[j].CopyFrom(a)
    elif kind == 1:
        del g.node[r.randrange(len(g.node))]
    elif kind == 2:
        g.node.append(g.node[r.randrange(len(g.node))])
    elif kind == 3 and g.initializer:
        del g.initializer[r.randrange(len(g.initializer))]
    elif kind == 4:
        g.output.append(g.output[0] if r.random() < 0.5 else g.input[0])
    elif kind == 5:
        del g.output[r.randrange(len(g.output))]
    else:
        a, b = r.sample(list(g.node), 2) if len(g.node) > 1 else (g.node[0], None)
        if b is not None:
            a.attribute.extend(b.attribute)


def edit_opset(m, r) -> None:
    if r.random() < 0.7:
        m.opset_import[0].version = r.choice([0, 1, 6, 7, 9, 11, 13, 18, 21, 23, 99, 10**6])
    elif r.random() < 0.5:
        m.ir_version = r.choice([0, 1, 3, 11, 99])
    else:
        m.opset_import.add(domain=r.choice(["", "ai.onnx", "bogus"]), version=r.choice([1, 17]))


def edit_tensor_data(m, r) -> None:
    if not m.graph.initializer:
        return
    t = r.choice(m.graph.initializer)
    if t.data_location == onnx.TensorProto.EXTERNAL:  # a mutated external-data entry: nothing to read here
        return
    try:
        raw = t.raw_data if t.raw_data else numpy_helper.to_array(t).tobytes()
    except Exception:  # noqa: BLE001 - an earlier mutation left the tensor unreadable: leave it as it is
        return
    kind = r.randrange(4)
    if kind == 0:
        t.raw_data = raw[: r.randrange(max(1, len(raw)))]
    elif kind == 1:
        t.raw_data = raw + b"\0" * r.randint(1, 8)
    elif kind == 2 and t.data_type == TensorProto.FLOAT and raw:
        arr = np.frombuffer(raw, np.float32).copy()
        arr[r.randrange(arr.size)] = r.choice(FLOATS)
        t.raw_data = arr.tobytes()
    else:
        t.ClearField("raw_data")
        t.float_data.extend([1.0] * r.randint(0, 3))
        t.data_location = r.choice([0, 1])


BYTE_MUTATIONS = [bit_flip, truncate, insert_bytes, duplicate_chunk]
PROTO_MUTATIONS = [edit_dims, edit_attribute, edit_op_type, edit_data_type, edit_name, edit_structure, edit_opset,
                   edit_tensor_data]


def mutate(data: bytes, steps: list[tuple[str, int]]) -> bytes:
    """Applies mutations (name, seed) in order; each is replayable from its seed."""
    table = {f.__name__: f for f in BYTE_MUTATIONS + PROTO_MUTATIONS}
    for name, seed in steps:
        r = random.Random(seed)
        f = table[name]
        if f in BYTE_MUTATIONS:
            data = f(data, r) if data else data
            continue
        m = onnx.ModelProto()
        try:
            m.ParseFromString(data)
        except Exception:  # noqa: BLE001 - an earlier mutation broke the bytes: keep them
            continue
        if not m.graph.node:
            continue
        try:
            f(m, r)
            data = m.SerializeToString()
        except (ValueError, TypeError, IndexError):  # protobuf refuses the edit (an enum value, a range)
            continue
    return data


def draw_steps(r: random.Random) -> list[tuple[str, int]]:
    steps = []
    for _ in range(r.choice([1, 1, 1, 2, 2, 3])):
        pool = BYTE_MUTATIONS if r.random() < 0.3 else PROTO_MUTATIONS
        steps.append((r.choice(pool).__name__, r.randrange(2**32)))
    return steps
