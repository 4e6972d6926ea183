"""Unit tests of the ONNX frontend (`ziggurat.frontends.onnx`).

Models are built in memory with `onnx.helper`; numeric checks come later,
through the compiler.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.ir import Operation
from xdsl.parser import Parser

from ziggurat.dialects import graph
from ziggurat.errors import ModelLoadError, ShapeError, UnsupportedOpError
from ziggurat.frontends.onnx import CONVERTERS, ImportedModel, ShapeMismatchWarning, import_onnx
from ziggurat.frontends.onnx.convert_sequence import SEQUENCE_OPS

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def value_info(name: str, shape, elem_type=TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def weight(name: str, shape, seed: int = 0) -> onnx.TensorProto:
    array = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return numpy_helper.from_array(array, name)


def output(name: str, rank: int) -> onnx.ValueInfoProto:
    """A float output of known rank whose dims are left for the importer to compute."""
    return value_info(name, [f"{name}_d{i}" for i in range(rank)])


def make_model(nodes, inputs, outputs, initializers=(), opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


BOOL_OUTPUT = {"Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal", "And", "Or", "Xor", "Not", "IsNaN", "IsInf"}
"""Ops whose output is a bool tensor ..."""
BOOL_INPUT = {"And", "Or", "Xor", "Not"}
"""... and those whose inputs are bools too."""


def single_op(op_type: str, input_shapes, attrs=None, initializers=(), extra_inputs=(), opset=17, rank=None):
    """One `op_type` node named n0 over float inputs x0, x1, ... (bools for the
    logic ops) then `extra_inputs`; its output y has the rank of the first input
    unless `rank` is given."""
    names = [f"x{i}" for i in range(len(input_shapes))]
    node = helper.make_node(op_type, [*names, *extra_inputs], ["y"], name="n0", **(attrs or {}))
    in_type = TensorProto.BOOL if op_type in BOOL_INPUT else TensorProto.FLOAT
    inputs = [value_info(n, s, in_type) for n, s in zip(names, input_shapes, strict=True)]
    out_rank = len(input_shapes[0]) if rank is None else rank
    out = output("y", out_rank)
    if op_type in BOOL_OUTPUT:
        out = value_info("y", [f"y_d{i}" for i in range(out_rank)], TensorProto.BOOL)
    return make_model([node], inputs, [out], initializers, opset)


def ops(imported: ImportedModel) -> list[Operation]:
    main = imported.module.ops.first
    return list(main.body.block.ops)


def op_names(imported: ImportedModel) -> list[str]:
    return [op.name for op in ops(imported)]


def the_op(imported: ImportedModel, op_type: type[Operation]) -> Operation:
    (found,) = [op for op in ops(imported) if isinstance(op, op_type)]
    return found


def imported_ok(model: onnx.ModelProto) -> ImportedModel:
    """Imports without shape mismatches, verifies, and checks that the printed
    module parses back identically."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShapeMismatchWarning)
        imported = import_onnx(model)
    imported.module.verify()
    text = str(imported.module)
    ctx = Context()
    for dialect in (Builtin, Func, graph.Graph):
        ctx.load_dialect(dialect)
    reparsed = Parser(ctx, text).parse_module()
    reparsed.verify()
    assert str(reparsed) == text
    return imported


# ---------------------------------------------------------------------------
# The converter table
# ---------------------------------------------------------------------------


def test_every_converter_key_is_an_onnx_op():
    for op_type in CONVERTERS:
        assert onnx.defs.has(op_type), op_type


# ---------------------------------------------------------------------------
# Each supported op imports to a verified module with the right shape
# ---------------------------------------------------------------------------

PARAMS = {
    "w_conv": weight("w", (8, 3, 3, 3)),
    "b_conv": weight("b", (8,)),
    "w_gemm": weight("w", (10, 6)),
    "b_gemm": weight("b", (10,)),
    "bn": [weight(n, (3,), i) for i, n in enumerate(["s", "b", "m"])]
    + [numpy_helper.from_array(np.full(3, 0.5, np.float32), "v")],
}

def ints(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def floats(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.float32), name)


SINGLE_OP_CASES = {
    "Relu": ("Relu", [(2, 3)], {}, [], [], (2, 3)),
    "Tanh": ("Tanh", [(2, 3)], {}, [], [], (2, 3)),
    "Sigmoid": ("Sigmoid", [(4,)], {}, [], [], (4,)),
    "Exp": ("Exp", [(4,)], {}, [], [], (4,)),
    "Sqrt": ("Sqrt", [(4,)], {}, [], [], (4,)),
    "Neg": ("Neg", [(4,)], {}, [], [], (4,)),
    "Erf": ("Erf", [(4,)], {}, [], [], (4,)),
    "Add": ("Add", [(2, 1, 4), (3, 1)], {}, [], [], (2, 3, 4)),
    "Sub": ("Sub", [(2, 3), (3,)], {}, [], [], (2, 3)),
    "Mul": ("Mul", [(1, 3), (2, 1)], {}, [], [], (2, 3)),
    "Div": ("Div", [(2, 3), (2, 3)], {}, [], [], (2, 3)),
    "Conv": (
        "Conv", [(1, 3, 8, 8)], {"pads": [1, 1, 1, 1]}, [PARAMS["w_conv"], PARAMS["b_conv"]], ["w", "b"], (1, 8, 8, 8)
    ),
    "MaxPool": ("MaxPool", [(1, 3, 8, 8)], {"kernel_shape": [2, 2], "strides": [2, 2]}, [], [], (1, 3, 4, 4)),
    "AveragePool": ("AveragePool", [(1, 3, 8, 8)], {"kernel_shape": [3, 3]}, [], [], (1, 3, 6, 6)),
    "GlobalAveragePool": ("GlobalAveragePool", [(1, 3, 8, 8)], {}, [], [], (1, 3, 1, 1)),
    "BatchNormalization": ("BatchNormalization", [(1, 3, 4, 4)], {}, PARAMS["bn"], ["s", "b", "m", "v"], (1, 3, 4, 4)),
    "Gemm": ("Gemm", [(2, 6)], {"transB": 1}, [PARAMS["w_gemm"], PARAMS["b_gemm"]], ["w", "b"], (2, 10)),
    "MatMul": ("MatMul", [(5, 2, 3), (3, 4)], {}, [], [], (5, 2, 4)),
    "Softmax": ("Softmax", [(2, 5)], {}, [], [], (2, 5)),
    "Flatten": ("Flatten", [(2, 3, 4)], {"axis": 2}, [], [], (6, 4)),
    "Transpose": ("Transpose", [(2, 3, 4)], {"perm": [2, 0, 1]}, [], [], (4, 2, 3)),
    "Identity": ("Identity", [(2, 3)], {}, [], [], (2, 3)),
    "ReduceSum": ("ReduceSum", [(2, 3, 4)], {"keepdims": 0}, [ints("axes", [-1, 0])], ["axes"], (3,)),
    **{
        op: (op, [(2, 3, 4)], {"keepdims": 0, "axes": [-1, 0]}, [], [], (3,))
        for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                   "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
    },
    **{op: (op, [(2, 3)], {}, [], [], (2, 3)) for op in ("Abs", "Log", "Floor", "Ceil", "Reciprocal")},
    "Pow": ("Pow", [(2, 3), (3,)], {}, [], [], (2, 3)),
    **{op: (op, [(2, 3), (3,), (1, 1)], {}, [], [], (2, 3)) for op in ("Sum", "Mean", "Max", "Min")},
    **{op: (op, [(2, 3)], {}, [], [], (2, 3)) for op in (
        "Elu", "LeakyRelu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Mish", "Gelu",
        "Dropout", "LogSoftmax", "LpNormalization",
        "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Round")},
    "PRelu": ("PRelu", [(2, 3), (3,)], {}, [], [], (2, 3)),
    **{op: (op, [(2, 3), (3,)], {}, [], [], (2, 3)) for op in ("Less", "LessOrEqual", "Greater", "GreaterOrEqual",
                                                                "Equal", "And", "Or", "Xor")},
    **{op: (op, [(2, 3)], {}, [], [], (2, 3)) for op in ("Not", "IsNaN", "IsInf", "Sign", "ThresholdedRelu")},
    "Where": ("Where", [(2, 1), (3,), (2, 3)], {}, [], [], (2, 3)),
    "RMSNormalization": ("RMSNormalization", [(2, 3), (3,)], {}, [], [], (2, 3)),
    "Clip": ("Clip", [(2, 3), (), ()], {}, [], [], (2, 3)),
    "CastLike": ("CastLike", [(2, 3), (1,)], {}, [], [], (2, 3)),
    "GlobalMaxPool": ("GlobalMaxPool", [(1, 3, 4, 4)], {}, [], [], (1, 3, 1, 1)),
    "InstanceNormalization": ("InstanceNormalization", [(1, 3, 4, 4)], {}, PARAMS["bn"][:2], ["s", "b"], (1, 3, 4, 4)),
    "MeanVarianceNormalization": ("MeanVarianceNormalization", [(2, 3, 4, 4)], {}, [], [], (2, 3, 4, 4)),
    "Pad": ("Pad", [(2, 3)], {"mode": "reflect"}, [ints("pads", [1, 2, 1, 0])], ["pads"], (4, 5)),
    "Tile": ("Tile", [(2, 3)], {}, [ints("reps", [2, 1])], ["reps"], (4, 3)),
    "DepthToSpace": ("DepthToSpace", [(1, 8, 2, 3)], {"blocksize": 2, "mode": "CRD"}, [], [], (1, 2, 4, 6)),
    "SpaceToDepth": ("SpaceToDepth", [(1, 2, 4, 6)], {"blocksize": 2}, [], [], (1, 8, 2, 3)),
    "Unsqueeze": ("Unsqueeze", [(2, 3)], {}, [ints("axes", [0, -1])], ["axes"], (1, 2, 3, 1)),
    "Squeeze": ("Squeeze", [(2, 1, 3, 1)], {}, [ints("axes", [1])], ["axes"], (2, 3, 1)),
    "Gather": ("Gather", [(5, 3)], {"axis": 0}, [ints("idx", [[4, 0], [1, 1]])], ["idx"], (2, 2, 3)),
    "GatherElements": ("GatherElements", [(3, 4)], {"axis": 1}, [ints("idx", [[3, -1], [0, 0], [2, 1]])], ["idx"],
                       (3, 2)),
    "ConvTranspose": ("ConvTranspose", [(1, 4, 3, 3)], {"strides": [2, 2], "pads": [1, 0, 0, 1]},
                      [weight("w", (4, 3, 3, 2))], ["w"], (1, 3, 6, 5)),
    "Resize": ("Resize", [(1, 2, 3, 4)], {"mode": "linear"}, [floats("sc", [1, 1, 2, 0.5])], ["", "sc"], (1, 2, 6, 2)),
    "Upsample": ("Upsample", [(1, 2, 3, 4)], {}, [floats("sc", [1, 1, 2, 2])], ["sc"], (1, 2, 6, 8)),
    "Slice": ("Slice", [(6, 8)], {}, [ints("s", [-1, 1]), ints("e", [-7, 100]), ints("a", [0, 1]),
                                       ints("st", [-2, 3])], ["s", "e", "a", "st"], (3, 3)),
    "Concat": ("Concat", [(2, 3), (2, 5)], {"axis": -1}, [], [], (2, 8)),
    "Split": ("Split", [(2, 6)], {"axis": 1}, [ints("sp", [4, 2])], ["sp"], (2, 4)),
    "Expand": ("Expand", [(3, 1)], {}, [ints("shape", [2, 1, 4])], ["shape"], (2, 3, 4)),
    "Cast": ("Cast", [(2, 3)], {"to": TensorProto.FLOAT}, [], [], (2, 3)),
    "LayerNormalization": ("LayerNormalization", [(2, 3, 4)], {"axis": -2}, [weight("g", (3, 4))], ["g"], (2, 3, 4)),
    "GRU": ("GRU", [(5, 2, 3)], {"hidden_size": 4}, [weight("W", (1, 12, 3)), weight("R", (1, 12, 4))],
            ["W", "R"], (5, 1, 2, 4)),
    "RNN": ("RNN", [(5, 2, 3)], {"hidden_size": 4}, [weight("W", (1, 4, 3)), weight("R", (1, 4, 4))],
            ["W", "R"], (5, 1, 2, 4)),
    "LSTM": ("LSTM", [(5, 2, 3)], {"hidden_size": 4}, [weight("W", (1, 16, 3)), weight("R", (1, 16, 4))],
             ["W", "R"], (5, 1, 2, 4)),
}
SINGLE_OP_CASES |= {  # the converters of convert_window.py, convert_index.py and convert_einsum.py
    "LpPool": ("LpPool", [(1, 3, 5, 5, 5)], {"kernel_shape": [2, 2, 2]}, [], [], (1, 3, 4, 4, 4)),
    "CumSum": ("CumSum", [(2, 3)], {"reverse": 1}, [ints("ax", 1)], ["ax"], (2, 3)),
    "CumProd": ("CumProd", [(2, 3)], {"exclusive": 1}, [ints("ax", 1)], ["ax"], (2, 3)),
    "Col2Im": ("Col2Im", [(1, 4, 16)], {}, [ints("im", [5, 5]), ints("bl", [2, 2])], ["im", "bl"], (1, 1, 5, 5)),
    "STFT": ("STFT", [(1, 16, 1)], {"onesided": 1}, [ints("st", 4), ints("fl", 8)], ["st", "", "fl"], (1, 3, 5, 2)),
    "OneHot": ("OneHot", [(2, 3)], {"axis": 1}, [ints("depth", 4), numpy_helper.from_array(np.float32([0, 1]), "vals")],
               ["depth", "vals"], (2, 4, 3)),
    "Hardmax": ("Hardmax", [(2, 3)], {}, [], [], (2, 3)),
    "Trilu": ("Trilu", [(3, 4)], {"upper": 0}, [], [], (3, 4)),
    "GatherND": ("GatherND", [(3, 4)], {}, [ints("i", [[0, 1], [2, 3]])], ["i"], (2,)),
    **{op: (op, [(3, 4)], {"axis": 1}, [ints("i", [[1], [0], [3]]), weight("u", (3, 1))], ["i", "u"], (3, 4))
       for op in ("ScatterElements", "Scatter")},
    "ScatterND": ("ScatterND", [(3, 4)], {}, [ints("i", [[2]]), weight("u", (1, 4))], ["i", "u"], (3, 4)),
    "ReverseSequence": ("ReverseSequence", [(4, 2, 3)], {}, [ints("l", [3, 1])], ["l"], (4, 2, 3)),
    "Compress": ("Compress", [(3, 4)], {"axis": 1}, [numpy_helper.from_array(np.array([1, 0, 1, 0], bool), "c")],
                 ["c"], (3, 2)),
    "Einsum": ("Einsum", [(2, 3), (3, 4)], {"equation": "ij,jk->ik"}, [], [], (2, 4)),
    "LRN": ("LRN", [(1, 4, 2, 2)], {"size": 3}, [], [], (1, 4, 2, 2)),
    "Det": ("Det", [(5, 3, 3)], {}, [], [], (5,)),
    "DFT": ("DFT", [(2, 6, 1)], {"axis": 1}, [], [], (2, 6, 2)),
    "GridSample": ("GridSample", [(1, 2, 3, 4), (1, 2, 2, 2)], {}, [], [], (1, 2, 2, 2)),
    "DeformConv": ("DeformConv", [(1, 2, 4, 4), (2, 2, 3, 3), (1, 18, 2, 2)], {}, [], [], (1, 2, 2, 2)),
}


def test_every_converter_has_a_single_op_case():
    tested_elsewhere = {"Reshape", "Constant"}  # they need constant inputs or none
    tested_elsewhere |= {"ArgMax", "ArgMin", "TopK"}  # int64 outputs: tests/unit/test_onnx_index_ops.py
    tested_elsewhere |= {"Scan"}  # a body graph: tests/unit/test_onnx_scan.py
    tested_elsewhere |= {"If", "Loop"}  # subgraphs: tests/unit/test_onnx_control.py
    tested_elsewhere |= SEQUENCE_OPS  # sequence values: tests/unit/test_onnx_sequences.py
    tested_elsewhere |= {"MaxUnpool", "TensorScatter"}  # integer inputs: tests/unit/test_onnx_index_ops.py
    tested_elsewhere |= {"TfIdfVectorizer"}  # integer tokens: tests/unit/test_onnx_edge_cases.py
    tested_elsewhere |= {"RoiAlign"}  # integer batch indices: tests/unit/test_onnx_roi_align.py
    tested_elsewhere |= {"BitCast"}  # every element type pair: tests/unit/test_onnx_bitcast.py
    tested_elsewhere |= {"NonZero", "Unique", "NonMaxSuppression"}  # sized at run time: test_data_dependent.py
    tested_elsewhere |= {"Range", "ConstantOfShape"}  # converters over symbolic extents: test_symbolic_import.py
    # integer inputs: tests/unit/test_onnx_dtypes.py
    tested_elsewhere |= {"BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "Mod", "BitShift"}
    # 8-bit inputs against onnxruntime: tests/unit/test_onnx_quant.py
    tested_elsewhere |= {"MatMulInteger", "QLinearMatMul", "ConvInteger", "QLinearConv", "QuantizeLinear",
                         "DequantizeLinear", "DynamicQuantizeLinear"}
    assert set(CONVERTERS) == set(SINGLE_OP_CASES) | tested_elsewhere


@pytest.mark.parametrize("case", SINGLE_OP_CASES, ids=str)
def test_single_op_imports(case):
    op_type, shapes, attrs, inits, extra, expected = SINGLE_OP_CASES[case]
    opset = {"Mish": 18, "Gelu": 20, "RMSNormalization": 23, "Upsample": 9, "Scatter": 10, "DeformConv": 19, "CumProd": 26, "Col2Im": 18}.get(op_type, 17)  # ops newer than opset 17
    imported = imported_ok(single_op(op_type, shapes, attrs, inits, extra, opset=opset, rank=len(expected)))
    assert imported.output_shapes == [expected]
    assert imported.input_shapes == [tuple(s) for s in shapes]


def test_reshape_with_zero_and_minus_one():
    shape = numpy_helper.from_array(np.array([0, -1, 2], np.int64), "shape")
    imported = imported_ok(single_op("Reshape", [(2, 3, 4)], initializers=[shape], extra_inputs=["shape"]))
    assert imported.output_shapes == [(2, 6, 2)]
    assert "shape" not in imported.weights  # read at import time only
    assert op_names(imported) == ["graph.reshape", "func.return"]


def test_reshape_allowzero_keeps_zero_dims_literal():
    shape = numpy_helper.from_array(np.array([0, 4], np.int64), "shape")
    model = single_op("Reshape", [(0, 2, 2)], {"allowzero": 1}, [shape], ["shape"])
    assert imported_ok(model).output_shapes == [(0, 4)]


def test_reshape_of_computed_shape_is_unsupported():
    with pytest.raises(UnsupportedOpError, match="constant"):
        import_onnx(single_op("Reshape", [(2, 3), (2,)]))


def test_flatten_negative_axis():
    assert imported_ok(single_op("Flatten", [(2, 3, 4, 5)], {"axis": -1})).output_shapes == [(24, 5)]
    assert imported_ok(single_op("Flatten", [(2, 3, 4, 5)], {"axis": 0})).output_shapes == [(1, 120)]


def test_constant_node_becomes_graph_constant():
    const = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones((3,), np.float32)))
    add = helper.make_node("Add", ["x", "c"], ["y"])
    imported = imported_ok(make_model([const, add], [value_info("x", (2, 3))], [output("y", 2)]))
    assert op_names(imported) == ["graph.constant", "graph.add", "func.return"]
    assert list(imported.weights) == ["c"]


def test_constant_float_attribute_and_identity_forwarding():
    const = helper.make_node("Constant", [], ["c"], value_float=2.0)
    ident = helper.make_node("Identity", ["c"], ["c2"])
    mul = helper.make_node("Mul", ["x", "c2"], ["y"])
    imported = imported_ok(make_model([const, ident, mul], [value_info("x", (2, 3))], [output("y", 2)]))
    assert op_names(imported) == ["graph.constant", "graph.mul", "func.return"]
    assert imported.weights["c2"].ravel().tolist() == [2.0]


def test_weight_store_keeps_scalar_constants_0d():
    const = helper.make_node("Constant", [], ["c"], value_float=2.0)
    mul = helper.make_node("Mul", ["x", "c"], ["y"])
    imported = imported_ok(make_model([const, mul], [value_info("x", (2, 3))], [output("y", 2)]))
    assert imported.weights["c"].shape == ()


def test_transpose_of_a_constant_is_folded():
    node_t = helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0])
    node_mm = helper.make_node("MatMul", ["x", "wt"], ["y"])
    w = weight("w", (4, 3))
    imported = imported_ok(make_model([node_t, node_mm], [value_info("x", (2, 3))], [output("y", 2)], [w]))
    assert op_names(imported) == ["graph.constant", "graph.matmul", "func.return"]
    np.testing.assert_array_equal(imported.weights["wt"], numpy_helper.to_array(w).T)


@pytest.mark.parametrize(
    ("a", "b", "out", "reshapes"),
    [((3,), (3, 4), (4,), 2), ((2, 3), (3,), (2,), 2), ((3,), (3,), (), 3), ((2, 1, 2, 3), (4, 3, 5), (2, 4, 2, 5), 0)],
)
def test_matmul_numpy_semantics(a, b, out, reshapes):
    imported = imported_ok(single_op("MatMul", [a, b]))
    assert imported.output_shapes == [out]
    assert op_names(imported).count("graph.reshape") == reshapes


def test_softmax_before_opset_13_coerces_to_2d():
    imported = imported_ok(single_op("Softmax", [(2, 3, 4)], {"axis": 1}, opset=11))
    assert op_names(imported) == ["graph.reshape", "graph.softmax", "graph.reshape", "func.return"]
    assert the_op(imported, graph.SoftmaxOp).axis.value.data == 1
    assert imported.output_shapes == [(2, 3, 4)]


def test_softmax_before_opset_13_on_last_axis_needs_no_reshape():
    imported = imported_ok(single_op("Softmax", [(2, 3, 4)], {"axis": -1}, opset=11))
    assert op_names(imported) == ["graph.softmax", "func.return"]


def test_softmax_opset_13_normalizes_negative_axis():
    imported = imported_ok(single_op("Softmax", [(2, 3, 4)], {"axis": -2}))
    assert op_names(imported) == ["graph.softmax", "func.return"]
    assert the_op(imported, graph.SoftmaxOp).axis.value.data == 1


# ---------------------------------------------------------------------------
# Gemm attributes
# ---------------------------------------------------------------------------


def test_gemm_trans_a_alpha_and_constant_c_scaled_at_import():
    a, b = (6, 2), (6, 4)
    c = weight("c", (4,))
    model = single_op("Gemm", [a, b], {"transA": 1, "alpha": 2.0, "beta": 0.5}, [c], ["c"])
    imported = imported_ok(model)
    assert imported.output_shapes == [(2, 4)]
    assert op_names(imported) == [
        "graph.transpose", "graph.matmul", "graph.constant", "graph.mul", "graph.constant", "graph.add", "func.return",
    ]
    np.testing.assert_array_equal(imported.weights["c.scaled"], 0.5 * numpy_helper.to_array(c))
    assert not the_op(imported, graph.MatmulOp).is_transpose_b


def test_gemm_trans_b_and_runtime_c_with_beta():
    imported = imported_ok(single_op("Gemm", [(3, 5), (7, 5), (3, 1)], {"transB": 1, "beta": 3.0}))
    assert imported.output_shapes == [(3, 7)]
    assert the_op(imported, graph.MatmulOp).is_transpose_b
    assert op_names(imported) == ["graph.matmul", "graph.constant", "graph.mul", "graph.add", "func.return"]


def test_gemm_without_c_and_default_attributes():
    imported = imported_ok(single_op("Gemm", [(3, 5), (5, 2)]))
    assert op_names(imported) == ["graph.matmul", "func.return"]
    assert imported.output_shapes == [(3, 2)]


def test_gemm_with_mismatched_inner_dims_is_a_shape_error():
    with pytest.raises(ShapeError, match="n0"):
        import_onnx(single_op("Gemm", [(3, 5), (4, 2)], {"transA": 1}))


# ---------------------------------------------------------------------------
# Conv and pooling attributes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("auto_pad", "out", "pads"),
    [
        ("SAME_UPPER", (4, 4), [0, 0, 1, 1]),
        ("SAME_LOWER", (4, 4), [1, 1, 0, 0]),
        ("VALID", (3, 3), [0, 0, 0, 0]),
    ],
)
def test_conv_auto_pad(auto_pad, out, pads):
    w = weight("w", (2, 3, 3, 3))
    model = single_op("Conv", [(1, 3, 8, 8)], {"auto_pad": auto_pad, "strides": [2, 2]}, [w], ["w"])
    imported = imported_ok(model)
    assert imported.output_shapes == [(1, 2, *out)]
    assert list(the_op(imported, graph.Conv2dOp).pads.get_values()) == pads


def test_conv_groups_dilations_and_bias_reshaped_in_store():
    w, b = weight("w", (6, 2, 3, 3)), weight("b", (6,))
    attrs = {"group": 2, "dilations": [2, 2], "pads": [2, 2, 2, 2]}
    imported = imported_ok(single_op("Conv", [(1, 4, 9, 9)], attrs, [w, b], ["w", "b"]))
    assert imported.output_shapes == [(1, 6, 9, 9)]
    assert imported.weights["b"].shape == (6, 1, 1)
    assert "graph.reshape" not in op_names(imported)


def test_conv_4d_is_unsupported():
    w = weight("w", (2, 3, 3, 3, 3, 3))  # 1-D and 3-D map onto graph.conv2d (convert_window.py); 4-D does not
    with pytest.raises(UnsupportedOpError, match="only 2-D convolution"):
        import_onnx(single_op("Conv", [(1, 3, 4, 4, 4, 4)], {}, [w], ["w"]))


def test_pool_flags():
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1, "count_include_pad": 1}
    imported = imported_ok(single_op("AveragePool", [(1, 2, 8, 8)], attrs))
    pool = the_op(imported, graph.AvgPool2dOp)
    assert pool.ceil_mode is not None and pool.count_include_pad is not None
    assert imported.output_shapes == [(1, 2, 5, 5)]


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
def test_pool_ceil_mode_drops_windows_starting_in_right_padding(op_type):
    # The spec, PyTorch and onnxruntime give 2; onnx 1.23 shape inference says 3.
    attrs = {"kernel_shape": [2, 2], "strides": [3, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1}
    with pytest.warns(ShapeMismatchWarning):
        imported = import_onnx(single_op(op_type, [(1, 1, 4, 4)], attrs))
    imported.module.verify()
    assert imported.output_shapes == [(1, 1, 2, 2)]


def test_max_pool_auto_pad_same_upper():
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2], "auto_pad": "SAME_UPPER"}
    assert imported_ok(single_op("MaxPool", [(1, 2, 5, 5)], attrs)).output_shapes == [(1, 2, 3, 3)]


def test_max_pool_indices_output_imports():
    # 2-D Indices are computed (values vs onnxruntime: tests/unit/test_onnx_edge_cases.py)
    node = helper.make_node("MaxPool", ["x"], ["y", "idx"], name="pool", kernel_shape=[2, 2])
    outputs = [output("y", 4), value_info("idx", (1, 1, 3, 3), TensorProto.INT64)]
    model = make_model([node], [value_info("x", (1, 1, 4, 4))], outputs)
    assert import_onnx(model).output_shapes == [(1, 1, 3, 3), (1, 1, 3, 3)]


def test_batch_norm_training_mode_uses_batch_statistics():
    # numerics against onnx's reference: tests/unit/test_onnx_batchnorm_training.py
    model = single_op("BatchNormalization", [(1, 3, 4, 4)], {"training_mode": 1}, PARAMS["bn"], ["s", "b", "m", "v"])
    assert "graph.reduce" in op_names(imported_ok(model))


# ---------------------------------------------------------------------------
# The module: names, weights by reference
# ---------------------------------------------------------------------------


def test_main_signature_and_name_attributes():
    w = weight("fc.weight", (3, 4))
    node = helper.make_node("Gemm", ["in:0", "fc.weight"], ["out/1"], transB=1)
    # An initializer listed as a graph input is a constant, not an argument.
    inputs = [value_info("in:0", (2, 4)), value_info("fc.weight", (3, 4))]
    imported = imported_ok(make_model([node], inputs, [output("out/1", 2)], [w]))
    main = imported.module.ops.first
    assert [a.data for a in main.attributes["graph.input_names"].data] == ["in:0"]
    assert [a.data for a in main.attributes["graph.output_names"].data] == ["out/1"]
    assert imported.input_names == ["in:0"] and imported.output_names == ["out/1"]
    assert len(main.body.block.args) == 1
    assert "%in" in str(imported.module) and "%fc_weight" in str(imported.module)


def test_printed_ir_holds_no_weight_values():
    array = np.full((100, 100), 0.7315926, np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    w = numpy_helper.from_array(array, "w")
    imported = imported_ok(make_model(nodes, [value_info("x", (1, 100))], [output("y", 2)], [w]))
    text = str(imported.module)
    assert "7315" not in text
    assert len(text) < 1000
    np.testing.assert_array_equal(imported.weights["w"], array)


def test_weight_store_holds_exactly_the_referenced_constants():
    nodes = [helper.make_node("Add", ["x", "b"], ["y"])]
    inits = [weight("b", (3,)), weight("unused", (50,))]
    imported = imported_ok(make_model(nodes, [value_info("x", (2, 3))], [output("y", 2)], inits))
    refs = {op.ref.data for op in ops(imported) if isinstance(op, graph.ConstantOp)}
    assert refs == set(imported.weights) == {"b"}


def test_constant_used_twice_is_emitted_once():
    nodes = [helper.make_node("Add", ["x", "b"], ["h"]), helper.make_node("Mul", ["h", "b"], ["y"])]
    imported = imported_ok(make_model(nodes, [value_info("x", (2, 3))], [output("y", 2)], [weight("b", (3,))]))
    assert op_names(imported).count("graph.constant") == 1


def test_import_from_path_and_bytes(tmp_path):
    model = single_op("Relu", [(2, 3)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert isinstance(import_onnx(path).module, ModuleOp)
    assert isinstance(import_onnx(str(path)).module, ModuleOp)
    assert isinstance(import_onnx(model.SerializeToString()).module, ModuleOp)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["RandomUniformLike", "Foo"])
def test_unsupported_op_names_op_node_and_opset(op_type):
    nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node(op_type, ["h"], ["y"], name="my_node")]
    with pytest.raises(UnsupportedOpError) as info:
        import_onnx(make_model(nodes, [value_info("x", (2, 3))], [output("y", 2)], opset=17))
    message = str(info.value)
    assert op_type in message and "my_node" in message and "17" in message
    assert (info.value.op_type, info.value.node_name, info.value.opset) == (op_type, "my_node", 17)


def test_unsupported_op_without_name_and_others_listed():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("GlobalLpPool", ["a"], ["s"]),
             helper.make_node("MaxRoiPool", ["s", "x"], ["y"], pooled_shape=[1, 1])]
    with pytest.raises(UnsupportedOpError, match=r"'GlobalLpPool'.*<node #1>.*MaxRoiPool"):
        import_onnx(make_model(nodes, [value_info("x", (2, 3))], [output("y", 1)]))


def test_op_of_another_domain_is_unsupported():
    node = helper.make_node("Relu", ["x"], ["y"], domain="com.example", name="custom")
    model = make_model([node], [value_info("x", (2,))], [output("y", 1)])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedOpError, match="com.example"):
        import_onnx(model)


def test_malformed_file_is_a_load_error(tmp_path):
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"this is not a protobuf \xff\xfe")
    with pytest.raises(ModelLoadError, match="bad.onnx"):
        import_onnx(path)
    with pytest.raises(ModelLoadError, match="not an ONNX model"):
        import_onnx(b"")


def test_missing_file_is_a_load_error(tmp_path):
    with pytest.raises(ModelLoadError, match="no such file"):
        import_onnx(tmp_path / "missing.onnx")


def test_invalid_graph_is_a_load_error():
    node = helper.make_node("Relu", ["nowhere"], ["y"])
    with pytest.raises(ModelLoadError, match="not a valid ONNX model"):
        import_onnx(make_model([node], [value_info("x", (2,))], [output("y", 1)]))


def test_dynamic_input_is_a_shape_error():
    with pytest.raises(ShapeError, match=r"input 'x0'.*batch.*static shapes"):
        import_onnx(single_op("Relu", [("batch", 3)]))


def test_unsupported_input_type_is_rejected():
    node = helper.make_node("Identity", ["x"], ["y"])
    model = make_model([node], [value_info("x", (2,), TensorProto.COMPLEX64)], [output("y", 1)])
    with pytest.raises(ShapeError, match="COMPLEX64"):
        import_onnx(model)


def test_declared_output_type_must_match_the_computed_one():
    node = helper.make_node("Less", ["x", "x"], ["y"])
    model = make_model([node], [value_info("x", (2,))], [output("y", 1)])  # declared float, Less gives bool
    with pytest.raises(ShapeError, match="output 'y' has element type FLOAT; ziggurat computes bool"):
        import_onnx(model)


def test_declared_shape_mismatch_warns_and_computed_shape_wins():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [value_info("x", (2, 3))], [value_info("y", (3, 2))])
    with pytest.warns(ShapeMismatchWarning, match=r"Relu node '<node #0>'.*\(2, 3\).*\(3, 2\)"):
        imported = import_onnx(model)
    assert imported.output_shapes == [(2, 3)]


def test_old_opset_is_a_load_error():
    # Add changed at opset 7 (numpy broadcasting replaced the `broadcast` attribute)
    with pytest.raises(ModelLoadError, match="opset 6.*Add changed since"):
        import_onnx(single_op("Add", [(2,), (2,)], opset=6))


def test_old_opset_with_unchanged_ops_imports():
    assert import_onnx(single_op("Relu", [(2,)], opset=6)).output_shapes == [(2,)]


# ---------------------------------------------------------------------------
# External data
# ---------------------------------------------------------------------------


def _model_with_big_weight() -> onnx.ModelProto:
    return make_model([helper.make_node("Add", ["x", "w"], ["y"])], [value_info("x", (64, 64))], [output("y", 2)],
                      [weight("w", (64, 64))])


def test_external_data_next_to_the_model_is_loaded(tmp_path):
    model = _model_with_big_weight()
    expected = numpy_helper.to_array(model.graph.initializer[0])
    onnx.save(model, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    imported = import_onnx(tmp_path / "m.onnx")
    imported.module.verify()
    np.testing.assert_array_equal(imported.weights["w"], expected)


@pytest.mark.parametrize("location", ["../outside.data", "/etc/passwd"])
def test_external_data_outside_the_model_folder_is_refused(tmp_path, location):
    model = _model_with_big_weight()
    tensor = model.graph.initializer[0]
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value=location)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "m.onnx").write_bytes(model.SerializeToString())
    with pytest.raises(ModelLoadError, match="outside the model's folder"):
        import_onnx(folder / "m.onnx")


def test_external_data_without_a_path_is_refused(tmp_path):
    model = _model_with_big_weight()
    onnx.save(model, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    proto = onnx.load(tmp_path / "m.onnx", load_external_data=False)
    with pytest.raises(ModelLoadError, match="external file"):
        import_onnx(proto)
