"""The `sym` dialect: symbolic extents in tensor and memref types.

A model with dynamic axes (`batch`, `sequence`) compiles once for every shape
when its types say what each dynamic dim *is*: `?` in the shape, and the
`#sym.dims` attribute, in a tensor's encoding or a memref's layout, giving
one expression of the symbols per `?` (symbolic.py `Sym`), in order:

```mlir
%x : tensor<?x?x768xf32, #sym.dims<"batch", "sequence">>
%y : memref<?x768xf32, #sym.dims<"batch*sequence">>
```

Functions that take symbolic buffers list the symbols they are given in the
attribute `sym.symbols`: their trailing `index` arguments, in that order. A
kernel reads a symbol's value from that argument (the LLVM backend computes
strides, allocation sizes and loop bounds from it); the entry function gets
the values from the executor, which binds them from the inputs' shapes.

    shape_of(t)                 # (Sym('batch*sequence'), 768)
    tensor_of(f32, shape)       # tensor<?x768xf32, #sym.dims<"batch*sequence">>
    memref_of_shape(f32, shape) # memref<?x768xf32, #sym.dims<"batch*sequence">>
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    MemRefLayoutAttr,
    MemRefType,
    NoneAttr,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.ir.affine import AffineMap
from xdsl.parser import AttrParser
from xdsl.printer import Printer

from ziggurat.errors import CompileError
from ziggurat.symbolic import Dim, Sym, SymbolicError, is_symbolic

SYMBOLS_ATTR = "sym.symbols"
"""Function attribute: the names of the symbols its trailing `index` arguments carry."""


@irdl_attr_definition
class DimsAttr(ParametrizedAttribute, MemRefLayoutAttr):
    """The expressions of a type's dynamic dims, one per `?`, in order.

    `#sym.dims<"batch", "batch*sequence">`
    """

    name = "sym.dims"
    exprs: ArrayAttr[StringAttr]

    def __init__(self, exprs: Sequence[Sym]):
        super().__init__(ArrayAttr([StringAttr(str(e)) for e in exprs]))

    @property
    def dims(self) -> list[Sym]:
        out = []
        for s in self.exprs.data:
            e = Sym.parse(s.data)
            if not isinstance(e, Sym):
                raise CompileError(f"#sym.dims: '{s.data}' is a constant; a static dim is written in the shape")
            out.append(e)
        return out

    def get_affine_map(self) -> AffineMap:  # row-major; the strides are expressions, not affine constants
        raise SymbolicError("a #sym.dims layout is row-major with symbolic strides; it has no static affine map")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            texts = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_str_literal)
        for t in texts:
            Sym.parse(t)  # a malformed expression is an error here, not at use
        return (ArrayAttr([StringAttr(t) for t in texts]),)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<" + ", ".join(f'"{s.data}"' for s in self.exprs.data) + ">")


def _dims_attr(t: Attribute) -> DimsAttr | None:
    if isinstance(t, TensorType):
        enc = t.encoding
    elif isinstance(t, MemRefType):
        enc = t.layout
    else:
        return None
    return enc if isinstance(enc, DimsAttr) else None


def shape_of(t: Attribute) -> tuple[Dim, ...]:
    """The shape of a tensor or memref type, with a `Sym` for each dynamic dim."""
    shape = t.get_shape()  # type: ignore[attr-defined]
    if all(d >= 0 for d in shape):
        return tuple(shape)
    attr = _dims_attr(t)
    exprs = attr.dims if attr is not None else []
    if len(exprs) != sum(d < 0 for d in shape):
        raise CompileError(f"type {t} has {sum(d < 0 for d in shape)} dynamic dims and "
                           f"{len(exprs)} #sym.dims expressions; give one expression per '?'")
    it = iter(exprs)
    return tuple(d if d >= 0 else next(it) for d in shape)


def _split(shape: Sequence[Dim]) -> tuple[list[int], DimsAttr | NoneAttr]:
    static = [DYNAMIC_INDEX if isinstance(d, Sym) else int(d) for d in shape]
    syms = [d for d in shape if isinstance(d, Sym)]
    return static, (DimsAttr(syms) if syms else NoneAttr())


def tensor_of(element: Attribute, shape: Sequence[Dim]) -> TensorType:
    static, attr = _split(shape)
    return TensorType(element, static, attr)


def memref_of_shape(element: Attribute, shape: Sequence[Dim]) -> MemRefType:
    static, attr = _split(shape)
    return MemRefType(element, static, attr)  # type: ignore[arg-type]


def is_symbolic_type(t: Attribute) -> bool:
    return isinstance(t, (TensorType, MemRefType)) and any(d < 0 for d in t.get_shape())


def type_symbols(t: Attribute) -> set[str]:
    if not is_symbolic_type(t):
        return set()
    return {s for d in shape_of(t) if isinstance(d, Sym) for s in d.symbols}


def symbol_args(fop) -> dict[str, Any]:
    """The symbols a function is given: `sym.symbols` names its trailing `index` arguments (name ->
    argument; none without the attribute). A malformed attribute is a CompileError."""
    from xdsl.dialects.builtin import IndexType

    attr = fop.attributes.get(SYMBOLS_ATTR)
    if attr is None:
        return {}
    names = [s.data for s in attr.data] if isinstance(attr, ArrayAttr) else []
    if not all(isinstance(s, StringAttr) for s in getattr(attr, "data", ())) or not names:
        raise CompileError(f"@{fop.sym_name.data}: {SYMBOLS_ATTR} must be a list of symbol names")
    args = fop.body.block.args
    tail = args[len(args) - len(names):] if len(names) <= len(args) else []
    if len(tail) != len(names) or not all(isinstance(a.type, IndexType) for a in tail):
        raise CompileError(f"@{fop.sym_name.data} names symbols {names} in {SYMBOLS_ATTR} but "
                           f"does not end with {len(names)} index arguments for them")
    return dict(zip(names, tail))


__all__ = ["DimsAttr", "SYMBOLS_ATTR", "shape_of", "tensor_of", "memref_of_shape", "is_symbolic_type",
           "type_symbols", "is_symbolic", "symbol_args"]

Symbolic = Dialect("sym", [], [DimsAttr])
