"""Property: fusing any random graph of graph ops (every op-pattern kind, with
diamonds and values used twice) changes no result (fused and unfused models
match numpy), and every group is convex: no path leaves it and comes back."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects import func
from xdsl.ir import Block, Operation
from xdsl.parser import Parser

import ziggurat
from ziggurat.dialects import graph, make_context
from ziggurat.frontends.onnx import ImportedModel
from ziggurat.transforms.graph.fuse_ops import FuseOpsPass
from ziggurat.transforms.graph.fusion import place_group
from ziggurat.weights import WeightStore

T = "tensor<4x4xf32>"
UNARY = ("relu", "tanh", "sigmoid", "neg")


NUMPY_UNARY = {"relu": lambda a: np.maximum(a, 0), "tanh": np.tanh, "sigmoid": lambda a: 1 / (1 + np.exp(-a)),
               "neg": np.negative}
NUMPY_BINARY = {"add": np.add, "mul": np.multiply, "sub": np.subtract}


def _softmax(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@st.composite
def graphs(draw) -> tuple[str, int, Callable]:
    """MLIR text of @main over two 4x4 inputs, its number of results, and a numpy (float64) function
    computing the same results, with the largest magnitude of any value it computes on the way."""
    values = ["%x", "%y"]
    lines = []
    steps: list[tuple[str, Callable, tuple[str, ...]]] = []  # (value, numpy function, operand values)
    for n in range(draw(st.integers(2, 10))):
        pick = lambda: draw(st.sampled_from(values))  # noqa: E731
        kind = draw(st.sampled_from(("unary", "binary", "transpose", "softmax", "reduce", "matmul")))
        v = f"%v{n}"
        if kind == "unary":
            op, a = draw(st.sampled_from(UNARY)), pick()
            lines.append(f"{v} = graph.{op} {a} : {T}")
            steps.append((v, NUMPY_UNARY[op], (a,)))
        elif kind == "binary":
            op, a, b = draw(st.sampled_from(("add", "mul", "sub"))), pick(), pick()
            lines.append(f"{v} = graph.{op} {a}, {b} : {T}, {T} -> {T}")
            steps.append((v, NUMPY_BINARY[op], (a, b)))
        elif kind == "transpose":
            a = pick()
            lines.append(f"{v} = graph.transpose {a} {{perm = array<i64: 1, 0>}} : {T} -> {T}")
            steps.append((v, np.transpose, (a,)))
        elif kind == "softmax":
            a = pick()
            lines.append(f"{v} = graph.softmax {a} {{axis = 1 : i64}} : {T}")
            steps.append((v, _softmax, (a,)))
        elif kind == "reduce":
            a, b = pick(), pick()
            lines.append(f'{v}r = graph.reduce {a} {{kind = "sum", axes = array<i64: 1>, keepdims = true}} : {T} -> tensor<4x1xf32>')
            lines.append(f"{v} = graph.add {b}, {v}r : {T}, tensor<4x1xf32> -> {T}")
            steps.append((f"{v}r", lambda t: t.sum(axis=1, keepdims=True), (a,)))
            steps.append((v, np.add, (b, f"{v}r")))
        else:
            a, b = pick(), pick()
            lines.append(f"{v} = graph.matmul {a}, {b} : {T}, {T} -> {T}")
            steps.append((v, np.matmul, (a, b)))
        values.append(v)
    outs = [values[-1]] + ([draw(st.sampled_from(values[2:-1]))] if len(values) > 3 and draw(st.booleans()) else [])
    body = "\n  ".join(lines)
    sig = ", ".join([T] * len(outs))
    text = f"func.func @main(%x: {T}, %y: {T}) -> ({sig}) {{\n  {body}\n  func.return {', '.join(outs)} : {sig}\n}}"

    def reference(x: np.ndarray, y: np.ndarray) -> tuple[list[np.ndarray], float]:
        env = {"%x": x.astype(np.float64), "%y": y.astype(np.float64)}
        for v, fn, args in steps:
            env[v] = fn(*(env[a] for a in args))
        return [env[o] for o in outs], max(float(np.abs(a).max()) for a in env.values())

    return text, len(outs), reference


def _model(text: str, n_out: int) -> ImportedModel:
    module = Parser(make_context(), text).parse_module()
    return ImportedModel(module=module, weights=WeightStore({}), input_names=["x", "y"],
                         output_names=[f"r{i}" for i in range(n_out)], input_shapes=[(4, 4), (4, 4)],
                         output_shapes=[(4, 4)] * n_out, opset=17)


def _main_block(module) -> Block:
    return next(op for op in module.ops if isinstance(op, func.FuncOp)).body.block


def assert_groups_convex(producers: dict[Operation, set[Operation]], groups: list[set[Operation]]) -> None:
    """No path leaves a group and comes back: no op outside a group both depends on one of its
    members and feeds one (through other outside ops), in the dataflow graph before fusion."""
    consumers: dict[Operation, set[Operation]] = {op: set() for op in producers}
    for op, ins in producers.items():
        for p in ins:
            consumers[p].add(op)
    for group in groups:
        frontier = [c for m in group for c in consumers[m] if c not in group]
        seen = set(frontier)
        while frontier:
            op = frontier.pop()
            back = consumers[op] & group
            assert not back, (f"not convex: {op.name} depends on group member(s) and feeds "
                              f"{sorted(b.name for b in back)} of the group {sorted(m.name for m in group)}")
            for c in consumers[op] - seen:
                seen.add(c)
                frontier.append(c)


def assert_well_formed(block: Block) -> None:
    """Every value is defined before its use, inside the region that uses it (no use of a value
    defined in a fused body from outside it, no cycle through a `graph.fused`)."""
    defined = set(block.args)
    for op in block.ops:
        for v in op.operands:
            assert v in defined, f"{op.name} uses a value not defined before it in its block"
        if isinstance(op, graph.FusedOp):
            assert_well_formed(op.body.block)
        defined.update(op.results)


@settings(max_examples=12, deadline=None)
@given(graphs(), st.booleans())
def test_fusion_preserves_results_and_groups_are_convex(case, allow_reduction_fusion):
    text, n_out, reference = case
    # the groups, checked against the dataflow graph before fusion (fuse-ops moves the ops themselves
    # into the bodies of the `graph.fused` it makes, so they keep their identity)
    module = Parser(make_context(), text).parse_module()
    block = _main_block(module)
    producers = {op: {v.owner for v in op.operands if isinstance(v.owner, Operation)} for op in block.ops}
    FuseOpsPass(allow_reduction_fusion=allow_reduction_fusion).apply(make_context(), module)
    groups = [{o for o in op.body.block.ops if not isinstance(o, graph.YieldOp)}
              for op in block.ops if isinstance(op, graph.FusedOp)]
    assert all(len(g) >= 2 for g in groups)
    assert_well_formed(block)
    assert_groups_convex(producers, groups)
    # the same pass inside the compiler: fused and unfused models both compute what numpy computes
    fuse = f"fuse-ops{{allow-reduction-fusion={'true' if allow_reduction_fusion else 'false'}}}"
    seen = {}

    def after(p, module, _s):
        if p.name == "fuse-ops":
            seen["groups"] = sum(isinstance(op, graph.FusedOp) for op in module.walk())

    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
    plain = ziggurat.compile(_model(text, n_out), target="llvm -num-cores=1", opt_level=0)(x, y)
    fused = ziggurat.compile(_model(text, n_out), target="llvm -num-cores=1", opt_level=0, pipeline=fuse, after_pass=after)(x, y)
    assert seen["groups"] == len(groups)
    want, scale = reference(x, y)
    assert len(plain) == len(fused) == len(want) == n_out
    for got in (plain, fused):
        for g, w in zip(got, want):  # float32 rounding grows with the largest intermediate value
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(1.0, scale))


def test_a_group_with_a_path_out_and_back_is_not_convex_and_is_never_outlined():
    """relu -> softmax -> add with relu -> add: {relu, add} is not convex (the softmax depends on the
    relu and feeds the add). The checker above says so, fuse-ops does not fuse it, and outlining it
    by hand is refused (it would make a cycle through the `graph.fused`)."""
    text = f"""func.func @main(%x: {T}, %y: {T}) -> ({T}) {{
  %r = graph.relu %x : {T}
  %s = graph.softmax %r {{axis = 1 : i64}} : {T}
  %a = graph.add %r, %s : {T}, {T} -> {T}
  func.return %a : {T}
}}"""
    module = Parser(make_context(), text).parse_module()
    block = _main_block(module)
    relu, softmax, add, _ = block.ops
    producers = {op: {v.owner for v in op.operands if isinstance(v.owner, Operation)} for op in block.ops}
    with pytest.raises(AssertionError, match="not convex: graph.softmax"):
        assert_groups_convex(producers, [{relu, add}])
    assert_groups_convex(producers, [{relu, softmax, add}, {softmax, add}])  # these are convex
    FuseOpsPass().apply(make_context(), module)
    assert not any(isinstance(op, graph.FusedOp) for op in block.ops)
    before = str(module)
    assert place_group(block, [relu, add]) is None
    assert str(module) == before
    assert_well_formed(block)
