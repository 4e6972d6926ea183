"""Source locations: which ONNX nodes an op, a fused group or a kernel came from.

The ONNX importer gives every graph op it emits for a node the location
`loc("<node name>")` (an xDSL `NameLoc`; `<node #i>` for a node without a
name). Graph passes that replace an op give its replacement the same
location; `fuse-ops` gives a `graph.fused` group the fused location of its
members (`loc(fused["a", "b"])`). Locations print with `--print-debuginfo`
(`ziggurat-opt`) and parse back.

Below the graph level the IR is built per kernel, not per op, so the names
travel on the kernel instead: `convert-graph-to-te` writes the node names of
the op (or of every member of the group) that a kernel computes on its
`func.func` as the one attribute `graph.source_nodes = ["a", "b"]`, and the
loop-level passes keep it (`convert-te-to-loop`, `dedupe-kernels` merges the
lists of the kernels it merges, `apply-tuning`). It is left out of the text
that workload keys and `dedupe-kernels` hash, so it changes no tuning record.
Errors raised while lowering or scheduling an op or a kernel name its nodes
(`where`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, CallSiteLoc, FusedLoc, NameLoc, NoneAttr, StringAttr, UnknownLoc
from xdsl.ir import Attribute, Operation
from xdsl.pattern_rewriter import PatternRewriterListener

SOURCE_NODES = "graph.source_nodes"
"""Attribute of a kernel `func.func`: the names of the source (ONNX) nodes it computes."""


def name_loc(name: str) -> NameLoc:
    """`loc("name")`."""
    return NameLoc(StringAttr(name), NoneAttr())


def loc_names(loc: Attribute) -> list[str]:
    """The node names a location holds: a NameLoc's, each of a FusedLoc's, a call site's callee's."""
    if isinstance(loc, NameLoc):
        return [loc.desc.data]
    if isinstance(loc, FusedLoc):
        return [n for inner in loc.locations.data for n in loc_names(inner)]  # type: ignore[union-attr]
    if isinstance(loc, CallSiteLoc):
        return loc_names(loc.callee)
    return []


def fused_loc(locs: Iterable[Attribute]) -> Attribute:
    """One location for several: unknown when they name no node, `loc("a")` when they
    name one, else `loc(fused["a", "b"])` of the distinct names."""
    names = list(dict.fromkeys(n for loc in locs for n in loc_names(loc)))
    if not names:
        return UnknownLoc()
    if len(names) == 1:
        return name_loc(names[0])
    return FusedLoc(ArrayAttr([name_loc(n) for n in names]), NoneAttr())


def op_names(op: Operation) -> list[str]:
    """The node names of `op` and of the ops nested in it (a graph.fused group's members), in order."""
    names = loc_names(op.location)
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                names += op_names(inner)
    return list(dict.fromkeys(names))


def carry(new: Operation, old: Operation) -> None:
    """Gives `new` (which replaces or stands in for `old`) `old`'s location, unless it has one."""
    if isinstance(new.location, UnknownLoc):
        new.location = old.location


def keep_locations() -> PatternRewriterListener:
    """A listener for `PatternRewriteWalker(..., listener=keep_locations())`: an op a pattern
    inserts without a location takes the location of the op it is inserted before, which
    for `rewriter.replace(op, new_ops)` is the op it replaces."""

    def located(op: Operation) -> None:
        if isinstance(op.location, UnknownLoc) and op.next_op is not None:
            op.location = op.next_op.location

    return PatternRewriterListener(operation_insertion_handler=[located])


def set_kernel_nodes(kernel: func.FuncOp, names: Sequence[str]) -> None:
    """Records `names` on `kernel` (no attribute when there are none)."""
    names = list(dict.fromkeys(names))
    if names:
        kernel.attributes[SOURCE_NODES] = ArrayAttr([StringAttr(n) for n in names])
    else:
        kernel.attributes.pop(SOURCE_NODES, None)


def kernel_nodes(kernel: Operation) -> tuple[str, ...]:
    """The source node names recorded on a kernel function (empty when none are)."""
    attr = kernel.attributes.get(SOURCE_NODES)
    if not isinstance(attr, ArrayAttr):
        return ()
    return tuple(a.data for a in attr.data if isinstance(a, StringAttr))


def where(op: Operation | Sequence[Operation] | None) -> str:
    """`" (ONNX node 'a')"` / `" (ONNX nodes 'a', 'b')"` for an op, a group, the ops of a group
    not yet outlined, or a kernel function, looking at the enclosing kernel when the op itself has
    no location; '' when nothing is known."""
    if isinstance(op, Sequence):
        names = list(dict.fromkeys(n for o in op for n in op_names(o)))
        return _quoted(names) if names else ""
    names: Sequence[str] = []
    node = op
    while node is not None and not names:
        if isinstance(node, func.FuncOp):  # a function is as far out as an op's source goes
            names = kernel_nodes(node)
            break
        names = op_names(node)
        node = node.parent_op()
    return _quoted(names) if names else ""


def _quoted(names: Sequence[str]) -> str:
    quoted = ", ".join(f"'{n}'" for n in names)
    return f" (ONNX node{'s' if len(names) > 1 else ''} {quoted})"


def at(op: Operation) -> str:
    """`where(op)` when it names source nodes, else `" (at <op's location>)"`."""
    return where(op) or f" (at {op.location})"


def name_source(err: Exception, op: Operation | Sequence[Operation] | None) -> Exception:
    """`err` with `where(op)` appended to its message (once); raise it again with `raise`. The op
    (the first of several) is kept as `err.ziggurat_op` for `ziggurat-opt --verify-diagnostics`."""
    first = op[0] if isinstance(op, Sequence) and op else op
    if isinstance(first, Operation) and getattr(err, "ziggurat_op", None) is None:
        err.ziggurat_op = first  # type: ignore[attr-defined]
    note = where(op)
    if note and note not in str(err) and err.args:
        err.args = (f"{err.args[0]}{note}", *err.args[1:])
    return err


# ---------------------------------------------------------------- invalid IR, shown where it fails


def invalid_op(module: Operation) -> tuple[Operation, str] | None:
    """The op whose own checks fail first, nested ops before their parent (the order `verify`
    takes), and its message as `'<op>' op ...`; None when every op passes its own checks."""
    from xdsl.utils.exceptions import VerifyException

    for op in module.walk(region_first=True):
        try:
            op.verify(verify_nested_ops=False)
        except (VerifyException, ValueError) as err:
            message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            prefix = f"'{op.name}' op "
            return op, message if message.startswith(prefix) else prefix + message
    return None


def show_op(op: Operation, message: str, context: int = 4) -> str:
    """The function (or other top-level op) around `op`, printed with locations, `op` underlined
    with `message`; at most `context` lines either side of it."""
    import io

    from xdsl.dialects.builtin import ModuleOp
    from xdsl.printer import Printer
    from xdsl.utils.diagnostic import Diagnostic

    top = op
    while (parent := top.parent_op()) is not None and not isinstance(parent, ModuleOp):
        top = parent
    diagnostic = Diagnostic()
    diagnostic.add_message(op, message)
    text = io.StringIO()
    Printer(stream=text, diagnostic=diagnostic, print_debuginfo=True).print_op(top)
    lines = text.getvalue().splitlines()
    mark = next((i for i, line in enumerate(lines) if line.strip().startswith("^")), 0)
    first, last = max(0, mark - 1 - context), min(len(lines), mark + 3 + context)
    shown = lines[first:last]
    return "\n".join((["  ..."] if first > 0 else []) + shown + (["  ..."] if last < len(lines) else []))


def invalid_ir_report(module: Operation, err: Exception) -> str:
    """What `module.verify()` raising `err` means, for a person: the failing op, its message and
    where it came from (`at`) on the first line, then the op shown in its function (`show_op`)."""
    found = invalid_op(module)
    if found is None:
        return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    op, message = found
    note = where(op) or ("" if isinstance(op.location, UnknownLoc) else f" (at {op.location})")
    return f"{message}{note}\n{show_op(op, message)}"
