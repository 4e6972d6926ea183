"""Types, sizes and function declarations shared by the LLVM translators.

Maps builtin xDSL types to `llvmlite.ir` types (`index` is i64, a memref is a
bare pointer to its element type), computes row-major strides of static
memrefs, and declares intrinsics and C functions once per module.
"""

from __future__ import annotations

from llvmlite import ir
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    MemRefType,
    NoneAttr,
    StridedLayoutAttr,
    VectorType,
)
from xdsl.ir import Attribute
from xdsl.ir.affine import AffineMap

from ziggurat.errors import CompileError

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F16 = ir.HalfType()
F32 = ir.FloatType()
F64 = ir.DoubleType()


class BFloatType(ir.HalfType):
    """LLVM's `bfloat` (llvmlite has no class for it): 2 bytes, float lanes."""

    intrinsic_name = "bf16"

    def _to_string(self) -> str:
        return "bfloat"


BF16 = BFloatType()
I8P = I8.as_pointer()
VOID = ir.VoidType()

_SCALARS: dict[type, ir.Type] = {IndexType: I64, BFloat16Type: BF16, Float16Type: F16, Float32Type: F32, Float64Type: F64}
_TYPE_CACHE: dict[Attribute, ir.Type] = {}
_STRIDE_CACHE: dict[Attribute, tuple[int, ...]] = {}


def llvm_type(attr: Attribute) -> ir.Type:
    """The LLVM type of an xDSL type (memrefs become element pointers)."""
    t = _TYPE_CACHE.get(attr)
    if t is None:
        t = _TYPE_CACHE[attr] = _convert(attr)
    return t


def _convert(attr: Attribute) -> ir.Type:
    scalar = _SCALARS.get(type(attr))
    if scalar is not None:
        return scalar
    if isinstance(attr, IntegerType):
        return ir.IntType(attr.width.data)
    if isinstance(attr, VectorType):
        shape = attr.get_shape()
        if len(shape) != 1 or attr.get_num_scalable_dims():
            raise CompileError(f"llvm backend: only fixed 1-D vectors are supported, got {attr}")
        return ir.VectorType(llvm_type(attr.element_type), shape[0])
    if isinstance(attr, MemRefType):
        from ziggurat.dialects.sym import DimsAttr, shape_of

        if isinstance(attr.layout, DimsAttr):
            shape_of(attr)  # one expression per dynamic dim (the strides follow from them)
        else:
            memref_strides(attr)  # rejects dynamic shapes and non-identity layouts
        return llvm_type(attr.element_type).as_pointer()
    raise CompileError(f"llvm backend: unsupported type {attr}")


def memref_strides(mt: MemRefType) -> tuple[int, ...]:
    """Row-major element strides of a static memref with identity layout."""
    s = _STRIDE_CACHE.get(mt)
    if s is not None:
        return s
    shape = mt.get_shape()
    if any(d < 0 for d in shape):
        raise CompileError(f"llvm backend: memref {mt} has a dynamic shape without #sym.dims; give each '?' "
                           "its expression (dialects/sym.py) or compile at a static shape")
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    strides.reverse()
    layout = mt.layout
    if isinstance(layout, StridedLayoutAttr):
        if tuple(layout.get_strides()) != tuple(strides) or layout.get_offset() not in (0, None):
            raise CompileError(f"llvm backend: memref {mt} has a non-identity layout")
    elif not isinstance(layout, NoneAttr):
        if getattr(layout, "data", None) != AffineMap.identity(len(shape)):
            raise CompileError(f"llvm backend: memref {mt} has a non-identity layout")
    s = _STRIDE_CACHE[mt] = tuple(strides)
    return s


def byte_size(t: ir.Type) -> int:
    """Size in bytes of a scalar, vector or pointer LLVM type (as stored)."""
    if isinstance(t, ir.IntType):
        return max(1, (t.width + 7) // 8)
    if isinstance(t, ir.VectorType):
        return t.count * byte_size(t.element)
    if isinstance(t, ir.PointerType):
        return 8
    if isinstance(t, ir.DoubleType):
        return 8
    if isinstance(t, ir.FloatType):
        return 4
    if isinstance(t, ir.HalfType):
        return 2
    raise CompileError(f"llvm backend: no size for type {t}")


def element_size(t: ir.Type) -> int:
    """Size of a scalar, or of one lane of a vector: the safe access alignment."""
    return byte_size(t.element if isinstance(t, ir.VectorType) else t)


def suffix(t: ir.Type) -> str:
    """Intrinsic name mangling: f32, i64, v16f32, ..."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{suffix(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, BFloatType):
        return "bf16"
    if isinstance(t, ir.HalfType):
        return "f16"
    raise CompileError(f"llvm backend: no intrinsic suffix for type {t}")


def is_float(t: ir.Type) -> bool:
    """Whether a scalar or the lanes of a vector are floating point."""
    e = t.element if isinstance(t, ir.VectorType) else t
    return isinstance(e, (ir.FloatType, ir.DoubleType, ir.HalfType))


class Declarations:
    """Declares intrinsics and external C functions in one module, once each."""

    def __init__(self, module: ir.Module):
        self.module = module
        self._fns: dict[str, ir.Function] = {}

    def function(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        """A declared function `name`, created on first use."""
        fn = self._fns.get(name)
        if fn is None:
            fn = self._fns[name] = ir.Function(self.module, ir.FunctionType(ret, args), name)
            if not name.startswith("llvm."):
                fn.attributes.add("nounwind")
        return fn

    def intrinsic(self, base: str, ret: ir.Type, args: list[ir.Type], *mangle: ir.Type) -> ir.Function:
        """`llvm.<base>.<suffixes>`; mangled by `mangle`, or by `ret` when none given."""
        tys = mangle or (ret,)
        return self.function(f"llvm.{base}." + ".".join(suffix(t) for t in tys), ret, args)

    def declared_externals(self) -> list[str]:
        """Names of the non-intrinsic functions this module calls but does not define."""
        return [n for n, f in self._fns.items() if not n.startswith("llvm.") and f.is_declaration]
