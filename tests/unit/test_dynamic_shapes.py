"""Models with dynamic axes (runtime/dynamic.py, frontends/onnx/symbols.py): one compile call, the
generic model for every shape (runtime/symbolic_model.py) or a variant per shape, checked against
onnxruntime; the symbols' checks and their errors."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat.errors import InputError, ShapeError
from ziggurat.frontends.onnx.symbols import bind_symbols, symbolic_inputs
from ziggurat.runtime.dynamic import DynamicModel

H = 8


def encoder_like(batch="batch", seq="sequence") -> onnx.ModelProto:
    """x, m: [batch, sequence, 8] -> softmax(reshape((x + m) @ W)) as an exporter writes it: the
    reshape's target computed from Shape at run time, and a mean over the sequence axis."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((H, H)).astype(np.float32), "w")
    tail = numpy_helper.from_array(np.array([2, H // 2], np.int64), "tail")
    nodes = [
        helper.make_node("Add", ["x", "m"], ["s"]),
        helper.make_node("MatMul", ["s", "w"], ["h"]),
        helper.make_node("Shape", ["x"], ["shape"], end=2),
        helper.make_node("Concat", ["shape", "tail"], ["target"], axis=0),
        helper.make_node("Reshape", ["h", "target"], ["r"]),
        helper.make_node("Softmax", ["r"], ["p"], axis=-1),
        helper.make_node("ReduceMean", ["p"], ["y"], axes=[1], keepdims=0),
    ]
    dims = [batch, seq, H]
    g = helper.make_graph(nodes, "enc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims),
                                         helper.make_tensor_value_info("m", TensorProto.FLOAT, dims)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 2, H // 2])], [w, tail])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def feeds(b: int, s: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal((b, s, H)).astype(np.float32) for n in ("x", "m")}


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return encoder_like()


@pytest.fixture(scope="module")
def reference(model):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return lambda f: session.run(None, f)[0]


@pytest.fixture(scope="module")
def compiled(model) -> DynamicModel:
    return ziggurat.compile(model, shapes={"batch": [1, 2], "sequence": 5})


def test_input_specs_at_a_binding(compiled):
    specs = compiled.input_specs({"batch": 3, "sequence": 7})
    assert [(s.name, s.shape, s.dtype) for s in specs] == [("x", (3, 7, H), np.float32), ("m", (3, 7, H), np.float32)]


def test_symbols_are_read_from_dim_params_and_unnamed_axes():
    m = encoder_like(batch="", seq="sequence")  # no name: a symbol of its own per input
    inputs = symbolic_inputs(m)
    assert [i.dims for i in inputs] == [("x:0", "sequence", H), ("m:0", "sequence", H)]
    assert bind_symbols(inputs, {"x": (3, 4, H), "m": (2, 4, H)}) == {"x:0": 3, "sequence": 4, "m:0": 2}


def test_up_front_buckets_are_compiled_and_calls_at_them_compile_nothing(compiled, reference):
    assert isinstance(compiled, DynamicModel) and compiled.symbols == ["batch", "sequence"]
    assert sorted(compiled.variants) == [(1, 5), (2, 5)] and compiled.compiles == 2
    for b in (1, 2):
        f = feeds(b, 5, seed=b)
        np.testing.assert_allclose(compiled(**f)[0], reference(f), rtol=1e-5, atol=1e-6)
    assert compiled.compiles == 2


def test_a_new_shape_compiles_a_variant_that_shares_the_weights(model, reference):
    m = ziggurat.compile(model, on_new_shape="compile")
    for b, s in [(1, 3), (4, 7), (1, 3)]:
        f = feeds(b, s)
        np.testing.assert_allclose(m(f["x"], f["m"])[0], reference(f), rtol=1e-5, atol=1e-6)
    assert m.compiles == 2 and sorted(m.variants) == [(1, 3), (4, 7)]
    a, b = (v.constants for v in m.variants.values())
    for x in a:  # a constant both variants hold alike (same shape, dtype and bytes) is kept once
        for y in b:
            if x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y):
                assert x is y


@pytest.fixture(scope="module")
def on_demand(model) -> DynamicModel:
    return ziggurat.compile(model, on_new_shape="compile")


@pytest.fixture(scope="module")
def generic(model) -> DynamicModel:
    return ziggurat.compile(model)


@settings(max_examples=8, deadline=None)
@given(b=st.integers(1, 512), s=st.integers(1, 512))
def test_random_batch_and_sequence_lengths_match_onnxruntime(b, s, on_demand, reference):
    b = min(b, max(1, 65536 // s))  # at most 64 Ki rows
    f = feeds(b, s, seed=b * 1000 + s)
    np.testing.assert_allclose(on_demand(**f)[0], reference(f), rtol=1e-5, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 512), s=st.integers(1, 512))
def test_one_generic_compile_runs_random_batch_and_sequence_lengths(b, s, generic, reference):
    """The default: one compile whose kernels take the symbols at run time; no call compiles."""
    assert generic.generic is not None, generic.generic_error
    b = min(b, max(1, 65536 // s))
    f = feeds(b, s, seed=b * 1000 + s)
    np.testing.assert_allclose(generic(**f)[0], reference(f), rtol=1e-5, atol=1e-6)
    assert generic.compiles == 0 and generic.variants == {}


@pytest.mark.parametrize("b, s", [(1, 1), (3, 7), (4, 64)])
def test_the_generic_arena_is_no_bigger_than_a_static_compiles(b, s, generic, model):
    """Every buffer of the generic model's entry is placed per binding (plan-memory's live ranges,
    in-place outputs as their inputs' buffers): no more bytes than the static compile's arena."""
    from ziggurat.frontends.onnx.symbols import fix_shapes

    binding = {"batch": b, "sequence": s}
    static = ziggurat.compile(fix_shapes(model, binding), cache=False)
    g = generic.generic
    assert g.arena_bytes + g.dynamic_bytes(binding) <= static.arena_bytes
    f = feeds(b, s)
    np.testing.assert_allclose(generic(**f)[0], static(**f)[0], rtol=1e-6, atol=1e-6)


def test_the_generic_model_comes_back_from_the_disk_cache(tmp_path, monkeypatch, reference):
    """A compile for every shape is stored like a static one: another compile of the model (another
    process alike) links the stored code with its symbols, arena plan and constraints."""
    from ziggurat.compiler import compile_symbolic

    monkeypatch.setenv("ZIGGURAT_CACHE_DIR", str(tmp_path))
    m = encoder_like()
    first = compile_symbolic(m, cache=True)
    again = compile_symbolic(m, cache=True)
    assert first.info["stats"].cache is None and again.info["stats"].cache == "disk"
    assert [str(c) for c in again.constraints] == [str(c) for c in first.constraints]
    assert again.inputs == first.inputs and again.dynamic_buffers == first.dynamic_buffers
    for b, s in [(1, 1), (3, 7), (2, 40)]:
        f = feeds(b, s)
        np.testing.assert_allclose(again(f["x"], f["m"])[0], reference(f), rtol=1e-5, atol=1e-6)
    assert compile_symbolic(m, cache=False).info["stats"].cache is None


def test_buckets_take_precedence_over_the_generic_model(model, reference):
    m = ziggurat.compile(model, shapes={"batch": 2, "sequence": 5})
    assert m.generic is not None and m.compiles == 1
    for b, s in [(2, 5), (3, 9)]:
        f = feeds(b, s)
        np.testing.assert_allclose(m(**f)[0], reference(f), rtol=1e-5, atol=1e-6)
    assert m.compiles == 1 and m.info["generic"] is True


@pytest.mark.parametrize("shapes, message", [
    ({"x": (1, 5, 4), "m": (1, 5, 4)}, r"input 'x' axis 2 must be 8 \(shape \[batch, sequence, 8\]\), got 4"),
    ({"x": (1, 5, H), "m": (1, 6, H)}, r"input 'm' axis 1 is 'sequence' = 6, but input 'x' axis 1 made 'sequence' = 5"),
    ({"x": (5, H), "m": (1, 5, H)}, r"input 'x' must have rank 3"),
])
def test_a_call_against_the_symbols_is_one_clear_error(compiled, shapes, message):
    with pytest.raises(InputError, match=message):
        compiled(**{n: np.zeros(s, np.float32) for n, s in shapes.items()})


def test_on_new_shape_error_names_the_compiled_shapes(model):
    m = ziggurat.compile(model, shapes={"batch": 1, "sequence": [2, 3]}, on_new_shape="error")
    assert m(**feeds(1, 3))[0].shape == (1, 2, H // 2)
    with pytest.raises(InputError, match=r"no variant compiled for batch=2, sequence=3 \(compiled: batch=1, "
                                         r"sequence=2; batch=1, sequence=3\)"):
        m(**feeds(2, 3))


@pytest.mark.parametrize("shapes, message", [
    ({"batch": 1, "seq": 2}, r"shapes= names 'seq', not a symbol of the model; its symbols are 'batch', 'sequence'"),
    ({"batch": 1}, r"shapes= gives no value for 'sequence'"),
    ({"batch": 0, "sequence": 1}, r"'batch' must be a positive int"),
])
def test_bad_shapes_argument_is_one_clear_error(model, shapes, message):
    with pytest.raises(InputError, match=message):
        ziggurat.compile(model, shapes=shapes)


def test_shapes_on_a_static_model_is_refused():
    static = encoder_like(batch=1, seq=4)
    with pytest.raises(InputError, match=r"no dynamic axes \(x\[1, 4, 8\]"):
        ziggurat.compile(static, shapes={"batch": 1})


def test_a_shape_the_model_cannot_take_names_the_binding():
    """Reshape to [batch, -1, 3] needs sequence * 8 divisible by 3: the error says at which shape."""
    g = helper.make_graph([helper.make_node("Reshape", ["x", "t"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", H])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "rows", 3])],
                          [numpy_helper.from_array(np.array([0, -1, 3], np.int64), "t")])
    m = ziggurat.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert m(np.ones((2, 3, H), np.float32))[0].shape == (2, 8, 3)
    with pytest.raises(ShapeError, match=r"^at batch=1, sequence=1: .*Reshape"):
        m(np.ones((1, 1, H), np.float32))


def test_cli_runs_any_shape_and_compiles_one_with_shapes(model, reference, tmp_path, capsys):
    from ziggurat.cli.main import main

    path = tmp_path / "enc.onnx"
    onnx.save(model, str(path))
    f = feeds(3, 6)
    np.savez(tmp_path / "in.npz", **f)
    np.savez(tmp_path / "out.npz", y=reference(f))
    assert main(["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--check", str(tmp_path / "out.npz")]) == 0
    out = capsys.readouterr().out
    assert "(dynamic axes: one generic compile for every shape)" in out and out.strip().endswith("PASS")
    assert main(["compile", str(path), "--shapes", "batch=2,sequence=4"]) == 0
    assert "kernels" in capsys.readouterr().err
    assert main(["compile", str(path)]) == 1
    assert "run on one shape: give the command --shapes SYM=N" in capsys.readouterr().err
    assert main(["profile", str(path)]) == 1
    assert "input 'x' has a dynamic or unknown shape ['batch', 'sequence', 8]" in capsys.readouterr().err
    assert main(["compile", str(path), "--shapes", "batch=2,seq=4"]) == 1
    assert "name 'seq' and leave out 'sequence'" in capsys.readouterr().err
    assert main(["compile", str(path), "--shapes", "batch=two"]) == 1
    assert "write SYMBOL=N pairs" in capsys.readouterr().err


def test_share_constants_keeps_one_copy_of_equal_weights():
    """Two compiles of one shape (no cache): after sharing, the second holds the first's arrays."""
    static = encoder_like(batch=2, seq=3)
    first = ziggurat.compile(static, cache=False)
    ziggurat.compiler.clear_cache()  # the second compile builds again: arrays of its own
    second = ziggurat.compile(static, cache=False)
    assert not any(x is y for x, y in zip(first.constants, second.constants))
    pool: dict = {}
    first.share_constants(pool)
    second.share_constants(pool)
    assert first.constants and all(x is y for x, y in zip(first.constants, second.constants))
    f = feeds(2, 3)
    np.testing.assert_array_equal(second(**f)[0], first(**f)[0])
