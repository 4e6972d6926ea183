"""ziggurat's dialects, one per level, and the context that loads them.

`get_all_dialects()` maps each dialect name to a factory that imports it on
call (as xDSL's own registry does); a test checks every key equals the
dialect's `name`.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect


def _graph() -> Dialect:
    from ziggurat.dialects.graph import Graph

    return Graph


def _te() -> Dialect:
    from ziggurat.dialects.te import TE

    return TE


def _loop() -> Dialect:
    from ziggurat.dialects.loop import Loop

    return Loop


def _hw() -> Dialect:
    from ziggurat.dialects.hw import HW

    return HW


def _x86vec() -> Dialect:
    from ziggurat.dialects.x86vec import X86Vec

    return X86Vec


def _amx() -> Dialect:
    from ziggurat.dialects.amx import AMX

    return AMX


def _sym() -> Dialect:
    from ziggurat.dialects.sym import Symbolic

    return Symbolic


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """ziggurat's own dialects, from the highest level to the lowest (`sym`: symbolic extents in
    the types of every level)."""
    return {"graph": _graph, "te": _te, "loop": _loop, "hw": _hw, "x86vec": _x86vec, "amx": _amx, "sym": _sym}


def make_context(allow_unregistered: bool = False) -> Context:
    """A context with ziggurat's dialects and every upstream xDSL dialect registered: what passes
    parse their own IR snippets with. Plugins' dialects come with `ziggurat.registry.make_context`."""
    from xdsl.dialects import get_all_dialects as upstream_dialects

    ctx = Context(allow_unregistered=allow_unregistered)
    ours = get_all_dialects()
    for name, factory in ours.items():
        ctx.register_dialect(name, factory)
    # Upstream xDSL also ships CIRCT's `hw`; ours takes that name here.
    for name, factory in upstream_dialects().items():
        if name not in ours:
            ctx.register_dialect(name, factory)
    return ctx
