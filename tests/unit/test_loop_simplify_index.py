"""loop-simplify-index: random index expressions keep their value at every point of the loop ranges, and
reshape / transpose / slice chains compiled end to end match numpy with their copies vectorized."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, f32
from xdsl.ir import Block

import ziggurat
from ziggurat.dialects import loop
from ziggurat.transforms.loop.loop_simplify_index import simplify_block

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# An expression: ("var", i) | ("const", k) | (op, lhs, rhs-or-constant)
_leaf = st.one_of(st.tuples(st.just("var"), st.integers(0, 2)), st.tuples(st.just("const"), st.integers(0, 70)))
_expr = st.recursive(_leaf, lambda e: st.one_of(
    st.tuples(st.sampled_from(["add", "sub"]), e, e),
    st.tuples(st.just("mul"), e, st.integers(1, 40)),
    st.tuples(st.sampled_from(["div", "rem"]), e, st.integers(1, 64)),
), max_leaves=8)


def _build(expr, blk_vars, b: Block):
    def const(k):
        op = arith.ConstantOp(IntegerAttr(k, IndexType()))
        b.add_op(op)
        return op.result

    def go(e):
        kind = e[0]
        if kind == "var":
            return blk_vars[e[1]]
        if kind == "const":
            return const(e[1])
        lhs = go(e[1])
        if kind in ("add", "sub"):
            rhs = go(e[2])
            op = arith.AddiOp(lhs, rhs) if kind == "add" else arith.SubiOp(lhs, rhs)
        else:
            rhs = const(e[2])
            op = {"mul": arith.MuliOp, "div": arith.DivUIOp, "rem": arith.RemUIOp}[kind](lhs, rhs)
        b.add_op(op)
        return op.result

    return go(expr)


def _eval(block: Block, env: dict) -> dict:
    vals = dict(env)
    for op in block.ops:
        if isinstance(op, arith.ConstantOp):
            vals[op.result] = op.value.value.data
        elif isinstance(op, (arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.DivUIOp, arith.RemUIOp)):
            x, y = vals[op.operands[0]], vals[op.operands[1]]
            vals[op.results[0]] = {arith.AddiOp: x + y, arith.SubiOp: x - y, arith.MuliOp: x * y,
                                   arith.DivUIOp: x // y if y else None, arith.RemUIOp: x % y if y else None}[type(op)]
        elif isinstance(op, loop.StoreOp):
            vals["out"] = vals[op.indices[0]]
    return vals


def _nonneg(block: Block, env: dict) -> bool:
    """Whether every intermediate of the original expression is >= 0 at this point (index math never
    goes negative in lowered kernels; unsigned division of a negative value is not what the pass models)."""
    vals = _eval(block, env)
    return all(v is None or not isinstance(v, int) or v >= 0 for k, v in vals.items() if k != "out")


@SETTINGS
@given(expr=_expr, extents=st.lists(st.integers(1, 40), min_size=3, max_size=3))
def test_simplified_index_math_keeps_its_value(expr, extents):
    loops = [loop.ForOp(0, n) for n in extents]
    blk = loop.BlockOp("e", "SSS", [f.iv for f in loops])
    out_buf = Block(arg_types=[MemRefType(f32, [1])]).args[0]
    b = blk.body.block
    v = _build(expr, list(blk.vars), b)
    store_src = Block(arg_types=[f32]).args[0]  # a store at index v keeps v alive; `_eval` reads its index
    b.add_op(loop.StoreOp(store_src, out_buf, [v]))
    points = list(itertools.product(*(range(n) for n in extents)))[:400]
    before = {}
    for p in points:
        env = dict(zip(blk.vars, p))
        if not _nonneg(b, env):
            return
        before[p] = _eval(b, env)["out"]
    simplify_block(blk)
    for p in points:
        assert _eval(b, dict(zip(blk.vars, p)))["out"] == before[p], (expr, p)


def _chain_model(d0, d1, d2, perm, offset):
    """x[d0, d1, d2] -> reshape [d0 * d1, d2] -> transpose -> reshape [d2, d0, d1] -> transpose(perm)
    -> slice of the middle axis from `offset`."""
    shape = [d2, d0, d1]
    out_shape = [shape[p] for p in perm]
    nodes = [
        helper.make_node("Reshape", ["x", "s1"], ["a"]),
        helper.make_node("Transpose", ["a"], ["b"], perm=[1, 0]),
        helper.make_node("Reshape", ["b", "s2"], ["c"]),
        helper.make_node("Transpose", ["c"], ["d"], perm=list(perm)),
        helper.make_node("Slice", ["d", "st", "en", "ax"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("s1", [d0 * d1, d2]), ("s2", shape), ("st", [offset]), ("en", [out_shape[1]]), ("ax", [1]))]
    out_shape[1] -= offset
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [d0, d1, d2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d0=st.integers(1, 5), d1=st.sampled_from([1, 3, 8, 16]), d2=st.sampled_from([2, 8, 24, 32]),
       perm=st.permutations([0, 1, 2]), offset=st.integers(0, 1), threads=st.sampled_from([1, 2]))
def test_reshape_transpose_slice_chains_match_numpy(d0, d1, d2, perm, offset, threads):
    offset = min(offset, [d2, d0, d1][perm[1]] - 1)
    x = np.random.default_rng(d0 + d1 + d2).standard_normal((d0, d1, d2)).astype(np.float32)
    want = np.transpose(x.reshape(d0 * d1, d2).T.reshape(d2, d0, d1), perm)[:, offset:]
    (got,) = ziggurat.compile(_chain_model(d0, d1, d2, perm, offset), target=f"llvm -num-cores={threads}")(x)
    np.testing.assert_array_equal(got, want)


def test_a_head_split_becomes_a_vector_copy():
    """A transformer's head split (reshape [32, 384] -> [32, 3, 4, 32], slice, transpose): the te lowering's
    div/rem chain cancels, so the copy loads 8 contiguous floats at a time."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["a"]),
             helper.make_node("Transpose", ["a"], ["y"], perm=[1, 2, 0, 3])]
    g = helper.make_graph(nodes, "heads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 384])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4, 32, 32])],
                          [numpy_helper.from_array(np.array([32, 3, 4, 32], np.int64), "s")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    seen = {}

    def grab(p, module, seconds):
        seen[p.name] = str(module)

    x = np.random.default_rng(0).standard_normal((32, 384)).astype(np.float32)
    c = ziggurat.compile(model, target="llvm -mattr=+avx,+avx2,+fma -num-cores=1", after_pass=grab)
    (got,) = c(x)
    np.testing.assert_array_equal(got, np.transpose(x.reshape(32, 3, 4, 32), (1, 2, 0, 3)))
    assert "arith.divui" not in seen["loop-simplify-index"] and "arith.remui" not in seen["loop-simplify-index"]
    assert "hw.vload" in seen["convert-loop-to-hw"]
