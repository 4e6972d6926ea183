"""ONNX node names as locations (lowering/locations.py): on graph ops, on kernels down to the
loop level, and in the errors raised while lowering or scheduling an op."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh
from xdsl.dialects import func
from xdsl.dialects.builtin import NameLoc

import ziggurat
from ziggurat.dialects import graph
from ziggurat.errors import CompileError, ScheduleError
from ziggurat.frontends.onnx import import_onnx
from ziggurat.lowering.locations import kernel_nodes
from ziggurat.transforms.loop.dedupe_kernels import structural_hash
from ziggurat.transforms.schedule.apply_tuning import kernel_text


def _model(tag: str) -> onnx.ModelProto:
    """MatMul -> Add -> Relu (one fused kernel) and Tanh; `tag` makes the bytes (the cache key) new."""
    w = onnx.numpy_helper.from_array(np.full((8, 16), 0.5, np.float32), "w")
    b = onnx.numpy_helper.from_array(np.ones(16, np.float32), "b")
    nodes = [oh.make_node("MatMul", ["x", "w"], ["m"], name="mm1"), oh.make_node("Add", ["m", "b"], ["a"], name="add1"),
             oh.make_node("Relu", ["a"], ["y"], name="relu1"), oh.make_node("Tanh", ["x2"], ["t"], name="tanh_a")]
    io = [oh.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("x", [4, 8]), ("x2", [4, 8]))]
    out = [oh.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("y", [4, 16]), ("t", [4, 8]))]
    g = oh.make_graph(nodes, f"g_{tag}", io, out, [w, b])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])


def test_importer_locates_every_graph_op_at_its_node() -> None:
    main = import_onnx(_model("import")).module.body.block.first_op
    assert isinstance(main, func.FuncOp)
    locs = {op.name: op.location.desc.data for op in main.body.block.ops  # type: ignore[attr-defined]
            if isinstance(op.location, NameLoc)}
    assert locs == {"graph.matmul": "mm1", "graph.constant": "add1", "graph.add": "add1", "graph.relu": "relu1",
                    "graph.tanh": "tanh_a"}


def test_loop_level_kernels_name_their_nodes() -> None:
    modules = []
    ziggurat.compile(_model("loop"), cache=False, after_pass=lambda p, m, s: modules.append(str(m))
                     if p.name == "convert-te-to-loop" else None)
    text = modules[0]
    assert 'graph.source_nodes = ["mm1", "add1", "relu1"]' in text
    assert 'graph.source_nodes = ["tanh_a"]' in text


def test_source_nodes_change_no_workload_key_and_no_dedupe_hash() -> None:
    from ziggurat.dialects import make_context
    from xdsl.parser import Parser

    kernel = """func.func @tanh_0(%in0: memref<4xf32>, %out0: memref<4xf32>) {
      func.return
    }"""
    plain = Parser(make_context(), kernel).parse_module()
    named = Parser(make_context(), kernel.replace(") {", ') attributes {graph.source_nodes = ["a"]} {', 1)).parse_module()
    assert kernel_text(plain, "tanh_0") == kernel_text(named, "tanh_0")
    fn_plain, fn_named = plain.body.block.first_op, named.body.block.first_op
    assert structural_hash(fn_plain) == structural_hash(fn_named)  # type: ignore[arg-type]
    assert kernel_nodes(fn_named) == ("a",)  # type: ignore[arg-type]


def test_an_error_while_lowering_an_op_names_its_onnx_node(monkeypatch: pytest.MonkeyPatch) -> None:
    from ziggurat.lowering import convert_graph_to_te

    def broken(op, b, lookup):
        raise CompileError("tanh: no compute definition for this case")

    monkeypatch.setitem(convert_graph_to_te.COMPUTE_DEFS, graph.TanhOp, broken)
    with pytest.raises(CompileError, match=r"tanh: no compute definition for this case \(ONNX node 'tanh_a'\)"):
        ziggurat.compile(_model("lower"), cache=False)


def test_an_error_while_scheduling_a_kernel_names_its_onnx_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    from ziggurat.transforms.schedule import loop_default_schedule

    def broken(nest, plan, width):
        raise ScheduleError("split: factor 3 does not divide extent 16")

    monkeypatch.setattr(loop_default_schedule, "build_block", broken)
    # at -O3 cost-guided fuse-ops prices the matmul first (transforms/costs/fusion_costs.py)
    with pytest.raises(ScheduleError, match=r"does not divide extent 16 \(ONNX node 'mm1'\)"):
        ziggurat.compile(_model("schedule"), cache=False)
    # at -O2 (rule-based fusion, no pricing) the fused kernel's default schedule fails
    with pytest.raises(ScheduleError, match=r"does not divide extent 16 \(ONNX nodes 'mm1', 'add1', 'relu1'\)"):
        ziggurat.compile(_model("schedule-O2"), cache=False, opt_level=2)
