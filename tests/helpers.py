"""Shared helpers for tests: build graph-level modules and compile them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

import ziggurat
from ziggurat.frontends.onnx import ImportedModel
from ziggurat.weights import WeightStore


def tensor(shape: Sequence[int]) -> TensorType:
    return TensorType(f32, list(shape))


def graph_model(
    input_shapes: Sequence[Sequence[int]],
    body: Callable[[Builder, list[SSAValue]], SSAValue],
    weights: dict[str, np.ndarray] | None = None,
) -> ImportedModel:
    """An ImportedModel whose @main applies `body` (which inserts graph ops)."""
    block = Block(arg_types=[tensor(s) for s in input_shapes])
    b = Builder(InsertPoint.at_end(block))
    out = body(b, list(block.args))
    b.insert(func.ReturnOp(out))
    fn = func.FuncOp("main", ([tensor(s) for s in input_shapes], [out.type]), Region(block))
    names = [f"x{i}" for i in range(len(input_shapes))]
    return ImportedModel(
        module=ModuleOp([fn]),
        weights=WeightStore(weights or {}),
        input_names=names,
        output_names=["y"],
        input_shapes=[tuple(s) for s in input_shapes],
        output_shapes=[tuple(out.type.get_shape())],  # type: ignore[attr-defined]
        opset=17,
    )


def run_graph(model: ImportedModel, inputs: Sequence[np.ndarray], threads: int = 1) -> np.ndarray:
    compiled = ziggurat.compile(model, target=f"llvm -num-cores={threads}")
    (out,) = compiled(*inputs)
    return out


def run_with_schedule_ir(model, inputs: Sequence[np.ndarray], target) -> tuple[list[np.ndarray], str]:
    """Compiles `model` for `target` and runs it on `inputs`; returns the
    outputs and the loop IR right after loop-default-schedule."""
    seen: dict[str, str] = {}

    def grab(p, module, seconds):
        if p.name == "loop-default-schedule":
            seen["ir"] = str(module)

    compiled = ziggurat.compile(model, target=target, after_pass=grab)
    return compiled(*inputs), seen["ir"]
