"""The errors a user of ziggurat can see.

Every error a user can trigger derives from `ZigguratError`. Its message names
the node or op, where it is, and what to do; the CLI prints it as one line and
exits with status 1, never with a traceback.
"""

from __future__ import annotations


class ZigguratError(Exception):
    """Base of every user-facing ziggurat error."""

    needs_values: tuple[str, ...] = ()
    """Graph inputs whose values would let the model compile (set by the ONNX
    importer on shape-parameter inputs known only at run time; see
    frontends/onnx/specialize.py)."""


class UnsupportedOpError(ZigguratError):
    """An ONNX op (or op variant) that the frontend cannot convert."""

    def __init__(self, op_type: str, node_name: str, opset: int, reason: str = ""):
        self.op_type = op_type
        self.node_name = node_name
        self.opset = opset
        detail = f": {reason}" if reason else ""
        super().__init__(
            f"unsupported ONNX op '{op_type}' (opset {opset}) at node '{node_name}'{detail}. "
            "Remove or replace the node, or add a converter in ziggurat/frontends/onnx/."
        )


class ShapeError(ZigguratError):
    """A shape that is unknown, dynamic where a static one is needed, or inconsistent."""


class DynamicAxesError(ShapeError):
    """A graph input with dynamic axes where only static shapes are handled: `ziggurat.compile`
    catches it and compiles a `runtime.dynamic.DynamicModel` of `model` (the ModelProto the
    importer loaded) instead. `subject` is the first part of the message: which input, which dims."""

    def __init__(self, subject: str, advice: str, model: object = None):
        super().__init__(f"{subject}; {advice}")
        self.subject = subject
        self.model = model


class ModelLoadError(ZigguratError):
    """A model file that cannot be read: missing, malformed, or unsafe."""


class CompileError(ZigguratError):
    """A failure inside a lowering or the backend, named by pass and op."""


class InputError(ZigguratError):
    """Arguments to a compiled model that do not match its inputs."""


class ScheduleError(ZigguratError):
    """An illegal schedule primitive: names the block or loop and why."""


class TuningError(ZigguratError):
    """A failure of the autotuner itself (not of a measured candidate): a bad record database, a dead worker pool."""


class TuningDatabaseError(TuningError):
    """A tuning record database that cannot be read or appended to."""


class MemoryLimitError(ZigguratError):
    """A model, file or tensor that needs more memory than the memory budget
    allows (ziggurat/limits.py), or a memory limit that cannot be read."""


class CudaError(ZigguratError):
    """A failure of the CUDA driver (runtime/cuda_driver.py): no driver or GPU on the machine, a
    PTX module the driver cannot load, a kernel launch or copy that fails. The message names the
    driver's error (CUDA_ERROR_...) and what was being done."""
