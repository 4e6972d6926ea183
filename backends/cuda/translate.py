"""Translate a GPU-scheduled loop-level module to NVPTX LLVM IR and a launch list.

The input is what the CUDA pipeline leaves (lowering/pipelines.py
`cuda_pipeline`): `@main` allocates buffers and calls kernels; every kernel
is one loop nest whose `blockIdx.x` / `threadIdx.x` loops (gpu-default-schedule)
say how it is launched. The output is

* an `llvmlite.ir.Module` for `nvptx64-nvidia-cuda`: each kernel becomes a
  `ptx_kernel` function taking one global pointer per memref (`noalias`
  unless a call passes it one buffer twice: plan-memory's in-place reuse); a `blockIdx.x`
  loop's variable is `%ctaid.x`, a `threadIdx.x` loop's `%tid.x`, and a
  `gpu.limit` on the block loop skips the threads past the loop's end; every
  other loop runs serially in its thread (the op handlers are the LLVM
  backend's, with GPU versions of the math functions, backends/cuda/math.py);
  a nest marked `gpu.gemm` (transforms/gpu/gpu_gemm.py) is implemented by
  the GEMM template instead: on tensor cores (backends/cuda/mma.py) where its
  operands are float16 and the shape fits, else backends/cuda/gemm.py;
* a `GpuProgram` skeleton (runtime/cuda_program.py): `@main`'s calls become
  `Launch`es (grid and block from the kernel's loops), its `loop.copy`s
  `Copy`s, its `loop.alloc`s arena offsets and its `loop.const_buffer`s weight
  slots. The host runs no generated code: runtime/cuda.py replays the steps.

```python
ir_module, info = translate_gpu_module(module, "sm_90")
info.program.steps   # [Launch("relu_0", (4, 1, 1), (256, 1, 1), (BufRef("input", 0), BufRef("output", 0)))]
```
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

from llvmlite import ir
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation

from ziggurat.backends.cuda.gemm import emit_gemm
from ziggurat.backends.cuda.implicit import Affine
from ziggurat.backends.cuda.math import GPU_MATH_HANDLERS
from ziggurat.backends.cuda.mma import emit_mma, mma_fits
from ziggurat.backends.llvm.lltypes import I32, I64, VOID, byte_size
from ziggurat.backends.llvm.memory import MEMORY_HANDLERS
from ziggurat.backends.llvm.options import LLVMOptions, ModuleInfo
from ziggurat.backends.llvm.translate import STRUCTURE_HANDLERS, FuncState, Translator
from ziggurat.dialects import loop
from ziggurat.errors import CompileError
from ziggurat.runtime.cuda_program import BufRef, Copy, GpuProgram, Launch
from ziggurat.target import CUDA_TRIPLE
from ziggurat.transforms.gpu.gpu_gemm import GEMM_ATTR, read_gemm
from ziggurat.transforms.gpu.implicit_gemm import IGEMM_ATTR, read_igemm

BLOCK_AXIS, THREAD_AXIS = loop.GPU_LOOP_KINDS
LIMIT_ATTR = "gpu.limit"
# NVPTX's data layout (LLVM's for nvptx64 with 64-bit generic pointers)
DATA_LAYOUT = "e-p3:32:32-p4:32:32-p5:32:32-p6:32:32-p7:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"
STACK_LIMIT = 4096  # bytes of per-thread scratch (local memory) a kernel may allocate


@dataclass
class GpuModuleInfo(ModuleInfo):
    """`ModuleInfo` plus the launch list (its `ptx` is filled in by backends/cuda/build.py)."""

    program: GpuProgram = field(default_factory=lambda: GpuProgram("", ""))


@dataclass
class _Launch:
    """What translating a kernel found: its grid and block sizes."""

    grid: int = 1
    block: int = 1


class GpuTranslator(Translator):
    """The LLVM backend's translator, emitting NVPTX kernels and a launch list instead of host code."""

    backend = "cuda"

    def __init__(self, arch: str):
        super().__init__(LLVMOptions(num_threads=1, cpu=arch, features="", fast_math=("contract",)))
        self.arch = arch
        self.module.triple = CUDA_TRIPLE
        self.module.data_layout = DATA_LAYOUT
        self.info = GpuModuleInfo()
        self.handlers = {**self.handlers, **GPU_MATH_HANDLERS, "loop.for": _gpu_for, "loop.alloc": _gpu_alloc}
        self.launch_of: dict[str, _Launch] = {}
        self._current: _Launch | None = None
        self._limit: tuple[int, ir.Value] | None = None  # a block loop's gpu.limit and its variable

    def run(self, module: ModuleOp) -> tuple[ir.Module, GpuModuleInfo]:  # type: ignore[override]
        funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
        other = [op for op in module.ops if not isinstance(op, func.FuncOp)]
        if other:
            raise CompileError(f"cuda backend: top-level op '{other[0].name}' is not supported; expected func.func")
        entry = next((f for f in funcs if f.sym_name.data == self.options.entry), None)
        if entry is None:
            raise CompileError(f"cuda backend: the module has no entry function @{self.options.entry}")
        self.aliased = _aliased_kernels(entry)
        for fop in funcs:
            if fop is not entry and fop.body.blocks:
                self._kernel(fop)
        self._entry_steps(entry)
        self.finish_slots()
        self.info.program.arch = self.arch
        self.info.program.arena_bytes = self.info.arena_size
        self.info.program.const_names = list(self.info.const_names)
        return self.module, self.info  # type: ignore[return-value]

    # -- kernels ---------------------------------------------------------------

    def _kernel(self, fop: func.FuncOp) -> None:
        name = fop.sym_name.data
        ins = fop.function_type.inputs.data
        bad = [str(t) for t in ins if not isinstance(t, MemRefType)]
        if bad or fop.function_type.outputs.data:
            raise CompileError(f"cuda backend: kernel @{name} must take only memrefs and return nothing "
                               f"(got {', '.join(bad) or 'results'})")
        fn = ir.Function(self.module, ir.FunctionType(VOID, [self.ty(t) for t in ins]), name)
        fn.calling_convention = "ptx_kernel"
        fn.attributes.add("nounwind")
        if name not in self.aliased:  # no call gives it one buffer twice (plan-memory's in-place reuse)
            for a in fn.args:
                a.add_attribute("noalias")
        self.funcs[name] = fn
        gemm = next((o.attributes[GEMM_ATTR] for o in fop.body.block.ops if GEMM_ATTR in o.attributes), None)
        igemm = next((o.attributes[IGEMM_ATTR] for o in fop.body.block.ops if IGEMM_ATTR in o.attributes), None)
        if gemm is not None or igemm is not None:  # the nest is the description; the GEMM template implements it
            if igemm is not None:
                spec = read_igemm(igemm)  # type: ignore[arg-type]
                grid, block = emit_gemm(self.module, fn, spec, self.decl, Affine(spec))
            else:
                spec = read_gemm(gemm)  # type: ignore[arg-type]
                emit = emit_mma if mma_fits(spec, self.arch) else emit_gemm
                grid, block = emit(self.module, fn, spec, self.decl)
            self.launch_of[name] = _Launch(grid, block)
            return
        f = FuncState(fn)
        for arg, value in zip(fop.body.block.args, fn.args):
            f.vals[arg] = value
        self._current = self.launch_of[name] = _Launch()
        self.block(f, fop.body.block)
        if not f.b.block.is_terminated:
            self.ret(f, None)
        f.entry_b.branch(f.start)
        self._current = None

    def special(self, f: FuncState, reg: str) -> ir.Value:
        """A PTX special register (`tid.x`, `ctaid.x`) as i64."""
        fn = self.decl.function(f"llvm.nvvm.read.ptx.sreg.{reg}", I32, [])
        return f.b.zext(f.b.call(fn, []), I64)

    # -- the entry function: the launch list ---------------------------------------

    def _entry_steps(self, entry: func.FuncOp) -> None:
        block = entry.body.block
        names = entry.attributes.get("graph.input_names")
        n_in = len(names.data) if names is not None else len(block.args)  # type: ignore[attr-defined]
        refs = {arg: BufRef("input", i) if i < n_in else BufRef("output", i - n_in) for i, arg in enumerate(block.args)}
        steps = self.info.program.steps
        for op in block.ops:
            if isinstance(op, loop.ConstBufferOp):
                refs[op.result] = BufRef("const", self.const_slot(op.ref.data))
            elif isinstance(op, loop.AllocOp):
                nbytes = op.result.type.element_count() * byte_size(self.ty(op.result.type).pointee)  # type: ignore[attr-defined]
                refs[op.result] = BufRef("arena", self.arena_slot(op, nbytes))
            elif isinstance(op, func.CallOp):
                name = op.callee.root_reference.data
                shape = self.launch_of.get(name)
                if shape is None:
                    raise CompileError(f"cuda backend: @main calls @{name}, which is not a kernel of the module")
                steps.append(Launch(name, (shape.grid, 1, 1), (shape.block, 1, 1), tuple(_ref(refs, v, op) for v in op.operands)))
            elif isinstance(op, loop.CopyOp):
                nbytes = op.source.type.element_count() * byte_size(self.ty(op.source.type).pointee)  # type: ignore[attr-defined]
                steps.append(Copy(_ref(refs, op.dest, op), _ref(refs, op.source, op), nbytes))
            elif isinstance(op, func.ReturnOp):
                break
            elif not (op.name.startswith("arith.") and not any(r.uses for r in op.results)):
                raise CompileError(f"cuda backend: '{op.name}' in @main is not supported on the GPU: the entry function "
                                   "may only allocate buffers, bind weights, call kernels and copy buffers")


def _aliased_kernels(entry: func.FuncOp) -> set[str]:
    """Kernels that some call of `entry` passes one buffer twice: the same value, or allocations that
    plan-memory placed at the same arena offset (an elementwise stage written in place). Their
    parameters get no `noalias` (nor loads through the read-only, non-coherent path)."""
    out = set()
    for call in entry.body.block.ops:
        if isinstance(call, func.CallOp):
            seen = set()
            for v in call.operands:
                key = v
                owner = v.owner
                if isinstance(owner, loop.AllocOp) and "arena_offset" in owner.attributes:
                    key = ("arena", owner.attributes["arena_offset"].value.data)  # type: ignore[attr-defined]
                if key in seen:
                    out.add(call.callee.root_reference.data)
                seen.add(key)
    return out


def _ref(refs: dict, value, op: Operation) -> BufRef:
    r = refs.get(value)
    if r is None:
        raise CompileError(f"cuda backend: '{op.name}' in @main takes {value.type}, which is not a buffer "
                           "(an input, output, weight or allocation); kernels take buffers only")
    return r


# -- loops -------------------------------------------------------------------------


def _gpu_for(t: GpuTranslator, f: FuncState, op: Operation) -> None:
    kind = op.kind.data  # type: ignore[attr-defined]
    if kind not in loop.GPU_LOOP_KINDS:
        STRUCTURE_HANDLERS["loop.for"](t, f, op)  # serial in its thread (num_threads is 1: never OpenMP)
        return
    lb, ub, step = op.bounds  # type: ignore[attr-defined]
    body = op.regions[0].block
    shape = t._current
    if shape is None or lb != 0 or step != 1:
        raise CompileError(f"cuda backend: a {kind} loop ({lb} to {ub} step {step}) must run from 0 with step 1 "
                           "in a kernel")
    trips = ub
    if kind == BLOCK_AXIS:
        shape.grid = trips
        iv = t.special(f, "ctaid.x")
        limit = op.attributes.get(LIMIT_ATTR)
        t._limit = None if limit is None else (limit.value.data, iv)  # type: ignore[attr-defined]
        f.vals[body.args[0]] = iv
        t.block(f, body)
        t._limit = None
        return
    shape.block = trips
    iv = t.special(f, "tid.x")
    f.vals[body.args[0]] = iv
    if t._limit is None:
        t.block(f, body)
        return
    limit, biv = t._limit
    b = f.b
    inside = b.icmp_unsigned("<", b.add(b.mul(biv, I64(trips)), iv), I64(limit))
    then = f.fn.append_basic_block("in_range")
    done = f.fn.append_basic_block("past_end")
    b.cbranch(inside, then, done)
    b.position_at_end(then)
    t.block(f, body)
    if not b.block.is_terminated:
        b.branch(done)
    b.position_at_end(done)


def _gpu_alloc(t: GpuTranslator, f: FuncState, op: Operation) -> None:
    """A kernel's scratch (`loop.alloc` inside a nest: per thread, in local memory) up to STACK_LIMIT bytes;
    larger scratch has no device allocator to come from (the LLVM backend would call aligned_alloc)."""
    res = op.results[0]
    nbytes = res.type.element_count() * byte_size(t.ty(res.type).pointee)  # type: ignore[attr-defined]
    if nbytes > STACK_LIMIT:
        raise CompileError(f"cuda backend: @{f.root.fn.name} allocates {nbytes} bytes of scratch per thread; a GPU "
                           f"kernel may have at most {STACK_LIMIT} (split the nest or hoist the buffer: "
                           "gpu-split-stages moves a kernel's top-level scratch to the arena)")
    MEMORY_HANDLERS["loop.alloc"](t, f, op)


def translate_gpu_module(module: ModuleOp, arch: str) -> tuple[ir.Module, GpuModuleInfo]:
    """NVPTX LLVM IR for `module`'s kernels and the launch list of its entry (cycle collector paused, as in
    backends/llvm/translate.py)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return GpuTranslator(arch).run(module)
    finally:
        if was_enabled:
            gc.enable()
