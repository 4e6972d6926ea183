"""The compile-time reference evaluator (used by fold-constants) agrees with
the generated kernels of every op it covers."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

import ziggurat
from ziggurat.dialects import graph, make_context
from ziggurat.frontends.onnx import ImportedModel
from ziggurat.weights import WeightStore
from ziggurat.transforms.graph.graph_reference import EVALUATORS, evaluate

T23 = "tensor<2x3xf32>"
UNARY = {graph.ReluOp: "relu", graph.TanhOp: "tanh", graph.SigmoidOp: "sigmoid", graph.ExpOp: "exp",
         graph.SqrtOp: "sqrt", graph.NegOp: "neg", graph.ErfOp: "erf", graph.AbsOp: "abs", graph.LogOp: "log",
         graph.FloorOp: "floor", graph.CeilOp: "ceil", graph.RoundOp: "round"}
BINARY = {graph.AddOp: "add", graph.SubOp: "sub", graph.MulOp: "mul", graph.DivOp: "div", graph.PowOp: "pow",
          graph.MaxOp: "max", graph.MinOp: "min"}

# op class -> (argument shapes, the op in custom syntax on %a [, %b], result shape)
CASES: dict[type, tuple[list[tuple[int, ...]], str, tuple[int, ...]]] = {
    **{cls: ([(2, 3)], f"graph.{n} %a : {T23}", (2, 3)) for cls, n in UNARY.items()},
    **{cls: ([(2, 3), (3,)], f"graph.{n} %a, %b : {T23}, tensor<3xf32> -> {T23}", (2, 3)) for cls, n in BINARY.items()},
    graph.MatmulOp: ([(2, 3), (4, 3)], "graph.matmul %a, %b {transpose_b = true} : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>", (2, 4)),
    graph.BatchNormOp: ([(1, 2, 3), (2,), (2,), (2,), (2,)], "graph.batch_norm %a, %b, %c, %d, %e {epsilon = 1.0e-05 : f64} : tensor<1x2x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32> -> tensor<1x2x3xf32>", (1, 2, 3)),
    graph.SoftmaxOp: ([(2, 3)], f"graph.softmax %a {{axis = 1 : i64}} : {T23}", (2, 3)),
    graph.ReshapeOp: ([(2, 3)], "graph.reshape %a : tensor<2x3xf32> -> tensor<3x2xf32>", (3, 2)),
    graph.TransposeOp: ([(2, 3)], "graph.transpose %a {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>", (3, 2)),
    graph.SliceOp: ([(2, 16)], "graph.slice %a {starts = array<i64: 0, 4>, steps = array<i64: 1, 2>} : tensor<2x16xf32> -> tensor<2x4xf32>", (2, 4)),
    graph.ConcatOp: ([(2, 3), (2, 5)], "graph.concat %a, %b {axis = 1 : i64} : tensor<2x3xf32>, tensor<2x5xf32> -> tensor<2x8xf32>", (2, 8)),
    graph.ReduceOp: ([(1, 4, 6)], 'graph.reduce %a {kind = "mean", axes = array<i64: 2>, keepdims = true} : tensor<1x4x6xf32> -> tensor<1x4x1xf32>', (1, 4, 1)),
    graph.BroadcastToOp: ([(1, 3)], "graph.broadcast_to %a : tensor<1x3xf32> -> tensor<4x3xf32>", (4, 3)),
    graph.CompareOp: ([(2, 3), (3,)], f'graph.compare %a, %b {{kind = "lt"}} : {T23}, tensor<3xf32> -> {T23}', (2, 3)),
    graph.WhereOp: ([(2, 3), (2, 3), (3,)], f"graph.where %a, %b, %c : {T23}, {T23}, tensor<3xf32> -> {T23}", (2, 3)),
    graph.LookupOp: ([(2, 3), (5,)], f"graph.lookup %a, %b {{offset = -2 : i64}} : {T23}, tensor<5xf32> -> {T23}", (2, 3)),
}


def _type(shape: tuple[int, ...]) -> str:
    return "tensor<" + "x".join(map(str, shape)) + "xf32>"


def test_every_evaluator_has_a_case():
    assert set(EVALUATORS) == set(CASES)


@pytest.mark.parametrize("cls", sorted(CASES, key=lambda c: c.name), ids=lambda c: c.name)
def test_reference_matches_kernel(cls):
    shapes, text, out = CASES[cls]
    names = "abcde"[: len(shapes)]
    args = ", ".join(f"%{n}: {_type(s)}" for n, s in zip(names, shapes))
    src = f"func.func @main({args}) -> {_type(out)} {{\n  %r = {text}\n  func.return %r : {_type(out)}\n}}"
    module = Parser(make_context(), src).parse_module()
    assert isinstance(module, ModuleOp)
    op = next(o for o in module.walk() if isinstance(o, cls))
    imported = ImportedModel(module=module, weights=WeightStore({}), input_names=list(names), output_names=["r"],
                             input_shapes=shapes, output_shapes=[out], opset=17)
    inputs = _inputs(cls, shapes)
    (got,) = ziggurat.compile(imported, target="llvm -num-cores=1", opt_level=0)(*inputs)
    np.testing.assert_allclose(got, evaluate(op, inputs), rtol=1e-5, atol=1e-6)


POSITIVE = {graph.SqrtOp, graph.LogOp, graph.PowOp}  # their domain (pow: a real power of a negative is NaN)
NONZERO_DIVISOR = {graph.DivOp}
VARIANCE = {graph.BatchNormOp}  # operand 4, the variance, is never negative


def _inputs(cls: type, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Standard-normal inputs (negatives included) with exact zeros and values at integers and
    halves (relu, abs, floor, ceil, max/min change behaviour there); positive only where the
    op's domain asks."""
    rng = np.random.default_rng(3)
    out = []
    for n, s in enumerate(shapes):
        if cls in POSITIVE or (cls in VARIANCE and n == 4):
            out.append((rng.random(s) + 0.5).astype(np.float32))
            continue
        size = int(np.prod(s))
        signs = np.where(np.arange(size) % 2 == 0, 1.0, -1.0)  # both signs, whatever the draw
        a = (signs * (rng.random(size) * 2 + 0.25)).astype(np.float32)
        if not (cls in NONZERO_DIVISOR and n == 1):
            special = np.array([0.0, -1.5, 2.0, -1.0, 0.0, -2.5], np.float32)[: max(1, size // 2)]
            a[: special.size] = special
        out.append(a.reshape(s))
    assert any((x < 0).any() for x in out) or cls in POSITIVE, "no negative input"
    return out


@pytest.mark.parametrize("cls", [graph.ReluOp, graph.AbsOp, graph.FloorOp, graph.MaxOp])
def test_inputs_cover_negatives_and_zeros(cls):
    """The inputs above reach the other side of zero (a relu that passed x through, an abs that did
    nothing, would fail there), and exact zeros."""
    a = _inputs(cls, CASES[cls][0])[0]
    assert (a < 0).sum() >= 2 and (a == 0).sum() >= 1 and (a > 0).any()


# Integer arithmetic (wrapping) and casts: what folds the weight side of int8 models
# (DequantizeLinear of a constant: cast i8 -> f32, sub, mul; the int8 GEMM's column sums).
INTEGER_CASES = [
    ("graph.add %a, %b : tensor<6xi8>, tensor<6xi8> -> tensor<6xi8>", ["i8", "i8"], "i8"),
    ("graph.mul %a, %b : tensor<6xi8>, tensor<6xi8> -> tensor<6xi8>", ["i8", "i8"], "i8"),
    ("graph.sub %a, %b : tensor<6xi32>, tensor<6xi32> -> tensor<6xi32>", ["i32", "i32"], "i32"),
    ("graph.max %a, %b : tensor<6xui8>, tensor<6xui8> -> tensor<6xui8>", ["ui8", "ui8"], "ui8"),
    ('graph.reduce %a {kind = "sum", axes = array<i64: 0>, keepdims = false} : tensor<6xi32> -> tensor<i32>',
     ["i32"], "i32"),
    ("graph.cast %a : tensor<6xi8> -> tensor<6xf32>", ["i8"], "f32"),
    ("graph.cast %a : tensor<6xui8> -> tensor<6xf32>", ["ui8"], "f32"),
    ("graph.cast %a : tensor<6xi32> -> tensor<6xi8>", ["i32"], "i8"),
    ("graph.cast %a : tensor<6xi64> -> tensor<6xf32>", ["i64"], "f32"),
    ("graph.cast %a : tensor<6xf32> -> tensor<6xf64>", ["f32"], "f64"),
]
_NP = {"i8": np.int8, "ui8": np.uint8, "i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64}
_EDGES = {np.int8: [-128, 127, -1, 0, 100, -100], np.uint8: [0, 255, 128, 1, 200, 77],
          np.int32: [2**31 - 1, -2**31, 70000, -5, 0, 123456789], np.int64: [2**40 + 3, -7, 0, 16777217, -2**33, 5],
          np.float32: [0.5, -1.25, 3.0e38, 1e-30, -0.0, 7.0]}


@pytest.mark.parametrize("text, ins, out", INTEGER_CASES, ids=[c[0].split(" %")[0] + ":" + c[1][0] + "->" + c[2]
                                                                for c in INTEGER_CASES])
def test_integer_ops_and_casts_fold_as_the_kernel_computes(text, ins, out):
    """Wrapping integer arithmetic and exact casts are supported, and agree bit for bit with the
    generated kernel, at the types' edges (overflowing sums and products wrap in both)."""
    from ziggurat.transforms.graph.graph_reference import supports

    names = "ab"[: len(ins)]
    shape = "" if "keepdims = false" in text else "6x"
    args = ", ".join(f"%{n}: tensor<6x{t}>" for n, t in zip(names, ins))
    src = f"func.func @main({args}) -> tensor<{shape}{out}> {{\n  %r = {text}\n  func.return %r : tensor<{shape}{out}>\n}}"
    module = Parser(make_context(), src).parse_module()
    op = next(o for o in module.walk() if o.name.startswith("graph.") and o.name != "graph.constant")
    assert supports(op)
    inputs = [np.array(_EDGES[_NP[t]][::(1 if k == 0 else -1)], _NP[t]) for k, t in enumerate(ins)]
    imported = ImportedModel(module=module, weights=WeightStore({}), input_names=list(names), output_names=["r"],
                             input_shapes=[(6,)] * len(ins), output_shapes=[() if not shape else (6,)], opset=17)
    (got,) = ziggurat.compile(imported, target="llvm -num-cores=1", opt_level=0)(*inputs)
    np.testing.assert_array_equal(got, evaluate(op, inputs))


@pytest.mark.parametrize("text", [
    "graph.cast %a : tensor<6xf32> -> tensor<6xi8>",   # ours saturates, numpy's astype does not
    "graph.cast %a : tensor<6xf64> -> tensor<6xf32>",  # narrowing: left to the kernel
    "graph.div %a, %b : tensor<6xi32>, tensor<6xi32> -> tensor<6xi32>",  # integer division rounds its own way
])
def test_casts_and_integer_ops_numpy_does_otherwise_are_not_folded(text):
    from ziggurat.transforms.graph.graph_reference import supports

    src_t = text.split(": ")[1].split(" ->")[0].split(", ")
    args = ", ".join(f"%{n}: {t}" for n, t in zip("ab", src_t))
    res = text.split("-> ")[1]
    module = Parser(make_context(), f"func.func @main({args}) -> {res} {{\n  %r = {text}\n  func.return %r : {res}\n}}"
                    ).parse_module()
    op = next(o for o in module.walk() if o.name.startswith("graph.") and o.name != "graph.constant")
    assert not supports(op)
