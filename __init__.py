"""ziggurat: a deep-learning compiler on xDSL.

Models are imported (ONNX), optimized at four levels (graph, te, loop, hw),
and compiled to native code with llvmlite:

    import ziggurat
    model = ziggurat.compile("model.onnx", target="llvm -num-cores=2")
    (logits,) = model(x)            # or model(**{"input.1": x}), model({"input.1": x})
"""

from ziggurat.errors import (
    CompileError,
    InputError,
    ModelLoadError,
    ShapeError,
    UnsupportedOpError,
    ZigguratError,
)
from ziggurat.target import Target

__all__ = [
    "compile",
    "Target",
    "ZigguratError",
    "UnsupportedOpError",
    "ShapeError",
    "ModelLoadError",
    "CompileError",
    "InputError",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    # `compile` imports xDSL and llvmlite; loading an exported model
    # (`ziggurat.runtime.load`) must not, so the import waits for first use.
    if name == "compile":
        from ziggurat.compiler import compile  # noqa: A004 - the public entry point

        return compile
    raise AttributeError(f"module 'ziggurat' has no attribute {name!r}")
