"""`ziggurat demo`: build a small CNN with onnx.helper, compile it, check it.

The model (conv3x3 + batch norm + relu + max pool + conv + relu + global
average pool + dense + softmax, seeded random weights) is built at run time,
compiled through the full pipeline, and compared with a numpy evaluation of
the same network written independently below.
"""

from __future__ import annotations

import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def demo_model(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The demo CNN and its weights (input 'image': 1x3x32x32 float32)."""
    rng = np.random.default_rng(seed)

    def w(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    weights = {
        "conv1.w": w(16, 3, 3, 3), "conv1.b": w(16),
        "bn.scale": (1 + w(16)).astype(np.float32), "bn.bias": w(16),
        "bn.mean": w(16), "bn.var": (1 + np.abs(w(16))).astype(np.float32),
        "conv2.w": w(32, 16, 3, 3, scale=0.1), "conv2.b": w(32),
        "fc.w": w(10, 32), "fc.b": w(10),
    }
    nodes = [
        helper.make_node("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("BatchNormalization", ["c1", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["b1"], name="bn"),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
        helper.make_node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], transB=1, name="fc"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes,
        "ziggurat_demo",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, weights


def np_conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pad: int) -> np.ndarray:
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, _, h, wd = x.shape
    co, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, co, oh, ow), dtype=np.float64)
    for dy in range(kh):
        for dx in range(kw):
            patch = x[:, :, dy : dy + stride * oh : stride, dx : dx + stride * ow : stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, dy, dx])
    return out + b[None, :, None, None]


def np_reference(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    """The demo network in plain numpy (float64)."""
    c1 = np_conv2d(x, p["conv1.w"], p["conv1.b"], 1, 1)
    ch = (slice(None), None, None)
    b1 = (c1 - p["bn.mean"][ch]) / np.sqrt(p["bn.var"][ch] + 1e-5) * p["bn.scale"][ch] + p["bn.bias"][ch]
    r1 = np.maximum(b1, 0)
    p1 = r1.reshape(1, 16, 16, 2, 16, 2).max(axis=(3, 5))
    r2 = np.maximum(np_conv2d(p1, p["conv2.w"], p["conv2.b"], 2, 1), 0)
    logits = r2.mean(axis=(2, 3)) @ p["fc.w"].T + p["fc.b"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run_demo(target: str = "llvm") -> int:
    import ziggurat

    model, weights = demo_model()
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    start = time.perf_counter()
    compiled = ziggurat.compile(model, target=target)
    compile_s = time.perf_counter() - start
    (probs,) = compiled(image=x)
    expected = np_reference(x.astype(np.float64), {k: v.astype(np.float64) for k, v in weights.items()})
    err = float(np.max(np.abs(probs - expected)))
    ok = bool(np.allclose(probs, expected, rtol=1e-3, atol=1e-5))
    runs = []
    for _ in range(20):
        t = time.perf_counter()
        compiled(image=x)
        runs.append(time.perf_counter() - t)
    stats = compiled.info["stats"]
    print("ziggurat demo: conv-bn-relu-pool-conv-relu-gap-dense-softmax on 1x3x32x32")
    print(f"  compiled {stats.kernels} kernels in {compile_s:.2f} s for '{compiled.info['target']}' ({compiled.info['num_threads']} thread(s))")
    print(f"  inference: median {np.median(runs) * 1e3:.3f} ms over {len(runs)} runs")
    print(f"  output {probs.round(4).tolist()}")
    print(f"  max abs error vs numpy: {err:.2e} -> {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1
