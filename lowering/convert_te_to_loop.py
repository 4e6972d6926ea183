"""convert-te-to-loop: naive loop nests over buffers for every te kernel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, builtin, func
from xdsl.dialects.builtin import IntegerType, MemRefType, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import graph, loop, te
from ziggurat.dtypes import scalar_type
from ziggurat.errors import CompileError, ZigguratError
from ziggurat.lowering.locations import SOURCE_NODES, name_source
from ziggurat.lowering.te_inline import clamp_indices

COMBINE = {
    "add": arith.AddfOp,
    "mul": arith.MulfOp,
    "max": arith.MaximumfOp,
    "min": arith.MinimumfOp,
}
INT_COMBINE = {
    "add": arith.AddiOp,
    "mul": arith.MuliOp,
    "max": arith.MaxSIOp,
    "min": arith.MinSIOp,
    "umax": arith.MaxUIOp,
    "umin": arith.MinUIOp,
}


def memref_of(t: TensorType) -> MemRefType:
    """The buffer type of a tensor type; integer elements become signless."""
    return MemRefType(scalar_type(t.element_type), t.get_shape())


def _combine(combiner: str, elt) -> type[Operation]:
    table = INT_COMBINE if isinstance(elt, IntegerType) else COMBINE
    if combiner not in table:
        raise CompileError(f"convert-te-to-loop: combiner '{combiner}' is not defined on {elt} elements")
    return table[combiner]


def _loop_nest(b: Builder, extents: Sequence[int], hint: str) -> tuple[Builder, list[SSAValue]]:
    """Inserts serial loops over `extents`; returns a builder inside the innermost."""
    ivs: list[SSAValue] = []
    for n, extent in enumerate(extents):
        f = b.insert(loop.ForOp(0, extent))
        f.iv.name_hint = f"{hint}{n}"
        ivs.append(f.iv)
        b = Builder(InsertPoint.at_end(f.body.block))
    return b, ivs


class _BodyLowering:
    """Clones a te body into a loop.block, turning reads into loads."""

    def __init__(self, buffers: dict[SSAValue, SSAValue]):
        self.buffers = buffers

    def clone_body(self, src: Block, dst: loop.BlockOp, extents: Sequence[int]) -> tuple[Builder, SSAValue]:
        """Returns the builder at the block's end and the value te.yield gave.

        `extents` are the iteration counts of the block's variables.
        """
        mapping: dict[SSAValue, SSAValue] = dict(zip(src.args, dst.vars))
        vars_ = dict(zip(dst.vars, extents))
        b = Builder(InsertPoint.at_end(dst.body.block))
        yielded: SSAValue | None = None
        for op in src.ops:
            if isinstance(op, te.YieldOp):
                yielded = mapping[op.value]
            elif isinstance(op, te.ReadOp):
                mapping[op.result] = self._read(b, op, mapping, vars_)
            else:
                b.insert(op.clone(value_mapper=mapping))
        assert yielded is not None, "te bodies end with te.yield (verified)"
        return b, yielded

    def _read(self, b: Builder, op: te.ReadOp, mapping, vars_) -> SSAValue:
        buf = self.buffers[op.tensor]
        idx = [mapping[i] for i in op.indices]
        if op.pad is None:
            return b.insert(loop.LoadOp(buf, idx)).result
        # Out-of-bounds reads yield the pad value: clamp the index so the load
        # stays in bounds, then select. A bare block variable whose extent fits
        # the dimension is in range already.
        shape = buf.type.get_shape()  # type: ignore[attr-defined]
        safe, inside = clamp_indices(b, idx, shape, lambda i, size: vars_.get(i, size + 1) <= size)
        value = b.insert(loop.LoadOp(buf, safe)).result
        if inside is None:
            return value
        pad = b.insert(arith.ConstantOp(op.pad)).result
        return b.insert(arith.SelectOp(inside, value, pad)).result


def lower_compute(b: Builder, op: te.ComputeOp, out: SSAValue, lowering: _BodyLowering) -> None:
    shape = op.result.type.get_shape()  # type: ignore[attr-defined]
    inner, ivs = _loop_nest(b, shape, "i")
    blk = inner.insert(loop.BlockOp(op.tag.data, "S" * len(shape), ivs))
    bb, value = lowering.clone_body(op.body.block, blk, shape)
    bb.insert(loop.StoreOp(value, out, list(blk.vars)))


def lower_reduce(b: Builder, op: te.ReduceOp, out: SSAValue, lowering: _BodyLowering) -> None:
    shape = op.result.type.get_shape()  # type: ignore[attr-defined]
    inner, ivs = _loop_nest(b, shape, "i")
    init_blk = inner.insert(loop.BlockOp(f"{op.tag.data}_init", "S" * len(shape), ivs))
    ib = Builder(InsertPoint.at_end(init_blk.body.block))
    init = ib.insert(arith.ConstantOp(op.init)).result
    ib.insert(loop.StoreOp(init, out, list(init_blk.vars)))
    red, rvs = _loop_nest(inner, op.extents, "r")
    kinds = "S" * len(shape) + "R" * len(rvs)
    blk = red.insert(loop.BlockOp(op.tag.data, kinds, [*ivs, *rvs]))
    bb, value = lowering.clone_body(op.body.block, blk, [*shape, *op.extents])
    spatial = list(blk.vars[: len(shape)])
    acc = bb.insert(loop.LoadOp(out, spatial)).result
    combined = bb.insert(_combine(op.combiner.data, acc.type)(acc, value)).results[0]
    bb.insert(loop.StoreOp(combined, out, spatial))


def lower_kernel(kernel: func.FuncOp) -> func.FuncOp:
    """te function over tensors -> loop function over buffers (outputs last)."""
    ret = kernel.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    in_types = [memref_of(t) for t in kernel.function_type.inputs.data]  # type: ignore[arg-type]
    out_types = [memref_of(v.type) for v in ret.arguments]  # type: ignore[arg-type]
    block = Block(arg_types=[*in_types, *out_types])
    ins, outs = block.args[: len(in_types)], block.args[len(in_types) :]
    for i, a in enumerate(ins):
        a.name_hint = f"in{i}"
    for i, a in enumerate(outs):
        a.name_hint = f"out{i}"
    buffers: dict[SSAValue, SSAValue] = dict(zip(kernel.body.block.args, ins))
    destination: dict[SSAValue, SSAValue] = {}
    for v, o in zip(ret.arguments, outs):
        destination.setdefault(v, o)
    b = Builder(InsertPoint.at_end(block))
    lowering = _BodyLowering(buffers)
    for op in kernel.body.block.ops:
        if isinstance(op, (te.ComputeOp, te.ReduceOp)):
            out = destination.get(op.result)
            if out is None:
                out = b.insert(loop.AllocOp(memref_of(op.result.type), "local")).result  # type: ignore[arg-type]
            buffers[op.result] = out
            (lower_compute if isinstance(op, te.ComputeOp) else lower_reduce)(b, op, out, lowering)  # type: ignore[operator]
        elif isinstance(op, func.ReturnOp):
            for v, o in zip(op.arguments, outs):
                if buffers[v] is not o:
                    b.insert(loop.CopyOp(buffers[v], o))
        else:
            raise CompileError(f"convert-te-to-loop: unexpected '{op.name}' at the top of te kernel @{kernel.sym_name.data}")
    b.insert(func.ReturnOp())
    new = func.FuncOp(kernel.sym_name.data, ([*in_types, *out_types], []), Region(block))
    if SOURCE_NODES in kernel.attributes:
        new.attributes[SOURCE_NODES] = kernel.attributes[SOURCE_NODES]
    return new


def lower_model(model: func.FuncOp) -> func.FuncOp:
    """Model function on tensors -> entry function on buffers (outputs last)."""
    ret = model.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    in_types = [memref_of(t) for t in model.function_type.inputs.data]  # type: ignore[arg-type]
    out_types = [memref_of(v.type) for v in ret.arguments]  # type: ignore[arg-type]
    block = Block(arg_types=[*in_types, *out_types])
    ins, outs = block.args[: len(in_types)], block.args[len(in_types) :]
    buffers: dict[SSAValue, SSAValue] = {}
    for old, new in zip(model.body.block.args, ins):
        new.name_hint = old.name_hint
        buffers[old] = new
    destination: dict[SSAValue, SSAValue] = {}
    for v, o in zip(ret.arguments, outs):
        destination.setdefault(v, o)
    b = Builder(InsertPoint.at_end(block))
    for op in model.body.block.ops:
        if isinstance(op, graph.ConstantOp):
            buffers[op.result] = b.insert(loop.ConstBufferOp(op.ref.data, memref_of(op.result.type))).result  # type: ignore[arg-type]
        elif isinstance(op, graph.CallKernelOp):
            out = destination.get(op.result)
            if out is None:
                out = b.insert(loop.AllocOp(memref_of(op.result.type))).result  # type: ignore[arg-type]
                out.name_hint = op.result.name_hint
            buffers[op.result] = out
            b.insert(func.CallOp(op.callee.data, [*(buffers[a] for a in op.args), out], []))
        elif isinstance(op, func.ReturnOp):
            for v, o in zip(op.arguments, outs):
                if buffers[v] is not o:
                    b.insert(loop.CopyOp(buffers[v], o))
        else:
            raise CompileError(
                f"convert-te-to-loop: '{op.name}' is still in @{model.sym_name.data}; "
                "run convert-graph-to-te first"
            )
    b.insert(func.ReturnOp())
    new = func.FuncOp(model.sym_name.data, ([*in_types, *out_types], []), Region(block))
    new.attributes |= model.attributes
    return new


def _is_te_kernel(f: func.FuncOp) -> bool:
    return any(isinstance(op, (te.ComputeOp, te.ReduceOp)) for op in f.body.block.ops)


def _is_model(f: func.FuncOp) -> bool:
    return any(op.dialect_name() == "graph" for op in f.body.block.ops)


@dataclass(frozen=True)
class ConvertTeToLoopPass(ModulePass):
    """Turns te kernels into naive loop nests and the model into kernel calls.

    **Input:** the output of convert-graph-to-te: te kernel functions over
    tensors, and a model function of `graph.constant`/`graph.call_kernel`.

    **Output:** every function works on buffers in destination-passing style
    (results become trailing `memref` arguments, the function returns
    nothing).
    - `te.compute` -> one serial `loop.for` per dim around a
      `loop.block "<tag>"` with spatial variables that stores the element.
    - `te.reduce` -> spatial loops; inside, a `"<tag>_init"` block stores the
      init value, then reduction loops around an update block (`S...R...`)
      that loads the accumulator, combines and stores.
    - `te.read` -> `loop.load`; a read with `pad` clamps its index and selects
      the pad value outside the bounds.
    - Intermediates of a kernel become `loop.alloc "local"`; in the model,
      `graph.constant` -> `loop.const_buffer`, each call gets a
      `loop.alloc "global"` destination (or the output argument it returns).

    Example: `te.compute "relu" (%i0) : tensor<4xf32>` becomes
    ```mlir
    loop.for %i0 = 0 to 4 serial {
      loop.block "relu" [S %0 = %i0] {
        %1 = loop.load %in0[%0] : memref<4xf32>
        ...
        loop.store %3, %out0[%0] : memref<4xf32>
      }
    }
    ```
    """

    name = "convert-te-to-loop"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for f in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            if _is_te_kernel(f):
                try:
                    new = lower_kernel(f)
                except ZigguratError as err:
                    raise name_source(err, f) from None
            elif _is_model(f):
                new = lower_model(f)
            else:
                continue
            op.body.block.insert_op_before(new, f)
            op.body.block.erase_op(f)
