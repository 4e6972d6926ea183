"""The CUDA target (`cuda -arch=sm_NN`, docs/targets.md): target strings, compiling ONNX models to PTX
and a launch list, saving and loading, the command lines; then models run on a GPU against numpy and
onnxruntime.

Everything up to the GPU section runs on any machine: compiling needs neither a GPU nor the CUDA
toolkit (LLVM's NVPTX backend makes the PTX; the model opens the GPU at its first run). The GPU
tests skip with `cuda_driver.available()`'s reason where there is no driver or device; they are
Hypothesis properties over shapes (few examples each: every example compiles a model and loads its
PTX) and a few fixed models.
"""

from __future__ import annotations

import math
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ziggurat
from ziggurat.dialects import loop
from ziggurat.errors import CompileError, ZigguratError
from ziggurat.runtime import cuda_driver
from ziggurat.runtime.cuda import CudaModel, load_cuda
from ziggurat.runtime.cuda_program import Launch
from ziggurat.target import CUDA_ARCHES, CUDA_DEFAULT_ARCH, Target
from ziggurat.transforms.gpu.gpu_gemm import GEMM_ATTR, read_gemm
from ziggurat.transforms.loop.primitives.loops import bound_kinds

CUDA = "cuda -arch=sm_90"
GPU_OK, GPU_REASON = cuda_driver.available()
needs_gpu = pytest.mark.skipif(not GPU_OK, reason=f"needs a CUDA GPU: {GPU_REASON}")
MAX_THREADS = 1024


# --- target strings -------------------------------------------------------------------------------------

def test_parse_cuda_defaults(monkeypatch):
    monkeypatch.setenv("ZIGGURAT_NUM_THREADS", "8")  # host threads are not a GPU's
    t = Target.parse("cuda")
    assert (t.kind, t.mcpu, t.llvm_cpu, t.arch, t.llvm_triple) == ("cuda", None, CUDA_DEFAULT_ARCH, "nvptx64",
                                                                  "nvptx64-nvidia-cuda")
    assert not t.is_native and t.num_threads == 1 and t.vector_width == 1
    assert t.features() == frozenset() and t.llvm_features == ""
    assert str(t) == "cuda"


@pytest.mark.parametrize("arch", CUDA_ARCHES)
def test_parse_cuda_arch_round_trips(arch):
    t = Target.parse(f"cuda -arch={arch}")
    assert t.llvm_cpu == arch and t.kind == "cuda"
    assert str(t) == f"cuda -arch={arch}"
    assert Target.parse(str(t)) == t


def test_parse_cuda_mcpu_is_an_arch_spelling():
    assert Target.parse("cuda -mcpu=sm_86") == Target.parse("cuda -arch=sm_86")


@pytest.mark.parametrize("text, match", [
    ("cuda -arch=sm_91", r"-arch=sm_91: ziggurat emits PTX for sm_70, .*sm_90"),
    ("cuda -arch=compute_90", r"-arch=compute_90"),
    ("cuda -arch", r"needs a value"),
    ("cuda -mtriple=aarch64-linux-gnu", r"a CUDA target takes -arch=sm_NN only.*-mtriple, -mattr and -num-cores are "
                                        r"for CPU targets"),
    ("cuda -arch=sm_90 -mattr=+ptx80", r"a CUDA target takes -arch=sm_NN only"),
    ("cuda -num-cores=4", r"a CUDA target takes -arch=sm_NN only"),
    ("cuda -mcpu=haswell", r"give the GPU as -arch=sm_NN"),
    ("cuda -foo=1", r"unknown target option '-foo'.*-arch \(cuda\)"),
    ("llvm -arch=sm_90", r"unknown target option '-arch'"),
    ("c -arch=sm_90", r"unknown target option '-arch'"),
    ("gpu -arch=sm_90", r"supported target kinds are llvm, c, cuda"),
])
def test_parse_refusals_are_clear(text, match):
    with pytest.raises(ZigguratError, match=match):
        Target.parse(text)


# --- models ------------------------------------------------------------------------------------------------

def _model(nodes, inputs, outputs, initializers=(), opset=17):
    """An ONNX model of `nodes`; `inputs`/`outputs` are (name, shape) pairs of float32 tensors,
    `initializers` (name, array) pairs."""
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)  # onnxruntime >= 1.20 reads it
    onnx.checker.check_model(model)
    return model


N = helper.make_node


def _weights(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def elementwise_chain():
    """Every math function the CUDA backend lowers itself, one after the other (values stay finite:
    Log of Exp of something in [-1, 1], Sqrt of a positive number, Pow of a positive base)."""
    return _model([N("Sigmoid", ["x"], ["a"]), N("Tanh", ["a"], ["b"]), N("Erf", ["b"], ["c"]),
                   N("Exp", ["c"], ["d"]), N("Log", ["d"], ["e"]), N("Abs", ["e"], ["e1"]),
                   N("Sqrt", ["e1"], ["f"]), N("Add", ["f", "one"], ["f1"]), N("Pow", ["f1", "x"], ["g"]),
                   N("Sin", ["g"], ["h"]), N("Cos", ["h"], ["y"])],
                  [("x", [3, 70])], [("y", [3, 70])], [("one", np.float32(1.0))])


def softmax():
    return _model([N("Softmax", ["x"], ["y"], axis=-1)], [("x", [5, 37])], [("y", [5, 37])])


def matmul():
    return _model([N("MatMul", ["a", "b"], ["y"])], [("a", [70, 45]), ("b", [45, 130])], [("y", [70, 130])])


# The matrix products have at least 4096 results: gpu-rfactor takes smaller ones as matrix-vector
# products (a GEMV: its k split over partial sums) instead of the GEMM template.
def batched_matmul():
    return _model([N("MatMul", ["a", "b"], ["y"])], [("a", [3, 40, 47]), ("b", [3, 47, 50])], [("y", [3, 40, 50])])


def matmul_transposed_b():
    """A x W^T with W a weight (Gemm transB=1, as a linear layer)."""
    return _model([N("Gemm", ["a", "w"], ["y"], transB=1)], [("a", [64, 40])], [("y", [64, 80])],
                  [("w", _weights(80, 40))])


def gemm():
    return _model([N("Gemm", ["a", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)], [("a", [64, 40])],
                  [("y", [64, 96])], [("w", _weights(96, 40)), ("c", _weights(96, seed=1))])


def conv():
    return _model([N("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])], [("x", [1, 3, 9, 9])],
                  [("y", [1, 4, 5, 5])], [("w", _weights(4, 3, 3, 3)), ("b", _weights(4, seed=1))])


def reduce_to_scalar():
    return _model([N("ReduceSum", ["x"], ["y"], keepdims=0)], [("x", [7, 13])], [("y", [])])


MODELS = {f.__name__: f for f in (elementwise_chain, softmax, matmul, batched_matmul, matmul_transposed_b, gemm,
                                  conv, reduce_to_scalar)}
MATMULS = ("matmul", "batched_matmul", "matmul_transposed_b", "gemm")


def _compile(model, opt_level=3):
    """`ziggurat.compile` for CUDA, with the loop IR before gpu-default-schedule (a clone)."""
    seen = {}

    def grab(p, module, seconds):
        if p.name == "gpu-gemm":
            seen["before_schedule"] = module.clone()

    compiled = ziggurat.compile(model, target=CUDA, opt_level=opt_level, after_pass=grab)
    return compiled, seen["before_schedule"]


def _entry(ptx: str, kernel: str) -> str:
    """The PTX of the entry `kernel`: from its `.entry` line to the next entry (or the end)."""
    start = ptx.index(f".entry {kernel}(")
    end = ptx.find(".entry ", start + 1)
    return ptx[start:] if end < 0 else ptx[start:end]


def _spatial_points(nest) -> int:
    """The points of the spatial iteration space a kernel's threads cover: the product of the trip
    counts of the perfectly nested serial loops from the top that no block binds as a reduction
    (1 for a nest that starts with a reduction, or with no loop)."""
    points, cur, prev = 1, nest, None
    while isinstance(cur, loop.ForOp) and cur.kind.data == "serial" and cur.bounds[0] == 0 and cur.bounds[2] == 1 \
            and "R" not in bound_kinds(cur):
        if prev is not None and any(o is not cur and not o.name.startswith("arith.") for o in prev.body.block.ops):
            break  # not perfectly nested: the loops below run inside each thread
        points *= cur.trip_count
        prev = cur
        inner = [o for o in cur.body.block.ops if isinstance(o, loop.ForOp)]
        cur = inner[0] if len(inner) == 1 else None
    return points


def _kernels(module) -> dict:
    return {f.sym_name.data: f for f in module.ops if getattr(f, "sym_name", None) and f.sym_name.data != "main"}


# --- compiling without a GPU -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(MODELS))
def test_compiles_without_a_gpu(name):
    compiled, _ = _compile(MODELS[name]())
    assert isinstance(compiled, CudaModel)
    program = compiled.program
    assert program.arch == "sm_90" and compiled.info["target"] == CUDA
    assert ".target sm_90" in program.ptx and ".address_size 64" in program.ptx
    assert program.launches, "a model runs at least one kernel"
    for launch in program.launches:
        assert f".visible .entry {launch.kernel}(" in program.ptx, launch.kernel
        assert len(launch.grid) == 3 and len(launch.block) == 3
        assert launch.grid[1:] == (1, 1) and launch.block[1:] == (1, 1)
        assert 1 <= launch.block[0] <= MAX_THREADS and launch.grid[0] >= 1
    assert compiled.input_names == [i.name for i in MODELS[name]().graph.input]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_grid_times_block_covers_each_kernel(name):
    """Every launch has a thread for each point of its kernel's spatial iteration space, and no block
    lies wholly past its end; a GEMM launch has a block per tile of C."""
    compiled, before = _compile(MODELS[name]())
    kernels = _kernels(before)
    for launch in compiled.program.launches:
        grid, block = launch.grid[0], launch.block[0]
        nests = [o for o in kernels[launch.kernel].body.block.ops if isinstance(o, (loop.ForOp, loop.BlockOp))]
        assert len(nests) == 1, f"{launch.kernel}: one loop nest per kernel after gpu-split-stages"
        if GEMM_ATTR in nests[0].attributes:
            spec = read_gemm(nests[0].attributes[GEMM_ATTR])
            tile = spec["tile"]
            tiles = math.prod(spec["batch"]) * -(-spec["m"] // tile) * -(-spec["n"] // tile)
            assert (grid, block) == (tiles, 256), launch
            continue
        if any(k.startswith("gpu.") and k != "gpu.limit" for k in nests[0].attributes):
            continue  # another template's nest (its own grid)
        points = _spatial_points(nests[0])
        assert grid * block >= points, f"{launch.kernel}: {grid} x {block} threads for {points} points"
        assert (grid - 1) * block < points, f"{launch.kernel}: a block of {block} threads past {points} points"


@pytest.mark.parametrize("opt_level", [0, 1, 2, 3])
def test_every_opt_level_compiles(opt_level):
    compiled, before = _compile(softmax(), opt_level)
    kernels = _kernels(before)
    assert {launch.kernel for launch in compiled.program.launches} <= set(kernels)
    for launch in compiled.program.launches:
        assert f".entry {launch.kernel}(" in compiled.program.ptx


@pytest.mark.parametrize("name", MATMULS)
def test_matrix_products_take_the_gemm_template(name):
    compiled, before = _compile(MODELS[name]())
    kernels = _kernels(before)
    gemms = [launch for launch in compiled.program.launches
             if any(GEMM_ATTR in o.attributes for o in kernels[launch.kernel].body.block.ops)]
    assert len(gemms) == 1, compiled.program.launches
    body = _entry(compiled.program.ptx, gemms[0].kernel)
    assert gemms[0].block == (256, 1, 1)
    assert "bar.sync" in body and "ld.shared" in body and "st.shared" in body and "fma.rn.f32" in body


def test_elementwise_kernels_guard_their_tail():
    """4 x 300 = 1200 points on 5 blocks of 256 threads: the last 80 threads lie past the end, so the
    kernel compares its index (ctaid.x * 256 + tid.x) with the last one, 1199."""
    relu = _model([N("Relu", ["x"], ["y"])], [("x", [4, 300])], [("y", [4, 300])])
    program = ziggurat.compile(relu, target=CUDA).program
    (launch,) = program.launches
    assert (launch.grid[0], launch.block[0]) == (5, 256)
    body = _entry(program.ptx, launch.kernel)
    assert "%ctaid.x" in body and "%tid.x" in body
    assert re.search(r"setp\.\w+\.u64\s+%p\d+, %rd\d+, 1199;", body), body


def test_unsupported_math_is_a_compile_error_naming_it():
    atan = _model([N("Atan", ["x"], ["y"])], [("x", [4])], [("y", [4])])
    with pytest.raises(CompileError, match=r"math\.atan has no GPU lowering"):
        ziggurat.compile(atan, target=CUDA)


def test_tuning_and_profiling_are_refused():
    with pytest.raises(ZigguratError, match="not built for GPUs yet"):
        ziggurat.compile(softmax(), target=CUDA, profile=True)


def test_save_and_load_without_a_gpu(tmp_path):
    compiled = ziggurat.compile(gemm(), target=CUDA)
    path = tmp_path / "m.cuda.json"
    compiled.save(path)
    loaded = load_cuda(path)
    assert loaded.program == compiled.program
    assert loaded.input_names == compiled.input_names and loaded.output_names == compiled.output_names
    assert [s.shape for s in loaded.inputs] == [s.shape for s in compiled.inputs]
    weights, again = compiled.constants, loaded.constants
    assert len(weights) == len(again) == len(compiled.program.const_names) > 0
    for w, v in zip(weights, again):
        np.testing.assert_array_equal(w, v)


# --- the command lines ---------------------------------------------------------------------------------

@pytest.fixture
def softmax_file(tmp_path):
    path = tmp_path / "softmax.onnx"
    onnx.save(softmax(), path)
    return str(path)


def test_cli_emit_ptx(softmax_file, capsys):
    from ziggurat.cli.main import main

    assert main(["compile", softmax_file, "--target", CUDA, "--emit", "ptx"]) == 0
    out, err = capsys.readouterr()
    launches = re.findall(r"^// launch (\w+) grid=\((\d+),1,1\) block=\((\d+),1,1\)", out, re.M)
    assert len(launches) == len(ziggurat.compile(softmax(), target=CUDA).program.launches) > 1, out[:2000]
    assert ".target sm_90" in out
    for kernel, _, _ in launches:
        assert f".entry {kernel}(" in out
    assert "GPU launch(es) for sm_90" in err


def test_cli_emit_loop_is_gpu_scheduled(softmax_file, capsys):
    from ziggurat.cli.main import main

    assert main(["compile", softmax_file, "--target", CUDA, "--emit", "loop"]) == 0
    out = capsys.readouterr().out
    assert "blockIdx.x" in out and "threadIdx.x" in out


@pytest.mark.parametrize("argv, match", [
    (["--target", CUDA, "--emit", "hw"], r"--emit hw: the target 'cuda -arch=sm_90' has no hw stage"),
    (["--emit", "ptx"], r"--emit ptx: the target 'llvm' is not a GPU"),
    (["--target", CUDA, "--explain-fusion"], r"--explain-fusion"),
    (["--target", "cuda -arch=sm_12"], r"-arch=sm_12"),
])
def test_cli_compile_refusals(softmax_file, capsys, argv, match):
    from ziggurat.cli.main import main

    assert main(["compile", softmax_file, *argv]) == 1
    err = capsys.readouterr().err
    assert re.search(match, err), err
    assert "Traceback" not in err


def test_cli_export_saves_the_cuda_model(softmax_file, tmp_path, capsys):
    from ziggurat.cli.main import main

    path = tmp_path / "s.cuda.json"
    assert main(["compile", softmax_file, "--target", CUDA, "--export", str(path)]) == 0
    assert "load_cuda" in capsys.readouterr().err
    assert load_cuda(path).program == ziggurat.compile(softmax(), target=CUDA).program


@pytest.mark.skipif(GPU_OK, reason="checks the error of a machine without a GPU")
def test_cli_run_without_a_gpu_is_one_clear_error(softmax_file, tmp_path, capsys):
    from ziggurat.cli.main import main

    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.zeros((5, 37), np.float32))
    assert main(["run", softmax_file, "--inputs", str(inputs), "--target", CUDA]) == 1
    err = capsys.readouterr().err
    assert "runs on an NVIDIA GPU" in err and "--export" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["tune", "--db", "r.jsonl"], ["profile"]])
def test_cli_cpu_only_commands_refuse_cuda(softmax_file, capsys, command):
    from ziggurat.cli.main import main

    assert main([command[0], softmax_file, *command[1:], "--target", CUDA]) == 1
    err = capsys.readouterr().err
    assert f"ziggurat {command[0]}: target '{CUDA}'" in err


def test_cli_mlir_model_points_at_ziggurat_opt(tmp_path, capsys):
    from ziggurat.cli.main import main

    path = tmp_path / "m.mlir"
    path.write_text('func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> attributes {graph.input_names = ["x"], '
                    'graph.output_names = ["y"]} {\n  %y = graph.relu %x : tensor<4xf32>\n'
                    '  func.return %y : tensor<4xf32>\n}\n')
    assert main(["compile", str(path), "--target", CUDA]) == 1
    assert "-t 'ptx{arch=\"sm_90\"}'" in capsys.readouterr().err


def test_opt_target_ptx(tmp_path, capsys):
    from ziggurat.cli.opt import main

    path = tmp_path / "m.onnx"
    onnx.save(matmul(), path)
    assert main([str(path), "-t", 'ptx{arch="sm_86"}']) == 0
    out = capsys.readouterr().out
    (line,) = re.findall(r"^// launch .*$", out, re.M)
    assert "grid=(6,1,1) block=(256,1,1) args=(input 0, input 1, output 0)" in line  # 70 x 130: 2 x 3 tiles of 64
    assert ".target sm_86" in out and "bar.sync" in out


# --- on a GPU ----------------------------------------------------------------------------------------------

def _ort(model, inputs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), inputs)})


def _run(runner, model, inputs):
    """The outputs of `model` compiled for CUDA: on the GPU (`gpu`), or its GPU-scheduled loops run on
    this CPU block by block and thread by thread (`emulate`, cross.cuda_emulate: checks what the GPU
    passes do, on any machine; not the CUDA backend's code)."""
    if runner == "gpu":
        with ziggurat.compile(model, target=CUDA) as compiled:
            return compiled(*inputs)
    from ziggurat.cross import cuda_emulate

    return cuda_emulate(model, CUDA)(*inputs)


RUNNERS = [pytest.param("gpu", marks=needs_gpu), "emulate"]


def _close(got, want, rtol=1e-4, atol=1e-5):
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


GPU_SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                        derandomize=True)


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_match_onnxruntime(name, runner):
    model = MODELS[name]()
    rng = np.random.default_rng(0)
    shapes = [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input]
    inputs = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    got, want = _run(runner, model, inputs), _ort(model, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _close(g, w, atol=1e-4 if name in ("elementwise_chain", *MATMULS, "conv") else 1e-5)


@st.composite
def broadcast_shapes(draw):
    """Two shapes that broadcast: x's, and y's with some of x's dims set to 1 and leading dims dropped."""
    x = draw(st.lists(st.integers(1, 40), min_size=1, max_size=4))
    y = [1 if draw(st.booleans()) else d for d in x]
    return x, y[draw(st.integers(0, len(y) - 1)):]


@pytest.mark.parametrize("runner", RUNNERS)
@GPU_SETTINGS
@given(shapes=broadcast_shapes(), seed=st.integers(0, 2**16))
def test_elementwise_and_broadcast_match_numpy(runner, shapes, seed):
    xs, ys = shapes
    out = list(np.broadcast_shapes(tuple(xs), tuple(ys)))
    model = _model([N("Add", ["x", "y"], ["s"]), N("Sigmoid", ["s"], ["g"]), N("Mul", ["g", "x"], ["m"]),
                    N("Tanh", ["m"], ["t"]), N("Sub", ["t", "y"], ["z"])],
                   [("x", xs), ("y", ys)], [("z", out)])
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(-2, 2, xs).astype(np.float32), rng.uniform(-2, 2, ys).astype(np.float32)
    (got,) = _run(runner, model, [x, y])
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    want = np.tanh(1 / (1 + np.exp(-(x64 + y64))) * x64) - y64
    _close(got, want, atol=1e-5)


@st.composite
def reductions(draw):
    shape = draw(st.lists(st.integers(1, 24), min_size=1, max_size=4))
    axes = sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
    return shape, axes, draw(st.booleans()), draw(st.sampled_from(["ReduceSum", "ReduceMax"]))


@pytest.mark.parametrize("runner", RUNNERS)
@GPU_SETTINGS
@given(case=reductions(), seed=st.integers(0, 2**16))
def test_reductions_match_numpy(runner, case, seed):
    shape, axes, keep, op = case
    out = [1 if d in axes else n for d, n in enumerate(shape)] if keep else \
        [n for d, n in enumerate(shape) if d not in axes]
    if op == "ReduceSum":  # opset 13+: the axes are an input
        node = N(op, ["x", "axes"], ["y"], keepdims=int(keep))
        inits = [("axes", np.array(axes, np.int64))]
    else:  # ReduceMax takes them as an attribute until opset 18
        node, inits = N(op, ["x"], ["y"], axes=axes, keepdims=int(keep)), []
    model = _model([node], [("x", shape)], [("y", out)], inits)
    x = np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)
    (got,) = _run(runner, model, [x])
    reduce = np.sum if op == "ReduceSum" else np.max
    want = reduce(x.astype(np.float64), axis=tuple(axes), keepdims=keep)
    reduced = math.prod(shape[a] for a in axes)  # the terms of each sum
    _close(got, want.reshape(out), atol=1e-6 * reduced)


@pytest.mark.parametrize("runner", RUNNERS)
@GPU_SETTINGS
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=3), data=st.data(), seed=st.integers(0, 2**16))
def test_softmax_matches_numpy(runner, shape, data, seed):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    model = _model([N("Softmax", ["x"], ["y"], axis=axis)], [("x", shape)], [("y", shape)])
    x = np.random.default_rng(seed).uniform(-5, 5, shape).astype(np.float32)
    (got,) = _run(runner, model, [x])
    e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
    _close(got, e / e.sum(axis=axis, keepdims=True), atol=1e-6)


@pytest.mark.parametrize("runner", RUNNERS)
@GPU_SETTINGS
@given(m=st.integers(1, 150), n=st.integers(1, 150), k=st.integers(1, 150),
       batch=st.lists(st.integers(1, 3), max_size=2), shared_b=st.booleans(), seed=st.integers(0, 2**16))
def test_matmul_matches_numpy(runner, m, n, k, batch, shared_b, seed):
    """Random m, n, k (mostly not multiples of the 64 or 128 tile, nor of the 8 steps of k), batched,
    with B of each batch or one B for all."""
    a_shape, b_shape = [*batch, m, k], ([k, n] if shared_b else [*batch, k, n])
    model = _model([N("MatMul", ["a", "b"], ["y"])], [("a", a_shape), ("b", b_shape)], [("y", [*batch, m, n])])
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-1, 1, a_shape).astype(np.float32), rng.uniform(-1, 1, b_shape).astype(np.float32)
    (got,) = _run(runner, model, [a, b])
    _close(got, np.matmul(a.astype(np.float64), b.astype(np.float64)), atol=1e-5 * k)


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("a_shape, b_shape", [
    ([2, 1030, 40], [2, 40, 2050]),  # 2 x 9 x 17 tiles of 128 (the large tile), a tail on both axes
    ([128, 256], [256, 128]),  # exact 64 tiles, k a multiple of 8
    ([1, 1], [1, 1]),
])
def test_matmul_tiles_match_numpy(a_shape, b_shape, runner):
    out = [*a_shape[:-1], b_shape[-1]]
    model = _model([N("MatMul", ["a", "b"], ["y"])], [("a", a_shape), ("b", b_shape)], [("y", out)])
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, a_shape).astype(np.float32), rng.uniform(-1, 1, b_shape).astype(np.float32)
    (got,) = _run(runner, model, [a, b])
    _close(got, np.matmul(a.astype(np.float64), b.astype(np.float64)), atol=1e-5 * a_shape[-1])


@pytest.mark.parametrize("runner", RUNNERS)
@GPU_SETTINGS
@given(c=st.integers(1, 8), k=st.integers(1, 8), size=st.integers(3, 14), kernel=st.integers(1, 3),
       stride=st.integers(1, 2), pad=st.integers(0, 1), batch=st.integers(1, 2), bias=st.booleans(),
       seed=st.integers(0, 2**16))
def test_conv_matches_onnxruntime(runner, c, k, size, kernel, stride, pad, batch, bias, seed):
    out = (size + 2 * pad - kernel) // stride + 1
    inits = [("w", _weights(k, c, kernel, kernel, seed=seed))] + ([("b", _weights(k, seed=seed + 1))] if bias else [])
    node = N("Conv", ["x", "w", *(["b"] if bias else [])], ["y"], kernel_shape=[kernel, kernel],
             strides=[stride, stride], pads=[pad] * 4)
    model = _model([node], [("x", [batch, c, size, size])], [("y", [batch, k, out, out])], inits)
    x = np.random.default_rng(seed).uniform(-1, 1, (batch, c, size, size)).astype(np.float32)
    (got,) = _run(runner, model, [x])
    (want,) = _ort(model, [x])
    _close(got, want, atol=1e-5 * c * kernel * kernel)


@needs_gpu
def test_saved_model_runs_after_loading(tmp_path):
    model = gemm()
    x = np.random.default_rng(2).uniform(-1, 1, (64, 40)).astype(np.float32)
    path = tmp_path / "g.cuda.json"
    with ziggurat.compile(model, target=CUDA) as compiled:
        (first,) = compiled(x)
        compiled.save(path)  # the weights read back from the GPU
    with load_cuda(path) as loaded:
        (again,) = loaded(x)
    np.testing.assert_array_equal(first, again)
    _close(first, _ort(model, [x])[0], atol=1e-4)


def test_launch_type_is_what_the_program_holds():
    """(A guard for the tests above: they read `Launch` grid and block as 3-tuples.)"""
    launch = ziggurat.compile(softmax(), target=CUDA).program.launches[0]
    assert isinstance(launch, Launch) and isinstance(launch.grid, tuple) and isinstance(launch.block, tuple)


def test_cuda_pipeline_takes_pass_options():
    """GPU pass options reach the pipeline (what gpu_check.sh's GPU_PASS_OPTIONS packs beside the defaults)."""
    from ziggurat.lowering.pipelines import cuda_pipeline

    spec = cuda_pipeline(3, "cuda -arch=sm_90", options={"gpu-rfactor": {"convolutions": True},
                                                          "gpu-gemm": {"convolutions": True, "deep-k": True}})
    assert "gpu-rfactor{convolutions=true}" in spec and "gpu-gemm{convolutions=true deep-k=true}" in spec
    assert "gpu-default-schedule{threads=256}" in spec and "gpu-gemm," in cuda_pipeline(3, "cuda -arch=sm_90")


def test_large_per_thread_scratch_is_a_clear_error():
    """A kernel's scratch inside a nest lives in each thread's local memory: over STACK_LIMIT bytes it is
    refused with the kernel's name (there is no device allocator for the CPU backend's aligned_alloc)."""
    from xdsl.parser import Parser

    from ziggurat.backends.cuda.translate import STACK_LIMIT, translate_gpu_module
    from ziggurat.errors import CompileError
    from ziggurat.registry import make_context

    n = STACK_LIMIT // 4 + 1
    text = f"""builtin.module {{
      func.func @main(%x: memref<4xf32>) attributes {{graph.input_names = ["x"], graph.output_names = []}} {{
        func.call @k(%x) : (memref<4xf32>) -> ()
        func.return
      }}
      func.func @k(%x: memref<4xf32>) {{
        loop.for %i = 0 to 4 serial {{
          %t = loop.alloc "local" : memref<{n}xf32>
          loop.block "b" [S %v = %i] {{
            %c = arith.constant 0 : index
            %e = loop.load %t[%c] : memref<{n}xf32>
            loop.store %e, %x[%v] : memref<4xf32>
          }}
        }}
        func.return
      }}
    }}"""
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(CompileError, match=r"@k allocates \d+ bytes of scratch per thread"):
        translate_gpu_module(module, "sm_90")
