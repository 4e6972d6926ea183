"""`ziggurat quantize`: calibrate a float ONNX model and write its QDQ form.

    ziggurat quantize MODEL.onnx --calibrate a.npz [b.npz ...] -o MODEL.int8.onnx
                      [--method minmax|percentile|entropy] [--per-tensor] [--reduce-range]

The result is what onnxruntime's `quantize_static(..., quant_format=QDQ)`
writes for the compute-heavy ops, so `ziggurat.compile` (and onnxruntime) run
it as any QDQ model (docs/quantization.md):

* every Conv, MatMul and Gemm whose weight is a float initializer gets its
  activation input through QuantizeLinear -> DequantizeLinear (uint8,
  asymmetric: scale = (max - min) / 255 over a range widened to hold 0, zero
  point round(-min / scale), as onnxruntime computes them) and its weight as an
  int8 initializer behind a DequantizeLinear (symmetric, per output channel by
  default: Conv axis 0, MatMul axis 1, Gemm by transB; |q| <= 127, or <= 64 with
  `reduce_range`, which keeps AVX2's `vpmaddubsw` exact: lowering/qgemm.py);
  biases and every other op stay float;
* the activation ranges come from running the model, compiled by ziggurat, on
  the calibration inputs (each `.npz` holds one array per graph input; several
  files, or arrays with a leading sample axis of the input's rank + 1, are
  several samples): `minmax` takes the extremes, `percentile` the
  (100 - p)-th and p-th percentiles (p = 99.999), `entropy` the threshold of
  least KL divergence between the histogram of |x| and its 128-level
  quantization (TensorRT's method; onnxruntime's `CalibrationMethod.Entropy`).

Needs opset 13 or later (per-axis QuantizeLinear).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ziggurat.errors import InputError, ModelLoadError

METHODS = ("minmax", "percentile", "entropy")
OPS = {"Conv": 1, "MatMul": 1, "Gemm": 1}
"""Quantized op -> the input index of its weight (input 0 is the activation)."""
PERCENTILE = 99.999
BINS = 2048
LEVELS = 128


def _weight_axis(node: onnx.NodeProto, rank: int) -> int | None:
    """The weight's output-channel axis (per-channel scales), None where it has no single one."""
    if node.op_type == "Conv":
        return 0
    if node.op_type == "Gemm":
        trans = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans else 1
    return 1 if rank == 2 else None  # MatMul: [K, N]


def _targets(model: onnx.ModelProto) -> list[int]:
    """Indices of the nodes to quantize: Conv, MatMul and Gemm with a float32 weight initializer."""
    inits = {t.name: t for t in model.graph.initializer}
    found = []
    for index, node in enumerate(model.graph.node):
        if node.domain not in ("", "ai.onnx") or node.op_type not in OPS or len(node.input) <= OPS[node.op_type]:
            continue
        w = inits.get(node.input[OPS[node.op_type]])
        if w is not None and w.data_type == TensorProto.FLOAT and node.input[0] not in inits:
            found.append(index)
    return found


def _samples(calibration: Iterable[Mapping[str, np.ndarray]], inputs: Sequence[onnx.ValueInfoProto]
             ) -> list[dict[str, np.ndarray]]:
    """One feed per sample: an array of the input's rank + 1 holds a sample per leading index."""
    feeds: list[dict[str, np.ndarray]] = []
    for data in calibration:
        missing = [i.name for i in inputs if i.name not in data]
        if missing:
            raise InputError(f"calibration data lacks the input(s) {missing}; it has {sorted(data)}")
        ranks = {i.name: len(i.type.tensor_type.shape.dim) for i in inputs}
        stacked = {n: np.asarray(data[n]).ndim == ranks[n] + 1 for n in ranks}
        if all(stacked.values()):
            count = len(np.asarray(data[inputs[0].name]))
            feeds += [{n: np.asarray(data[n])[s] for n in ranks} for s in range(count)]
        else:
            feeds.append({n: np.asarray(data[n]) for n in ranks})
    if not feeds:
        raise InputError("quantize needs at least one calibration sample (--calibrate FILE.npz)")
    return feeds


def _observe(model: onnx.ModelProto, names: list[str], feeds: list[dict[str, np.ndarray]], target: str
             ) -> dict[str, np.ndarray]:
    """The values of tensors `names` over every calibration sample (flattened, concatenated), from
    the model compiled by ziggurat with those tensors as extra outputs."""
    import ziggurat

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    graph_inputs = {i.name: i for i in model.graph.input}
    del probe.graph.output[:]
    for name in names:
        info = inferred.get(name) or graph_inputs.get(name)
        if info is None or not info.type.tensor_type.HasField("shape"):
            info = helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
            info.type.tensor_type.shape.SetInParent()
        probe.graph.output.append(info)
    compiled = ziggurat.compile(probe.SerializeToString(), target=target, cache=False)
    seen: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for feed in feeds:
        for name, value in zip(names, compiled(**feed), strict=True):
            seen[name].append(np.asarray(value, np.float32).reshape(-1))
    return {n: np.concatenate(v) for n, v in seen.items()}


def _entropy_threshold(values: np.ndarray) -> float:
    """|x|'s threshold of least KL divergence between its histogram clipped there and that
    histogram merged into LEVELS levels."""
    hist, edges = np.histogram(np.abs(values), bins=BINS)
    hist = hist.astype(np.float64)
    best, best_t = np.inf, float(edges[-1])
    for i in range(LEVELS, BINS + 1, 16):
        p = hist[:i].copy()
        p[i - 1] += hist[i:].sum()  # the clipped mass lands in the last bin
        chunks = np.array_split(np.arange(i), LEVELS)
        q = np.zeros(i)
        for c in chunks:
            nz = c[hist[c] > 0]
            if nz.size:
                q[nz] = hist[c].sum() / nz.size
        mask = p > 0
        if q[mask].min(initial=1) == 0:
            continue
        pn, qn = p / p.sum(), q / q.sum()
        kl = float(np.sum(pn[mask] * np.log(pn[mask] / qn[mask])))
        if kl < best:
            best, best_t = kl, float(edges[i])
    return best_t


def _range(values: np.ndarray, method: str) -> tuple[float, float]:
    if method == "minmax":
        return float(values.min()), float(values.max())
    if method == "percentile":
        return float(np.percentile(values, 100 - PERCENTILE)), float(np.percentile(values, PERCENTILE))
    t = _entropy_threshold(values)
    return (0.0 if values.min() >= 0 else -t), t


def activation_params(lo: float, hi: float) -> tuple[np.float32, np.uint8]:
    """uint8 scale and zero point of the range [lo, hi], widened to hold 0 (onnxruntime's formula)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    return scale, np.uint8(np.clip(np.round(-lo / scale), 0, 255))


def weight_params(w: np.ndarray, axis: int | None, reduce_range: bool) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weight, float32 scale) symmetric, per `axis` (None: one scale)."""
    qmax = 64 if reduce_range else 127
    peak = np.abs(w).max() if axis is None else np.abs(np.moveaxis(w, axis, 0)).reshape(w.shape[axis], -1).max(1)
    scale = np.where(peak > 0, peak / qmax, 1.0).astype(np.float32)
    shaped = scale if axis is None else scale.reshape([-1 if d == axis else 1 for d in range(w.ndim)])
    return np.clip(np.round(w / shaped), -qmax, qmax).astype(np.int8), scale


def quantize(model: Any, calibration: Iterable[Mapping[str, np.ndarray]], method: str = "minmax",
             per_channel: bool = True, reduce_range: bool = False, target: str = "llvm") -> onnx.ModelProto:
    """The QDQ form of `model` (a path, bytes or ModelProto), calibrated on `calibration` (module docstring)."""
    from ziggurat.frontends.onnx.loader import load_model

    if method not in METHODS:
        raise InputError(f"unknown calibration method '{method}'; choose one of {', '.join(METHODS)}")
    model = load_model(model)[0] if not isinstance(model, onnx.ModelProto) else model
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13:
        raise ModelLoadError(f"quantize needs opset 13 or later (per-axis QuantizeLinear); the model has opset "
                             f"{opset}: convert it with onnx.version_converter.convert_version(model, 13)")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    targets = _targets(out)
    if not targets:
        raise InputError("the model has no Conv, MatMul or Gemm with a float32 weight initializer: nothing to quantize")
    inits = {t.name: t for t in graph.initializer}  # read as arrays only for the weights quantized
    inputs = [i for i in graph.input if i.name not in inits]
    activations = list(dict.fromkeys(graph.node[i].input[0] for i in targets))
    values = _observe(model, activations, _samples(calibration, inputs), target)

    new_inits: list[TensorProto] = []
    made: set[str] = set()
    before: dict[int, list[onnx.NodeProto]] = {}  # node index -> the Q/DQ nodes to insert before it
    replaced: dict[str, str] = {}
    for index in targets:
        node, pre = graph.node[index], before.setdefault(index, [])
        a = node.input[0]
        if a not in replaced:
            scale, zp = activation_params(*_range(values[a], method))
            s, z, q, d = (f"{a}_scale", f"{a}_zero_point", f"{a}_quantized", f"{a}_dequantized")
            new_inits += [numpy_helper.from_array(np.array(scale, np.float32), s),
                          numpy_helper.from_array(np.array(zp, np.uint8), z)]
            pre += [helper.make_node("QuantizeLinear", [a, s, z], [q], name=f"{a}_QuantizeLinear"),
                    helper.make_node("DequantizeLinear", [q, s, z], [d], name=f"{a}_DequantizeLinear")]
            replaced[a] = d
        w_name = node.input[OPS[node.op_type]]
        names = (f"{w_name}_quantized", f"{w_name}_scale", f"{w_name}_zero_point", f"{w_name}_dequantized")
        if w_name not in made:
            made.add(w_name)
            w = numpy_helper.to_array(inits[w_name])
            axis = _weight_axis(node, w.ndim) if per_channel else None
            wq, ws = weight_params(w, axis, reduce_range)
            new_inits += [numpy_helper.from_array(wq, names[0]), numpy_helper.from_array(ws, names[1]),
                          numpy_helper.from_array(np.zeros(ws.shape, np.int8), names[2])]
            pre.append(helper.make_node("DequantizeLinear", list(names[:3]), [names[3]],
                                        name=f"{w_name}_DequantizeLinear", **({} if axis is None else {"axis": axis})))
        node.input[0], node.input[OPS[node.op_type]] = replaced[a], names[3]
    ordered: list[onnx.NodeProto] = []
    for index, node in enumerate(graph.node):
        ordered += before.get(index, [])
        ordered.append(onnx.NodeProto())
        ordered[-1].CopyFrom(node)  # detached: the repeated field is cleared below
    del graph.node[:]
    graph.node.extend(ordered)
    used = {i for n in graph.node for i in n.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept + new_inits)
    onnx.checker.check_model(out)
    return out


def load_calibration(paths: Sequence[str | Path]) -> list[dict[str, np.ndarray]]:
    """The arrays of each `.npz` (no pickles: loading runs no code from the file)."""
    data = []
    for path in paths:
        try:
            with np.load(path, allow_pickle=False) as f:
                data.append({k: f[k] for k in f.files})
        except (OSError, ValueError) as err:
            raise InputError(f"cannot read calibration data '{path}': {err}") from None
    return data
