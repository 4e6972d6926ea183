"""ziggurat as a standard `onnx.backend.base.Backend`, so that onnx's own
`onnx.backend.test.BackendTest` harness (and any tool written against the
backend API) can drive it:

    import onnx.backend.test
    from ziggurat.frontends.onnx import backend
    globals().update(onnx.backend.test.BackendTest(backend, __name__).test_cases)

`prepare` compiles the model once (raising ziggurat's clean errors for what it
cannot handle); `BackendRep.run` takes a list (graph-input order) or a dict of
arrays and returns a tuple of outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep


class ZigguratRep(BackendRep):
    """A compiled model behind the backend API: a `CompiledModel`, or a
    `SpecializingModel` when shape-parameter inputs (axes, pads, sizes) are
    graph inputs, compiled per value at run time, or a `SequenceModel` when
    graph inputs or outputs are sequences (lists in, lists out)."""

    def __init__(self, compiled):
        self.compiled = compiled

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:  # noqa: ARG002
        if isinstance(inputs, dict):
            return tuple(self.compiled(**inputs))
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        return tuple(self.compiled(*inputs))


class ZigguratBackend(Backend):
    """Compiles with `ziggurat.compile` for the CPU (`target`, default 'llvm')."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> ZigguratRep:
        import ziggurat

        if not cls.supports_device(device):
            raise ValueError(f"ziggurat runs on the CPU only, not on '{device}'")
        from ziggurat.errors import ShapeError, UnsupportedOpError
        from ziggurat.frontends.onnx.specialize import SpecializingModel

        from ziggurat.frontends.onnx.sequence_io import SequenceModel, has_sequence_io

        target = kwargs.get("target", "llvm")

        def compile_any(m: onnx.ModelProto):
            try:
                return ziggurat.compile(m, target=target)
            except (UnsupportedOpError, ShapeError) as err:
                if not err.needs_values:
                    raise
                return SpecializingModel(m, lambda m2, b: ziggurat.compile(m2, target=target, bind=b),
                                         err.needs_values)

        if has_sequence_io(model):  # sequence inputs/outputs: compiled per structure at run time
            return ZigguratRep(SequenceModel(model, compile_any))
        return ZigguratRep(compile_any(model))

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Sequence[np.ndarray], device: str = "CPU",
                 outputs_info=None, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Runs one node on float32 `inputs` by wrapping it in a one-node model."""
        infos = [onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
                 for name, x in zip(node.input, inputs)]
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        if outputs_info:
            outputs = [onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(dt), shape)
                       for name, (dt, shape) in zip(node.output, outputs_info)]
        else:  # the output types ONNX shape inference gives
            probe = onnx.helper.make_model(onnx.helper.make_graph([node], "probe", infos, []),
                                           opset_imports=[onnx.helper.make_opsetid("", opset)])
            inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(probe).graph.value_info}
            outputs = [inferred[name] for name in node.output if name]
        graph = onnx.helper.make_graph([node], "run_node", infos, outputs)
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        return cls.prepare(model, device).run(list(inputs))

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper().startswith("CPU")


prepare = ZigguratBackend.prepare
run_model = ZigguratBackend.run_model
run_node = ZigguratBackend.run_node
supports_device = ZigguratBackend.supports_device
