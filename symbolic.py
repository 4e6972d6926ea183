"""Symbolic dimensions: integer polynomials over named symbols (`batch`, `sequence`).

A dynamic axis of a model is a *symbol*; the extents derived from it are
polynomials with integer coefficients (`batch*sequence`, `2*sequence + 1`). A
`Sym` behaves like an int where the answer does not depend on the symbols'
values (`+`, `-`, `*`, exact division by a constant, equality) and raises
`SymbolicError` where it would (`int()`, ordering, `//` that does not divide
every coefficient), so shape code written for ints either works on symbols or
fails loudly at the place that needs a value.

    n = Sym.of("batch") * Sym.of("sequence")
    str(n * 4)                       # '4*batch*sequence'
    (n * 4).evaluate({"batch": 2, "sequence": 3})   # 24
    Sym.parse("4*batch*sequence") == n * 4          # True

`dims_of(shape)` gives the expressions of a shape's symbolic dims (what
`#sym.dims` stores, dialects/sym.py); `prod` is the element count of a mixed
shape.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache, reduce
from typing import Any

import numpy as np

from ziggurat.errors import CompileError

Monomial = tuple[str, ...]  # sorted symbol names, repeated for powers; () is the constant term


class SymbolicError(CompileError):
    """An operation needs the value of a symbolic extent."""


class Sym:
    """An integer polynomial over symbols, in canonical form (immutable, hashable)."""

    __slots__ = ("terms", "_hash")

    def __init__(self, terms: Mapping[Monomial, int]):
        self.terms: dict[Monomial, int] = {m: c for m, c in sorted(terms.items()) if c}
        self._hash = hash(tuple(self.terms.items()))

    @staticmethod
    def of(name: str) -> Sym:
        if not _NAME.fullmatch(name):
            raise SymbolicError(f"'{name}' is not a symbol name (letters, digits, '_', '.', ':'; not a leading digit)")
        return Sym({(name,): 1})

    @staticmethod
    def lift(x: int | Sym) -> Sym:
        return x if isinstance(x, Sym) else Sym({(): int(x)})

    def bounds(self) -> tuple[int | None, int | None]:
        """The least and greatest values over every binding with each symbol >= 1 (None: no
        bound), from the signs of the coefficients (the polynomial is monotone in each symbol
        where they share one sign). A derived symbol (`{P}//k`, possibly 0) gives no bound."""
        least = {s: _least(s) for s in self.symbols}
        if any(v is None for v in least.values()):
            return None, None
        at_least = sum(c * reduce(lambda a, s: a * least[s], m, 1) for m, c in self.terms.items())  # type: ignore[misc]
        coefs = [c for m, c in self.terms.items() if m]
        lo = at_least if all(c >= 0 for c in coefs) else None
        hi = at_least if all(c <= 0 for c in coefs) else None
        return lo, hi

    def compare(self, other: int | Sym) -> int | None:
        """-1, 0 or 1 where every binding (symbols >= 1) orders `self` and `other` the same way,
        else None."""
        d = self - other
        if not isinstance(d, Sym):
            return (d > 0) - (d < 0)
        lo, hi = d.bounds()
        if lo is not None and lo > 0:
            return 1
        if hi is not None and hi < 0:
            return -1
        return None

    @property
    def symbols(self) -> set[str]:
        return {s for m in self.terms for s in m}

    @property
    def constant(self) -> int | None:
        """The value when no symbol occurs, else None."""
        if not self.terms:
            return 0
        if list(self.terms) == [()]:
            return self.terms[()]
        return None

    def simplify(self) -> int | Sym:
        """An int where the polynomial is constant."""
        c = self.constant
        return self if c is None else c

    def __add__(self, other: int | Sym) -> int | Sym:
        o = Sym.lift(other)
        terms = dict(self.terms)
        for m, c in o.terms.items():
            terms[m] = terms.get(m, 0) + c
        return Sym(terms).simplify()

    __radd__ = __add__

    def __neg__(self) -> Sym:
        return Sym({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: int | Sym) -> int | Sym:
        return self + (-Sym.lift(other))

    def __rsub__(self, other: int | Sym) -> int | Sym:
        return Sym.lift(other) + (-self)

    def __mul__(self, other: int | Sym) -> int | Sym:
        if not isinstance(other, (numbers.Integral, Sym)):
            return NotImplemented
        o = Sym.lift(other)
        terms: dict[Monomial, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in o.terms.items():
                m = tuple(sorted(m1 + m2))
                terms[m] = terms.get(m, 0) + c1 * c2
        return Sym(terms).simplify()

    __rmul__ = __mul__

    def floordiv(self, k: int) -> int | Sym:
        """floor(self / k): exact where it divides, else with a derived symbol (`floor_div`)."""
        return floor_div(self, k)

    def __floordiv__(self, other: int | Sym) -> int | Sym:
        """Floor division: by a positive int (Python's `//`: a derived symbol where it does not
        divide, `floor_div`), or exactly by a polynomial that divides every term (`exact_div`)."""
        if isinstance(other, numbers.Integral) or (isinstance(other, Sym) and other.constant is not None):
            k = int(other) if not isinstance(other, Sym) else other.constant
            if k is not None and k > 0:
                return floor_div(self, k)
        return self.exact_div(other)

    def __rfloordiv__(self, other: int) -> int | Sym:
        return Sym.lift(other).exact_div(self)

    def exact_div(self, other: int | Sym) -> int | Sym:
        """`self / other` where it is exact for every binding: a constant dividing every
        coefficient, or a monomial dividing every term; else SymbolicError."""
        if isinstance(other, numbers.Integral) or (isinstance(other, Sym) and other.constant is not None):
            d = int(other) if not isinstance(other, Sym) else other.constant
            if d and all(c % d == 0 for c in self.terms.values()):
                return Sym({m: c // d for m, c in self.terms.items()}).simplify()
        elif isinstance(other, Sym) and len(other.terms) == 1:
            (dm, dc), = other.terms.items()
            out: dict[Monomial, int] = {}
            for m, c in self.terms.items():
                rest = list(m)
                for s in dm:
                    if s not in rest:
                        break
                    rest.remove(s)
                else:
                    if c % dc == 0:
                        out[tuple(rest)] = c // dc
                        continue
                break
            else:
                return Sym(out).simplify()
        raise SymbolicError(f"'{self}' is not known to be divisible by '{other}'")

    def __mod__(self, other: int | Sym) -> int | Sym:
        if isinstance(other, numbers.Integral) and int(other) > 0:
            return self - floor_div(self, int(other)) * int(other)
        self.exact_div(other)  # raises unless exact
        return 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sym):
            return self.terms == other.terms
        if isinstance(other, numbers.Integral):
            return self.constant == int(other)
        return NotImplemented

    def __hash__(self) -> int:
        return self._hash

    def _order(self, other: object) -> bool:
        raise SymbolicError(f"comparing the symbolic extent '{self}' with {other} needs its value")

    __lt__ = __le__ = __gt__ = __ge__ = _order

    def __int__(self) -> int:
        c = self.constant
        if c is None:
            raise SymbolicError(f"the symbolic extent '{self}' has no value at compile time")
        return c

    __index__ = __int__

    def __bool__(self) -> bool:
        return bool(self.terms)

    def evaluate(self, binding: Mapping[str, int]) -> int:
        return sum(c * reduce(lambda a, s: a * _atom(s, binding), m, 1) for m, c in self.terms.items())

    @property
    def base_symbols(self) -> set[str]:
        """The symbols an input binds that the value depends on (through derived ones too)."""
        out: set[str] = set()
        for s in self.symbols:
            if is_derived(s):
                inner = derived_parts(s)[0]
                out |= inner.base_symbols if isinstance(inner, Sym) else set()
            else:
                out.add(s)
        return out

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for m, c in self.terms.items():
            if m and c in (1, -1):
                parts.append(("-" if c < 0 else "") + "*".join(m))
            else:
                parts.append("*".join([str(c), *m]))
        return " + ".join(parts).replace("+ -", "- ")

    def __repr__(self) -> str:
        return f"Sym({str(self)!r})"

    @staticmethod
    def parse(text: str) -> int | Sym:
        """The inverse of `str`: sums and differences of products of ints, symbol names and
        floor quotients `{P}//k`."""
        src = text.replace(" ", "")
        if not src:
            raise SymbolicError("an empty symbolic extent")
        try:
            value, end = _parse_sum(src, 0)
        except (IndexError, ValueError):
            end = -1
        if end != len(src):
            raise SymbolicError(f"cannot read the symbolic extent '{text}'")
        return value


def _parse_sum(src: str, i: int) -> tuple[int | Sym, int]:
    total: int | Sym = 0
    sign = 1
    if src[i] in "+-":
        sign, i = (-1 if src[i] == "-" else 1), i + 1
    while True:
        term, i = _parse_term(src, i)
        total = total + term * sign
        if i < len(src) and src[i] in "+-":
            sign, i = (-1 if src[i] == "-" else 1), i + 1
            continue
        return total, i


def _parse_term(src: str, i: int) -> tuple[int | Sym, int]:
    value: int | Sym = 1
    while True:
        if src[i] == "{":
            inner, i = _parse_sum(src, i + 1)
            if src[i:i + 3] != "}//":
                raise ValueError(src)
            m = re.match(r"\d+", src[i + 3:])
            if m is None:
                raise ValueError(src)
            factor = floor_div(inner, int(m.group()))
            i += 3 + m.end()
        else:
            m = re.match(r"\d+|[A-Za-z_][A-Za-z0-9_.:]*", src[i:])
            if m is None:
                raise SymbolicError(f"cannot read the symbolic extent '{src}': '{src[i:]}' is neither an integer "
                                    "nor a symbol name")
            factor = int(m.group()) if m.group().isdigit() else Sym.of(m.group())
            i += m.end()
        value = value * factor
        if i < len(src) and src[i] == "*":
            i += 1
            continue
        return value, i


def floor_div(p: int | Sym, k: int) -> int | Sym:
    """floor(p / k) for a positive int k: exact parts divide, the rest is a derived symbol
    `{rest}//k` whose value follows from the others' (`evaluate`)."""
    if k <= 0:
        raise SymbolicError(f"floor division by {k}")
    if not isinstance(p, Sym):
        return int(p) // k
    exact = {m: c - c % k for m, c in p.terms.items()}
    rest = Sym({m: c % k for m, c in p.terms.items()})
    quotient = Sym({m: c // k for m, c in exact.items()}).simplify()
    if not rest.terms:
        return quotient
    if rest.constant is not None:
        return quotient + rest.constant // k
    return quotient + Sym({("{" + str(rest) + "}//" + str(k),): 1})


def is_derived(name: str) -> bool:
    """A derived symbol (`{P}//k`) rather than one a model's input binds."""
    return name.startswith("{")


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:]*")

Dim = int | Sym


def _least(name: str) -> int | None:
    """The least value of a symbol: 1 for an input's, floor(least(P) / k) for a derived `{P}//k`
    where that is known and not negative."""
    if not is_derived(name):
        return 1
    inner, k = derived_parts(name)
    lo = inner.bounds()[0] if isinstance(inner, Sym) else int(inner)
    return lo // k if lo is not None and lo >= 0 else None


@lru_cache(maxsize=4096)
def derived_parts(name: str) -> tuple[int | Sym, int]:
    """(P, k) of a derived symbol `{P}//k` (parsed once: sampling evaluates it thousands of times)."""
    close = name.rindex("}")
    return Sym.parse(name[1:close]), int(name[close + 3:])


def _atom(name: str, binding: Mapping[str, Any]) -> Any:
    if name in binding:
        v = binding[name]
        return v if isinstance(v, np.ndarray) else int(v)
    if is_derived(name):
        inner, k = derived_parts(name)
        return (inner.evaluate(binding) if isinstance(inner, Sym) else int(inner)) // k
    raise SymbolicError(f"no value for symbol '{name}'")


def is_symbolic(shape: Iterable[Dim]) -> bool:
    return any(isinstance(d, Sym) for d in shape)


def prod(shape: Iterable[Dim]) -> Dim:
    out: Dim = 1
    for d in shape:
        out = out * d
    return out


def symbols_in(shape: Iterable[Dim]) -> set[str]:
    return {s for d in shape if isinstance(d, Sym) for s in d.symbols}


def sampled_le(a: Dim, b: Dim, limit: int = 4096) -> bool | None:
    """Whether `a <= b` at every value 1..limit of the one base symbol they depend on (None where
    they depend on several, or it fails somewhere). A choice made this way is a guess beyond
    `limit`: its caller records the inequality as a `Constraint`, which every call checks."""
    names = (Sym.lift(a).base_symbols | Sym.lift(b).base_symbols)
    if len(names) != 1:
        return None
    (name,) = names
    values = {name: np.arange(1, limit + 1, dtype=np.int64)}  # every value at once
    return bool(np.all(np.asarray(evaluate(a, values)) <= np.asarray(evaluate(b, values))))


def derived_values(names: Iterable[str], binding: Mapping[str, int]) -> dict[str, int]:
    """The values of `names` (base or derived symbols) at a binding of the base ones."""
    return {n: _atom(n, binding) for n in names}


def evaluate(d: Dim, binding: Mapping[str, Any]) -> Any:
    """`d`'s value at `binding` (a symbol's value may be an int array: the values at many bindings)."""
    return d.evaluate(binding) if isinstance(d, Sym) else int(d)


def row_major_strides(shape: Iterable[Dim]) -> tuple[Dim, ...]:
    """Element strides of a row-major buffer of this (mixed) shape."""
    out: list[Dim] = []
    acc: Dim = 1
    for d in reversed(list(shape)):
        out.append(acc)
        acc = acc * d
    return tuple(reversed(out))


class Constraint:
    """What a model needs of its symbols' values (`lhs <op> rhs`, op one of `<=`, `==`), and the
    node that needs it: a Slice of a 512-row table up to `sequence` needs `sequence <= 512`.
    `check(binding)` returns None when the binding satisfies it, else what is wrong."""

    __slots__ = ("lhs", "op", "rhs", "node")

    def __init__(self, lhs: Dim, op: str, rhs: Dim, node: str):
        if op not in ("<=", "=="):
            raise SymbolicError(f"constraint operator must be <= or ==, got {op!r}")
        self.lhs, self.op, self.rhs, self.node = lhs, op, rhs, node

    def __str__(self) -> str:
        return f"{self.lhs} {self.op} {self.rhs}"

    def decided(self) -> bool | None:
        """True or False where every binding (symbols >= 1) decides it alike, else None."""
        d = self.lhs - self.rhs
        if not isinstance(d, Sym):
            return d <= 0 if self.op == "<=" else d == 0
        lo, hi = d.bounds()
        if (lo is not None and lo > 0) or (self.op == "==" and hi is not None and hi < 0):
            return False
        if self.op == "<=" and hi is not None and hi <= 0:
            return True
        return None

    def check(self, binding: Mapping[str, int]) -> str | None:
        a, b = evaluate(self.lhs, binding), evaluate(self.rhs, binding)
        ok = a <= b if self.op == "<=" else a == b
        return None if ok else f"{self} ({a} {self.op} {b} is false; needed by {self.node})"

    def to_json(self) -> list:
        return [str(self.lhs), self.op, str(self.rhs), self.node]

    @classmethod
    def from_json(cls, data: list) -> Constraint:
        lhs, op, rhs, node = data
        return cls(Sym.parse(str(lhs)), str(op), Sym.parse(str(rhs)), str(node))
