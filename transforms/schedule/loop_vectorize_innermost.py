"""loop-vectorize-innermost: the default vectorization decision."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import StringAttr
from xdsl.passes import ModulePass

from ziggurat.dialects import loop
from ziggurat.transforms.schedule.mark import is_scheduled


def _inside_vectorized(f: loop.ForOp) -> bool:
    """True under a loop that is vectorized as a whole (an outer vector loop)."""
    p = f.parent_op()
    while p is not None:
        if isinstance(p, loop.ForOp) and p.kind.data == "vectorized":
            return True
        p = p.parent_op()
    return False


@dataclass(frozen=True)
class LoopVectorizeInnermostPass(ModulePass):
    """Marks every innermost serial loop with enough iterations `vectorized`.

    **Input:** loop-level functions (any schedule).

    **Output:** the same loops; an innermost `serial` loop whose trip count is
    at least `min-extent` gets kind `vectorized`, unless it lies inside a loop
    that is already `vectorized` (an outer vector loop, e.g. from
    loop-default-schedule) or holds no `loop.block` (hw-level code a
    schedule wrote itself, such as lowering/qgemm_amx.py's tile loop). A reduction loop qualifies
    too: convert-loop-to-hw then accumulates in vector lanes, which reorders
    the floating-point sum (the compiler runs float code with reassociation
    allowed). Whether a marked loop really becomes vector code is decided by
    convert-loop-to-hw, which records its reason when it cannot.

    **Options:** `min-extent` (default 16, one AVX-512 register of f32).

    Example:
    ```mlir
    loop.for %i1 = 0 to 512 serial { loop.block "relu" [...] {...} }
    ```
    becomes
    ```mlir
    loop.for %i1 = 0 to 512 vectorized { loop.block "relu" [...] {...} }
    ```
    """

    name = "loop-vectorize-innermost"
    min_extent: int = 16

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for f in op.walk():
            if not isinstance(f, loop.ForOp) or f.kind.data != "serial":
                continue
            if is_scheduled(f):  # apply-tuning replayed a record's schedule
                continue
            if any(isinstance(inner, loop.ForOp) for inner in f.body.walk() if inner is not f):
                continue
            if _inside_vectorized(f):
                continue
            if not any(isinstance(o, loop.BlockOp) for o in f.body.walk()):  # hw-level code (AMX tiles)
                continue
            if f.bounds[2] == 1 and f.trip_count >= self.min_extent:
                f.properties["kind"] = StringAttr("vectorized")
