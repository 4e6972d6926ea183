"""te-row-blocks: static kernels for blocks of rows of a kernel over symbolic rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import DenseArrayBase, TensorType, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from ziggurat.dialects import te
from ziggurat.dialects.sym import is_symbolic_type, shape_of, tensor_of
from ziggurat.errors import ScheduleError
from ziggurat.symbolic import Sym

ROW_BLOCKS = "te.row_blocks"
"""Kernel attribute: the row counts of its static block kernels, `<kernel>_rows<R>` (largest first)."""


def block_name(kernel: str, rows: int) -> str:
    return f"{kernel}_rows{rows}"


def row_prefix(f: func.FuncOp) -> int:
    """How many leading dims of `f`'s values are its symbolic rows, where `f` computes each row
    from the same row of its inputs alone (0: it does not, or it has no symbolic dims).

    Every value with a symbolic dim has the same symbolic leading dims (the rows) and static ones
    after them; every te.compute/te.reduce result has them; a body uses its row variables only as
    the row indices of reads of such values (at the same positions); reduction extents are static
    and no `te.sym` is read."""
    values = [*f.body.block.args, *(r for op in f.body.block.ops for r in op.results)]
    symbolic = [v for v in values if is_symbolic_type(v.type)]
    if not symbolic:
        return 0
    shape = shape_of(symbolic[0].type)
    p = next((k for k, d in enumerate(shape) if not isinstance(d, Sym)), len(shape))
    rows = shape[:p]
    if p == 0:
        return 0
    for v in symbolic:
        s = shape_of(v.type)
        if tuple(s[:p]) != tuple(rows) or any(isinstance(d, Sym) for d in s[p:]):
            return 0
    for op in f.body.block.ops:
        if isinstance(op, (te.ComputeOp, te.ReduceOp)):
            if not is_symbolic_type(op.result.type):
                return 0
            if isinstance(op, te.ReduceOp) and any(isinstance(e, Sym) for e in op.extents):
                return 0
            if not _rows_only_index_rows(op, p):
                return 0
        elif not isinstance(op, func.ReturnOp):
            return 0
    return p


def _rows_only_index_rows(op: te.ComputeOp | te.ReduceOp, p: int) -> bool:
    row_vars = list(op.body.block.args[:p])
    uses_ok = 0
    for inner in op.body.walk():
        if isinstance(inner, te.SymOp):
            return False
        if isinstance(inner, te.ReadOp):
            idx = list(inner.indices)
            if is_symbolic_type(inner.tensor.type):
                if idx[:p] != row_vars or any(i in row_vars for i in idx[p:]):
                    return False
                uses_ok += p
            elif any(i in row_vars for i in idx):
                return False
    return sum(len(list(a.uses)) for a in row_vars) == uses_ok


def _static_type(t, p: int, rows: int):
    if not is_symbolic_type(t):
        return t
    shape = shape_of(t)
    return tensor_of(t.element_type, [rows, *shape[p:]])


def block_kernel(f: func.FuncOp, p: int, rows: int) -> func.FuncOp:
    """`f` with its `p` symbolic row dims replaced by one static dim of `rows` rows."""
    ins = [_static_type(t, p, rows) for t in f.function_type.inputs.data]
    block = Block(arg_types=ins)
    mapping: dict[SSAValue, SSAValue] = dict(zip(f.body.block.args, block.args))
    out_types = []
    for op in f.body.block.ops:
        if isinstance(op, func.ReturnOp):
            block.add_op(func.ReturnOp(*[mapping[v] for v in op.arguments]))
            out_types = [mapping[v].type for v in op.arguments]
            continue
        new = _rebuilt(op, p, rows, mapping)  # type: ignore[arg-type]
        block.add_op(new)
        mapping[op.results[0]] = new.results[0]
    g = func.FuncOp(block_name(f.sym_name.data, rows), (ins, out_types), Region(block))
    for key, value in f.attributes.items():
        if key not in ("sym_name", "function_type", ROW_BLOCKS):
            g.attributes[key] = value
    return g


def _rebuilt(op: te.ComputeOp | te.ReduceOp, p: int, rows: int, outer: dict[SSAValue, SSAValue]) -> Operation:
    old = op.body.block
    n_args = len(old.args) - p + 1
    body = Block(arg_types=[builtin.IndexType()] * n_args)
    local: dict[SSAValue, SSAValue] = dict(outer)
    row = body.args[0]
    for a in old.args[:p]:
        local[a] = row
    for a, b in zip(old.args[p:], body.args[1:]):
        local[a] = b
    for inner in old.ops:
        if isinstance(inner, te.ReadOp) and is_symbolic_type(inner.tensor.type):
            new: Operation = te.ReadOp(local[inner.tensor], [row, *(local.get(i, i) for i in list(inner.indices)[p:])])
            if inner.pad is not None:
                new.properties["pad"] = inner.pad
        else:
            new = inner.clone(value_mapper=local)
        body.add_op(new)
        for r_old, r_new in zip(inner.results, new.results):
            local[r_old] = r_new
    result_type = _static_type(op.result.type, p, rows)
    if isinstance(op, te.ComputeOp):
        out = te.ComputeOp(op.tag.data, result_type, Region(body))
    else:
        out = te.ReduceOp(op.tag.data, op.combiner.data, 0.0, list(op.extents), result_type, Region(body))
        out.properties["init"] = op.init
    out.attributes |= op.attributes
    return out


@dataclass(frozen=True)
class TeRowBlocksPass(ModulePass):
    """Gives each kernel over symbolic rows static copies for blocks of rows.

    **Input:** te kernels (after convert-graph-to-te); a kernel qualifies when it computes each
    row of its symbolic leading dims from the same rows of its inputs alone (`row_prefix`: a
    matmul over `batch*sequence` rows, its bias and GELU, a layer norm or a softmax along a
    static axis; not an attention matmul over `sequence` columns).

    **Output:** for each qualifying kernel `K`, static te kernels `K_rows<R>` for R in `sizes`
    (its rows flattened into one dim of R rows), and `K` marked `te.row_blocks = [R...]`.
    convert-te-to-loop then makes `K` a driver that runs the block kernels over the run-time
    rows (the largest blocks in a parallel loop, the rest by smaller ones) through `loop.rows`
    views, and the static kernels get the default static schedule (register blocks, packed
    panels): one compile for every shape, at static speed.

    **Options:** `sizes` (default 64,16,4,1: descending, the last 1).

    Example:
    ```mlir
    func.func @k(%x: tensor<?x768xf32, #sym.dims<"n">>) -> tensor<?x768xf32, #sym.dims<"n">> {...}
    ```
    becomes
    ```mlir
    func.func @k(%x: tensor<?x768xf32, #sym.dims<"n">>) -> ... attributes {te.row_blocks = array<i64: 64, 16, 4, 1>} {...}
    func.func @k_rows1(%x: tensor<1x768xf32>) -> tensor<1x768xf32> {...}
    func.func @k_rows4(...)   func.func @k_rows16(...)
    func.func @k_rows64(%x: tensor<64x768xf32>) -> tensor<64x768xf32> {...}
    ```
    """

    name = "te-row-blocks"
    sizes: tuple[int, ...] = (64, 16, 4, 1)

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        sizes = tuple(int(s) for s in self.sizes)
        if not sizes or sizes[-1] != 1 or list(sizes) != sorted(set(sizes), reverse=True):
            raise ScheduleError(f"te-row-blocks: sizes must descend to 1, got {sizes}")
        for f in [f for f in op.ops if isinstance(f, func.FuncOp) and f.sym_name.data != "main"]:
            if not any(isinstance(o, (te.ComputeOp, te.ReduceOp)) for o in f.body.block.ops):
                continue
            p = row_prefix(f)
            if p == 0:
                continue
            for rows in sizes:
                op.body.block.insert_op_after(block_kernel(f, p, rows), f)
            f.attributes[ROW_BLOCKS] = DenseArrayBase.from_list(i64, list(sizes))


def blocks_of(f: func.FuncOp) -> Sequence[int]:
    attr = f.attributes.get(ROW_BLOCKS)
    return tuple(attr.get_values()) if attr is not None else ()  # type: ignore[attr-defined]
