"""Row fusion (transforms/schedule/fuse_rows.py): row reductions and the steps between them run
row by row; any shape keeps onnxruntime's result, and a GEMM never fuses."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx import numpy_helper as nh

import ziggurat
import ziggurat.transforms.schedule.fuse_rows as fuse_rows_module
from ziggurat.transforms.schedule.fuse_rows import fuse_rows

OPS = ("Softmax", "LogSoftmax", "LayerNormalization", "center")


def _model(op: str, shape: list[int]):
    rng = np.random.default_rng(0)
    inits = []
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    if op == "LayerNormalization":
        inits = [nh.from_array(rng.standard_normal(shape[-1]).astype(np.float32), n) for n in ("g", "b")]
        nodes = [helper.make_node(op, ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)]
    elif op == "center":  # x - max(x) over the rows, then exp: a row reduction feeding an elementwise chain
        inits = [nh.from_array(np.array([-1], np.int64), "axes")]
        nodes = [helper.make_node("ReduceMax", ["x", "axes"], ["m"], keepdims=1),
                 helper.make_node("Sub", ["x", "m"], ["d"]), helper.make_node("Exp", ["d"], ["y"])]
    else:
        nodes = [helper.make_node(op, ["x"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "rows", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(OPS), st.integers(1, 3), st.integers(1, 40), st.integers(1, 300))
def test_fused_rows_match_onnxruntime(op: str, batch: int, rows: int, cols: int) -> None:
    shape = [batch, rows, cols]
    model = _model(op, shape)
    x = (np.random.default_rng(rows).standard_normal(shape) * 4).astype(np.float32)
    seen = []

    def after(p, module, seconds):
        if p.name == "loop-default-schedule":
            seen.append(str(module))

    old = fuse_rows_module.MIN_BYTES
    fuse_rows_module.MIN_BYTES = 0  # every size fuses
    try:
        got = ziggurat.compile(model, target="llvm -num-cores=2", after_pass=after, cache=False)(x)[0]
    finally:
        fuse_rows_module.MIN_BYTES = old
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5)
    if batch * rows > 1 and cols > 1:  # the row buffers (a softmax over one column folds to 1: no kernel)
        assert 'loop.alloc "local" : memref<1x1x1xf32>' in seen[0] or op == "LayerNormalization"


def test_a_matmul_with_its_epilogue_never_fuses() -> None:
    """A reduction with spatial loops below the rows (a matmul) keeps its own nest for its register block."""
    from xdsl.context import Context
    from xdsl.dialects import func
    from xdsl.parser import Parser

    from ziggurat.registry import make_context, parse_pipeline

    text = """
func.func @main(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %c = graph.matmul %a, %b : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  %d = graph.relu %c : tensor<64x64xf32>
  func.return %d : tensor<64x64xf32>
}"""
    module = Parser(make_context(), text).parse_module()
    for p in parse_pipeline("fuse-ops,convert-graph-to-te,convert-te-to-loop"):
        p.apply(Context(), module)
    kernels = [f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data != "main"]
    assert len(kernels) == 1 and sum(1 for o in kernels[0].body.block.ops if o.name == "loop.for") == 2
    assert not fuse_rows(kernels[0], min_bytes=0)
