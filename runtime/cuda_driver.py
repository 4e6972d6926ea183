"""A thin ctypes binding of the CUDA driver API (libcuda.so.1): the calls runtime/cuda.py needs, numpy and ctypes alone.

`available()` says whether a driver and a GPU are there (tests skip on its reason). A `Context` is
the first GPU's primary context with one non-blocking stream; it allocates and copies device
memory, loads PTX (`load_module`, the driver JIT-compiles it for the GPU), launches kernels,
captures a sequence of launches and copies into a CUDA graph (`capture`) and times work with
events (`time_ms`). It owns what it creates (memory, modules, graphs, the stream) and `close`
releases it all. Every call's CUresult goes through `check`, which raises `CudaError` with the
driver's error name and text and what was being done. The host-device copies are ordered on the
context's stream (the "synchronous" `htod`/`dtoh` wait for it): a copy on the legacy default
stream would not wait for the kernels of a non-blocking one.

```python
with Context() as ctx:
    add_one = ctx.load_module(ptx).function("add_one")
    a, b = ctx.alloc(x.nbytes), ctx.alloc(x.nbytes)
    ctx.htod(a, x)
    graph = ctx.capture(lambda: ctx.launch(add_one, (1, 1, 1), (256, 1, 1), [a, b]))
    graph.launch()
    ctx.dtoh(y, b)
```
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ziggurat.errors import CudaError

__all__ = ["Context", "Graph", "Module", "PreparedLaunch", "available", "check", "error_text"]

_LIB_NAMES = ("libcuda.so.1", "libcuda.so")
_P, _PP, _U64 = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64
_INT, _UINT, _SIZE = ctypes.c_int, ctypes.c_uint, ctypes.c_size_t
_PINT = ctypes.POINTER(_INT)
# name -> argument types; every function returns a CUresult (int). CUdeviceptr is unsigned long long,
# CUdevice an int, the handles (context, stream, module, function, graph, event) pointers.
_PROTOTYPES: dict[str, tuple[Any, ...]] = {
    "cuGetErrorName": (_INT, ctypes.POINTER(ctypes.c_char_p)),
    "cuGetErrorString": (_INT, ctypes.POINTER(ctypes.c_char_p)),
    "cuInit": (_UINT,),
    "cuDeviceGetCount": (_PINT,),
    "cuDeviceGet": (_PINT, _INT),
    "cuDeviceGetName": (ctypes.POINTER(ctypes.c_char), _INT, _INT),
    "cuDeviceGetAttribute": (_PINT, _INT, _INT),
    "cuDevicePrimaryCtxRetain": (_PP, _INT),
    "cuDevicePrimaryCtxRelease_v2": (_INT,),
    "cuCtxSetCurrent": (_P,),
    "cuStreamCreate": (_PP, _UINT),
    "cuStreamDestroy_v2": (_P,),
    "cuStreamSynchronize": (_P,),
    "cuMemAlloc_v2": (ctypes.POINTER(_U64), _SIZE),
    "cuMemFree_v2": (_U64,),
    "cuMemcpyHtoDAsync_v2": (_U64, _P, _SIZE, _P),
    "cuMemcpyDtoHAsync_v2": (_P, _U64, _SIZE, _P),
    "cuMemcpyDtoDAsync_v2": (_U64, _U64, _SIZE, _P),
    "cuMemsetD8Async": (_U64, ctypes.c_ubyte, _SIZE, _P),
    "cuModuleLoadDataEx": (_PP, ctypes.c_char_p, _UINT, _PINT, _PP),
    "cuModuleUnload": (_P,),
    "cuModuleGetFunction": (_PP, _P, ctypes.c_char_p),
    "cuLaunchKernel": (_P, _UINT, _UINT, _UINT, _UINT, _UINT, _UINT, _UINT, _P, _PP, _PP),
    "cuStreamBeginCapture_v2": (_P, _INT),
    "cuStreamEndCapture": (_P, _PP),
    "cuGraphInstantiateWithFlags": (_PP, _P, ctypes.c_ulonglong),
    "cuGraphLaunch": (_P, _P),
    "cuGraphExecDestroy": (_P,),
    "cuGraphDestroy": (_P,),
    "cuEventCreate": (_PP, _UINT),
    "cuEventRecord": (_P, _P),
    "cuEventSynchronize": (_P,),
    "cuEventElapsedTime": (ctypes.POINTER(ctypes.c_float), _P, _P),
    "cuEventDestroy_v2": (_P,),
}
_HINTS = {
    2: "the GPU is out of memory",
    100: "no CUDA-capable GPU is visible (check CUDA_VISIBLE_DEVICES)",
    222: "the PTX's ISA version (.version) is newer than this driver supports: update the NVIDIA driver "
         "or emit an older PTX version",
}
_STREAM_NON_BLOCKING, _CAPTURE_THREAD_LOCAL = 1, 1
_ATTR_CC_MAJOR, _ATTR_CC_MINOR, _ATTR_MULTIPROCESSORS = 75, 76, 16
_JIT_INFO_LOG, _JIT_INFO_LOG_SIZE, _JIT_ERROR_LOG, _JIT_ERROR_LOG_SIZE = 3, 4, 5, 6
_LOG_BYTES = 1 << 16


@functools.cache
def _driver() -> ctypes.CDLL:
    """libcuda with every function of `_PROTOTYPES` declared; CudaError where it cannot be loaded."""
    lib = None
    for name in _LIB_NAMES:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        raise CudaError(f"{_LIB_NAMES[0]} not found: no NVIDIA driver on this machine")
    missing = [name for name in _PROTOTYPES if not hasattr(lib, name)]
    if missing:
        raise CudaError(f"the NVIDIA driver is too old: {_LIB_NAMES[0]} lacks {missing}; update the driver")
    for name, argtypes in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = list(argtypes), ctypes.c_int
    return lib


def error_text(result: int) -> str:
    """A CUresult as 'CUDA_ERROR_NAME (code): the driver's text', with a hint for the common ones."""
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    try:
        lib = _driver()
        lib.cuGetErrorName(result, ctypes.byref(name))
        lib.cuGetErrorString(result, ctypes.byref(text))
    except CudaError:
        pass
    out = f"{(name.value or b'CUresult').decode(errors='replace')} ({result})"
    if text.value:
        out += f": {text.value.decode(errors='replace').rstrip('.')}"
    return out + (f"; {_HINTS[result]}" if result in _HINTS else "")


def check(result: int, what: str) -> None:
    """Raises CudaError naming `what` (the work being done) and the driver's error where `result` is not 0."""
    if result != 0:
        raise CudaError(f"{what} failed: {error_text(result)}")


def available() -> tuple[bool, str]:
    """(True, how many devices) where libcuda loads, cuInit succeeds and a device exists, else
    (False, why not). Never raises."""
    try:
        lib = _driver()
        check(lib.cuInit(0), "initializing the CUDA driver (cuInit)")
        count = ctypes.c_int()
        check(lib.cuDeviceGetCount(ctypes.byref(count)), "counting CUDA devices (cuDeviceGetCount)")
        if count.value < 1:
            return False, "the NVIDIA driver sees no CUDA device"
        return True, f"{count.value} CUDA device(s)"
    except Exception as e:  # noqa: BLE001 - the reason is the answer
        return False, str(e)


def _host(array: np.ndarray, writable: bool) -> tuple[int, int]:
    """The data address and byte size of a C-contiguous host array (ValueError otherwise)."""
    if not array.flags.c_contiguous:
        raise ValueError("host arrays copied to or from the GPU must be C-contiguous (np.ascontiguousarray)")
    if writable and not array.flags.writeable:
        raise ValueError("the host array a GPU buffer is copied into must be writable")
    return array.ctypes.data, array.nbytes


class Module:
    """A loaded PTX module; `log` is the JIT compiler's info log."""

    def __init__(self, ctx: Context, handle: int, log: str):
        self._ctx, self.handle, self.log = ctx, handle, log

    def function(self, name: str) -> int:
        """The handle of the kernel (PTX `.entry`) `name`; CudaError where the module has none."""
        fn = ctypes.c_void_p()
        check(self._ctx.lib.cuModuleGetFunction(ctypes.byref(fn), self.handle, name.encode()),
              f"looking up kernel '{name}' in the PTX module (cuModuleGetFunction)")
        return fn.value or 0


class PreparedLaunch:
    """One kernel launch with its parameter block built once: kernelParams points at one void* per
    argument, each at a 64-bit slot holding a device pointer. The ctypes arrays live as long as it does."""

    def __init__(self, lib: ctypes.CDLL, func: int, grid: Sequence[int], block: Sequence[int],
                 args: Sequence[int], shared_bytes: int, name: str):
        self._lib, self._func, self._shared = lib, func, int(shared_bytes)
        self._dims = (*(int(g) for g in grid), *(int(b) for b in block))
        if len(self._dims) != 6:
            raise ValueError(f"kernel '{name}': grid and block must have 3 dimensions each, got {grid}, {block}")
        self._values = (_U64 * len(args))(*args)
        base = ctypes.addressof(self._values)
        self._params = (ctypes.c_void_p * len(args))(*(base + 8 * i for i in range(len(args)))) if args else None
        self._what = f"launching kernel '{name}' on grid {tuple(grid)} x block {tuple(block)} (cuLaunchKernel)"

    def launch(self, stream: int) -> None:
        check(self._lib.cuLaunchKernel(self._func, *self._dims, self._shared, stream, self._params, None), self._what)


class Graph:
    """An instantiated CUDA graph, launched on its context's stream."""

    def __init__(self, ctx: Context, graph: int, exe: int):
        self._ctx, self._graph, self._exec = ctx, graph, exe

    def launch(self) -> None:
        check(self._ctx.lib.cuGraphLaunch(self._exec, self._ctx.stream), "launching the CUDA graph (cuGraphLaunch)")

    def destroy(self) -> None:
        if self._exec:
            self._ctx.lib.cuGraphExecDestroy(self._exec)
            self._ctx.lib.cuGraphDestroy(self._graph)
            self._exec = self._graph = 0
            self._ctx._graphs.remove(self)


class Context:
    """The primary context of CUDA device `device` (shared with the process's other CUDA users,
    retained here and released by `close`), made current on this thread, and one non-blocking stream.
    `activate()` makes it current on another thread. Attributes: `name`, `compute_capability`
    (major, minor), `multiprocessors`, `stream`."""

    def __init__(self, device: int = 0):
        self.lib = lib = _driver()
        self._handle: int | None = None
        self.stream = 0
        self._allocs: set[int] = set()
        self._modules: list[Module] = []
        self._graphs: list[Graph] = []
        check(lib.cuInit(0), "initializing the CUDA driver (cuInit)")
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        check(lib.cuDeviceGet(ctypes.byref(dev), device), f"opening CUDA device {device} (cuDeviceGet)")
        self.device = dev.value
        check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), self.device),
              f"retaining the primary context of CUDA device {device} (cuDevicePrimaryCtxRetain)")
        self._handle = ctx.value
        try:
            self.activate()
            stream = ctypes.c_void_p()
            check(lib.cuStreamCreate(ctypes.byref(stream), _STREAM_NON_BLOCKING), "creating a CUDA stream")
            self.stream = stream.value or 0
            name = ctypes.create_string_buffer(256)
            check(lib.cuDeviceGetName(name, 256, self.device), "reading the GPU's name (cuDeviceGetName)")
            self.name = name.value.decode(errors="replace")
            self.compute_capability = (self._attribute(_ATTR_CC_MAJOR), self._attribute(_ATTR_CC_MINOR))
            self.multiprocessors = self._attribute(_ATTR_MULTIPROCESSORS)
        except BaseException:
            self.close()
            raise

    def _attribute(self, attribute: int) -> int:
        value = ctypes.c_int()
        check(self.lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, self.device),
              f"reading device attribute {attribute} (cuDeviceGetAttribute)")
        return value.value

    def activate(self) -> None:
        """Makes this context current on the calling thread (the driver's calls act on the current one)."""
        if self._handle is None:
            raise CudaError("the CUDA context is closed")
        check(self.lib.cuCtxSetCurrent(self._handle), "making the CUDA context current (cuCtxSetCurrent)")

    def alloc(self, nbytes: int) -> int:
        """`nbytes` of device memory (at least 1 byte, so every buffer has its own address)."""
        ptr = _U64()
        check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), max(int(nbytes), 1)),
              f"allocating {nbytes} bytes of GPU memory (cuMemAlloc)")
        self._allocs.add(ptr.value)
        return ptr.value

    def free(self, ptr: int) -> None:
        self._allocs.discard(ptr)
        check(self.lib.cuMemFree_v2(ptr), "freeing GPU memory (cuMemFree)")

    def htod_async(self, dptr: int, array: np.ndarray) -> None:
        """Copies the C-contiguous `array` to `dptr` on the stream (the array must live until it is done)."""
        address, nbytes = _host(array, writable=False)
        if nbytes:
            check(self.lib.cuMemcpyHtoDAsync_v2(dptr, address, nbytes, self.stream),
                  f"copying {nbytes} bytes to the GPU (cuMemcpyHtoDAsync)")

    def dtoh_async(self, array: np.ndarray, dptr: int) -> None:
        """Copies `array.nbytes` from `dptr` into the C-contiguous, writable `array` on the stream."""
        address, nbytes = _host(array, writable=True)
        if nbytes:
            check(self.lib.cuMemcpyDtoHAsync_v2(address, dptr, nbytes, self.stream),
                  f"copying {nbytes} bytes from the GPU (cuMemcpyDtoHAsync)")

    def htod(self, dptr: int, array: np.ndarray) -> None:
        """`htod_async`, then waits for the stream."""
        self.htod_async(dptr, array)
        self.synchronize()

    def dtoh(self, array: np.ndarray, dptr: int) -> None:
        """`dtoh_async` after the stream's earlier work, then waits for the stream."""
        self.dtoh_async(array, dptr)
        self.synchronize()

    def dtod_async(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            check(self.lib.cuMemcpyDtoDAsync_v2(dst, src, nbytes, self.stream),
                  f"copying {nbytes} bytes on the GPU (cuMemcpyDtoDAsync)")

    def memset_d8_async(self, dptr: int, value: int, nbytes: int) -> None:
        if nbytes:
            check(self.lib.cuMemsetD8Async(dptr, value, nbytes, self.stream), "setting GPU memory (cuMemsetD8Async)")

    def synchronize(self) -> None:
        """Waits until the stream's work is done."""
        check(self.lib.cuStreamSynchronize(self.stream), "waiting for the GPU (cuStreamSynchronize)")

    def load_module(self, ptx: str) -> Module:
        """Loads PTX text (the driver JIT-compiles it for this GPU); CudaError with the JIT's error log."""
        err, info = ctypes.create_string_buffer(_LOG_BYTES), ctypes.create_string_buffer(_LOG_BYTES)
        options = (ctypes.c_int * 4)(_JIT_ERROR_LOG, _JIT_ERROR_LOG_SIZE, _JIT_INFO_LOG, _JIT_INFO_LOG_SIZE)
        values = (ctypes.c_void_p * 4)(ctypes.addressof(err), _LOG_BYTES, ctypes.addressof(info), _LOG_BYTES)
        handle = ctypes.c_void_p()
        result = self.lib.cuModuleLoadDataEx(ctypes.byref(handle), ptx.encode() + b"\0", 4, options, values)
        if result != 0:
            log = err.value.decode(errors="replace").strip()
            raise CudaError(f"loading the PTX module (cuModuleLoadDataEx) failed: {error_text(result)}"
                            + (f"\nJIT error log:\n{log}" if log else ""))
        module = Module(self, handle.value or 0, info.value.decode(errors="replace").strip())
        self._modules.append(module)
        return module

    def prepare_launch(self, func: int, grid: Sequence[int], block: Sequence[int], args: Sequence[int],
                       shared_bytes: int = 0, name: str = "kernel") -> PreparedLaunch:
        """A launch of `func` with device pointers `args`, its parameter block built once (`.launch(stream)`)."""
        return PreparedLaunch(self.lib, func, grid, block, args, shared_bytes, name)

    def launch(self, func: int, grid: Sequence[int], block: Sequence[int], args: Sequence[int],
               shared_bytes: int = 0, name: str = "kernel") -> None:
        """Launches `func` on the stream with one pointer argument per entry of `args`."""
        self.prepare_launch(func, grid, block, args, shared_bytes, name).launch(self.stream)

    def capture(self, fn: Callable[[], None]) -> Graph:
        """Records the stream work `fn` issues (launches, copies on this context's stream) into a
        CUDA graph, instantiated for `Graph.launch`; nothing runs while capturing."""
        lib, graph = self.lib, ctypes.c_void_p()
        check(lib.cuStreamBeginCapture_v2(self.stream, _CAPTURE_THREAD_LOCAL), "beginning a CUDA graph capture")
        try:
            fn()
        except BaseException:
            if lib.cuStreamEndCapture(self.stream, ctypes.byref(graph)) == 0 and graph.value:
                lib.cuGraphDestroy(graph)
            raise
        check(lib.cuStreamEndCapture(self.stream, ctypes.byref(graph)), "ending the CUDA graph capture")
        exe = ctypes.c_void_p()
        result = lib.cuGraphInstantiateWithFlags(ctypes.byref(exe), graph, 0)
        if result != 0:
            lib.cuGraphDestroy(graph)
            check(result, "instantiating the CUDA graph (cuGraphInstantiateWithFlags)")
        out = Graph(self, graph.value or 0, exe.value or 0)
        self._graphs.append(out)
        return out

    def time_ms(self, fn: Callable[[], None], repeat: int) -> list[float]:
        """Milliseconds of GPU time of each of `repeat` calls of `fn` (stream work), between two events
        recorded around it, after one warm-up call."""
        start, end = ctypes.c_void_p(), ctypes.c_void_p()
        check(self.lib.cuEventCreate(ctypes.byref(start), 0), "creating a CUDA event")
        try:
            check(self.lib.cuEventCreate(ctypes.byref(end), 0), "creating a CUDA event")
            fn()
            times, ms = [], ctypes.c_float()
            for _ in range(repeat):
                check(self.lib.cuEventRecord(start, self.stream), "recording a CUDA event")
                fn()
                check(self.lib.cuEventRecord(end, self.stream), "recording a CUDA event")
                check(self.lib.cuEventSynchronize(end), "waiting for a CUDA event")
                check(self.lib.cuEventElapsedTime(ctypes.byref(ms), start, end), "reading a CUDA event time")
                times.append(ms.value)
            return times
        finally:
            for event in (start, end):
                if event.value:
                    self.lib.cuEventDestroy_v2(event)

    def close(self) -> None:
        """Waits for the stream, then frees the graphs, modules, memory and stream and releases the
        primary context. Best effort: the driver's results are not checked."""
        if self._handle is None:
            return
        lib = self.lib
        lib.cuCtxSetCurrent(self._handle)
        if self.stream:
            lib.cuStreamSynchronize(self.stream)
        for graph in list(self._graphs):
            graph.destroy()
        for module in self._modules:
            lib.cuModuleUnload(module.handle)
        for ptr in self._allocs:
            lib.cuMemFree_v2(ptr)
        if self.stream:
            lib.cuStreamDestroy_v2(self.stream)
        lib.cuDevicePrimaryCtxRelease_v2(self.device)
        self._modules, self._allocs, self.stream, self._handle = [], set(), 0, None

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
