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
from functools import reduce

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
        where they share one sign)."""
        at_one = sum(self.terms.values())
        coefs = [c for m, c in self.terms.items() if m]
        lo = at_one if all(c >= 0 for c in coefs) else None
        hi = at_one if all(c <= 0 for c in coefs) else None
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

    def __floordiv__(self, other: int | Sym) -> int | Sym:
        """Exact division: by an int dividing every coefficient, or by a polynomial that is a factor
        of every monomial with the quotient's coefficients exact (`batch*sequence // sequence`)."""
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

    def __mod__(self, other: int | Sym) -> int:
        self // other  # raises unless exact
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
        missing = sorted(self.symbols - set(binding))
        if missing:
            raise SymbolicError(f"no value for symbol(s) {', '.join(missing)} in '{self}'")
        return sum(c * reduce(lambda a, s: a * int(binding[s]), m, 1) for m, c in self.terms.items())

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
        """The inverse of `str`: sums and differences of products of ints and symbol names."""
        total: int | Sym = 0
        src = text.replace(" ", "")
        if not src:
            raise SymbolicError("an empty symbolic extent")
        if not re.fullmatch(r"[+-]?[^+-]+([+-][^+-]+)*", src):
            raise SymbolicError(f"cannot read the symbolic extent '{text}'")
        for sign, term in re.findall(r"([+-]?)([^+-]+)", src):
            value: int | Sym = 1
            for factor in term.split("*"):
                if factor.isdigit():
                    value = value * int(factor)
                elif _NAME.fullmatch(factor):
                    value = value * Sym.of(factor)
                else:
                    raise SymbolicError(f"cannot read the symbolic extent '{text}': '{factor}' is neither "
                                        "an integer nor a symbol name")
            total = total - value if sign == "-" else total + value
        return total


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:]*")

Dim = int | Sym


def is_symbolic(shape: Iterable[Dim]) -> bool:
    return any(isinstance(d, Sym) for d in shape)


def prod(shape: Iterable[Dim]) -> Dim:
    out: Dim = 1
    for d in shape:
        out = out * d
    return out


def symbols_in(shape: Iterable[Dim]) -> set[str]:
    return {s for d in shape if isinstance(d, Sym) for s in d.symbols}


def evaluate(d: Dim, binding: Mapping[str, int]) -> int:
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
