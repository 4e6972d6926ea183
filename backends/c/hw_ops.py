"""`hw` register ops and `math` ops in C.

    hw.vload / hw.vstore     -> a dereference of the unaligned vector typedef (`zv16_f32u`)
    hw.vbroadcast            -> `(zv16_f32){x, x, ...}`
    hw.vfma, math.fma        -> `a * b + c` on vectors (the C compiler contracts it to an FMA where the
                                target has one: build.py passes -ffp-contract=fast), `fma` on scalars
    hw.vreduce               -> a pairwise tree over the lanes (LLVM's reassociating reduction)
    hw.vlanecmp              -> `iota <pred> splat(bound - base)` on i32 lanes
    hw.vselect, hw.vcmpf     -> arith_ops.py's select and cmpf
    hw.vconvert              -> arith_ops.py's convert (the arith casts' handler)
    hw.vmaskload/store, vgather, vlookup -> lane loops that never touch a masked-off lane
    math.exp/tanh/erf on f32 vectors -> the LLVM backend's polynomials (backends/llvm/fast_math.py),
                                as C vector code; other math ops call libm (lane by lane on vectors)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects.builtin import VectorType
from xdsl.ir import Operation

from ziggurat.backends.c.arith_ops import cmpf, convert, elem, elementwise, libm, sel_fn, select
from ziggurat.backends.c.ctypes_map import scalar_info
from ziggurat.backends.c.emit import tile_ref
from ziggurat.backends.llvm.fast_math import ERF_P, ERF_Q, EXP_POLY, TANH_POLY
from ziggurat.errors import CompileError

if TYPE_CHECKING:
    from ziggurat.backends.c.emit import Emitter


def _vload(e: Emitter, op: Operation) -> None:
    res = op.results[0]
    tile = tile_ref(e, op.operands[0], op.operands[1:])
    if tile is not None:
        e.define(res, tile[0])
        return
    ref = e.address(op.operands[0], op.operands[1:])
    e.define(res, f"*(const {e.types.vector(res.type, unaligned=True)} *)&{ref}")  # type: ignore[arg-type]


def _vstore(e: Emitter, op: Operation) -> None:
    value = op.operands[0]
    tile = tile_ref(e, op.operands[1], op.operands[2:])
    if tile is not None:
        e.line(f"{tile[0]} = {e.get(value)};")
        return
    ref = e.address(op.operands[1], op.operands[2:])
    e.line(f"*({e.types.vector(value.type, unaligned=True)} *)&{ref} = {e.get(value)};")  # type: ignore[arg-type]


def _vbroadcast(e: Emitter, op: Operation) -> None:
    res = op.results[0]
    n = e.types.lanes(res.type)  # type: ignore[arg-type]
    x = e.get(op.operands[0])
    if scalar_info(elem(res.type))[3] == "b":
        x = f"-(int32_t){x}"
    e.define(res, f"({e.types.c(res.type)}){{{', '.join([x] * n)}}}")


def _vfma(e: Emitter, op: Operation) -> None:
    a, b, c = (e.get(v) for v in op.operands)
    e.define(op.results[0], f"({a} * {b} + {c})")


def _math_fma(e: Emitter, op: Operation) -> None:
    if isinstance(op.results[0].type, VectorType):
        _vfma(e, op)
        return
    t = scalar_info(op.results[0].type)[0]
    e.define(op.results[0], libm("fma", t, [e.get(v) for v in op.operands]))


_REDUCE = {"add": "{x} + {y}", "mul": "{x} * {y}"}


def _vreduce(e: Emitter, op: Operation) -> None:
    kind = op.properties["kind"].data  # type: ignore[attr-defined]
    v = op.operands[0]
    vt = e.types.c(v.type)
    n = e.types.lanes(v.type)  # type: ignore[arg-type]
    ctype, _, _, k = scalar_info(v.type.element_type)  # type: ignore[attr-defined]
    name = f"zg_reduce_{kind}_{vt}"
    if kind in _REDUCE:
        comb = _REDUCE[kind]
    elif k == "f":  # llvm.vector.reduce.fmax/fmin: a NaN lane loses (maxnum)
        gt = ">" if kind == "max" else "<"
        comb = f"(({{y}} != {{y}}) || {{x}} {gt} {{y}} ? {{x}} : {{y}})"
    else:
        gt = ">" if kind == "max" else "<"
        comb = f"({{x}} {gt} {{y}} ? {{x}} : {{y}})"
    body = []
    x, width = "v", n
    size = scalar_info(v.type.element_type)[2]  # type: ignore[attr-defined]
    while kind in _REDUCE and width > 2:  # halve with shuffles: log2(n) vector adds, as LLVM's reduction
        half = width // 2
        ht = e.types.vector_of(ctype, scalar_info(v.type.element_type)[1], size, half)  # type: ignore[attr-defined]
        lo = ", ".join(str(i) for i in range(half))
        hi = ", ".join(str(i) for i in range(half, width))
        nxt = f"h{half}"
        body.append(f"{ht} {nxt} = {comb.format(x=f'__builtin_shufflevector({x}, {x}, {lo})', y=f'__builtin_shufflevector({x}, {x}, {hi})')};")
        x, width = nxt, half
    lanes = [f"{x}[{i}]" for i in range(width)]
    level = 0
    while len(lanes) > 1:
        nxt = []
        for i in range(0, len(lanes), 2):
            t = f"t{level}_{i // 2}"
            body.append(f"{ctype} {t} = {comb.format(x=lanes[i], y=lanes[i + 1])};")
            nxt.append(t)
        lanes, level = nxt, level + 1
    e.helper(name, f"static inline {ctype} {name}({vt} v) {{ {' '.join(body)} return {lanes[0]}; }}")
    e.define(op.results[0], f"{name}({e.get(v)})")


_LANE_PRED = {"slt": "<", "sle": "<=", "sgt": ">", "sge": ">=", "eq": "==", "ne": "!="}


def _vlanecmp(e: Emitter, op: Operation) -> None:
    res = op.results[0]
    n = e.types.lanes(res.type)  # type: ignore[arg-type]
    st = op.attributes.get("stride")
    stride = st.value.data if st is not None else 1  # type: ignore[attr-defined]
    base, bound = (e.get(v) for v in op.operands)
    d = e.fresh("d")
    lim = 1 << 30
    e.line(f"int64_t {d} = {bound} - {base}; {d} = {d} < -{lim} ? -{lim} : {d} > {lim} ? {lim} : {d};")
    mt = e.types.mask(n)
    iota = ", ".join(str(i * stride) for i in range(n))
    splat = ", ".join([f"(int32_t){d}"] * n)
    e.define(res, f"(({mt}){{{iota}}} {_LANE_PRED[op.properties['predicate'].data]} ({mt}){{{splat}}})")  # type: ignore[attr-defined]


def _vselect(e: Emitter, op: Operation) -> None:
    select(e, op.results[0], *op.operands)


def _vcmpf(e: Emitter, op: Operation) -> None:
    cmpf(e, op, op.properties["predicate"].data)  # type: ignore[attr-defined]


def _masked(e: Emitter, op: Operation, kind: str) -> None:
    """vmaskload / vgather / vlookup / vmaskstore: one guarded scalar access per lane."""
    ops = op.operands
    offsets = None
    if kind == "store":
        value, buf, idx, mask = ops[0], ops[1], ops[2:-1], ops[-1]
        vt = value.type
    elif kind == "lookup":
        buf, idx, offsets, mask = ops[0], ops[1:-2], ops[-2], ops[-1]
        vt = op.results[0].type
    else:
        buf, idx, mask = ops[0], ops[1:-1], ops[-1]
        vt = op.results[0].type
    n = e.types.lanes(vt)  # type: ignore[arg-type]
    stride = op.attributes["stride"].value.data if kind == "gather" else 1  # type: ignore[attr-defined]
    ref = e.address(buf, idx)
    base = ref[:ref.index("[")]
    lin = ref[ref.index("[") + 1:-1]
    l_ = e.fresh("l")
    m = e.get(mask)
    at = f"{base}[{lin} + {l_}{f' * {stride}' if stride != 1 else ''}]"
    if offsets is not None:
        at = f"{base}[{lin} + {e.get(offsets)}[{l_}]]"
    if kind == "store":
        e.line(f"for (int {l_} = 0; {l_} < {n}; ++{l_}) if ({m}[{l_}]) {at} = {e.get(value)}[{l_}];")
        return
    name = e.fresh()
    zero = f"({e.types.c(vt)}){{0}}"
    e.line(f"{e.types.c(vt)} {name} = {zero};")
    e.line(f"for (int {l_} = 0; {l_} < {n}; ++{l_}) if ({m}[{l_}]) {name}[{l_}] = {at};")
    e.vals[op.results[0]] = name


# -- math ------------------------------------------------------------------------------

UNARY = {
    "math.exp": "exp", "math.exp2": "exp2", "math.log": "log", "math.log2": "log2", "math.log10": "log10",
    "math.sqrt": "sqrt", "math.absf": "fabs", "math.floor": "floor", "math.ceil": "ceil", "math.round": "round",
    "math.roundeven": "roundeven", "math.trunc": "trunc", "math.sin": "sin", "math.cos": "cos", "math.tan": "tan",
    "math.tanh": "tanh", "math.asin": "asin", "math.acos": "acos", "math.atan": "atan", "math.sinh": "sinh",
    "math.cosh": "cosh", "math.erf": "erf", "math.log1p": "log1p", "math.expm1": "expm1", "math.cbrt": "cbrt",
    "math.asinh": "asinh", "math.acosh": "acosh", "math.atanh": "atanh",
}
BINARY = {"math.powf": "pow", "math.copysign": "copysign", "math.atan2": "atan2"}
# Vector forms C has without a libm call (GCC lowers these builtins to vector instructions).
_VECTOR_ABS = "math.absf"


def _unary(name: str):
    fn = "__builtin_roundeven" if name == "roundeven" else name
    scalar = elementwise(lambda a, t: libm(fn, t, a))

    def h(e: Emitter, op: Operation) -> None:
        x = op.operands[0]
        if isinstance(x.type, VectorType) and scalar_info(x.type.element_type)[1] == "f32":
            poly = _POLY.get(name)
            if poly is not None:
                vt = e.types.c(x.type)
                e.define(op.results[0], f"{poly(e, vt)}({e.get(x)})")
                return
        scalar(e, op)

    return h


def _binary(name: str):
    return elementwise(lambda a, t: libm(name, t, a))


def _rsqrt(e: Emitter, op: Operation) -> None:
    elementwise(lambda a, t: f"(({t})1 / {libm('sqrt', t, a)})")(e, op)


def _fpowi(e: Emitter, op: Operation) -> None:
    x, n = op.operands
    if isinstance(x.type, VectorType):
        raise CompileError("c backend: math.fpowi on vectors is not supported")
    t = scalar_info(x.type)[0]
    fn = {"float": "__builtin_powif", "double": "__builtin_powi"}.get(t)
    if fn is None:
        raise CompileError(f"c backend: math.fpowi on {x.type} is not supported")
    e.define(op.results[0], f"{fn}({e.get(x)}, (int){e.get(n)})")


def _int_unary(kind: str):
    def scalar(a: list[str], t: str) -> str:
        bits = {"int8_t": 8, "int16_t": 16, "int32_t": 32, "int64_t": 64}[t]
        u = f"(uint64_t)({'uint%d_t' % bits}){a[0]}"
        if kind == "ctpop":
            return f"({t})__builtin_popcountll({u})"
        if kind == "ctlz":
            return f"({t})({u} == 0 ? {bits} : __builtin_clzll({u}) - {64 - bits})"
        if kind == "cttz":
            return f"({t})({u} == 0 ? {bits} : __builtin_ctzll({u}))"
        return f"({t})({a[0]} < 0 ? -(uint64_t){a[0]} : (uint64_t){a[0]})"
    return elementwise(scalar)


# Vector f32 exp, tanh, erf: the LLVM backend's polynomials (fast_math.py), as C on vector types.


def _c(v: float) -> str:
    return float(v).hex() + "f"


def _poly_expr(x: str, coeffs) -> str:
    acc = _c(coeffs[0])
    for k in coeffs[1:]:
        acc = f"({acc} * {x} + {_c(k)})"
    return acc


def _vexp(e: Emitter, vt: str) -> str:
    name = f"zg_vexp_{vt}"
    n = int(vt[2:vt.index("_")])
    it = e.types.mask(n)
    sel = sel_fn(e, vt, it)
    body = (
        f"{vt} xc = {sel}(x > -87.33f, x, ({vt}){{0}} - 87.33f); xc = {sel}(xc < 88.72f, xc, ({vt}){{0}} + 88.72f); "
        f"{vt} t = xc * 1.44269504088896341f + 0.5f; {vt} fx = __builtin_convertvector(__builtin_convertvector(t, {it}), {vt}); "
        f"fx = {sel}(fx > t, fx - 1.0f, fx); "
        f"{vt} r = (xc - fx * 0.693359375f) - fx * (-2.12194440e-4f); "
        f"{vt} y = ({_poly_expr('r', EXP_POLY)}) * (r * r) + r + 1.0f; "
        f"{it} sc = (__builtin_convertvector(fx, {it}) + 127) << 23; y = y * ({vt})sc; "
        f"y = {sel}(x < -87.33f, ({vt}){{0}}, y); y = {sel}(x > 88.72f, ({vt}){{0}} + __builtin_inff(), y); "
        f"return {sel}(x != x, x, y);")  # NaN stays NaN, as in backends/llvm/fast_math.py
    return e.helper(name, f"static inline {vt} {name}({vt} x) {{ {body} }}")


def _vtanh(e: Emitter, vt: str) -> str:
    name = f"zg_vtanh_{vt}"
    n = int(vt[2:vt.index("_")])
    it = e.types.mask(n)
    ex = _vexp(e, vt)
    sel = sel_fn(e, vt, it)
    body = (f"{it} sign = ({it})x & (-2147483647 - 1); {vt} ax = ({vt})(({it})x & 2147483647); {vt} z = x * x; "
            f"{vt} small = x + (x * z) * ({_poly_expr('z', TANH_POLY)}); "
            f"{vt} ex = {ex}({sel}(ax < 20.0f, ax, ({vt}){{0}} + 20.0f) * 2.0f); "
            f"{vt} big = 1.0f - 2.0f / (ex + 1.0f); big = ({vt})((({it})big & 2147483647) | sign); "
            f"{vt} y = {sel}(ax < 0.625f, small, big); return {sel}(x != x, x, y);")
    return e.helper(name, f"static inline {vt} {name}({vt} x) {{ {body} }}")


def _verf(e: Emitter, vt: str) -> str:
    name = f"zg_verf_{vt}"
    n = int(vt[2:vt.index("_")])
    it = e.types.mask(n)
    sel = sel_fn(e, vt, it)
    body = (f"{vt} xc = {sel}(x > -4.0f, x, ({vt}){{0}} - 4.0f); xc = {sel}(xc < 4.0f, xc, ({vt}){{0}} + 4.0f); "
            f"{vt} x2 = xc * xc; {vt} y = (xc * ({_poly_expr('x2', ERF_P)})) / ({_poly_expr('x2', ERF_Q)}); "
            f"return {sel}(x != x, x, y);")
    return e.helper(name, f"static inline {vt} {name}({vt} x) {{ {body} }}")


_POLY = {"exp": _vexp, "tanh": _vtanh, "erf": _verf}


_VCONVERT = {"fptoui": convert(False, True), "fptosi": convert(False), "uitofp": convert(True), "sitofp": convert(False)}

HW_HANDLERS = {
    "hw.vload": _vload,
    "hw.vstore": _vstore,
    "hw.vbroadcast": _vbroadcast,
    "hw.vfma": _vfma,
    "hw.vreduce": _vreduce,
    "hw.vlanecmp": _vlanecmp,
    "hw.vselect": _vselect,
    "hw.vcmpf": _vcmpf,
    "hw.vconvert": lambda e, op: _VCONVERT[op.properties["kind"].data](e, op),  # type: ignore[attr-defined]
    "hw.vmaskload": lambda e, op: _masked(e, op, "load"),
    "hw.vmaskstore": lambda e, op: _masked(e, op, "store"),
    "hw.vgather": lambda e, op: _masked(e, op, "gather"),
    "hw.vlookup": lambda e, op: _masked(e, op, "lookup"),
}

MATH_HANDLERS = {
    **{k: _unary(v) for k, v in UNARY.items()},
    **{k: _binary(v) for k, v in BINARY.items()},
    "math.rsqrt": _rsqrt,
    "math.fma": _math_fma,
    "math.fpowi": _fpowi,
    "math.ctlz": _int_unary("ctlz"),
    "math.cttz": _int_unary("cttz"),
    "math.ctpop": _int_unary("ctpop"),
    "math.absi": _int_unary("abs"),
}
