"""gpu-split-stages: every loop nest of a kernel becomes a kernel of its own.

A CPU kernel runs its stages (a fused matmul's accumulation, then its
epilogue; a softmax's max, exp, sum and divide) one after the other on the
same threads. On a GPU the threads of one launch cannot wait for each other
across blocks, so each stage that reads what another wrote must be its own
launch. This pass splits each kernel `@k` with several top-level stages into
`@k_s0`, `@k_s1`, ...; a scratch buffer of `@k` (`loop.alloc "local"` at its
top level) becomes a `loop.alloc "global"` of the entry function that the
stages take as an argument (plan-memory places it in the arena), and a
top-level `loop.copy` becomes a copy in the entry function. Kernels of one
stage and no scratch are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.errors import CompileError

ENTRY = "main"


@dataclass(frozen=True)
class GpuSplitStagesPass(ModulePass):
    """Splits every kernel into one function per top-level stage.

    **Input:** a loop-level module (before plan-memory): `@main` calls kernels; a kernel's top
    level holds loop nests (`loop.for`, `loop.block`), `loop.copy`, scratch `loop.alloc "local"`
    and index/constant ops.

    **Output:** every kernel has one stage; scratch buffers are entry-level `loop.alloc "global"`
    passed as arguments; copies run in `@main`.

    Example:
    ```mlir
    func.func @softmax_0(%in0: memref<8x32xf32>, %out0: memref<8x32xf32>) {
      %0 = loop.alloc "local" : memref<8x1xf32>
      loop.for %i0 = 0 to 8 serial { ... store %0 ... }     // max
      loop.for %i0_1 = 0 to 8 serial { ... load %0 ... }    // exp, ...
    }
    ```
    becomes `@softmax_0_s0(%in0, %0)`, `@softmax_0_s1(%in0, %0, %out0)`, ... and `@main` allocates
    `%0` (`loop.alloc "global"`) and calls the stages in order.
    """

    name = "gpu-split-stages"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        funcs = {f.sym_name.data: f for f in op.ops if isinstance(f, func.FuncOp)}
        entry = funcs.get(ENTRY)
        if entry is None:
            return
        plans = {name: _plan(f) for name, f in funcs.items() if name != ENTRY and f.body.blocks}
        for call in [c for c in entry.walk() if isinstance(c, func.CallOp)]:
            name = call.callee.root_reference.data
            plan = plans.get(name)
            if plan is not None:
                _expand(call, plan)
        for name, plan in plans.items():
            if plan is None:
                continue
            at = funcs[name]
            for fn in plan.stage_funcs:  # in stage order, where the kernel was
                op.body.block.insert_op_after(fn, at)
                at = fn
            funcs[name].detach()
            funcs[name].erase()


@dataclass
class _Plan:
    """How one kernel splits: its scratch allocations, and per stage either a new function
    (with the kernel arguments and scratch buffers it takes) or a copy (source, destination)."""

    args: list[SSAValue]
    scratch: list[loop.AllocOp]
    stages: list[tuple[str, func.FuncOp | None, list[SSAValue]]]

    @property
    def stage_funcs(self) -> list[func.FuncOp]:
        return [fn for _, fn, _ in self.stages if fn is not None]


_PURE = ("arith.", "math.")


def _plan(f: func.FuncOp) -> _Plan | None:
    ops = list(f.body.block.ops)
    scratch = [o for o in ops if isinstance(o, loop.AllocOp)]
    stages = [o for o in ops if not isinstance(o, (loop.AllocOp, func.ReturnOp)) and not o.name.startswith(_PURE)]
    if len(stages) <= 1 and not scratch and not any(isinstance(o, loop.CopyOp) for o in stages):
        return None
    if any(o.results for o in stages):
        bad = next(o for o in stages if o.results)
        raise CompileError(f"gpu-split-stages: @{f.sym_name.data} has a top-level '{bad.name}' with results; "
                           "a kernel's stages must write buffers")
    name = f.sym_name.data
    params = list(f.body.block.args) + [a.result for a in scratch]
    out: list[tuple[str, func.FuncOp | None, list[SSAValue]]] = []
    for k, stage in enumerate(stages):
        if isinstance(stage, loop.CopyOp):
            out.append(("copy", None, [stage.source, stage.dest]))
            continue
        used = _used_values(stage)
        args = [p for p in params if p in used]
        out.append(("call", _stage_func(f"{name}_s{k}", stage, args, used, f), args))
    return _Plan(list(f.body.block.args), scratch, out)


def _used_values(op: Operation) -> set[SSAValue]:
    """Values defined outside `op` that it (or any op nested in it) uses (one walk)."""
    inner: set[SSAValue] = set()
    operands: list[SSAValue] = []
    for o in op.walk():
        inner.update(o.results)
        for r in o.regions:
            for b in r.blocks:
                inner.update(b.args)
        operands.extend(o.operands)
    return {v for v in operands if v not in inner}


def _stage_func(name: str, stage: Operation, args: list[SSAValue], used: set[SSAValue],
                parent: func.FuncOp) -> func.FuncOp:
    """A function of `args` holding a clone of `stage` and of the top-level pure ops it uses (`used`: the
    values defined outside the stage that it reads)."""
    block = Block(arg_types=[a.type for a in args])
    mapping: dict[SSAValue, SSAValue] = dict(zip(args, block.args))
    for a, new in zip(args, block.args):
        new.name_hint = a.name_hint
    needed = _pure_closure(used, set(args))
    for o in parent.body.block.ops:
        if o in needed:
            block.add_op(o.clone(value_mapper=mapping))
    block.add_op(stage.clone(value_mapper=mapping))
    block.add_op(func.ReturnOp())
    fn = func.FuncOp(name, ([a.type for a in args], []), Region(block))
    fn.attributes.update({k: v for k, v in parent.attributes.items() if k.startswith("graph.")})
    return fn


def _pure_closure(used: set[SSAValue], args: set[SSAValue]) -> set[Operation]:
    """The top-level pure ops whose results a stage uses (`used`, less its arguments), with the ones those use."""
    needed: set[Operation] = set()
    todo = [v for v in used if v not in args]
    while todo:
        v = todo.pop()
        o = v.owner
        if isinstance(o, Operation) and o not in needed:
            if not o.name.startswith(_PURE):
                raise CompileError(f"gpu-split-stages: a stage uses the result of '{o.name}', which is neither a "
                                   "kernel argument, a scratch buffer nor index arithmetic")
            needed.add(o)
            todo.extend(o.operands)
    return needed


def _expand(call: func.CallOp, plan: _Plan) -> None:
    """Replaces `call` by entry-level scratch allocations and the stages' calls and copies."""
    b = Builder(InsertPoint.before(call))
    mapping: dict[SSAValue, SSAValue] = dict(zip(plan.args, call.operands))
    for alloc in plan.scratch:
        new = b.insert(loop.AllocOp(alloc.result.type, "global"))  # type: ignore[arg-type]
        mapping[alloc.result] = new.result
    for kind, fn, vals in plan.stages:
        mapped = [mapping[v] for v in vals]
        if kind == "copy":
            b.insert(loop.CopyOp(mapped[0], mapped[1]))
        else:
            assert fn is not None
            b.insert(func.CallOp(fn.sym_name.data, mapped, []))
    call.detach()
    call.erase()

