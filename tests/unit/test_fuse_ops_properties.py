"""Property: fusing any random graph of graph ops (every op-pattern kind, with
diamonds and values used twice) changes no result, and groups stay convex."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.parser import Parser

import ziggurat
from ziggurat.dialects import graph, make_context
from ziggurat.frontends.onnx import ImportedModel
from ziggurat.weights import WeightStore

T = "tensor<4x4xf32>"
UNARY = ("relu", "tanh", "sigmoid", "neg")


@st.composite
def graphs(draw) -> tuple[str, int]:
    """MLIR text of @main over two 4x4 inputs, and its number of results."""
    values = ["%x", "%y"]
    lines = []
    for n in range(draw(st.integers(2, 10))):
        pick = lambda: draw(st.sampled_from(values))  # noqa: E731
        kind = draw(st.sampled_from(("unary", "binary", "transpose", "softmax", "reduce", "matmul")))
        v = f"%v{n}"
        if kind == "unary":
            lines.append(f"{v} = graph.{draw(st.sampled_from(UNARY))} {pick()} : {T}")
        elif kind == "binary":
            op = draw(st.sampled_from(("add", "mul", "sub")))
            lines.append(f"{v} = graph.{op} {pick()}, {pick()} : {T}, {T} -> {T}")
        elif kind == "transpose":
            lines.append(f"{v} = graph.transpose {pick()} {{perm = array<i64: 1, 0>}} : {T} -> {T}")
        elif kind == "softmax":
            lines.append(f"{v} = graph.softmax {pick()} {{axis = 1 : i64}} : {T}")
        elif kind == "reduce":
            lines.append(f'{v}r = graph.reduce {pick()} {{kind = "sum", axes = array<i64: 1>, keepdims = true}} : {T} -> tensor<4x1xf32>')
            lines.append(f"{v} = graph.add {pick()}, {v}r : {T}, tensor<4x1xf32> -> {T}")
        else:
            lines.append(f"{v} = graph.matmul {pick()}, {pick()} : {T}, {T} -> {T}")
        values.append(v)
    outs = [values[-1]] + ([draw(st.sampled_from(values[2:-1]))] if len(values) > 3 and draw(st.booleans()) else [])
    body = "\n  ".join(lines)
    sig = ", ".join([T] * len(outs))
    text = f"func.func @main(%x: {T}, %y: {T}) -> ({sig}) {{\n  {body}\n  func.return {', '.join(outs)} : {sig}\n}}"
    return text, len(outs)


def _model(text: str, n_out: int) -> ImportedModel:
    module = Parser(make_context(), text).parse_module()
    return ImportedModel(module=module, weights=WeightStore({}), input_names=["x", "y"],
                         output_names=[f"r{i}" for i in range(n_out)], input_shapes=[(4, 4), (4, 4)],
                         output_shapes=[(4, 4)] * n_out, opset=17)


@settings(max_examples=12, deadline=None)
@given(graphs(), st.booleans())
def test_fusion_preserves_results(case, allow_reduction_fusion):
    text, n_out = case
    fuse = f"fuse-ops{{allow-reduction-fusion={'true' if allow_reduction_fusion else 'false'}}}"
    seen = {}

    def after(p, module, _s):
        if p.name == "fuse-ops":
            seen["groups"] = [op for op in module.walk() if isinstance(op, graph.FusedOp)]
            for g in seen["groups"]:  # convex: no group input is computed from the group's own result
                inside = set(g.body.block.ops)
                assert all(v.owner not in inside for v in g.inputs)

    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
    plain = ziggurat.compile(_model(text, n_out), target="llvm -num-cores=1", opt_level=0)(x, y)
    fused = ziggurat.compile(_model(text, n_out), target="llvm -num-cores=1", opt_level=0, pipeline=fuse, after_pass=after)(x, y)
    assert "groups" in seen
    for a, b in zip(plain, fused):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
