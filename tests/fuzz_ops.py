"""The ops the graph fuzzer draws (tests/fuzz_graphs.py): one builder per op.

A builder picks its operands (`ctx.operand`, `ctx.partner`), draws legal
attributes and adds the node with the interval of its output; it raises
GenReject when the draw does not give a legal node.
"""

from __future__ import annotations

import math

import numpy as np

from tests.fuzz_graphs import B, F, F16, I32, I64, GenReject, V

INTS = (I32, I64)


def _mag(*vs: V) -> float:
    return max(v.mag for v in vs)


def _corners(f, a: V, b: V) -> tuple[float, float]:
    vals = [f(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    return min(vals), max(vals)


# -- elementwise --------------------------------------------------------------------------
UNARY = {  # op -> (interval of the result, operand requirement)
    "Relu": (lambda v: (max(v.lo, 0), max(v.hi, 0)), {}),
    "Sigmoid": (lambda v: (0, 1), {}),
    "Tanh": (lambda v: (-1, 1), {}),
    "Erf": (lambda v: (-1, 1), {}),
    "Abs": (lambda v: (0, v.mag), {}),
    "Neg": (lambda v: (-v.hi, -v.lo), {}),
    "Exp": (lambda v: (0, math.exp(v.hi)), {"max_mag": 8}),
    "Sqrt": (lambda v: (math.sqrt(v.lo), math.sqrt(v.hi)), {"positive": True}),
    "Log": (lambda v: (math.log(v.lo), math.log(v.hi)), {"positive": True}),
    "Reciprocal": (lambda v: (1 / v.hi, 1 / v.lo), {"positive": True}),
    "Softplus": (lambda v: (0, max(v.hi, 0) + 1), {"max_mag": 50}),
    "Softsign": (lambda v: (-1, 1), {}),
    "Sin": (lambda v: (-1, 1), {"max_mag": 50}),
    "Cos": (lambda v: (-1, 1), {"max_mag": 50}),
    "Floor": (lambda v: (math.floor(v.lo), math.floor(v.hi)), {"exact": True}),
    "Ceil": (lambda v: (math.ceil(v.lo), math.ceil(v.hi)), {"exact": True}),
    "Round": (lambda v: (round(v.lo) - 1, round(v.hi) + 1), {"exact": True}),
    "Sign": (lambda v: (-1, 1), {"exact": True}),
    "HardSwish": (lambda v: (-0.5, max(v.hi, 0)), {}),
    "Selu": (lambda v: (-2, 1.06 * max(v.hi, 0)), {}),
}
EXACT_UNARY = {"Relu", "Abs", "Neg", "Floor", "Ceil", "Round", "Sign"}
LOOSE_UNARY = {"Exp", "Log", "Erf", "Softplus", "Sin", "Cos", "Selu"}


def _unary(op: str):
    interval, need = UNARY[op]

    def build(c) -> None:
        ints = op in ("Abs", "Neg") and c.chance(4)  # the integer forms ziggurat has (dtype_policy.NATIVE)
        v = c.operand(INTS if ints else (F,), **need)
        if op in LOOSE_UNARY:
            c.loose = True
        c.node(op, [v.name], [interval(v)], exact=v.exact and op in EXACT_UNARY)
    return build


def _alpha_unary(op: str, interval):
    def build(c) -> None:
        v = c.operand((F,), exact=op == "ThresholdedRelu")
        alpha = c.choice([0.1, 0.5, 1.0, 2.0, 0.01])
        attrs = {"alpha": alpha}
        if op == "HardSigmoid":
            attrs["beta"] = c.choice([0.5, 0.2, 0.0])
        if op in ("Elu", "Celu"):
            c.loose = True
        c.node(op, [v.name], [interval(v, alpha)], **attrs)
    return build


BINARY = {
    "Add": lambda a, b: (a.lo + b.lo, a.hi + b.hi),
    "Sub": lambda a, b: (a.lo - b.hi, a.hi - b.lo),
    "Mul": lambda a, b: _corners(lambda x, y: x * y, a, b),
    "Max": lambda a, b: (max(a.lo, b.lo), max(a.hi, b.hi)),
    "Min": lambda a, b: (min(a.lo, b.lo), min(a.hi, b.hi)),
}


def _binary(op: str):
    def build(c) -> None:
        a = c.operand((F,) if not c.chance(4) else INTS)
        b = c.partner(a)
        if c.chance(2):
            a, b = b, a
        c.node(op, [a.name, b.name], [BINARY[op](a, b)], exact=a.exact and b.exact and (op in ("Max", "Min") or a.dtype in INTS))
    return build


def op_div(c) -> None:
    a = c.operand((F,) if not c.chance(3) else INTS)
    b = c.partner(a, positive=True)
    c.node("Div", [a.name, b.name], [_corners(lambda x, y: x / y, a, b)], exact=a.dtype in INTS)


def op_mod(c) -> None:
    a = c.operand(INTS + (F,), exact=True)
    b = c.partner(a, positive=True, exact=True)
    c.node("Mod", [a.name, b.name], [(-b.mag, b.mag)], exact=True, fmod=int(a.dtype == F))


def op_pow(c) -> None:
    base = c.operand((F,), positive=True, max_mag=20)
    if c.chance(2):
        e = c.partner(base, dtypes=(F,), max_mag=3)
    else:
        k = c.choice([2.0, 0.5, 3.0, -1.0, 1.5, 1.0, 0.0, -0.5])
        dtype = c.choice([F, I64]) if float(k).is_integer() else F
        e = V(c.const(np.array(k), dtype), (), dtype, k, k, True)
    c.loose = True
    c.node("Pow", [base.name, e.name], [_corners(lambda x, y: x**y, base, e)])


def op_variadic(op: str):
    def build(c) -> None:
        a = c.operand((F,))
        vs = [a] + [c.partner(a) for _ in range(c.int(0, 2))]
        if op in ("Sum", "Mean"):
            iv = (sum(v.lo for v in vs), sum(v.hi for v in vs))
            if op == "Mean":
                iv = (iv[0] / len(vs), iv[1] / len(vs))
        else:
            f = max if op == "Max" else min
            iv = (f(v.lo for v in vs), f(v.hi for v in vs))
        c.node(op, [v.name for v in vs], [iv])
    return build


def op_prelu(c) -> None:
    x = c.operand((F,), min_rank=1)
    shape = x.shape[len(x.shape) - c.int(0, len(x.shape)):]
    slope = c.operand((F,), shape=tuple(d if c.chance(2) else 1 for d in shape), lo=-1, hi=1)
    c.node("PRelu", [x.name, slope.name], [(-_mag(x, slope) * max(slope.mag, 1), x.mag)])


def op_compare(c) -> None:
    op = c.choice(["Greater", "Less", "Equal", "GreaterOrEqual", "LessOrEqual"])
    a = c.operand((F,) + INTS, exact=True)
    b = c.partner(a, exact=True)
    c.node(op, [a.name, b.name], [(0, 1)], exact=True)


def op_logic(c) -> None:
    a = c.operand((B,))
    if c.chance(3):
        c.node("Not", [a.name], [(0, 1)], exact=True)
        return
    b = c.partner(a)
    c.node(c.choice(["And", "Or", "Xor"]), [a.name, b.name], [(0, 1)], exact=True)


def op_where(c) -> None:
    cond = c.operand((B,))
    x = c.partner(cond, dtypes=(F,) + INTS) if c.chance(2) else c.operand((F,) + INTS)
    y = c.partner(x)
    if not all(_broadcast_all(cond.shape, x.shape, y.shape)):
        raise GenReject("Where shapes")
    c.node("Where", [cond.name, x.name, y.name], [(min(x.lo, y.lo), max(x.hi, y.hi))], exact=x.exact and y.exact)


def _broadcast_all(*shapes):
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    for dims in zip(*padded):
        yield len({d for d in dims if d != 1}) <= 1


def op_clip(c) -> None:
    x = c.operand((F,) if not c.chance(4) else INTS)
    lo = c.choice([-1.0, 0.0, -0.5, -3.0])
    hi = c.choice([1.0, 0.5, 6.0, 2.0])
    np_t = F if x.dtype == F else x.dtype
    ins = [x.name, "", ""]
    if c.chance(4) or not c.chance(3):
        ins[1] = c.const(np.array(lo), np_t)
    if not c.chance(4):
        ins[2] = c.const(np.array(hi), np_t)
    while ins[-1] == "":
        ins.pop()
    low = lo if len(ins) > 1 and ins[1] else x.lo
    high = hi if len(ins) > 2 else x.hi
    c.node("Clip", ins, [(max(min(x.lo, high), low), min(max(x.hi, low), high))], exact=x.exact)


def op_cast(c) -> None:
    src = c.operand((F, F16, I32, I64, B))
    targets = {F: [F16, I32, I64, B] if src.exact else [F16], F16: [F], I32: [F, I64, B], I64: [F, I32, B],
               B: [F, I32, I64]}[src.dtype]
    to = c.choice(targets)
    lo, hi = (0, 1) if to == B else (min(src.lo, 0), max(src.hi, 0)) if src.dtype == B else (src.lo, src.hi)
    if to in INTS:
        lo, hi = math.trunc(lo), math.trunc(hi)
    c.node("Cast", [src.name], [(lo, hi)], exact=src.exact, to=to)


def _family(builders: dict):
    def build(c) -> None:
        builders[c.choice(sorted(builders))](c)
    return build


def _ops() -> dict:
    from tests import fuzz_ops_nn as nn

    unary = {op: _unary(op) for op in UNARY}
    unary.update({
        "LeakyRelu": _alpha_unary("LeakyRelu", lambda v, a: (min(v.lo, a * v.lo), max(v.hi, a * v.hi, 0))),
        "Elu": _alpha_unary("Elu", lambda v, a: (-a, max(v.hi, 0))),
        "Celu": _alpha_unary("Celu", lambda v, a: (-a, max(v.hi, 0))),
        "HardSigmoid": _alpha_unary("HardSigmoid", lambda v, a: (0, 1)),
        "ThresholdedRelu": _alpha_unary("ThresholdedRelu", lambda v, a: (0, max(v.hi, 0))),
    })
    binary = {op: _binary(op) for op in BINARY}
    binary.update({"Div": op_div, "Mod": op_mod, "Pow": op_pow, "PRelu": op_prelu, "Sum": op_variadic("Sum"),
                   "Mean": op_variadic("Mean"), "MaxN": op_variadic("Max"), "MinN": op_variadic("Min")})
    ops = {"Relu": unary["Relu"], "Unary": _family(unary), "Binary": _family(binary), "Compare": op_compare,
           "Logic": op_logic, "Where": op_where, "Clip": op_clip, "Cast": op_cast}
    ops.update({name[3:]: f for name, f in vars(nn).items() if name.startswith("op_")})
    return ops


OPS = _ops()
"""Builder by family name (what hypothesis draws; most cover several ONNX ops)."""
