"""The synthetic workloads of the benchmark suite, built with onnx.helper.

Each builder returns `(name, onnx.ModelProto, inputs, flops)`; `flops` is the
multiply-add count x 2 of the dominant ops (None where not meaningful).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _w(name: str, shape, rng, scale: float | None = None) -> onnx.TensorProto:
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
    return numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)


def _model(nodes, inputs, outputs, inits, name: str) -> onnx.ModelProto:
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    return m


def _vi(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def matmul(n: int):
    rng = _rng(n)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    m = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", (n, n)), _vi("b", (n, n))],
               [_vi("y", (n, n))], [], f"matmul{n}")
    return f"matmul_{n}", m, {"a": a, "b": b}, 2.0 * n**3


def mlp_b64():
    rng = _rng(1)
    sizes = [784, 512, 512, 10]
    nodes, inits, cur = [], [], "x"
    for i, (k, n) in enumerate(zip(sizes, sizes[1:])):
        inits += [_w(f"w{i}", (n, k), rng), _w(f"b{i}", (n,), rng, 0.1)]
        nodes.append(helper.make_node("Gemm", [cur, f"w{i}", f"b{i}"], [f"g{i}"], transB=1))
        cur = f"g{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [cur], [f"r{i}"]))
            cur = f"r{i}"
    nodes.append(helper.make_node("Identity", [cur], ["y"]))
    x = rng.standard_normal((64, 784)).astype(np.float32)
    flops = 2.0 * 64 * sum(k * n for k, n in zip(sizes, sizes[1:]))
    return "mlp_b64_784_512_512_10", _model(nodes, [_vi("x", (64, 784))], [_vi("y", (64, 10))], inits, "mlp"), {"x": x}, flops


def conv3x3():
    rng = _rng(2)
    inits = [_w("w", (64, 64, 3, 3), rng)]
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    x = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    m = _model([node], [_vi("x", (1, 64, 56, 56))], [_vi("y", (1, 64, 56, 56))], inits, "conv3x3")
    return "conv3x3_64x56x56", m, {"x": x}, 2.0 * 64 * 64 * 9 * 56 * 56


def resnet_small():
    """conv-bn-relu stem, two basic residual blocks at 32 channels, then a 2x2
    pool, a block at 64 channels (strided 1x1 shortcut), global pool and FC."""
    rng = _rng(3)
    nodes, inits, flops = [], [], 0.0

    def conv_bn(x, cin, cout, k, stride, hw, name, relu=True):
        nonlocal flops
        inits.extend([_w(f"{name}.w", (cout, cin, k, k), rng),
                      numpy_helper.from_array(rng.uniform(0.5, 1.5, cout).astype(np.float32), f"{name}.s"),
                      numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"{name}.b"),
                      numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"{name}.m"),
                      numpy_helper.from_array(rng.uniform(0.5, 1.5, cout).astype(np.float32), f"{name}.v")])
        p = k // 2
        nodes.append(helper.make_node("Conv", [x, f"{name}.w"], [f"{name}.c"], pads=[p] * 4,
                                      kernel_shape=[k, k], strides=[stride, stride]))
        nodes.append(helper.make_node("BatchNormalization", [f"{name}.c", f"{name}.s", f"{name}.b", f"{name}.m", f"{name}.v"],
                                      [f"{name}.bn"]))
        out_hw = hw // stride
        flops += 2.0 * cout * cin * k * k * out_hw * out_hw
        if relu:
            nodes.append(helper.make_node("Relu", [f"{name}.bn"], [f"{name}.r"]))
            return f"{name}.r"
        return f"{name}.bn"

    def block(x, cin, cout, stride, hw, name):
        h = conv_bn(x, cin, cout, 3, stride, hw, f"{name}.1")
        h = conv_bn(h, cout, cout, 3, 1, hw // stride, f"{name}.2", relu=False)
        skip = x if (cin == cout and stride == 1) else conv_bn(x, cin, cout, 1, stride, hw, f"{name}.sc", relu=False)
        nodes.append(helper.make_node("Add", [h, skip], [f"{name}.add"]))
        nodes.append(helper.make_node("Relu", [f"{name}.add"], [f"{name}.out"]))
        return f"{name}.out"

    h = conv_bn("x", 3, 32, 3, 1, 32, "stem")
    h = block(h, 32, 32, 1, 32, "b1")
    h = block(h, 32, 32, 1, 32, "b2")
    h = block(h, 32, 64, 2, 32, "b3")
    nodes.append(helper.make_node("GlobalAveragePool", [h], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    inits += [_w("fc.w", (10, 64), rng), _w("fc.b", (10,), rng, 0.1)]
    nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["y"], transB=1))
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    return "resnet_small_32x32", _model(nodes, [_vi("x", (1, 3, 32, 32))], [_vi("y", (1, 10))], inits, "resnet"), {"x": x}, flops


def bert_layer(seq: int = 128, hidden: int = 256, heads: int = 4):
    """One post-LN encoder layer: QKV projections, scaled dot-product attention,
    output projection, residual + LayerNorm, GELU(erf) FFN (4x), residual + LayerNorm."""
    rng = _rng(4)
    d = hidden // heads
    nodes, inits = [], []

    def dense(x, k, n, name):
        inits.extend([_w(f"{name}.w", (k, n), rng), _w(f"{name}.b", (n,), rng, 0.1)])
        nodes.append(helper.make_node("MatMul", [x, f"{name}.w"], [f"{name}.mm"]))
        nodes.append(helper.make_node("Add", [f"{name}.mm", f"{name}.b"], [f"{name}.out"]))
        return f"{name}.out"

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def heads_split(x, name):
        nodes.append(helper.make_node("Reshape", [x, const(f"{name}.shape", np.array([1, seq, heads, d], np.int64))], [f"{name}.r"]))
        nodes.append(helper.make_node("Transpose", [f"{name}.r"], [f"{name}.t"], perm=[0, 2, 1, 3]))
        return f"{name}.t"

    def layer_norm(x, name):
        inits.extend([numpy_helper.from_array(np.ones(hidden, np.float32), f"{name}.g"),
                      numpy_helper.from_array(np.zeros(hidden, np.float32), f"{name}.b")])
        nodes.append(helper.make_node("LayerNormalization", [x, f"{name}.g", f"{name}.b"], [f"{name}.out"], axis=-1, epsilon=1e-5))
        return f"{name}.out"

    q = heads_split(dense("x", hidden, hidden, "q"), "qh")
    k = heads_split(dense("x", hidden, hidden, "k"), "kh")
    v = heads_split(dense("x", hidden, hidden, "v"), "vh")
    nodes.append(helper.make_node("Transpose", [k], ["kT"], perm=[0, 1, 3, 2]))
    nodes.append(helper.make_node("MatMul", [q, "kT"], ["scores"]))
    nodes.append(helper.make_node("Mul", ["scores", const("scale", np.array(1.0 / np.sqrt(d), np.float32))], ["scaled"]))
    nodes.append(helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1))
    nodes.append(helper.make_node("MatMul", ["probs", v], ["ctx"]))
    nodes.append(helper.make_node("Transpose", ["ctx"], ["ctx.t"], perm=[0, 2, 1, 3]))
    nodes.append(helper.make_node("Reshape", ["ctx.t", const("ctx.shape", np.array([1, seq, hidden], np.int64))], ["ctx.r"]))
    attn = dense("ctx.r", hidden, hidden, "o")
    nodes.append(helper.make_node("Add", ["x", attn], ["res1"]))
    h1 = layer_norm("res1", "ln1")
    f1 = dense(h1, hidden, 4 * hidden, "ff1")
    nodes.append(helper.make_node("Div", [f1, const("sqrt2", np.array(np.sqrt(2.0), np.float32))], ["g.div"]))
    nodes.append(helper.make_node("Erf", ["g.div"], ["g.erf"]))
    nodes.append(helper.make_node("Add", ["g.erf", const("one", np.array(1.0, np.float32))], ["g.add"]))
    nodes.append(helper.make_node("Mul", [f1, "g.add"], ["g.mul"]))
    nodes.append(helper.make_node("Mul", ["g.mul", const("half", np.array(0.5, np.float32))], ["gelu"]))
    f2 = dense("gelu", 4 * hidden, hidden, "ff2")
    nodes.append(helper.make_node("Add", [h1, f2], ["res2"]))
    out = layer_norm("res2", "ln2")
    nodes.append(helper.make_node("Identity", [out], ["y"]))
    x = rng.standard_normal((1, seq, hidden)).astype(np.float32)
    flops = 2.0 * seq * hidden * hidden * 4 + 2.0 * 2 * seq * seq * hidden + 2.0 * 2 * seq * hidden * 4 * hidden
    m = _model(nodes, [_vi("x", (1, seq, hidden))], [_vi("y", (1, seq, hidden))], inits, "bert_layer")
    return f"bert_layer_s{seq}_h{hidden}", m, {"x": x}, flops


def eltwise_chain(n: int = 1 << 20):
    rng = _rng(5)
    nodes = [
        helper.make_node("Add", ["x", "z"], ["t1"]),
        helper.make_node("Mul", ["t1", "x"], ["t2"]),
        helper.make_node("Relu", ["t2"], ["t3"]),
        helper.make_node("Sub", ["t3", "z"], ["t4"]),
        helper.make_node("Abs", ["t4"], ["t5"]),
        helper.make_node("Mul", ["t5", "z"], ["y"]),
    ]
    x = rng.standard_normal(n).astype(np.float32)
    z = rng.standard_normal(n).astype(np.float32)
    m = _model(nodes, [_vi("x", (n,)), _vi("z", (n,))], [_vi("y", (n,))], [], "eltwise")
    return "eltwise_chain6_1M", m, {"x": x, "z": z}, 6.0 * n


def add_chain(nodes: int, shape: tuple[int, ...] = (1, 64)):
    """`nodes` Adds in a chain, each of the previous result and alternately a
    constant and the input: `x -> Add(c) -> Add(x) -> ...` (the compile-time
    workload; it fuses into one long elementwise group). The reference is
    `add_chain_reference`."""
    rng = _rng(6)
    const = rng.standard_normal(shape).astype(np.float32)
    graph_nodes, prev = [], "x"
    for i in range(nodes):
        out = "y" if i == nodes - 1 else f"t{i}"
        graph_nodes.append(helper.make_node("Add", [prev, "c" if i % 2 == 0 else "x"], [out], name=f"add{i}"))
        prev = out
    x = rng.standard_normal(shape).astype(np.float32)
    m = _model(graph_nodes, [_vi("x", shape)], [_vi("y", shape)], [numpy_helper.from_array(const, "c")],
               f"add_chain{nodes}")
    return f"add_chain_{nodes}", m, {"x": x}, float(nodes * np.prod(shape))


def add_chain_reference(nodes: int, x: np.ndarray, model: onnx.ModelProto) -> np.ndarray:
    """What `add_chain(nodes)` computes for input `x`, in float32 step by step as the model does."""
    const = numpy_helper.to_array(model.graph.initializer[0])
    y = x
    for i in range(nodes):
        y = y + (const if i % 2 == 0 else x)
    return y


BUILDERS = {
    "matmul_512": lambda: matmul(512),
    "matmul_1024": lambda: matmul(1024),
    "mlp_b64": mlp_b64,
    "conv3x3": conv3x3,
    "resnet_small": resnet_small,
    "bert_layer": bert_layer,
    "eltwise_chain": eltwise_chain,
}
