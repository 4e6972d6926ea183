"""The runtime: running compiled models (`executor.py`) and exported ones
(`export.py`: `load`), with numpy and ctypes alone."""

from ziggurat.runtime.export import load
from ziggurat.runtime.executor import CompiledModel

__all__ = ["load", "CompiledModel"]
