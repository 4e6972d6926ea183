"""The registry of tensor intrinsics, by name (`TensorIntrin`: lowering/tensor_intrin.py).

`register_intrin` adds an entry from any module; `get_intrin` and
`all_intrins` answer the `tensorize` primitive. The built-in x86 entries
(`lowering/intrinsics_x86.py`) are registered on first use.
"""

from __future__ import annotations

from ziggurat.errors import ScheduleError
from ziggurat.lowering.tensor_intrin import TensorIntrin

_REGISTRY: dict[str, TensorIntrin] = {}
_BUILTINS_LOADED = False


def register_intrin(intrin: TensorIntrin, replace: bool = False) -> TensorIntrin:
    """Adds `intrin` to the registry (an existing name needs `replace=True`)."""
    if intrin.name in _REGISTRY and not replace:
        raise ValueError(f"tensor intrinsic '{intrin.name}' is already registered; pass replace=True to override")
    _REGISTRY[intrin.name] = intrin
    return intrin


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        from ziggurat.lowering.intrinsics_x86 import X86_INTRINSICS

        for intrin in X86_INTRINSICS:
            _REGISTRY.setdefault(intrin.name, intrin)  # an entry registered earlier under that name wins


def all_intrins() -> dict[str, TensorIntrin]:
    """Every registered tensor intrinsic, by name."""
    _load_builtins()
    return dict(_REGISTRY)


def get_intrin(name: str) -> TensorIntrin:
    """The intrinsic called `name`, or a ScheduleError listing the known ones."""
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ScheduleError(f"no tensor intrinsic '{name}'; known: {', '.join(sorted(_REGISTRY))}") from None
