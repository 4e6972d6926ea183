"""`arith` and `math` ops in C, on scalars and on vector registers.

Each op has a scalar C form. On vectors it uses the GCC/Clang vector form
where C has one (`+ - * /`, comparisons, bitwise ops, `__builtin_convertvector`)
and otherwise the scalar form lane by lane (`r[l] = f(a[l], ...)`), which the C
compiler unrolls. The meanings are the LLVM backend's (backends/llvm/arith_ops.py,
math_ops.py): `maximumf`/`minimumf` propagate NaN and order -0 below +0,
`maxnumf`/`minnumf` return the other operand for a NaN, `iN` arithmetic wraps
(computed in the unsigned type), `index` is `int64_t`, `remf` is `fmod`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr, VectorType
from xdsl.ir import Attribute, Operation, SSAValue

from ziggurat.backends.c.ctypes_map import UNSIGNED, literal, scalar_info
from ziggurat.errors import CompileError

if TYPE_CHECKING:
    from ziggurat.backends.c.emit import Emitter

Scalar = Callable[[list[str], str], str]  # (operand expressions, C type of the first operand) -> expression
CMPI = (("s", "=="), ("s", "!="), ("s", "<"), ("s", "<="), ("s", ">"), ("s", ">="),
        ("u", "<"), ("u", "<="), ("u", ">"), ("u", ">="))
CMPF = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord",
        "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true")


def elem(t: Attribute) -> Attribute:
    return t.element_type if isinstance(t, VectorType) else t  # type: ignore[return-value]


def is_mask(t: Attribute) -> bool:
    return isinstance(t, VectorType) and scalar_info(t.element_type)[3] == "b"


def lanewise(e: Emitter, res: SSAValue, operands, scalar: Scalar) -> None:
    """`res` (a vector) computed lane by lane with the scalar form."""
    vt = res.type
    n = e.types.lanes(vt)  # type: ignore[arg-type]
    name = e.fresh()
    l_ = e.fresh("l")
    args = []
    for v in operands:
        x = e.get(v)
        if isinstance(v.type, VectorType):
            args.append(f"({x}[{l_}] != 0)" if is_mask(v.type) else f"{x}[{l_}]")
        else:
            args.append(x)
    ctype = scalar_info(elem(operands[0].type))[0] if operands else ""
    expr = scalar(args, ctype)
    if is_mask(vt):
        expr = f"-(int32_t)({expr})"
    e.line(f"{e.types.c(vt)} {name};")
    e.line(f"for (int {l_} = 0; {l_} < {n}; ++{l_}) {name}[{l_}] = {expr};")
    e.vals[res] = name


def elementwise(scalar: Scalar, vector: Scalar | None = None):
    """A handler: the scalar form on scalars; on vectors the vector form, else the scalar one lane by lane."""

    def h(e: Emitter, op: Operation) -> None:
        res = op.results[0]
        ctype = scalar_info(elem(op.operands[0].type))[0]
        if isinstance(res.type, VectorType):
            if vector is not None:
                expr = vector([e.get(v) for v in op.operands], ctype)
                if expr:
                    e.define(res, expr)
                    return
            lanewise(e, res, list(op.operands), scalar)
        else:
            e.define(res, scalar([e.get(v) for v in op.operands], ctype))

    return h


def libm(name: str, ctype: str, args: list[str]) -> str:
    """`namef(x)` for float, `name(x)` for double, computed in float for _Float16."""
    if ctype == "float":
        return f"{name}f({', '.join(args)})"
    if ctype == "double":
        return f"{name}({', '.join(args)})"
    if ctype == "_Float16":
        return f"(_Float16){name}f({', '.join(f'(float){a}' for a in args)})"
    raise CompileError(f"c backend: math function '{name}' on {ctype} is not supported")


# -- constants -------------------------------------------------------------------------


def _constant(e: Emitter, op: Operation) -> None:
    res = op.results[0]
    attr = op.properties["value"]
    t = res.type
    if isinstance(attr, (IntegerAttr, FloatAttr)) and not isinstance(t, VectorType):
        v = attr.value.data
        e.bind(res, literal(t, v), int(v) if isinstance(attr, IntegerAttr) and scalar_info(t)[3] != "f" else None)
        return
    if isinstance(attr, DenseIntOrFPElementsAttr) and isinstance(t, VectorType):
        n = e.types.lanes(t)
        vals = list(attr.get_values())
        if len(vals) == 1:
            vals = vals * n
        if is_mask(t):
            lanes = ["-1" if int(v) & 1 else "0" for v in vals]
        else:
            lanes = [literal(t.element_type, v) for v in vals]
        e.define(res, f"({e.types.c(t)}){{{', '.join(lanes)}}}")
        return
    raise CompileError(f"c backend: unsupported arith.constant value {attr} : {t}")


# -- float -----------------------------------------------------------------------------


def _infix(sym: str) -> Scalar:
    return lambda a, t: f"({a[0]} {sym} {a[1]})"


def _wrap(sym: str) -> Scalar:
    """Wrapping integer arithmetic: in the unsigned type for iN (no signed-overflow UB), plain for bools."""
    def f(a: list[str], t: str) -> str:
        if t == "_Bool":
            return f"(_Bool)(({a[0]} {sym} {a[1]}) & 1)"
        u = UNSIGNED[t]
        return f"({t})(({u}){a[0]} {sym} ({u}){a[1]})"
    return f


def _unsigned(sym: str) -> Scalar:
    return lambda a, t: f"({t})(({UNSIGNED[t]}){a[0]} {sym} ({UNSIGNED[t]}){a[1]})"


def sel_fn(e: Emitter, vt_name: str, mt_name: str) -> str:
    """The helper that blends two vectors by a lane mask (all-ones lanes take `a`)."""
    return e.helper(f"zg_sel_{vt_name}", f"static inline {vt_name} zg_sel_{vt_name}({mt_name} m, {vt_name} a, "
                    f"{vt_name} b) {{ return ({vt_name})((m & ({mt_name})a) | (~m & ({mt_name})b)); }}")


def _minmax(kind: str) -> Callable:
    """maximumf/minimumf (NaN-propagating, -0 < +0) and maxnumf/minnumf (a NaN operand loses)."""
    gt = ">" if kind.startswith("max") else "<"
    nan_wins = kind in ("maximumf", "minimumf")

    def scalar_fn(e: Emitter, ctype: str) -> str:
        name = f"zg_{kind}_{ctype.replace(' ', '')}"
        if nan_wins:
            ut = {"float": "uint32_t", "double": "uint64_t", "_Float16": "uint16_t"}[ctype]
            zero = "&" if gt == ">" else "|"
            body = (f"if (a != a || b != b) return a + b; if (a {gt} b) return a; if (b {gt} a) return b; "
                    f"{ut} x, y; memcpy(&x, &a, sizeof x); memcpy(&y, &b, sizeof y); x = x {zero} y; "
                    f"memcpy(&a, &x, sizeof a); return a;")
        else:
            body = f"if (b != b) return a; return a {gt} b ? a : b;"
        return e.helper(name, f"static inline {ctype} {name}({ctype} a, {ctype} b) {{ {body} }}")

    def h(e: Emitter, op: Operation) -> None:
        res = op.results[0]
        a, b = (e.get(v) for v in op.operands)
        ctype = scalar_info(elem(res.type))[0]
        if isinstance(res.type, VectorType):
            _, _, size, _ = scalar_info(res.type.element_type)
            if size == 4 and ctype == "float":
                vt = e.types.c(res.type)
                mt = e.types.mask(e.types.lanes(res.type))
                sel = sel_fn(e, vt, mt)
                name = f"zg_{kind}_{vt}"
                if nan_wins:
                    zero = "&" if gt == ">" else "|"
                    body = (f"{vt} r = {sel}(a {gt} b, a, b); r = {sel}(a == b, ({vt})(({mt})a {zero} ({mt})b), r); "
                            f"return {sel}((a != a) | (b != b), a + b, r);")
                else:
                    body = f"return {sel}((a {gt} b) | (b != b), a, b);"
                e.helper(name, f"static inline {vt} {name}({vt} a, {vt} b) {{ {body} }}")
                e.define(res, f"{name}({a}, {b})")
                return
            fn = scalar_fn(e, ctype)
            lanewise(e, res, list(op.operands), lambda x, t: f"{fn}({x[0]}, {x[1]})")
            return
        e.define(res, f"{scalar_fn(e, ctype)}({a}, {b})")

    return h


def _int_minmax(gt: str, unsigned: bool) -> Scalar:
    def f(a: list[str], t: str) -> str:
        x, y = (f"({UNSIGNED[t]}){a[0]}", f"({UNSIGNED[t]}){a[1]}") if unsigned else (a[0], a[1])
        return f"({x} {gt} {y} ? {a[0]} : {a[1]})"
    return f


def _div_helper(e: Emitter, kind: str, t: str) -> str:
    name = f"zg_{kind}_{t}"
    if kind == "floordivsi":
        body = f"{t} q = a / b, r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;"
    elif kind == "ceildivsi":
        body = f"{t} q = a / b, r = a % b; return (r != 0 && ((r < 0) == (b < 0))) ? q + 1 : q;"
    else:
        u = UNSIGNED[t]
        body = f"{u} x = ({u})a, y = ({u})b; return ({t})(x / y + (x % y != 0));"
    return e.helper(name, f"static inline {t} {name}({t} a, {t} b) {{ {body} }}")


def _div(kind: str):
    def h(e: Emitter, op: Operation) -> None:
        t = scalar_info(elem(op.results[0].type))[0]
        fn = _div_helper(e, kind, t)
        elementwise(lambda a, _t: f"{fn}({a[0]}, {a[1]})")(e, op)
    return h


def _cmpi(e: Emitter, op: Operation) -> None:
    sign, cmp = CMPI[op.properties["predicate"].value.data]  # type: ignore[attr-defined]

    def scalar(a: list[str], t: str) -> str:
        if sign == "u":
            return f"(({UNSIGNED[t]}){a[0]} {cmp} ({UNSIGNED[t]}){a[1]})"
        return f"({a[0]} {cmp} {a[1]})"

    elementwise(scalar)(e, op)


_CMPF_FORMS = {  # predicate -> (scalar form, vector form) over a, b
    "false": ("0", None), "true": ("1", None),
    "oeq": ("(a == b)", "(a == b)"), "ogt": ("(a > b)", "(a > b)"), "oge": ("(a >= b)", "(a >= b)"),
    "olt": ("(a < b)", "(a < b)"), "ole": ("(a <= b)", "(a <= b)"),
    "one": ("(a < b || a > b)", "((a < b) | (a > b))"), "ord": ("(a == a && b == b)", "((a == a) & (b == b))"),
    "ueq": ("!(a < b || a > b)", "~((a < b) | (a > b))"), "ugt": ("!(a <= b)", "~(a <= b)"),
    "uge": ("!(a < b)", "~(a < b)"), "ult": ("!(a >= b)", "~(a >= b)"), "ule": ("!(a > b)", "~(a > b)"),
    "une": ("(a != b)", "(a != b)"), "uno": ("(a != a || b != b)", "((a != a) | (b != b))"),
}


def cmpf(e: Emitter, op: Operation, pred: str) -> None:
    """A float compare (arith.cmpf or hw.vcmpf); vectors of 32-bit lanes compare as vectors."""
    sform, vform = _CMPF_FORMS[pred]
    a, b = op.operands
    res = op.results[0]
    sub = lambda form, x: form.replace("a", "\0").replace("b", x[1]).replace("\0", x[0])  # noqa: E731
    if isinstance(a.type, VectorType):
        if vform is not None and scalar_info(a.type.element_type)[:3] == ("float", "f32", 4):
            e.define(res, sub(vform, [e.get(a), e.get(b)]))
            return
        lanewise(e, res, [a, b], lambda x, t: sub(sform, x))
        return
    e.define(res, sub(sform, [e.get(a), e.get(b)]))


def _cmpf(e: Emitter, op: Operation) -> None:
    cmpf(e, op, CMPF[op.properties["predicate"].value.data])  # type: ignore[attr-defined]


def select(e: Emitter, res: SSAValue, c: SSAValue, a: SSAValue, b: SSAValue) -> None:
    """`c ? a : b`: a scalar condition as C's `?:`; a vector mask as a bitwise select (32-bit lanes)."""
    if not isinstance(c.type, VectorType):
        e.define(res, f"({e.get(c)} ? {e.get(a)} : {e.get(b)})")
        return
    if scalar_info(elem(res.type))[2] == 4 and not is_mask(res.type):
        vt = e.types.c(res.type)
        sel = sel_fn(e, vt, e.types.mask(e.types.lanes(res.type)))  # type: ignore[arg-type]
        e.define(res, f"{sel}({e.get(c)}, {e.get(a)}, {e.get(b)})")
        return
    lanewise(e, res, [c, a, b], lambda x, t: f"({x[0]} ? {x[1]} : {x[2]})")


def _select(e: Emitter, op: Operation) -> None:
    select(e, op.results[0], *op.operands)


# -- casts -----------------------------------------------------------------------------


def _resize(signed: bool):
    """index_cast / extsi / extui / trunci: sign- or zero-extend, or truncate, to the result width."""

    def h(e: Emitter, op: Operation) -> None:
        src = scalar_info(elem(op.operands[0].type))
        dst = scalar_info(elem(op.results[0].type))

        def scalar(a: list[str], t: str) -> str:
            if dst[3] == "b":
                return f"(_Bool)({a[0]} & 1)"
            if src[3] == "b":
                return f"-({dst[0]}){a[0]}" if signed else f"({dst[0]}){a[0]}"
            if src[2] >= dst[2] or signed:
                return f"({dst[0]}){a[0]}"
            return f"({dst[0]})({UNSIGNED[src[0]]}){a[0]}"

        vec = None
        if signed and src[3] == dst[3] == "i":
            vt = e.types.c(op.results[0].type) if isinstance(op.results[0].type, VectorType) else ""
            vec = lambda a, t: f"__builtin_convertvector({a[0]}, {vt})"  # noqa: E731
        elementwise(scalar, vec)(e, op)

    return h


def convert(unsigned_src: bool, unsigned_dst: bool = False):
    """sitofp, uitofp, fptosi, fptoui, extf, truncf (and hw.vconvert): a C conversion (vectors:
    __builtin_convertvector, or lane by lane)."""

    def h(e: Emitter, op: Operation) -> None:
        res = op.results[0]
        src = scalar_info(elem(op.operands[0].type))
        dst = scalar_info(elem(res.type))
        if src[3] == "b" or dst[3] == "b":
            raise CompileError(f"c backend: {op.name} from {op.operands[0].type} to {res.type} is not supported")
        uns = unsigned_dst

        def scalar(a: list[str], t: str) -> str:
            x = f"({UNSIGNED[src[0]]}){a[0]}" if unsigned_src else a[0]
            return f"({dst[0]})({UNSIGNED[dst[0]]}){x}" if uns else f"({dst[0]}){x}"

        vec = None
        if not unsigned_src and not uns and isinstance(res.type, VectorType):
            vt = e.types.c(res.type)
            vec = lambda a, t: f"__builtin_convertvector({a[0]}, {vt})"  # noqa: E731
        elementwise(scalar, vec)(e, op)

    return h


def _bitcast(e: Emitter, op: Operation) -> None:
    res = op.results[0]
    src = op.operands[0]
    if isinstance(res.type, VectorType) != isinstance(src.type, VectorType) or is_mask(res.type) or is_mask(src.type):
        raise CompileError(f"c backend: arith.bitcast from {src.type} to {res.type} is not supported")
    t = e.types.c(res.type)
    if isinstance(res.type, VectorType):
        e.define(res, f"({t}){e.get(src)}")
        return
    name = e.fresh()
    e.line(f"{t} {name}; memcpy(&{name}, &{e.get(src)}, sizeof {name});")
    e.vals[res] = name


ARITH_HANDLERS = {
    "arith.constant": _constant,
    "arith.addf": elementwise(_infix("+"), _infix("+")),
    "arith.subf": elementwise(_infix("-"), _infix("-")),
    "arith.mulf": elementwise(_infix("*"), _infix("*")),
    "arith.divf": elementwise(_infix("/"), _infix("/")),
    "arith.negf": elementwise(lambda a, t: f"(-{a[0]})", lambda a, t: f"(-{a[0]})"),
    "arith.maximumf": _minmax("maximumf"),
    "arith.minimumf": _minmax("minimumf"),
    "arith.maxnumf": _minmax("maxnumf"),
    "arith.minnumf": _minmax("minnumf"),
    "arith.addi": elementwise(_wrap("+")),
    "arith.subi": elementwise(_wrap("-")),
    "arith.muli": elementwise(_wrap("*")),
    "arith.divsi": elementwise(_infix("/")),
    "arith.divui": elementwise(_unsigned("/")),
    "arith.remsi": elementwise(_infix("%")),
    "arith.remui": elementwise(_unsigned("%")),
    "arith.andi": elementwise(_infix("&")),
    "arith.ori": elementwise(_infix("|")),
    "arith.xori": elementwise(_infix("^")),
    "arith.shli": elementwise(_unsigned("<<")),
    "arith.shrsi": elementwise(_infix(">>")),
    "arith.shrui": elementwise(_unsigned(">>")),
    "arith.minsi": elementwise(_int_minmax("<", False)),
    "arith.maxsi": elementwise(_int_minmax(">", False)),
    "arith.minui": elementwise(_int_minmax("<", True)),
    "arith.maxui": elementwise(_int_minmax(">", True)),
    "arith.floordivsi": _div("floordivsi"),
    "arith.ceildivsi": _div("ceildivsi"),
    "arith.ceildivui": _div("ceildivui"),
    "arith.cmpi": _cmpi,
    "arith.cmpf": _cmpf,
    "arith.select": _select,
    "arith.index_cast": _resize(True),
    "arith.extsi": _resize(True),
    "arith.extui": _resize(False),
    "arith.trunci": _resize(True),
    "arith.sitofp": convert(False),
    "arith.uitofp": convert(True),
    "arith.fptosi": convert(False),
    "arith.fptoui": convert(False, True),
    "arith.extf": convert(False),
    "arith.truncf": convert(False),
    "arith.bitcast": _bitcast,
}
