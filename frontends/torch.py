"""PyTorch entry points: `ziggurat.compile(module, example_inputs)` and `torch.compile(..., backend="ziggurat")`.

Both go through ONNX: `torch.onnx.export(..., dynamo=True)` (torch.export, then
onnxscript's translation, opset 18) writes the model, and `ziggurat.compile`
compiles it as any ONNX model. Needs the optional extra `pip install
'ziggurat[torch]'` (torch and onnxscript); nothing here is imported otherwise.

* `compile_module(module, example_inputs, dynamic_shapes, compile_onnx)`
  (what `ziggurat.compile(module, ...)` calls) exports `module` called on `example_inputs` (a tensor or a tuple of them) and
  returns a `TorchModel`: call it with tensors, get tensors (a tuple where the
  module returns several). `dynamic_shapes` is torch.export's (per input, a
  dict dim -> `torch.export.Dim`, or a name): those axes become symbols of a
  `DynamicModel` (runtime/dynamic.py), one static variant per binding.
* `backend(gm, example_inputs, compile_onnx)` is the `torch.compile` backend
  (`ziggurat.compiler.dynamo_backend`, found by the name "ziggurat" through the
  `torch_dynamo_backends` entry point in pyproject.toml). Dynamo hands it an FX graph whose parameters arrive as
  inputs; they become the exported model's weights. When dynamo marks a size
  dynamic (after a change of shape, or with `dynamic=True`), the graph takes
  SymInt inputs and symbolic tensor sizes: those axes are exported as
  symbols, so later calls with other sizes reuse the compile (torch does not
  recompile the graph; ziggurat's model for every shape runs them, or where a
  node needs a symbol's value a static variant per binding,
  runtime/dynamic.py). `nn.TransformerEncoderLayer`'s fused inference op,
  which dynamo records and the ONNX exporter cannot translate, is replaced by
  the same computation in plain ops (`encoder_layer`).

Tensors cross as numpy arrays without a copy where they are contiguous CPU
tensors (`Tensor.numpy()`; outputs `torch.from_numpy`). Gradients are not
supported: the result is for inference.

```python
import torch, ziggurat
m = ziggurat.compile(torchvision.models.resnet18().eval(), (torch.randn(1, 3, 224, 224),))
y = m(torch.randn(1, 3, 224, 224))
fast = torch.compile(model, backend="ziggurat")
```
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ziggurat.errors import CompileError

OPSET = 18


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise CompileError("compiling a PyTorch module needs torch and onnxscript: "
                           "pip install 'ziggurat[torch]'") from None
    return torch


def is_module(model: Any) -> bool:
    """Whether `model` is a `torch.nn.Module` (checked without importing torch)."""
    return any(c.__module__.startswith("torch.nn") and c.__name__ == "Module" for c in type(model).__mro__)


def export_onnx(module: Any, args: tuple, dynamic_shapes: Any = None) -> tuple[bytes, bool]:
    """`module(*args)` exported as an ONNX model (opset `OPSET`) through torch.export, and whether
    the module returns one tensor (not a tuple or list: torch.export's output spec says)."""
    torch = _torch()
    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            program = torch.onnx.export(module, args, dynamo=True, dynamic_shapes=dynamic_shapes,
                                        opset_version=OPSET, verbose=False)
    except ImportError as err:
        raise CompileError(f"torch.onnx.export needs onnxscript ({err}): pip install 'ziggurat[torch]'") from None
    except Exception as err:  # noqa: BLE001 - torch.export's own errors, many types
        raise CompileError(f"torch.onnx.export could not export {type(module).__name__}: "
                           f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}. "
                           "Check the module with torch.export.export(module, example_inputs).") from None
    finally:
        quiet.setLevel(level)
    return program.model_proto.SerializeToString(), program.exported_program.call_spec.out_spec.is_leaf()


class TorchModel:
    """A compiled model called with tensors: positional tensors in, a tensor (or a tuple) out."""

    def __init__(self, compiled: Any, single: bool):
        self.compiled = compiled  # the CompiledModel or DynamicModel
        self.single = single

    def __call__(self, *tensors: Any) -> Any:
        torch = _torch()
        arrays = [t.detach().cpu().contiguous().numpy() if isinstance(t, torch.Tensor) else t for t in tensors]
        outputs = [torch.from_numpy(o) for o in self.compiled(*arrays)]
        return outputs[0] if self.single else tuple(outputs)

    def __repr__(self) -> str:
        return f"TorchModel({self.compiled!r})"


def compile_module(module: Any, example_inputs: Any, dynamic_shapes: Any, compile_onnx: Callable[[bytes], Any]
                   ) -> TorchModel:
    """`module` exported on `example_inputs` and compiled by `compile_onnx` (`ziggurat.compile` of
    the ONNX bytes with the caller's options: compiler.py passes it, so this module imports no
    compiler)."""
    torch = _torch()
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if isinstance(module, torch.nn.Module):
        module = module.eval()
    with torch.no_grad():
        data, single = export_onnx(module, args, _dims(torch, dynamic_shapes))
    return TorchModel(compile_onnx(data), single)


def _dims(torch: Any, dynamic_shapes: Any) -> Any:
    """torch.export's `dynamic_shapes`, with a dim given by name made a `torch.export.Dim`."""
    if dynamic_shapes is None:
        return None
    made: dict[str, Any] = {}

    def dim(d: Any) -> Any:
        return made.setdefault(d, torch.export.Dim(d)) if isinstance(d, str) else d

    def convert(spec: Any) -> Any:
        if isinstance(spec, dict):
            return {k: dim(v) for k, v in spec.items()}
        if isinstance(spec, (list, tuple)):
            return type(spec)(convert(s) for s in spec)
        return spec

    return convert(dynamic_shapes)


def encoder_layer(src: Any, embed_dim: int, num_heads: int, qkv_w: Any, qkv_b: Any, proj_w: Any, proj_b: Any,
                  use_gelu: bool, norm_first: bool, eps: float, n1_w: Any, n1_b: Any, n2_w: Any, n2_b: Any,
                  f1_w: Any, f1_b: Any, f2_w: Any, f2_b: Any, mask: Any = None, mask_type: Any = None) -> Any:
    """`aten._transformer_encoder_layer_fwd` (the fused op `nn.TransformerEncoderLayer` runs in
    inference, which dynamo records and the ONNX exporter has no translation for) in plain ops:
    self-attention with `num_heads` heads over batch-first `src`, the feed-forward block, both
    with residuals and layer norms (before each block with `norm_first`). `mask` is additive
    (float) or True where a position is masked (bool): [B, L] key padding (`mask_type` 1) or
    [L, L] / [B, H, L, L]."""
    import torch
    import torch.nn.functional as F

    def attention(x: Any) -> Any:
        b, n, e = x.shape
        q, k, v = F.linear(x, qkv_w, qkv_b).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, n, num_heads, e // num_heads).transpose(1, 2) for t in (q, k, v))
        bias = None
        if mask is not None:
            m = mask.reshape(b, 1, 1, n) if mask_type == 1 else mask
            bias = torch.zeros(m.shape, dtype=x.dtype).masked_fill(m, float("-inf")) if m.dtype == torch.bool else m
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return F.linear(y.transpose(1, 2).reshape(b, n, e), proj_w, proj_b)

    def feed_forward(x: Any) -> Any:
        h = F.linear(x, f1_w, f1_b)
        return F.linear(F.gelu(h) if use_gelu else F.relu(h), f2_w, f2_b)

    def norm1(x: Any) -> Any:
        return F.layer_norm(x, (embed_dim,), n1_w, n1_b, eps)

    def norm2(x: Any) -> Any:
        return F.layer_norm(x, (embed_dim,), n2_w, n2_b, eps)

    if norm_first:
        x = src + attention(norm1(src))
        return x + feed_forward(norm2(x))
    x = norm1(src + attention(src))
    return norm2(x + feed_forward(x))


class _Graph:
    """Dynamo's FX graph as a module of its run-time tensors alone: the parameters it takes as
    inputs are held as constants, and each SymInt input is read off the tensor dim it sizes."""

    def __init__(self, torch: Any, gm: Any, example_inputs: Sequence[Any]):
        import copy

        self.n = len(example_inputs)
        placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
        # a copy without dynamo's node metadata: torch.export would re-check dynamo's guards from it
        self.gm = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
        for node in self.gm.graph.nodes:
            node.meta = {}
            if node.op == "call_function" and "_transformer_encoder_layer_fwd" in str(node.target):
                node.target = encoder_layer  # the inference fast path, which ONNX export cannot translate
        self.gm.recompile()
        self.constants = {i: a.detach() for i, a in enumerate(example_inputs) if isinstance(a, torch.nn.Parameter)}
        self.tensors = [i for i, a in enumerate(example_inputs)
                        if isinstance(a, torch.Tensor) and i not in self.constants]
        fake = [p.meta.get("example_value") for p in placeholders]
        self.symbols: dict[int, tuple[int, int]] = {}  # SymInt input -> (position among tensors, dim)
        self.dynamic: list[dict[int, str]] = []  # per run-time tensor: dim -> symbol name
        sizes: dict[str, tuple[int, int]] = {}
        for k, i in enumerate(self.tensors):
            dims = {}
            shape = getattr(fake[i], "shape", ()) if i < len(fake) else ()
            for d, size in enumerate(shape):
                if isinstance(size, torch.SymInt):
                    dims[d] = str(size.node.expr)
                    sizes.setdefault(dims[d], (k, d))
            self.dynamic.append(dims)
        for i, a in enumerate(example_inputs):
            if not isinstance(a, torch.Tensor):
                name = str(placeholders[i].meta["example_value"].node.expr) if isinstance(
                    placeholders[i].meta.get("example_value"), torch.SymInt) else None
                if name not in sizes:
                    raise CompileError(f"the graph's input {i} ({a!r}) is a size no tensor input has; "
                                       "ziggurat's torch.compile backend takes sizes of tensor inputs only")
                self.symbols[i] = sizes[name]

    def module(self, torch: Any) -> Any:
        graph = self

        class Runtime(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                for i, c in graph.constants.items():
                    self.register_buffer(f"c{i}", c)

            def run(self, *tensors: Any) -> Any:
                args = []
                for i in range(graph.n):
                    if i in graph.constants:
                        args.append(getattr(self, f"c{i}"))
                    elif i in graph.symbols:
                        k, d = graph.symbols[i]
                        args.append(tensors[k].shape[d])
                    else:
                        args.append(tensors[graph.tensors.index(i)])
                return graph.gm(*args)

        # forward with one named parameter per tensor: torch.export's guards do not take *args
        names = ", ".join(f"x{k}" for k in range(len(self.tensors)))
        scope: dict[str, Any] = {}
        exec(f"def forward(self, {names}):\n    return self.run({names})\n", scope)  # noqa: S102 - our own text
        Runtime.forward = scope["forward"]
        return Runtime()


def backend(gm: Any, example_inputs: Sequence[Any], compile_onnx: Callable[[bytes], Any]) -> Callable[..., Any]:
    """The `torch.compile` backend "ziggurat" (`compiler.dynamo_backend`, module docstring): dynamo's
    FX graph `gm`, compiled by `compile_onnx` at its first call."""
    torch = _torch()

    graph = _Graph(torch, gm, example_inputs)
    dynamic = tuple({d: torch.export.Dim.DYNAMIC for d in dims} for dims in graph.dynamic) \
        if any(graph.dynamic) else None
    state: dict[str, TorchModel] = {}

    def run(*args: Any) -> Any:
        tensors = tuple(args[i] for i in graph.tensors)
        if not state:  # at the first call, outside dynamo's tracing: torch.export inside it would take
            with torch.no_grad():  # over dynamo's shape guards (and fail to evaluate them)
                data, single = export_onnx(graph.module(torch), tensors, dynamic)
            state["model"] = TorchModel(compile_onnx(data), single)
        return state["model"](*tensors)

    return run
