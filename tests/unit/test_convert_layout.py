"""convert-layout: models compiled with NCHW[x]c regions match onnxruntime, and the
pass's helpers (blocked shapes, region finding) behave."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat.dialects import graph  # noqa: F401 - graph.py loads graph_layout (import order)
from ziggurat.dialects.graph_layout import blocked_shape, parse_layout, plain_shape
from ziggurat.transforms.graph.layout_rewrite import (
    depthwise_weight_array,
    grouped_weight_array,
    input_block,
    to_blocked_array,
    weight_array,
)

LAYOUT = "simplify-graph,fold-constants,cse,dce,convert-layout{block=%d},fuse-ops"


def _model(nodes, x_shape, y_shape, inits) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _graph_ops(model, block) -> list[str]:
    """The graph op names after the graph pipeline up to convert-layout."""
    from ziggurat.compiler import parse_pipeline, run_passes
    from ziggurat.frontends.onnx import import_onnx
    from ziggurat.transforms.graph.weight_binding import bind_weights

    imported = import_onnx(model)
    bind_weights(imported.module, imported.weights)
    run_passes(imported.module, parse_pipeline(LAYOUT.split(",fuse-ops")[0] % block))
    return [op.name for op in imported.module.walk() if op.name.startswith("graph.")]


def _check(model, x, block=16, threads=1):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (ref,) = sess.run(None, {"x": x})
    compiled = ziggurat.compile(model, target=f"llvm -num-cores={threads}", pipeline=LAYOUT % block)
    (got,) = compiled(x)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    return _graph_ops(model, block)


def _w(rng, name, shape, scale=0.2):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _conv_bn_relu(nodes, inits, rng, x, cin, cout, k, stride, name, relu=True, group=1):
    inits += [_w(rng, f"{name}.w", (cout, cin // group, k, k)),
              numpy_helper.from_array(rng.uniform(0.5, 1.5, cout).astype(np.float32), f"{name}.s"),
              numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"{name}.b"),
              numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"{name}.m"),
              numpy_helper.from_array(rng.uniform(0.5, 1.5, cout).astype(np.float32), f"{name}.v")]
    nodes.append(helper.make_node("Conv", [x, f"{name}.w"], [f"{name}.c"], pads=[k // 2] * 4, kernel_shape=[k, k],
                                  strides=[stride, stride], group=group))
    nodes.append(helper.make_node("BatchNormalization", [f"{name}.c"] + [f"{name}.{p}" for p in "sbmv"], [f"{name}.bn"]))
    if relu:
        nodes.append(helper.make_node("Relu", [f"{name}.bn"], [f"{name}.r"]))
        return f"{name}.r"
    return f"{name}.bn"


def _residual_net(rng):
    """Stem (C_in 3), a residual block, a strided block with a 1x1 shortcut, max pool, GAP."""
    nodes, inits = [], []
    h = _conv_bn_relu(nodes, inits, rng, "x", 3, 16, 3, 1, "stem")
    a = _conv_bn_relu(nodes, inits, rng, h, 16, 16, 3, 1, "b1.1")
    a = _conv_bn_relu(nodes, inits, rng, a, 16, 16, 3, 1, "b1.2", relu=False)
    nodes += [helper.make_node("Add", [a, h], ["b1.add"]), helper.make_node("Relu", ["b1.add"], ["b1.out"])]
    b = _conv_bn_relu(nodes, inits, rng, "b1.out", 16, 32, 3, 2, "b2.1")
    b = _conv_bn_relu(nodes, inits, rng, b, 32, 32, 3, 1, "b2.2", relu=False)
    sc = _conv_bn_relu(nodes, inits, rng, "b1.out", 16, 32, 1, 2, "b2.sc", relu=False)
    nodes += [helper.make_node("Add", [b, sc], ["b2.add"]), helper.make_node("Relu", ["b2.add"], ["b2.out"]),
              helper.make_node("MaxPool", ["b2.out"], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
              helper.make_node("GlobalAveragePool", ["pool"], ["y"])]
    return _model(nodes, (1, 3, 12, 12), (1, 32, 1, 1), inits)


@pytest.mark.parametrize("threads", [1, 2])
def test_residual_net_matches_onnxruntime(threads):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
    ops = _check(_residual_net(rng), x, threads=threads)
    # one region: every conv, the residual adds and the pool are blocked; weights are
    # transformed at compile time, so the only transforms are x entering and the pool leaving
    assert ops.count("graph.conv2d_nchwc") == 6 and "graph.conv2d" not in ops
    assert "graph.max_pool2d_nchwc" in ops
    assert ops.count("graph.layout_transform") == 2


def test_block_8_and_dilated_padded_conv():
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[2, 1, 2, 1], dilations=[2, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["c2"], pads=[0, 0, 0, 0], strides=[2, 2], kernel_shape=[2, 2]),
             helper.make_node("Mul", ["c2", "scale"], ["y"])]
    inits = [_w(rng, "w", (16, 8, 3, 3)), _w(rng, "w2", (8, 16, 2, 2)),
             numpy_helper.from_array(rng.standard_normal((8, 1, 1)).astype(np.float32), "scale")]
    x = rng.standard_normal((1, 8, 10, 9)).astype(np.float32)
    ops = _check(_model(nodes, x.shape, (1, 8, 5, 4), inits), x, block=8)
    assert ops.count("graph.conv2d_nchwc") == 2 and ops.count("graph.layout_transform") == 2


def test_grouped_conv_stays_nchw_between_regions():
    rng = np.random.default_rng(2)
    nodes, inits = [], []
    h = _conv_bn_relu(nodes, inits, rng, "x", 16, 24, 3, 1, "a")
    h = _conv_bn_relu(nodes, inits, rng, h, 24, 24, 3, 1, "g", group=2)  # group width 12 straddles blocks: NCHW
    h = _conv_bn_relu(nodes, inits, rng, h, 24, 32, 1, 1, "pw")
    nodes.append(helper.make_node("Identity", [h], ["y"]))
    x = rng.standard_normal((1, 16, 7, 7)).astype(np.float32)
    ops = _check(_model(nodes, x.shape, (1, 32, 7, 7), inits), x)
    assert ops.count("graph.conv2d_nchwc") == 2 and ops.count("graph.conv2d") == 1
    assert ops.count("graph.layout_transform") == 4  # two regions, in and out each


@settings(max_examples=12, deadline=None)
@given(groups=st.integers(2, 6), width=st.sampled_from([2, 4, 8]), stride=st.sampled_from([1, 2]),
       block=st.sampled_from([8, 16]), threads=st.sampled_from([1, 2]))
def test_groups_inside_channel_blocks_run_blocked_and_match_onnxruntime(groups, width, stride, block, threads):
    """RegNet's grouped 3x3 convs (group width 8): with the group width dividing the block, each output
    block reads its own input block through a block-diagonal weight (`graph.grouped_conv2d_nchwc`)."""
    c = groups * width
    rng = np.random.default_rng(groups * 7 + width + block)
    nodes, inits = [], []
    h = _conv_bn_relu(nodes, inits, rng, "x", 5, c, 1, 1, "pw1")
    h = _conv_bn_relu(nodes, inits, rng, h, c, c, 3, stride, "g", group=groups)
    nodes.append(helper.make_node("Identity", [h], ["y"]))
    oh = (9 - 1) // stride + 1
    x = rng.standard_normal((1, 5, 9, 9)).astype(np.float32)
    ops = _check(_model(nodes, x.shape, (1, c, oh, oh), inits), x, block=block, threads=threads)
    assert ops.count("graph.grouped_conv2d_nchwc") == (c % block == 0 or c > block)


@settings(max_examples=14, deadline=None)
@given(c=st.integers(9, 40), k=st.sampled_from([3, 5]), stride=st.sampled_from([1, 2]), dil=st.sampled_from([1, 2]),
       hw=st.integers(5, 15), block=st.sampled_from([8, 16]), threads=st.sampled_from([1, 2]),
       entry=st.sampled_from(["pointwise", "input"]))
def test_depthwise_convs_run_blocked_and_match_onnxruntime(c, k, stride, dil, hw, block, threads, entry):
    """MobileNet's inverted residual: a depthwise conv (groups = C) between pointwise convs runs as
    `graph.depthwise_conv2d_nchwc` in the same region (channel counts the block does not divide padded),
    or as the region's first op, its padding moved into the boundary transform."""
    rng = np.random.default_rng(c * 31 + k + hw + block)
    nodes, inits = [], []
    h = "x" if entry == "input" else _conv_bn_relu(nodes, inits, rng, "x", c, c, 1, 1, "pw1")
    cin = c
    inits.append(_w(rng, "dw.w", (cin, 1, k, k)))
    nodes += [helper.make_node("Conv", [h, "dw.w"], ["dw"], group=cin, kernel_shape=[k, k], strides=[stride, stride],
                               dilations=[dil, dil], pads=[dil * (k // 2)] * 4),
              helper.make_node("Sigmoid", ["dw"], ["dws"]), helper.make_node("Mul", ["dw", "dws"], ["dwa"])]
    h = _conv_bn_relu(nodes, inits, rng, "dwa", cin, 24, 1, 1, "pw2", relu=False)
    nodes.append(helper.make_node("Identity", [h], ["y"]))
    oh = (hw - 1) // stride + 1
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    ops = _check(_model(nodes, x.shape, (1, 24, oh, oh), inits), x, block=block, threads=threads)
    assert ops.count("graph.depthwise_conv2d_nchwc") == (c % block == 0 or c > block)


def test_layout_shapes():
    assert parse_layout("NCHW16c") == ("NCHW", (16,))
    assert parse_layout("OIHW3i16o") == ("OIHW", (3, 16))
    assert blocked_shape((1, 32, 5, 7), "NCHW16c") == (1, 2, 5, 7, 16)
    assert blocked_shape((1, 24, 5, 7), "NCHW16c") == (1, 2, 5, 7, 16)  # the last block padded
    assert blocked_shape((40, 24, 1, 1), "OIHW8i16o") == (3, 3, 1, 1, 8, 16)
    assert blocked_shape((32, 3, 3, 3), "OIHW3i16o") == (2, 1, 3, 3, 3, 16)
    assert plain_shape((2, 1, 3, 3, 3, 16), "OIHW3i16o") == (32, 3, 3, 3)
    assert input_block(3, 16) == 3 and input_block(48, 16) == 16 and input_block(24, 16) == 12
    with pytest.raises(ValueError, match="unknown layout"):
        parse_layout("NHWC")


@settings(max_examples=20, deadline=None)
@given(cb=st.integers(1, 3), b=st.sampled_from([1, 3, 4, 16]), h=st.integers(1, 4), ob=st.integers(1, 2))
def test_compile_time_transforms_are_the_index_maps(cb, b, h, ob):
    rng = np.random.default_rng(cb * 100 + b)
    x = rng.standard_normal((1, cb * b, h, h + 1)).astype(np.float32)
    xb = to_blocked_array(x, b)
    n, c, y, z = 0, cb * b - 1, h - 1, h
    assert xb[n, c // b, y, z, c % b] == x[n, c, y, z]
    w = rng.standard_normal((ob * b, cb * b, 2, 1)).astype(np.float32)
    wb = weight_array(w, b, b)
    o, i = ob * b - 1, cb * b - 1
    assert wb[o // b, i // b, 1, 0, i % b, o % b] == w[o, i, 1, 0]
    assert wb.shape == blocked_shape(w.shape, f"OIHW{b}i{b}o")


@settings(max_examples=20, deadline=None)
@given(c=st.integers(1, 40), b=st.sampled_from([4, 8, 16]), fill=st.sampled_from([0.0, 1.0]))
def test_ragged_channels_are_padded_with_the_fill(c, b, fill):
    rng = np.random.default_rng(c * 17 + b)
    x = rng.standard_normal((1, c, 2, 3)).astype(np.float32)
    xb = to_blocked_array(x, b, fill)
    assert xb.shape == blocked_shape(x.shape, f"NCHW{b}c")
    flat = xb.transpose(0, 1, 4, 2, 3).reshape(1, -1, 2, 3)
    np.testing.assert_array_equal(flat[:, :c], x)
    assert np.all(flat[:, c:] == fill)
    w = rng.standard_normal((c + 3, c, 1, 2)).astype(np.float32)
    wb = weight_array(w, b, b)
    assert wb.shape == blocked_shape(w.shape, f"OIHW{b}i{b}o")
    dense = wb.transpose(0, 5, 1, 4, 2, 3).reshape(wb.shape[0] * b, wb.shape[1] * b, 1, 2)
    np.testing.assert_array_equal(dense[: c + 3, :c], w)
    assert not dense[c + 3:].any() and not dense[:, c:].any()
    if c % 2 == 0 and b % 2 == 0:  # groups of width 2: the block-diagonal weight is the grouped conv
        gw = rng.standard_normal((c, 2, 1, 1)).astype(np.float32)
        gb = grouped_weight_array(gw, b)
        dense = np.zeros((gb.shape[0] * b, gb.shape[0] * b), np.float32)  # [out, in]
        for blk in range(gb.shape[0]):
            dense[blk * b:(blk + 1) * b, blk * b:(blk + 1) * b] = gb[blk, 0, 0].T
        want = np.zeros_like(dense)
        for o in range(c):
            want[o, (o // 2) * 2:(o // 2) * 2 + 2] = gw[o, :, 0, 0]
        np.testing.assert_array_equal(dense, want)
    dw = rng.standard_normal((c, 1, 3, 2)).astype(np.float32)
    dwb = depthwise_weight_array(dw, b)
    assert dwb.shape == (-(-c // b), 3, 2, b)
    flat_dw = dwb.transpose(0, 3, 1, 2).reshape(-1, 3, 2)
    np.testing.assert_array_equal(flat_dw[:c], dw[:, 0])
    assert not flat_dw[c:].any()


@settings(max_examples=12, deadline=None)
@given(c1=st.integers(9, 40), c2=st.integers(9, 40), block=st.sampled_from([8, 16]), k=st.sampled_from([1, 3]),
       tail=st.sampled_from(["sigmoid_mul", "div_const", "residual_pool", "log"]), threads=st.sampled_from([1, 2]))
def test_channels_the_block_does_not_divide_match_onnxruntime(c1, c2, block, k, tail, threads):
    """Convs whose channel counts are no multiple of the block run blocked with a padded last block:
    elementwise ops see finite padding lanes, the next conv gives them zero weights, the transform back
    drops them. A log of a padded value stays out of the region (log(0) would poison the next conv)."""
    rng = np.random.default_rng(c1 * 41 + c2 + block + k)
    nodes, inits = [], []
    h = _conv_bn_relu(nodes, inits, rng, "x", 5, c1, k, 1, "a", relu=False)
    if tail == "sigmoid_mul":
        nodes += [helper.make_node("Sigmoid", [h], ["s"]), helper.make_node("Mul", [h, "s"], ["t"])]
    elif tail == "div_const":
        inits.append(numpy_helper.from_array(rng.uniform(0.5, 2, (c1, 1, 1)).astype(np.float32), "d"))
        nodes.append(helper.make_node("Div", [h, "d"], ["t"]))
    elif tail == "log":
        inits.append(numpy_helper.from_array(np.ones((1,), np.float32), "one"))
        nodes += [helper.make_node("Abs", [h], ["ab"]), helper.make_node("Add", ["ab", "one"], ["ab1"]),
                  helper.make_node("Log", ["ab1"], ["t"])]
    else:
        nodes += [helper.make_node("Relu", [h], ["r"]),
                  helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
                  helper.make_node("Add", ["p", h], ["t"])]
    h = _conv_bn_relu(nodes, inits, rng, "t", c1, c2, k, 1, "b")
    nodes.append(helper.make_node("Identity", [h], ["y"]))
    x = rng.standard_normal((1, 5, 6, 7)).astype(np.float32)
    ops = _check(_model(nodes, x.shape, (1, c2, 6, 7), inits), x, block=block, threads=threads)
    blocked = (c1 % block == 0 or c1 > block) + (c2 % block == 0 or c2 > block)
    assert ops.count("graph.conv2d_nchwc") == blocked
    if tail == "log" and c1 % block:
        assert "graph.log" in ops and not any("log" in o and "nchwc" in o for o in ops)


@settings(max_examples=10, deadline=None)
@given(cin=st.sampled_from([3, 8, 16]), cout=st.sampled_from([8, 16]), k=st.sampled_from([1, 2, 3]),
       stride=st.integers(1, 2), pad=st.integers(0, 1), dil=st.integers(1, 2), hw=st.integers(5, 9),
       pool=st.booleans())
def test_random_blocked_conv_matches_onnxruntime(cin, cout, k, stride, pad, dil, hw, pool):
    rng = np.random.default_rng(cin * 7 + cout + k * 3 + hw)
    if (hw + 2 * pad - dil * (k - 1) - 1) // stride + 1 < 2:
        return  # no output left to pool
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[pad] * 4, kernel_shape=[k, k],
                              strides=[stride, stride], dilations=[dil, dil]),
             helper.make_node("Relu", ["c"], ["r"])]
    if pool:
        nodes.append(helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[1, 1]))
    else:
        nodes.append(helper.make_node("Identity", ["r"], ["y"]))
    inits = [_w(rng, "w", (cout, cin, k, k)), _w(rng, "b", (cout,))]
    oh = (hw + 2 * pad - dil * (k - 1) - 1) // stride + 1
    out = (1, cout, oh - pool, oh - pool)
    x = rng.standard_normal((1, cin, hw, hw)).astype(np.float32)
    ops = _check(_model(nodes, x.shape, out, inits), x, block=8)
    assert ops.count("graph.conv2d_nchwc") == 1


def test_bad_options_give_one_clear_error(tmp_path):
    from ziggurat.compiler import parse_pipeline, run_passes
    from ziggurat.errors import CompileError
    from ziggurat.frontends.onnx import import_onnx

    rng = np.random.default_rng(5)
    model = _model([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[1, 1])], (1, 16, 4, 4), (1, 16, 4, 4),
                   [_w(rng, "w", (16, 16, 1, 1))])
    with pytest.raises(CompileError, match="block must be a positive"):
        run_passes(import_onnx(model).module, parse_pipeline("convert-layout{block=-8}"))
    bad = tmp_path / "file" / "records.jsonl"
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(CompileError, match="cannot open the record file"):
        run_passes(import_onnx(model).module,
                   parse_pipeline(f'convert-layout{{cost-guided=true measure=true database="{bad}"}}'))


@settings(max_examples=10, deadline=None)
@given(pads=st.lists(st.integers(0, 2), min_size=4, max_size=4), stride=st.sampled_from([1, 2]),
       block=st.sampled_from([8, 16]), threads=st.sampled_from([1, 2]))
def test_boundary_conv_padding_moves_into_the_layout_transform(pads, stride, block, threads):
    """A padded conv that alone reads the region's input: the transform into NCHW<b>c pads (asymmetric
    pads, strides), the blocked conv has pads 0, and the result matches onnxruntime."""
    from ziggurat.compiler import parse_pipeline, run_passes
    from ziggurat.dialects.graph_layout import Conv2dNchwcOp, LayoutTransformOp
    from ziggurat.frontends.onnx import import_onnx
    from ziggurat.transforms.graph.weight_binding import bind_weights

    rng = np.random.default_rng(sum(pads) * 5 + stride)
    h, w = 9, 11
    ho, wo = (h + pads[0] + pads[2] - 3) // stride + 1, (w + pads[1] + pads[3] - 3) // stride + 1
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=pads, kernel_shape=[3, 3], strides=[stride, stride])
    model = _model([node], (1, 16, h, w), (1, 16, ho, wo), [_w(rng, "w", (16, 16, 3, 3))])
    x = rng.standard_normal((1, 16, h, w)).astype(np.float32)
    _check(model, x, block, threads)
    imported = import_onnx(model)
    bind_weights(imported.module, imported.weights)
    run_passes(imported.module, parse_pipeline(LAYOUT.split(",fuse-ops")[0] % block))
    into = [o for o in imported.module.walk() if isinstance(o, LayoutTransformOp) and o.src.data == "NCHW"]
    (conv,) = [o for o in imported.module.walk() if isinstance(o, Conv2dNchwcOp)]
    assert len(into) == 1 and into[0].padding() == (pads[0], pads[1], pads[2], pads[3])
    assert conv.input is into[0].result and not any(conv.pads.get_values())  # type: ignore[union-attr]


@settings(max_examples=12, deadline=None)
@given(c=st.integers(9, 40), kind=st.sampled_from(["ReduceMean", "ReduceMax", "ReduceSum", "GlobalAveragePool"]),
       block=st.sampled_from([8, 16]), hw=st.integers(1, 9), threads=st.sampled_from([1, 2]))
def test_squeeze_excite_pools_in_the_blocked_layout_and_match_onnxruntime(c, kind, block, hw, threads):
    """A squeeze-excite block: conv, the mean (max, sum) over H and W, a 1x1 conv, sigmoid, and the
    product with the conv's output. The spatial pool joins the blocked region as a reduce of the
    5-d tensor (ragged channel counts included: padded lanes reduce finite values)."""
    rng = np.random.default_rng(c * 13 + hw + block)
    nodes, inits = [], []
    h = _conv_bn_relu(nodes, inits, rng, "x", 3, c, 3, 1, "a")
    if kind == "GlobalAveragePool":
        nodes.append(helper.make_node(kind, [h], ["p"]))
    elif kind == "ReduceSum":  # opset 17: axes as an input for ReduceSum, an attribute for the others
        inits.append(numpy_helper.from_array(np.array([2, 3], np.int64), "axes"))
        nodes.append(helper.make_node(kind, [h, "axes"], ["p"], keepdims=1))
    else:
        nodes.append(helper.make_node(kind, [h], ["p"], axes=[2, 3], keepdims=1))
    inits += [_w(rng, "se.w", (c, c, 1, 1)), _w(rng, "se.b", (c,))]
    nodes += [helper.make_node("Conv", ["p", "se.w", "se.b"], ["e"]), helper.make_node("Sigmoid", ["e"], ["g"]),
              helper.make_node("Mul", [h, "g"], ["y"])]
    x = rng.standard_normal((1, 3, hw, hw + 1)).astype(np.float32)
    _check(_model(nodes, x.shape, (1, c, hw, hw + 1), inits), x, block=block, threads=threads)


def test_a_spatial_pool_reduces_the_blocked_tensor() -> None:
    """The pool of a blocked conv's output reads the NCHW16c tensor: a 5-d reduce over H and W
    (a ReduceMean, and a GlobalAveragePool as a mean)."""
    from ziggurat.compiler import parse_pipeline, run_passes
    from ziggurat.frontends.onnx import import_onnx
    from ziggurat.transforms.graph.weight_binding import bind_weights

    rng = np.random.default_rng(0)
    nodes, inits = [], []
    h = _conv_bn_relu(nodes, inits, rng, "x", 3, 32, 3, 1, "a")
    nodes += [helper.make_node("ReduceMean", [h], ["m"], axes=[2, 3], keepdims=1),
              helper.make_node("GlobalAveragePool", [h], ["g"]), helper.make_node("Add", ["m", "g"], ["y"])]
    imported = import_onnx(_model(nodes, (1, 3, 8, 8), (1, 32, 1, 1), inits))
    bind_weights(imported.module, imported.weights)
    run_passes(imported.module, parse_pipeline(LAYOUT.split(",fuse-ops")[0] % 16))
    pools = [op for op in imported.module.walk() if isinstance(op, graph.ReduceOp)]
    assert len(pools) == 2 and not any(isinstance(op, graph.GlobalAvgPoolOp) for op in imported.module.walk())
    for pool in pools:
        assert pool.kind.data == "mean"
        assert pool.input.type.get_shape() == (1, 2, 8, 8, 16) and pool.result.type.get_shape() == (1, 2, 1, 1, 16)


@pytest.mark.parametrize("groups", [32, 4])
def test_cost_guided_layout_prices_grouped_convs(groups):
    """`convert-layout{cost-guided=true}` prices a region holding a depthwise or grouped conv (whose
    blocked twin repacks its weight: pricing builds it on a scratch store of the region's weights,
    and crashed on an assertion before) and the model still matches onnxruntime."""
    rng = np.random.default_rng(groups)
    nodes, inits = [], []
    h = _conv_bn_relu(nodes, inits, rng, "x", 32, 32, 1, 1, "pw1")
    h = _conv_bn_relu(nodes, inits, rng, h, 32, 32, 3, 1, "g", group=groups)
    h = _conv_bn_relu(nodes, inits, rng, h, 32, 24, 1, 1, "pw2", relu=False)
    nodes.append(helper.make_node("Identity", [h], ["y"]))
    x = rng.standard_normal((1, 32, 14, 14)).astype(np.float32)
    model = _model(nodes, x.shape, (1, 24, 14, 14), inits)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (ref,) = sess.run(None, {"x": x})
    guided = LAYOUT.replace("convert-layout{block=%d}", "convert-layout{block=16 cost-guided=true "
                                                          "peak-gflops=100 bandwidth-gbs=20}")
    assert guided != LAYOUT
    compiled = ziggurat.compile(model, target="llvm -num-cores=1", pipeline=guided)
    (got,) = compiled(x)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
