"""C types for the C backend: scalars, GCC/Clang vector types, literals.

A builtin xDSL type maps to a C99 type (`index` and `i64` are `int64_t`, `i1`
is `_Bool`, `f16` is `_Float16`); a 1-D `vector<N x T>` maps to a typedef
`zv<N>_<t>` with `__attribute__((vector_size(N * sizeof T)))` and an unaligned
twin `zv<N>_<t>u` (aligned to the lane) for loads and stores. A vector of
`i1` (a mask) is `zv<N>_i32`: -1 in a lane whose bit is set, else 0, as GCC's
vector comparisons give for 32-bit lanes. A memref is a pointer to its
element type; an `i1` element is one byte (numpy's bool layout).
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import (
    BFloat16Type, Float16Type, Float32Type, Float64Type, IndexType, IntegerType, MemRefType, VectorType,
)
from xdsl.ir import Attribute

from ziggurat.backends.llvm.lltypes import memref_strides
from ziggurat.errors import CompileError

# (C type, short name, bytes, kind) of each scalar: kind "f" float, "i" integer, "b" bool.
_INT = {1: ("_Bool", "b", 1, "b"), 8: ("int8_t", "i8", 1, "i"), 16: ("int16_t", "i16", 2, "i"),
        32: ("int32_t", "i32", 4, "i"), 64: ("int64_t", "i64", 8, "i")}
_FLOAT = {Float16Type: ("_Float16", "f16", 2, "f"), Float32Type: ("float", "f32", 4, "f"),
          Float64Type: ("double", "f64", 8, "f")}
UNSIGNED = {"int8_t": "uint8_t", "int16_t": "uint16_t", "int32_t": "uint32_t", "int64_t": "uint64_t",
            "_Bool": "_Bool"}


def scalar_info(attr: Attribute) -> tuple[str, str, int, str]:
    """(C type, short name, bytes, kind) of a scalar xDSL type; CompileError for one C cannot hold."""
    if isinstance(attr, IndexType):
        return _INT[64]
    if isinstance(attr, IntegerType):
        info = _INT.get(attr.width.data)
        if info is None:
            raise CompileError(f"c backend: integer type {attr} is not supported (i1, i8, i16, i32, i64 are)")
        return info
    info = _FLOAT.get(type(attr))  # type: ignore[arg-type]
    if info is None:
        what = "bf16 has no C99/GCC 12 arithmetic type" if isinstance(attr, BFloat16Type) else "unsupported"
        raise CompileError(f"c backend: type {attr} is not supported ({what}); compile with target 'llvm'")
    return info


class Types:
    """Maps xDSL types to C type names and collects the vector typedefs a module needs."""

    def __init__(self) -> None:
        self.typedefs: dict[str, str] = {}

    def scalar(self, attr: Attribute) -> str:
        return scalar_info(attr)[0]

    def c(self, attr: Attribute) -> str:
        """The C type of a value of xDSL type `attr`."""
        if isinstance(attr, VectorType):
            return self.vector(attr)
        if isinstance(attr, MemRefType):
            return self.pointee(attr) + " *"
        return self.scalar(attr)

    def pointee(self, mt: MemRefType) -> str:
        memref_strides(mt)  # static shape and identity layout, else CompileError
        info = scalar_info(mt.element_type)
        return "uint8_t" if info[3] == "b" else info[0]

    def lanes(self, vt: VectorType) -> int:
        shape = vt.get_shape()
        if len(shape) != 1 or vt.get_num_scalable_dims():
            raise CompileError(f"c backend: only fixed 1-D vectors are supported, got {vt}")
        n = shape[0]
        if n < 1 or n & (n - 1):
            raise CompileError(f"c backend: vector {vt} has {n} lanes; GCC vector types need a power of two")
        return n

    def vector(self, vt: VectorType, unaligned: bool = False) -> str:
        n = self.lanes(vt)
        info = scalar_info(vt.element_type)
        if info[3] == "b":
            info = _INT[32]
        return self.vector_of(info[0], info[1], info[2], n, unaligned)

    def mask(self, lanes: int) -> str:
        ctype, short, size, _ = _INT[32]
        return self.vector_of(ctype, short, size, lanes)

    def vector_of(self, ctype: str, short: str, size: int, n: int, unaligned: bool = False) -> str:
        name = f"zv{n}_{short}"
        if name not in self.typedefs:
            self.typedefs[name] = f"typedef {ctype} {name} __attribute__((vector_size({n * size})));"
            self.typedefs[name + "u"] = (f"typedef {ctype} {name}u __attribute__((vector_size({n * size}), "
                                         f"aligned({size})));")
        return name + "u" if unaligned else name


def literal(attr: Attribute, value: float | int) -> str:
    """A C literal of scalar type `attr` with `value` (floats exact, as hexadecimal literals)."""
    ctype, _, size, kind = scalar_info(attr)
    if kind == "b":
        return "1" if int(value) & 1 else "0"
    if kind == "i":
        bits = size * 8
        v = int(value) & ((1 << bits) - 1)
        if v >= 1 << (bits - 1):
            v -= 1 << bits
        if v == -(1 << 63):
            return "(-9223372036854775807LL - 1)"
        return f"((int64_t){v}LL)" if ctype == "int64_t" and not -(1 << 31) <= v < 1 << 31 else (
            f"{v}" if ctype in ("int64_t", "int32_t") else f"(({ctype}){v})")
    x = float(value)
    suffix = "f" if ctype == "float" else ""
    if math.isnan(x):
        text = "__builtin_nanf(\"\")" if ctype == "float" else "__builtin_nan(\"\")"
    elif math.isinf(x):
        text = ("" if x > 0 else "-") + ("__builtin_inff()" if ctype == "float" else "__builtin_inf()")
    else:
        text = x.hex() + suffix
        if x < 0 or text.startswith("-"):
            text = f"({text})"
    return f"((_Float16){text})" if ctype == "_Float16" else text
