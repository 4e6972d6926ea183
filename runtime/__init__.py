"""The runtime: running compiled models (`executor.py`) and exported ones
(`export.py` writes them, `load.py`: `load`), with numpy and ctypes alone."""

from ziggurat.runtime.load import load
from ziggurat.runtime.executor import CompiledModel

__all__ = ["load", "CompiledModel"]
