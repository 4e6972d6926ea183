"""`x86vec` dot products in portable C (no intrinsics): the pipeline emits them for a target whose
CPU has AVX-512 VNNI (`c` on such a host), and the C compiler gets what it makes of the loops.

    x86vec.bcast_group -> the source's 4 bytes as one int32, splatted, reinterpreted (LLVM: bitcast,
                          splat, bitcast back)
    x86vec.dpbusd      -> acc[i] + sum_k (uint8) a[4i+k] * (int8) b[4i+k], wrapping (vpdpbusd, not the
                          saturating vpdpbusds)
    x86vec.maddubs_dot -> the same with each pair of products summed with int16 saturation first
                          (vpmaddubsw, then vpmaddwd with ones)
    x86vec.maddwd_dot  -> acc[i] + a[2i] * b[2i] + a[2i+1] * b[2i+1] in int32 (int16 inputs: vpmaddwd, vpaddd)
    x86vec.dpbf16ps    -> CompileError (bf16 has no C type here)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.ir import Operation

from ziggurat.backends.c.ctypes_map import scalar_info
from ziggurat.errors import CompileError

if TYPE_CHECKING:
    from ziggurat.backends.c.emit import Emitter


def _bcast_group(e: Emitter, op: Operation) -> None:
    src, res = op.operands[0], op.results[0]
    sbytes = e.types.lanes(src.type) * scalar_info(src.type.element_type)[2]  # type: ignore[arg-type,attr-defined]
    rbytes = e.types.lanes(res.type) * scalar_info(res.type.element_type)[2]  # type: ignore[arg-type,attr-defined]
    if sbytes != 4:
        raise CompileError(f"c backend: x86vec.bcast_group of a {sbytes}-byte group is not supported (4 bytes are)")
    word = e.fresh("g")
    e.line(f"int32_t {word}; memcpy(&{word}, &{e.get(src)}, 4);")
    splat = e.types.vector_of("int32_t", "i32", 4, rbytes // 4)
    e.define(res, f"({e.types.c(res.type)})({splat}){{{', '.join([word] * (rbytes // 4))}}}")


def _lane_dot(tag: str, lane_sum: str):
    """The handler of an i32-lane dot product: a static helper whose loop over lanes `i` computes
    `int32_t s` by `lane_sum` (C statements over vectors `a`, `b`) and adds it to acc[i], wrapping."""

    def emit(e: Emitter, op: Operation) -> None:
        acc, a, b = op.operands
        at, vt = e.types.c(acc.type), e.types.c(a.type)
        n = e.types.lanes(acc.type)  # type: ignore[arg-type]
        name = f"zg_{tag}_{at}_{vt}"
        e.helper(name, f"static inline {at} {name}({at} acc, {vt} a, {vt} b) {{ for (int i = 0; i < {n}; ++i) {{ "
                       f"{lane_sum} acc[i] = (int32_t)((uint32_t)acc[i] + (uint32_t)s); }} return acc; }}")
        e.define(op.results[0], f"{name}({e.get(acc)}, {e.get(a)}, {e.get(b)})")

    return emit


_PAIR = "(int32_t)(uint8_t)a[{0}] * (int32_t)b[{0}] + (int32_t)(uint8_t)a[{1}] * (int32_t)b[{1}]"
_dpbusd = _lane_dot("dpbusd", "int32_t s = 0; for (int k = 0; k < 4; ++k) "
                              "s += (int32_t)(uint8_t)a[4 * i + k] * (int32_t)b[4 * i + k];")
_maddubs_dot = _lane_dot("maddubs", "int32_t s = 0; for (int k = 0; k < 4; k += 2) { int32_t p = "
                         + _PAIR.format("4 * i + k", "4 * i + k + 1") + "; "
                         "s += p > 32767 ? 32767 : (p < -32768 ? -32768 : p); }")
_maddwd_dot = _lane_dot("maddwd", "int32_t s = (int32_t)a[2 * i] * (int32_t)b[2 * i] "
                                  "+ (int32_t)a[2 * i + 1] * (int32_t)b[2 * i + 1];")


X86_HANDLERS = {
    "x86vec.bcast_group": _bcast_group,
    "x86vec.dpbusd": _dpbusd,
    "x86vec.maddubs_dot": _maddubs_dot,
    "x86vec.maddwd_dot": _maddwd_dot,
}
