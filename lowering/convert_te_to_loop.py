"""convert-te-to-loop: naive loop nests over buffers for every te kernel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, builtin, func
from xdsl.dialects.builtin import ArrayAttr, IndexType, IntegerAttr, IntegerType, MemRefType, StringAttr, TensorType, UnitAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import graph, loop, te
from ziggurat.dialects.sym import SYMBOLS_ATTR, is_symbolic_type, memref_of_shape, shape_of, type_symbols
from ziggurat.dtypes import scalar_type
from ziggurat.errors import CompileError, ZigguratError
from ziggurat.lowering.locations import SOURCE_NODES, name_source
from ziggurat.lowering.te_inline import clamp_indices
from ziggurat.transforms.schedule.mark import SCHEDULED
from ziggurat.transforms.te.te_row_blocks import blocks_of
from ziggurat.symbolic import Dim, Sym

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
    """The buffer type of a tensor type; integer elements become signless, symbolic dims stay
    symbolic (`#sym.dims`)."""
    return memref_of_shape(scalar_type(t.element_type), shape_of(t))


def kernel_symbols(f: func.FuncOp) -> list[str]:
    """The symbols a te kernel or the model function uses (in its types, reduction extents and
    `te.sym` ops), sorted: the trailing `index` arguments its loop form takes."""
    found: set[str] = set()
    for t in [*f.function_type.inputs.data, *f.function_type.outputs.data]:
        found |= type_symbols(t)
    for op in f.walk():
        for r in op.results:
            found |= type_symbols(r.type)
        if isinstance(op, te.ReduceOp):
            found |= {s for e in op.extents if isinstance(e, Sym) for s in e.symbols}
        elif isinstance(op, te.SymOp):
            v = op.value
            found |= v.symbols if isinstance(v, Sym) else set()
    return sorted(found)


class _Extents:
    """The `index` values of extents in a function with symbol arguments, built once each at
    the function's start (arith on the symbols)."""

    def __init__(self, block: Block, symbols: dict[str, SSAValue]):
        # Every value goes before one anchor at the block's start, so it dominates whatever
        # loop asks for it, however late (a te.sym deep in a body).
        anchor = arith.ConstantOp(IntegerAttr(0, IndexType()))
        block.insert_op_before(anchor, block.first_op) if block.first_op else block.add_op(anchor)
        self.b = Builder(InsertPoint.before(anchor))
        self.symbols = symbols
        self.memo: dict[Dim, SSAValue] = {}

    def __call__(self, d: Dim) -> int | SSAValue:
        if not isinstance(d, Sym):
            return int(d)
        hit = self.memo.get(d)
        if hit is not None:
            return hit
        b = self.b
        total: SSAValue | None = None
        for monomial, coef in d.terms.items():
            term: SSAValue | None = None
            for s in monomial:
                x = self.symbols[s]
                term = x if term is None else b.insert(arith.MuliOp(term, x)).result
            c = coef if term is None or coef != 1 else None
            if c is not None:
                k = b.insert(arith.ConstantOp(IntegerAttr(c, IndexType()))).result
                term = k if term is None else b.insert(arith.MuliOp(term, k)).result
            assert term is not None
            total = term if total is None else b.insert(arith.AddiOp(total, term)).result
        assert total is not None
        if total.name_hint is None:
            total.name_hint = "n"
        self.memo[d] = total
        return total


def _with_symbols(block: Block, names: list[str]) -> dict[str, SSAValue]:
    """Appends one `index` argument per symbol to `block`."""
    out = {}
    for name in names:
        a = block.insert_arg(IndexType(), len(block.args))
        a.name_hint = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
        out[name] = a
    return out


def _symbols_attr(names: list[str]) -> Attribute:
    return ArrayAttr([StringAttr(n) for n in names])


def _combine(combiner: str, elt) -> type[Operation]:
    table = INT_COMBINE if isinstance(elt, IntegerType) else COMBINE
    if combiner not in table:
        raise CompileError(f"convert-te-to-loop: combiner '{combiner}' is not defined on {elt} elements")
    return table[combiner]


def _loop_nest(b: Builder, extents: Sequence[Dim], hint: str, values: _Extents | None = None
               ) -> tuple[Builder, list[SSAValue]]:
    """Inserts serial loops over `extents` (a symbolic one runs to its value from `values`);
    returns a builder inside the innermost."""
    ivs: list[SSAValue] = []
    for n, extent in enumerate(extents):
        if isinstance(extent, Sym) and values is None:
            raise CompileError(f"convert-te-to-loop: the extent '{extent}' is symbolic, outside a kernel")
        f = b.insert(loop.ForOp(0, values(extent) if values is not None else extent))
        f.iv.name_hint = f"{hint}{n}"
        ivs.append(f.iv)
        b = Builder(InsertPoint.at_end(f.body.block))
    return b, ivs


class _BodyLowering:
    """Clones a te body into a loop.block, turning reads into loads."""

    def __init__(self, buffers: dict[SSAValue, SSAValue], extents: _Extents | None = None):
        self.buffers = buffers
        self.extents = extents

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
            elif isinstance(op, te.SymOp):
                value = self.extents(op.value) if self.extents is not None else op.value
                if isinstance(value, int):
                    value = b.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).result
                mapping[op.result] = value
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
        shape = shape_of(buf.type)

        def fits(i: SSAValue, size) -> bool:
            extent = vars_.get(i)
            if extent is None:
                return False
            if isinstance(extent, Sym) or isinstance(size, Sym):
                return Sym.lift(extent) == size  # the loop runs exactly over the dim
            return extent <= size

        if any(isinstance(d, Sym) for d in shape):
            if self.extents is None:
                raise CompileError(f"convert-te-to-loop: a padded read of {buf.type} outside a kernel over its symbols")
            sizes = [self.extents(d) for d in shape]
            safe, inside = clamp_indices(b, idx, sizes, lambda i, n: fits(i, shape[idx.index(i)] if i in idx else n))
        else:
            safe, inside = clamp_indices(b, idx, shape, fits)
        value = b.insert(loop.LoadOp(buf, safe)).result
        if inside is None:
            return value
        pad = b.insert(arith.ConstantOp(op.pad)).result
        return b.insert(arith.SelectOp(inside, value, pad)).result


def lower_compute(b: Builder, op: te.ComputeOp, out: SSAValue, lowering: _BodyLowering) -> None:
    shape = shape_of(op.result.type)
    inner, ivs = _loop_nest(b, shape, "i", lowering.extents)
    blk = inner.insert(loop.BlockOp(op.tag.data, "S" * len(shape), ivs))
    bb, value = lowering.clone_body(op.body.block, blk, shape)
    bb.insert(loop.StoreOp(value, out, list(blk.vars)))


def lower_reduce(b: Builder, op: te.ReduceOp, out: SSAValue, lowering: _BodyLowering) -> None:
    shape = shape_of(op.result.type)
    inner, ivs = _loop_nest(b, shape, "i", lowering.extents)
    init_blk = inner.insert(loop.BlockOp(f"{op.tag.data}_init", "S" * len(shape), ivs))
    ib = Builder(InsertPoint.at_end(init_blk.body.block))
    init = ib.insert(arith.ConstantOp(op.init)).result
    ib.insert(loop.StoreOp(init, out, list(init_blk.vars)))
    red, rvs = _loop_nest(inner, op.extents, "r", lowering.extents)
    kinds = "S" * len(shape) + "R" * len(rvs)
    blk = red.insert(loop.BlockOp(op.tag.data, kinds, [*ivs, *rvs]))
    bb, value = lowering.clone_body(op.body.block, blk, [*shape, *op.extents])
    spatial = list(blk.vars[: len(shape)])
    acc = bb.insert(loop.LoadOp(out, spatial)).result
    combined = bb.insert(_combine(op.combiner.data, acc.type)(acc, value)).results[0]
    bb.insert(loop.StoreOp(combined, out, spatial))


def _lower_driver(kernel: func.FuncOp, block: Block, ins, outs, extents: _Extents, sizes) -> None:
    """The body of a kernel over symbolic rows that te-row-blocks gave static block kernels
    (transforms/te/te_row_blocks.py): its rows in blocks of the largest size (a parallel loop),
    the rest by the smaller sizes in turn, each block a `loop.rows` view of every row buffer
    passed to `<kernel>_rows<R>`."""
    from ziggurat.transforms.te.te_row_blocks import block_name

    buffers = [*ins, *outs]
    first = next(v for v in buffers if is_symbolic_type(v.type))
    shape = shape_of(first.type)
    p = next(k for k, d in enumerate(shape) if not isinstance(d, Sym))
    total: Dim = 1
    for d in shape[:p]:
        total = total * d
    rows = extents(total)
    b = Builder(InsertPoint.at_end(block))
    pos: SSAValue = b.insert(arith.ConstantOp(IntegerAttr(0, IndexType()))).result
    for k, size in enumerate(sizes):
        step = b.insert(arith.ConstantOp(IntegerAttr(size, IndexType()))).result
        left = b.insert(arith.SubiOp(rows, pos)).result  # type: ignore[arg-type]
        span = b.insert(arith.MuliOp(b.insert(arith.DivUIOp(left, step)).result, step)).result
        end = b.insert(arith.AddiOp(pos, span)).result
        f = b.insert(loop.ForOp(pos, end, size, "parallel" if k == 0 else "serial"))
        f.iv.name_hint = f"rows{size}"
        fb = Builder(InsertPoint.at_end(f.body.block))
        args = []
        for v in buffers:
            if is_symbolic_type(v.type):
                vs = shape_of(v.type)
                view_type = memref_of_shape(v.type.element_type, [size, *vs[p:]])  # type: ignore[attr-defined]
                args.append(fb.insert(loop.RowsOp(v, f.iv, view_type)).result)
            else:
                args.append(v)
        fb.insert(func.CallOp(block_name(kernel.sym_name.data, size), args, []))
        pos = end


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
    names = kernel_symbols(kernel)
    syms = _with_symbols(block, names)
    buffers: dict[SSAValue, SSAValue] = dict(zip(kernel.body.block.args, ins))
    destination: dict[SSAValue, SSAValue] = {}
    for v, o in zip(ret.arguments, outs):
        destination.setdefault(v, o)
    b = Builder(InsertPoint.at_end(block))
    lowering = _BodyLowering(buffers, _Extents(block, syms) if names else None)
    sizes = blocks_of(kernel)
    if sizes:
        _lower_driver(kernel, block, ins, outs, lowering.extents, sizes)  # type: ignore[arg-type]
    for op in kernel.body.block.ops if not sizes else ():
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
    new = func.FuncOp(kernel.sym_name.data, ([*in_types, *out_types, *[IndexType()] * len(names)], []),
                      Region(block))
    if SOURCE_NODES in kernel.attributes:
        new.attributes[SOURCE_NODES] = kernel.attributes[SOURCE_NODES]
    if names:
        new.attributes[SYMBOLS_ATTR] = _symbols_attr(names)
    if sizes:  # a driver: its schedule is the block loops above
        new.attributes[SCHEDULED] = UnitAttr()
    return new


def lower_model(model: func.FuncOp, kernel_syms: dict[str, list[str]] | None = None) -> func.FuncOp:
    """Model function on tensors -> entry function on buffers (outputs last, then the symbols'
    values where its types are symbolic; each call passes the symbols its kernel takes,
    `kernel_syms` by callee)."""
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
    kernel_syms = kernel_syms or {}
    names = sorted(set(kernel_symbols(model)).union(*kernel_syms.values()))
    syms = _with_symbols(block, names)
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
            extra = [syms[n] for n in kernel_syms.get(op.callee.data, [])]
            b.insert(func.CallOp(op.callee.data, [*(buffers[a] for a in op.args), out, *extra], []))
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
    new = func.FuncOp(model.sym_name.data, ([*in_types, *out_types, *[IndexType()] * len(names)], []),
                      Region(block))
    new.attributes |= model.attributes
    if names:
        new.attributes[SYMBOLS_ATTR] = _symbols_attr(names)
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
        funcs = [f for f in op.ops if isinstance(f, func.FuncOp)]
        kernel_syms = {f.sym_name.data: kernel_symbols(f) for f in funcs if _is_te_kernel(f)}
        for f in funcs:
            if _is_te_kernel(f):
                try:
                    new = lower_kernel(f)
                except ZigguratError as err:
                    raise name_source(err, f) from None
            elif _is_model(f):
                new = lower_model(f, kernel_syms)
            else:
                continue
            op.body.block.insert_op_before(new, f)
            op.body.block.erase_op(f)
