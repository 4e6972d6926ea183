"""The CUDA runtime: GpuProgram's JSON form, the driver binding (runtime/cuda_driver.py) and CudaModel
(runtime/cuda.py).

Without a GPU: the program's JSON round trip, `available()` and the errors of a machine without a
driver (CudaError, not OSError), the program checks made before the driver is touched, and
`load_cuda`'s errors. The tests of `Context` and `CudaModel` run a hand-written PTX kernel
(`add_one`: b[i] = a[i] + 1 for i < 256) twice: on `FakeDriver`, libcuda's calls as ctypes callbacks
over host memory (so the argument marshalling, the kernel parameter blocks, graph capture and
replay and the copies are checked on every machine), and on the GPU, skipped with `available()`'s
reason where there is none.
"""

from __future__ import annotations

import ctypes
import json
import threading
from collections.abc import Callable

import numpy as np
import pytest

from ziggurat.errors import CompileError, CudaError, InputError, ModelLoadError
from ziggurat.runtime import cuda_driver
from ziggurat.runtime.cuda import CudaModel, load_cuda
from ziggurat.runtime.cuda_driver import Context, available, check
from ziggurat.runtime.cuda_program import BufRef, Copy, GpuProgram, Launch
from ziggurat.signature import Extent, IndexCheck, TensorSpec

PTX = """\
.version 7.8
.target sm_80
.address_size 64

.visible .entry add_one(
    .param .u64 add_one_param_0,
    .param .u64 add_one_param_1
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<5>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [add_one_param_0];
    ld.param.u64 %rd2, [add_one_param_1];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r4, %r1, %r2, %r3;
    setp.ge.u32 %p1, %r4, 256;
    @%p1 bra $L__BB0_2;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r4, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.f32 %f1, [%rd6];
    add.f32 %f2, %f1, 0f3F800000;
    add.s64 %rd7, %rd4, %rd5;
    st.global.f32 [%rd7], %f2;
$L__BB0_2:
    ret;
}
"""

F32, I64 = np.dtype(np.float32), np.dtype(np.int64)
GPU_OK, GPU_REASON = available()
needs_gpu = pytest.mark.skipif(not GPU_OK, reason=f"needs a CUDA GPU: {GPU_REASON}")


class FakeDriver:
    """libcuda's functions as ctypes callbacks with `_PROTOTYPES`' argument types: device memory is host
    memory, `add_one` is emulated with numpy, and the stream's work runs at once except while a graph is
    captured, when it is recorded for `cuGraphLaunch` to replay. The calls not defined here return 0."""

    _NAMES = {218: b"CUDA_ERROR_INVALID_PTX", 500: b"CUDA_ERROR_NOT_FOUND"}

    def __init__(self):
        self.memory: dict[int, ctypes.Array] = {}
        self.graphs: dict[int, list[Callable[[], None]]] = {}
        self.captured: list[Callable[[], None]] | None = None
        for name, argtypes in cuda_driver._PROTOTYPES.items():
            impl = getattr(self, "_" + name, lambda *args: 0)
            setattr(self, name, ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(self._guard(impl)))

    @staticmethod
    def _guard(impl: Callable[..., int]) -> Callable[..., int]:
        """`impl`, with an exception (a failed assertion) turned into CUDA_ERROR_UNKNOWN (999): ctypes
        would print and drop it."""
        def call(*args):
            try:
                return impl(*args)
            except Exception:  # noqa: BLE001
                return 999
        return call

    def _issue(self, op: Callable[[], None]) -> int:
        if self.captured is not None:
            self.captured.append(op)
        else:
            op()
        return 0

    def _cuGetErrorName(self, code, out):
        out[0] = self._NAMES.get(code)
        return 0 if code in self._NAMES else 1

    def _cuDeviceGetCount(self, out):
        out[0] = 1
        return 0

    def _cuDeviceGetName(self, out, size, device):
        ctypes.memmove(out, b"Fake GPU\0", 9)
        return 0

    def _cuDeviceGetAttribute(self, out, attribute, device):
        out[0] = {75: 9, 76: 0, 16: 132}[attribute]
        return 0

    def _cuDevicePrimaryCtxRetain(self, out, device):
        out[0] = 0x1000
        return 0

    def _cuStreamCreate(self, out, flags):
        out[0] = 0x2000
        return 0

    def _cuMemAlloc_v2(self, out, nbytes):
        buffer = ctypes.create_string_buffer(nbytes)
        out[0] = ctypes.addressof(buffer)
        self.memory[out[0]] = buffer
        return 0

    def _cuMemFree_v2(self, ptr):
        return 0 if self.memory.pop(ptr, None) is not None else 1

    def _cuMemcpyHtoDAsync_v2(self, dst, src, nbytes, stream):
        return self._issue(lambda: ctypes.memmove(dst, src, nbytes))

    def _cuMemcpyDtoHAsync_v2(self, dst, src, nbytes, stream):
        return self._issue(lambda: ctypes.memmove(dst, src, nbytes))

    def _cuMemcpyDtoDAsync_v2(self, dst, src, nbytes, stream):
        return self._issue(lambda: ctypes.memmove(dst, src, nbytes))

    def _cuMemsetD8Async(self, dst, value, nbytes, stream):
        return self._issue(lambda: ctypes.memset(dst, value, nbytes))

    def _cuModuleLoadDataEx(self, out, image, n_options, options, values):
        assert [options[i] for i in range(n_options)] == [5, 6, 3, 4] and values[1] == values[3] == 1 << 16
        if b"bogus" in image:
            ctypes.memmove(values[0], b"ptxas fatal: bogus instruction\0", 31)
            return 218
        out[0] = 0x3000
        return 0

    def _cuModuleGetFunction(self, out, module, name):
        out[0] = 0x4000
        return 0 if name == b"add_one" else 500

    def _cuLaunchKernel(self, func, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        a, b = (ctypes.cast(params[i], ctypes.POINTER(ctypes.c_uint64))[0] for i in range(2))
        n = min(gx * bx, 256)

        def add_one() -> None:
            src = np.frombuffer((ctypes.c_float * n).from_address(a), np.float32)
            np.frombuffer((ctypes.c_float * n).from_address(b), np.float32)[:] = src + 1

        return self._issue(add_one)

    def _cuStreamBeginCapture_v2(self, stream, mode):
        self.captured = []
        return 0

    def _cuStreamEndCapture(self, stream, out):
        out[0] = 0x5000 + len(self.graphs)
        self.graphs[out[0]], self.captured = self.captured or [], None
        return 0

    def _cuGraphInstantiateWithFlags(self, out, graph, flags):
        out[0] = graph
        return 0

    def _cuGraphLaunch(self, exe, stream):
        for op in self.graphs[exe]:
            op()
        return 0

    def _cuEventCreate(self, out, flags):
        out[0] = 0x6000
        return 0

    def _cuEventElapsedTime(self, out, start, end):
        out[0] = 0.25
        return 0


@pytest.fixture(params=["fake", pytest.param("gpu", marks=needs_gpu)])
def driver(request, monkeypatch) -> FakeDriver | None:
    """Each test of Context and CudaModel on `FakeDriver` (the fixture's value), then on the GPU (None)."""
    if request.param == "gpu":
        return None
    fake = FakeDriver()
    monkeypatch.setattr(cuda_driver, "_driver", lambda: fake)
    return fake


def two_step_program() -> GpuProgram:
    """y = x + 2 (through the arena, then a copy), z = w + 1 (w a constant)."""
    return GpuProgram(PTX, "sm_80", arena_bytes=2048, const_names=["w"], steps=[
        Launch("add_one", (2, 1, 1), (128, 1, 1), (BufRef("input", 0), BufRef("arena", 0))),
        Launch("add_one", (2, 1, 1), (128, 1, 1), (BufRef("arena", 0), BufRef("arena", 1024))),
        Copy(BufRef("output", 0), BufRef("arena", 1024), 1024),
        Launch("add_one", (1, 1, 1), (256, 1, 1), (BufRef("const", 0), BufRef("output", 1))),
    ])


def two_step_model(**kwargs) -> tuple[CudaModel, np.ndarray]:
    w = np.linspace(-1, 1, 256, dtype=np.float32)
    specs = [TensorSpec("y", (256,), F32), TensorSpec("z", (256,), F32)]
    return CudaModel(two_step_program(), [TensorSpec("x", (256,), F32)], specs, [w], **kwargs), w


@pytest.fixture
def no_driver(monkeypatch):
    """A machine without libcuda, whatever this one has."""
    cuda_driver._driver.cache_clear()
    monkeypatch.setattr(cuda_driver, "_LIB_NAMES", ("libcuda-missing.so.1",))
    yield
    cuda_driver._driver.cache_clear()


# --- no GPU needed ---


def test_program_json_round_trip():
    program = two_step_program()
    data = json.loads(json.dumps(program.to_json()))
    assert GpuProgram.from_json(data) == program
    assert [s.kernel for s in program.launches] == ["add_one"] * 3


def test_available_never_raises():
    ok, reason = available()
    assert isinstance(ok, bool) and isinstance(reason, str) and reason


def test_no_driver_is_a_clear_cuda_error(no_driver):
    ok, reason = available()
    assert not ok and "libcuda-missing.so.1 not found: no NVIDIA driver" in reason
    model, _ = two_step_model()  # compiles and saves without a GPU: the GPU opens at the first run
    with pytest.raises(CudaError, match="not found: no NVIDIA driver on this machine"):
        model.open()
    with pytest.raises(CudaError, match=r"allocating failed: CUresult \(2\).*out of memory"):
        check(2, "allocating")
    check(0, "nothing")


def test_bad_program_refused_before_the_driver(no_driver):
    spec = [TensorSpec("y", (256,), F32)]
    bad_output = GpuProgram(PTX, "sm_80", steps=[
        Launch("add_one", (1, 1, 1), (256, 1, 1), (BufRef("input", 0), BufRef("output", 3)))])
    with pytest.raises(CompileError, match="names output 3; the model has 1"):
        CudaModel(bad_output, spec, spec, [])
    long_copy = GpuProgram(PTX, "sm_80", arena_bytes=512, steps=[Copy(BufRef("output", 0), BufRef("arena", 0), 1024)])
    with pytest.raises(CompileError, match="arena 0 has fewer bytes"):
        CudaModel(long_copy, spec, spec, [])
    with pytest.raises(CompileError, match="names 1 constants, 0 were given"):
        CudaModel(GpuProgram(PTX, "sm_80", const_names=["w"]), spec, spec, [])


def test_load_cuda_errors(tmp_path):
    with pytest.raises(ModelLoadError, match="cannot read"):
        load_cuda(tmp_path / "missing.json")
    (tmp_path / "other.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ModelLoadError, match="not a CUDA model"):
        load_cuda(tmp_path / "other.json")
    (tmp_path / "broken.json").write_text(json.dumps({"format": "ziggurat-cuda", "program": {}}))
    with pytest.raises(ModelLoadError, match="not a well-formed CUDA model"):
        load_cuda(tmp_path / "broken.json")


# --- on FakeDriver, then on the GPU ---


def test_context_and_direct_launch(driver):
    x = np.arange(256, dtype=np.float32)
    y = np.zeros_like(x)
    with Context() as ctx:
        assert ctx.name and ctx.compute_capability >= (7, 0) and ctx.multiprocessors > 0
        add_one = ctx.load_module(PTX).function("add_one")
        a, b = ctx.alloc(x.nbytes), ctx.alloc(x.nbytes)
        ctx.htod(a, x)
        ctx.memset_d8_async(b, 0, x.nbytes)
        ctx.launch(add_one, (1, 1, 1), (256, 1, 1), [a, b], name="add_one")
        ctx.dtoh(y, b)
        np.testing.assert_array_equal(y, x + 1)
        ctx.free(a)
        with pytest.raises(CudaError, match="kernel 'nope'"):
            ctx.load_module(PTX).function("nope")
        with pytest.raises(CudaError, match="(?s)cuModuleLoadDataEx.*JIT error log:.*bogus"):
            ctx.load_module(PTX.replace("mad.lo.s32", "mad.lo.bogus"))


def test_cuda_model_runs_the_program(driver):
    x = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    model, w = two_step_model()
    with model.open():
        assert model.info["cuda_graph"] is True
        assert model.info["compute_capability"].startswith("sm_") and model.info["device"]
        y, z = model(x)
        np.testing.assert_allclose(y, x + 2, rtol=1e-6)
        np.testing.assert_allclose(z, w + 1, rtol=1e-6)
        again = model({"x": x})  # the graph replayed gives the same
        np.testing.assert_array_equal(again[0], y)
        np.testing.assert_array_equal(again[1], z)
        with pytest.raises(InputError, match="must be float32"):
            model(x.astype(np.float64))
        np.testing.assert_allclose(model(x=x.tolist())[0], x + 2, rtol=1e-6)
        threaded: list = []
        worker = threading.Thread(target=lambda: threaded.append(model(x)))  # activates the context there
        worker.start()
        worker.join()
        np.testing.assert_array_equal(threaded[0][0], y)
        model.run_device(repeat=3)
        times = model.time_device(repeat=5)
        assert len(times) == 5 and all(t > 0 for t in times)
    with pytest.raises(CudaError, match="closed"):
        model(x)
    assert driver is None or not driver.memory  # close() freed every allocation


def test_without_a_graph_the_steps_are_replayed(driver, monkeypatch):
    def refuse(self, fn):
        raise CudaError("capture refused by the test")

    monkeypatch.setattr(Context, "capture", refuse)
    x = np.arange(256, dtype=np.float32)
    model, w = two_step_model()
    with model.open():
        assert model.info["cuda_graph"] is False
        y, z = model(x)
        np.testing.assert_array_equal(y, x + 2)
        np.testing.assert_array_equal(z, w + 1)
        assert all(t > 0 for t in model.time_device(repeat=2))


def test_hidden_outputs_extent_and_index_check(driver):
    x = np.arange(256, dtype=np.float32)
    steps = [Launch("add_one", (1, 1, 1), (256, 1, 1), (BufRef("input", 0), BufRef("output", 0))),
             Copy(BufRef("output", 1), BufRef("const", 0), 8)]
    extent = TensorSpec("n", (1,), I64, extent=Extent(0, 0, "nz", "NonZero"))
    specs = [TensorSpec("y", (256,), F32), extent]
    with CudaModel(GpuProgram(PTX, "sm_80", steps=steps), [TensorSpec("x", (256,), F32)], specs,
                   [np.array([100], np.int64)]) as model:
        (y,) = model(x)
        np.testing.assert_array_equal(y, x[:100] + 1)
    steps[1] = Copy(BufRef("output", 1), BufRef("const", 0), 16)
    check_spec = TensorSpec("g", (2,), I64, check=IndexCheck("g", "Gather", "idx", (10,)))
    with CudaModel(GpuProgram(PTX, "sm_80", steps=steps), [TensorSpec("x", (256,), F32)],
                   [specs[0], check_spec], [np.array([0, 20], np.int64)]) as model:
        with pytest.raises(InputError, match="holds the index 20"):
            model(x)


def test_save_and_load(driver, tmp_path):
    x = np.arange(256, dtype=np.float32)
    model, w = two_step_model()
    with model:
        expected = model(x)
        model.save(tmp_path / "m.cuda.json")
    assert (tmp_path / "m.cuda.json.weights.npz").exists()
    with load_cuda(tmp_path / "m.cuda.json") as loaded:
        assert loaded.program == two_step_program()
        for got, want in zip(loaded(x), expected):
            np.testing.assert_array_equal(got, want)


def test_program_for_a_newer_gpu_is_refused(driver):
    spec = [TensorSpec("y", (256,), F32)]
    with pytest.raises(CudaError, match="compiled for sm_990"):
        CudaModel(GpuProgram(PTX, "sm_990"), spec, spec, []).open()
