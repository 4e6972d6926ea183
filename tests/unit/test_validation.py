"""Validation before compilation (frontends/onnx/validate.py), the memory budget
(limits.py, the loader's external data checks) and the import-time folding of
GatherElements (frontends/onnx/fold.py).

Every refusal is one ziggurat error whose message names the node or tensor.
Models are built in memory with onnx.helper; memory limits are small (KiBs),
so no test allocates much.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat.errors import MemoryLimitError, ModelLoadError, ShapeError, ZigguratError
from ziggurat.frontends.onnx import import_onnx
from ziggurat.frontends.onnx.loader import load_model
from ziggurat.limits import DEFAULT_FRACTION, ENV_VAR, default_memory_limit, parse_memory_limit, physical_memory

KIB = 1 << 10
NEWEST = onnx.defs.onnx_opset_version()


def vi(name, shape, elem_type=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem_type, shape)


def make_model(nodes, inputs, outputs, initializers=(), opset=17, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *extra_opsets])


def relu_model(**kwargs):
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [2, 3])], [vi("y", [2, 3])],
                      **kwargs)


def refused(model, error=ModelLoadError, memory_limit=None) -> str:
    with pytest.raises(error) as info:
        import_onnx(model, memory_limit=memory_limit)
    return str(info.value)


# -- window attributes ---------------------------------------------------------

def conv_model(op="Conv", x_shape=(1, 4, 8, 8), **attrs):
    group = attrs.get("group", 1)
    w = numpy_helper.from_array(np.ones((4, 4 // group if group in (1, 2, 4) else 4, 3, 3), np.float32), "w")
    inputs = ["x", "w"] if "Conv" in op else ["x"]
    if "Conv" not in op:
        attrs.setdefault("kernel_shape", [3, 3])
    node = helper.make_node(op, inputs, ["y"], name="win0", **attrs)
    return make_model([node], [vi("x", list(x_shape))], [vi("y", None)], [w] if "Conv" in op else [])


def test_conv_zero_stride_is_refused_naming_the_node():
    message = refused(conv_model(strides=[0, 0]))
    assert "Conv node 'win0' (node #0 of the main graph)" in message
    assert "strides [0, 0] must be >= 1" in message


@pytest.mark.parametrize("op, attrs, words", [
    ("Conv", {"dilations": [1, 0]}, "dilations [1, 0] must be >= 1"),
    ("Conv", {"pads": [0, -1, 0, 0]}, "pads [0, -1, 0, 0] must be >= 0"),
    ("Conv", {"pads": [1, 1]}, "pads [1, 1] has 2 entries; its 2 spatial dim(s) need 4"),
    ("Conv", {"kernel_shape": [0, 3]}, "kernel_shape [0, 3] must be >= 1"),
    ("Conv", {"strides": [1, 1, 1]}, "strides [1, 1, 1] has 3 entries"),
    ("Conv", {"group": 0}, "group=0 must be >= 1"),
    ("Conv", {"group": 3}, "group=3 does not divide the input's 4 channels"),
    ("Conv", {"auto_pad": "SAME"}, "auto_pad 'SAME' is none of"),
    ("ConvTranspose", {"strides": [0, 1]}, "strides [0, 1] must be >= 1"),
    ("ConvTranspose", {"output_padding": [-1, 0]}, "output_padding [-1, 0] must be >= 0"),
    ("MaxPool", {"strides": [0, 0]}, "strides [0, 0] must be >= 1"),
    ("MaxPool", {"kernel_shape": [2, 0]}, "kernel_shape [2, 0] must be >= 1"),
    ("AveragePool", {"pads": [0, 0, -2, 0]}, "pads [0, 0, -2, 0] must be >= 0"),
    ("LpPool", {"strides": [1, 0]}, "strides [1, 0] must be >= 1"),
])
def test_window_attributes_out_of_range_are_refused(op, attrs, words):
    message = refused(conv_model(op, **attrs))
    assert f"{op} node 'win0'" in message and words in message


def test_zero_blocksize_is_refused():
    node = helper.make_node("DepthToSpace", ["x"], ["y"], name="d2s", blocksize=0)
    message = refused(make_model([node], [vi("x", [1, 4, 2, 2])], [vi("y", None)]))
    assert "DepthToSpace node 'd2s'" in message and "blocksize=0 must be >= 1" in message


# -- element types and tensors -------------------------------------------------

def test_unknown_type_code_of_an_initializer_is_refused():
    c = helper.make_tensor("c", TensorProto.FLOAT, [2], [1.0, 2.0])
    c.data_type = 99
    model = make_model([helper.make_node("Add", ["x", "c"], ["y"])], [vi("x", [2])], [vi("y", [2])], [c])
    message = refused(model)
    assert "initializer 'c' of the main graph has element type code 99" in message


def test_unknown_type_code_of_a_constant_node_is_refused():
    t = helper.make_tensor("t", TensorProto.FLOAT, [2], [1.0, 2.0])
    t.data_type = 99
    nodes = [helper.make_node("Constant", [], ["c"], name="const", value=t), helper.make_node("Add", ["x", "c"], ["y"])]
    message = refused(make_model(nodes, [vi("x", [2])], [vi("y", [2])]))
    assert "Constant node 'const'" in message and "element type code 99" in message


@pytest.mark.parametrize("where", ["input", "output"])
def test_unknown_type_code_of_a_graph_value_is_refused(where):
    x, y = vi("x", [2], 99 if where == "input" else TensorProto.FLOAT), vi("y", [2], 99 if where == "output" else 1)
    message = refused(make_model([helper.make_node("Relu", ["x"], ["y"])], [x], [y]))
    assert f"{where} '{'x' if where == 'input' else 'y'}' of the main graph declares element type code 99" in message


def test_negative_dims_of_an_initializer_are_refused():
    c = helper.make_tensor("c", TensorProto.FLOAT, [2], [1.0, 2.0])
    c.dims[:] = [-2]
    message = refused(make_model([helper.make_node("Add", ["x", "c"], ["y"])], [vi("x", [2])], [vi("y", [2])], [c]))
    assert "initializer 'c'" in message and "negative dims [-2]" in message


def test_raw_data_of_the_wrong_length_is_refused():
    c = numpy_helper.from_array(np.ones(4, np.float32), "c")
    c.dims[:] = [5]
    message = refused(make_model([helper.make_node("Add", ["x", "c"], ["y"])], [vi("x", [5])], [vi("y", [5])], [c]))
    assert "initializer 'c'" in message and "holds 16 bytes of raw data" in message and "need 20" in message


# -- opsets ----------------------------------------------------------------------

def test_default_opset_newer_than_onnx_knows_is_refused():
    message = refused(relu_model(opset=9999))
    assert message == (f"the given ModelProto declares opset 9999 of domain ''; ziggurat supports up to {NEWEST}; "
                       f"re-export it with opset {NEWEST} or lower.")


def test_ml_opset_newer_than_onnx_knows_is_refused():
    message = refused(relu_model(extra_opsets=[helper.make_opsetid("ai.onnx.ml", 9999)]))
    assert "opset 9999 of domain 'ai.onnx.ml'" in message


def test_unknown_domain_opsets_are_not_bounded():
    import_onnx(relu_model(extra_opsets=[helper.make_opsetid("com.example", 9999)]))


# -- graph structure -------------------------------------------------------------

def test_graph_without_outputs_is_refused():
    message = refused(make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], []))
    assert "has no graph outputs" in message


def test_graph_without_nodes_and_an_unproduced_output_is_refused():
    message = refused(make_model([], [vi("x", [2])], [vi("y", [2])]))
    assert "empty graph (no nodes)" in message and "output 'y'" in message


def test_graph_without_nodes_returning_its_input_imports():
    assert import_onnx(make_model([], [vi("x", [2])], [vi("x", [2])])).output_names == ["x"]


def test_output_listed_twice_is_refused():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2]), vi("y", [2])])
    assert "output 'y' of the main graph is listed twice" in refused(model)


def test_output_nothing_produces_is_refused():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2]), vi("z", [2])])
    assert "output 'z' of the main graph is produced by no node, input or initializer" in refused(model)


def test_value_produced_twice_is_refused():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")]
    message = refused(make_model(nodes, [vi("x", [2])], [vi("y", [2])]))
    assert "Neg node 'b' (node #1 of the main graph) writes 'y', which is already the output of node #0" in message


@pytest.mark.parametrize("shadowed", ["input", "initializer"])
def test_node_output_shadowing_an_input_or_initializer_is_refused(shadowed):
    c = numpy_helper.from_array(np.ones(2, np.float32), "c")
    target = "x" if shadowed == "input" else "c"
    nodes = [helper.make_node("Add", ["x", "c"], [target], name="shadow"), helper.make_node("Relu", [target], ["y"])]
    message = refused(make_model(nodes, [vi("x", [2])], [vi("y", [2])], [c]))
    assert f"Add node 'shadow' (node #0 of the main graph) writes '{target}', which is already" in message


def test_cycle_is_refused_naming_the_node():
    nodes = [helper.make_node("Relu", ["b"], ["a"], name="first"), helper.make_node("Neg", ["a"], ["b"], name="second"),
             helper.make_node("Abs", ["a"], ["y"])]
    message = refused(make_model(nodes, [vi("x", [2])], [vi("y", [2])]))
    assert "Relu node 'first' (node #0 of the main graph) reads 'b'" in message
    assert "Neg node 'second' (node #1)" in message and "cycle" in message


def test_node_reading_its_own_output_is_refused():
    nodes = [helper.make_node("Add", ["x", "a"], ["a"], name="self"), helper.make_node("Relu", ["a"], ["y"])]
    assert "Add node 'self'" in refused(make_model(nodes, [vi("x", [2])], [vi("y", [2])]))


def test_nodes_out_of_order_are_refused():
    nodes = [helper.make_node("Neg", ["a"], ["y"]), helper.make_node("Relu", ["x"], ["a"], name="late")]
    message = refused(make_model(nodes, [vi("x", [2])], [vi("y", [2])]))
    assert "Neg node '<node #0>' (node #0 of the main graph) reads 'a'" in message and "'late'" in message


def if_model(then_reads="x"):
    """An If whose branches read the outer `x` (or `then_reads`)."""
    then = helper.make_graph([helper.make_node("Relu", [then_reads], ["t"], name="inner")], "then", [], [vi("t", [2])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", [2])])
    cond = numpy_helper.from_array(np.array(True), "cond")
    nodes = [helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then, else_branch=other)]
    return make_model(nodes, [vi("x", [2])], [vi("y", [2])], [cond])


def test_subgraphs_reading_outer_names_still_compile():
    x = np.array([-1.0, 2.0], np.float32)
    np.testing.assert_allclose(ziggurat.compile(if_model())(x=x)[0], np.maximum(x, 0))


def test_subgraph_reading_an_unknown_name_is_refused_naming_its_node():
    message = refused(if_model(then_reads="nowhere"))
    assert "Relu node 'inner' (node #0 of the 'then_branch' graph of If node 'branch'" in message


# -- GatherElements folding ------------------------------------------------------

def gather_elements_model(table, indices, axis):
    """GatherElements over constant `table` and `indices`, cast to float and added to input x."""
    nodes = [helper.make_node("GatherElements", ["table", "idx"], ["g"], axis=axis, name="ge"),
             helper.make_node("Cast", ["g"], ["gf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["gf", "x"], ["y"])]
    inits = [numpy_helper.from_array(table, "table"), numpy_helper.from_array(indices, "idx")]
    return make_model(nodes, [vi("x", list(indices.shape))], [vi("y", list(indices.shape))], inits)


def test_gather_elements_over_a_bert_position_table_folds_like_numpy():
    table, indices = np.arange(512, dtype=np.int64).reshape(1, 512), np.arange(128, dtype=np.int64).reshape(1, 128)
    x = np.random.default_rng(0).standard_normal((1, 128)).astype(np.float32)
    got = ziggurat.compile(gather_elements_model(table, indices, 1))(x=x)[0]
    np.testing.assert_allclose(got, np.take_along_axis(table, indices, 1).astype(np.float32) + x, rtol=1e-6)


@pytest.mark.parametrize("table_shape, index_shape, axis", [
    ((3, 100), (3, 7), 1), ((3, 100), (2, 7), -1), ((70, 4), (5, 4), 0), ((2, 3, 80), (2, 2, 9), 2),
])
def test_gather_elements_fold_matches_take_along_axis(table_shape, index_shape, axis):
    rng = np.random.default_rng(1)
    table = rng.integers(-1000, 1000, table_shape).astype(np.int64)
    size = table_shape[axis]
    indices = rng.integers(-size, size, index_shape).astype(np.int64)
    view = table[tuple(slice(None) if d == axis % table.ndim else slice(0, n) for d, n in enumerate(index_shape))]
    want = np.take_along_axis(view, np.where(indices < 0, indices + size, indices), axis).astype(np.float32)
    x = np.zeros(index_shape, np.float32)
    np.testing.assert_array_equal(ziggurat.compile(gather_elements_model(table, indices, axis))(x=x)[0], want)


def test_gather_elements_fold_refuses_out_of_range_indices():
    table, indices = np.arange(100, dtype=np.int64).reshape(1, 100), np.array([[3, 100]], np.int64)
    with pytest.raises(ShapeError, match="GatherElements node 'ge'.*indices leave"):
        import_onnx(gather_elements_model(table, indices, 1))


# -- memory limits ---------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    (1234, 1234), ("1234", 1234), ("512K", 512 * KIB), ("512M", 512 << 20), ("4G", 4 << 30), ("4g", 4 << 30),
    ("1.5GiB", 3 << 29), ("2 MB", 2 << 20), ("1T", 1 << 40),
])
def test_parse_memory_limit(text, expected):
    assert parse_memory_limit(text) == expected


@pytest.mark.parametrize("text", ["", "lots", "4X", "-1", "0", "1.2.3G", 0, -5, True, 1.5])
def test_parse_memory_limit_refuses_bad_values(text):
    with pytest.raises(MemoryLimitError, match="memory limit"):
        parse_memory_limit(text)


def test_default_memory_limit_reads_the_environment(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "3G")
    assert default_memory_limit() == 3 << 30
    monkeypatch.setenv(ENV_VAR, "three gigs")
    with pytest.raises(MemoryLimitError, match=ENV_VAR):
        default_memory_limit()
    monkeypatch.delenv(ENV_VAR)
    total = physical_memory()
    assert total is not None and default_memory_limit() == int(total * DEFAULT_FRACTION)


def test_weights_over_the_limit_are_refused():
    w = numpy_helper.from_array(np.zeros((64, 64), np.float32), "big_weight")
    model = make_model([helper.make_node("MatMul", ["x", "big_weight"], ["y"])], [vi("x", [1, 64])],
                       [vi("y", [1, 64])], [w])
    message = refused(model, MemoryLimitError, memory_limit=8 * KIB)
    assert "the weights of the given ModelProto" in message and "'big_weight'" in message and "16384 bytes" in message
    import_onnx(model, memory_limit=64 * KIB)


def test_huge_declared_input_is_refused():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [100000, 100000, 100])],
                       [vi("y", [100000, 100000, 100])])
    message = refused(model, MemoryLimitError, memory_limit="1M")
    assert "input 'x'" in message and "[100000, 100000, 100]" in message and "4000000000000 bytes" in message
    assert "input 'x'" in refused(model, MemoryLimitError)  # the default limit (80% of memory) refuses it too


def test_huge_inferred_value_is_refused_naming_its_node():
    nodes = [helper.make_node("MatMul", ["a", "b"], ["outer"], name="outer_product"),
             helper.make_node("ReduceSum", ["outer"], ["y"], keepdims=0)]
    model = make_model(nodes, [vi("a", [1000, 1]), vi("b", [1, 1000])], [vi("y", [])])
    message = refused(model, MemoryLimitError, memory_limit="1M")
    assert "value 'outer' of shape [1000, 1000], computed by MatMul node 'outer_product'" in message


def test_negative_input_dims_are_refused():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [-1, 3])], [vi("y", [2, 3])])
    assert "input 'x' declares the negative dims [-1, 3]" in refused(model)


# -- external data -----------------------------------------------------------------

def save_external(tmp_path, length=None, offset=None, shape=(16, 16)):
    """A MatMul model whose weight lies in weights.bin next to it; `length` and
    `offset` overwrite its external data entry."""
    w = numpy_helper.from_array(np.arange(np.prod(shape), dtype=np.float32).reshape(shape), "w")
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [1, shape[0]])],
                       [vi("y", [1, shape[1]])], [w])
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="weights.bin", size_threshold=0)
    saved = onnx.load(str(path), load_external_data=False)
    entries = {e.key: e for e in saved.graph.initializer[0].external_data}
    for key, value in (("length", length), ("offset", offset)):
        if value is not None:
            if key in entries:
                entries[key].value = str(value)
            else:
                saved.graph.initializer[0].external_data.add(key=key, value=str(value))
    onnx.save(saved, str(path))
    return path


def test_external_data_loads_within_the_limit(tmp_path):
    path = save_external(tmp_path)
    model, _ = load_model(path, memory_limit=64 * KIB)
    np.testing.assert_array_equal(numpy_helper.to_array(model.graph.initializer[0]).ravel(), np.arange(256))
    x = np.ones((1, 16), np.float32)
    want = x @ np.arange(256, dtype=np.float32).reshape(16, 16)
    np.testing.assert_allclose(ziggurat.compile(str(path))(x=x)[0], want)


def test_huge_external_data_length_is_refused_before_reading(tmp_path):
    path = save_external(tmp_path, length=1 << 50)
    with pytest.raises(ModelLoadError) as info:
        load_model(path)
    assert "tensor 'w' declares 1125899906842624 bytes of external data in 'weights.bin'" in str(info.value)
    assert "need 1024" in str(info.value)


def test_external_data_offset_past_the_end_is_refused(tmp_path):
    path = save_external(tmp_path, offset=4096)
    with pytest.raises(ModelLoadError, match="tensor 'w' reads bytes 4096 to 5120 of external data 'weights.bin', "
                                             "which holds 1024 bytes"):
        import_onnx(path)


def test_external_data_over_the_limit_is_refused(tmp_path):
    path = save_external(tmp_path, shape=(32, 32))
    with pytest.raises(MemoryLimitError, match="the external data of .*model.onnx.*'w'"):
        import_onnx(path, memory_limit=2 * KIB)


def test_model_file_over_the_limit_is_refused(tmp_path):
    path = tmp_path / "model.onnx"
    w = numpy_helper.from_array(np.zeros((16, 16), np.float32), "w")
    onnx.save(make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [1, 16])], [vi("y", [1, 16])],
                         [w]), str(path))
    with pytest.raises(MemoryLimitError, match="ONNX model .*model.onnx"):
        load_model(path, memory_limit=KIB)


# -- a valid model still compiles ------------------------------------------------

def test_valid_model_compiles_and_matches_onnxruntime():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 2, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", strides=[2, 2], pads=[1, 1, 1, 1], group=2),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[1, 1])]
    model = make_model(nodes, [vi("x", [1, 4, 9, 9])], [vi("y", [1, 8, 4, 4])], [w])
    x = rng.standard_normal((1, 4, 9, 9)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = ziggurat.compile(model, memory_limit="64M")(x=x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_every_refusal_is_a_ziggurat_error():
    assert issubclass(MemoryLimitError, ZigguratError) and issubclass(ModelLoadError, ZigguratError)


def test_typed_tensor_data_of_the_wrong_length_is_refused():
    """A float_data field with 2 values for a scalar (the fuzzer's finding F2: a numpy ValueError)."""
    t = onnx.numpy_helper.from_array(np.array(1.0, np.float32), "c")
    t.ClearField("raw_data")
    t.float_data.extend([1.0, 2.0])
    g = onnx.helper.make_graph([onnx.helper.make_node("Add", ["x", "c"], ["y"])], "g",
                               [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
                               [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])], [t])
    model = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)])
    with pytest.raises(ModelLoadError, match=r"'c'.*holds 2 values in float_data, but its dims \[\] of FLOAT need 1"):
        import_onnx(model)


@pytest.mark.parametrize("attr", ["keepdims", "noop_with_empty_axes"])
def test_flag_attributes_outside_0_1_are_refused(attr):  # F8: storage_order, layout, ... are in _FLAGS too
    """keepdims=3 (the fuzzer's finding F3) was read as true; onnxruntime compares with 1."""
    node = onnx.helper.make_node("ReduceSum", ["x", "axes"], ["s"], name="sum", **{attr: 3})
    g = onnx.helper.make_graph([node], "g", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 5])],
                               [onnx.helper.make_tensor_value_info("s", onnx.TensorProto.FLOAT, None)],
                               [onnx.numpy_helper.from_array(np.array([1]), "axes")])
    model = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)])
    with pytest.raises(ModelLoadError, match=rf"ReduceSum node 'sum'.*{attr}=3 must be 0 or 1"):
        import_onnx(model)


@pytest.mark.parametrize("starts, ends, steps", [([-7], [-2**62], [-1]), ([-9], [-2**62], [-2]), ([5], [-9], [-2]), ([0], [9], [3]), ([-1], [0], [-1])])
def test_slice_folded_at_import_clamps_as_onnx(starts, ends, steps):
    """Slice on a constant (the fuzzer's finding F1): a start still negative after adding the dim
    clamps to 0 for a negative step (Python slicing takes nothing); onnxruntime's results."""
    data = np.arange(1, 6, dtype=np.float32).reshape(5, 1)
    inits = [numpy_helper.from_array(data, "c"), numpy_helper.from_array(np.array(starts), "s"),
             numpy_helper.from_array(np.array(ends), "e"), numpy_helper.from_array(np.array([0]), "a"),
             numpy_helper.from_array(np.array(steps), "t")]
    nodes = [helper.make_node("Slice", ["c", "s", "e", "a", "t"], ["sl"]), helper.make_node("Add", ["sl", "x"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.zeros((1, 1), np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    if want.size == 0:
        return  # an empty result: ziggurat refuses zero-size outputs with its own error
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, list(want.shape)))
    np.testing.assert_array_equal(ziggurat.compile(model, cache=False)(x)[0], want)


def test_storage_order_outside_0_1_is_refused():
    """Another flag (the fuzzer's finding F8): MaxPool's storage_order."""
    node = helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2], storage_order=2)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 3, 3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelLoadError, match=r"MaxPool node 'pool'.*storage_order=2 must be 0 or 1"):
        import_onnx(model)


def _const_model(node, inits, out_shape, opset=17):
    g = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


_RNG = np.random.default_rng(0)
REFERENCE_CASES = {  # the fuzzer's findings F4-F7: onnx.reference folded these wrong or not at all
    "F4 BatchNormalization opset 13": _const_model(
        helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3),
        [numpy_helper.from_array(a, k) for k, a in {
            "x": _RNG.uniform(-2, 2, (3, 2, 2, 2)).astype(np.float32), "s": np.array([1.0, 0.5], np.float32),
            "b": np.array([0.1, -0.2], np.float32), "m": np.array([0.3, -0.4], np.float32),
            "v": np.array([1.2, 0.7], np.float32)}.items()], [3, 2, 2, 2], opset=13),
    "F5 GlobalMaxPool 3-D": _const_model(
        helper.make_node("GlobalMaxPool", ["c"], ["y"]),
        [numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(1, 2, 3), "c")], [1, 2, 1]),
    "F6 MaxPool SAME_LOWER": _const_model(
        helper.make_node("MaxPool", ["c"], ["y"], auto_pad="SAME_LOWER", kernel_shape=[1, 1], strides=[1, 2]),
        [numpy_helper.from_array(np.full((1, 1, 1, 1), -0.9, np.float32), "c")], [1, 1, 1, 1]),
    "F7 Pad negative": _const_model(
        helper.make_node("Pad", ["c", "p"], ["y"], mode="constant"),
        [numpy_helper.from_array(np.array([[[-0.9, -1.8]]], np.float32), "c"),
         numpy_helper.from_array(np.array([0, 0, 0, 0, 0, -1]), "p")], [1, 1, 1]),
}


@pytest.mark.parametrize("name", list(REFERENCE_CASES))
def test_ops_onnx_reference_folds_wrong_match_onnxruntime_on_constants(name):
    model = REFERENCE_CASES[name]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {})[0]
    got = ziggurat.compile(model, cache=False)()[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_name_that_is_not_utf8_is_a_load_error():
    """A bit flip in an op type (the 30-minute fuzz run, seed 2026: onnx.defs.get_schema got bytes and
    raised TypeError) is one ModelLoadError."""
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    assert data.count(b"Relu") == 1
    with pytest.raises(ModelLoadError, match=r"corrupt: a name, op type or domain of node #0 of the main graph is not "
                                             r"valid UTF-8"):
        ziggurat.compile(data.replace(b"Relu", b"\xffelu"), cache=False)


@pytest.mark.parametrize("code", [-100, 2147483647, 0])
def test_cast_to_an_unknown_element_type_is_refused(code):
    """Cast's `to` outside ONNX's codes (the 30-minute fuzz run, seed 2027: a ValueError from
    protobuf's enum) is one ModelLoadError naming the node."""
    node = helper.make_node("Cast", ["x"], ["y"], name="cast", to=code)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelLoadError, match=rf"Cast node 'cast'.*to={code} is an element type code ONNX does not"):
        import_onnx(model)
