"""Random valid ONNX graphs (hypothesis), run against onnxruntime.

`graph_cases()` draws small graphs (1-6 nodes over small tensors) from the ops
in tests/fuzz_ops.py. Every value carries an interval that bounds its
elements, so ops with a restricted domain (Sqrt, Log, Div, Pow) get operands
inside it and magnitudes stay where float32 comparisons mean something; and an
`exact` flag (its elements are computed without rounding: inputs, constants,
data movement), so discontinuous ops (Floor, comparisons, casts to int,
ArgMax) only see values that ziggurat and onnxruntime agree on bit for bit.
Tensor contents come from one drawn seed, so hypothesis shrinks the structure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

F, F16, I32, I64, B = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL
NP = {F: np.float32, F16: np.float16, I32: np.int32, I64: np.int64, B: np.bool_}
DRAWN: list[str] = []
MAX_MAG = 1e4
"""Largest element magnitude a generated float value may reach."""


class GenReject(Exception):
    """This draw cannot build the op (the generator tries another one)."""


@dataclass
class V:
    name: str
    shape: tuple[int, ...]
    dtype: int
    lo: float
    hi: float
    exact: bool
    folded: bool = False  # computed from constants only: ziggurat evaluates it at import time

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def mag(self) -> float:
        return max(abs(self.lo), abs(self.hi))


@dataclass
class Case:
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    rtol: float
    atol: float
    ops: list[str] = field(default_factory=list)

    def __repr__(self) -> str:  # what hypothesis prints for a falsifying example
        return "Case(\n" + onnx.printer.to_text(self.model.graph) + f"\n, rtol={self.rtol}, atol={self.atol})"


class Ctx:
    """The graph under construction: its nodes, inputs, constants and the pool of values."""

    def __init__(self, draw, opset: int, seed: int):
        self.draw, self.opset = draw, opset
        self.rng = np.random.default_rng(seed)
        self.pool: list[V] = []
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: list[tuple[V, np.ndarray]] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0
        self.loose = False

    # -- drawing helpers ------------------------------------------------------------------
    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def choice(self, seq):
        return self.draw(st.sampled_from(list(seq)))

    def chance(self, one_in: int) -> bool:
        """True about once in `one_in` draws (False when shrunk)."""
        return self.draw(st.integers(0, one_in - 1)) == one_in - 1

    def shape(self, rank: int | None = None, lo: int = 1, hi: int = 4) -> tuple[int, ...]:
        rank = self.int(1, 4) if rank is None else rank
        return tuple(self.int(lo, hi) for _ in range(rank))

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    # -- values -----------------------------------------------------------------------------
    def data(self, shape, dtype: int, lo: float, hi: float) -> np.ndarray:
        if dtype in (F, F16):
            return self.rng.uniform(lo, hi, shape).astype(NP[dtype])
        if dtype == B:
            return self.rng.integers(0, 2, shape).astype(bool)
        return self.rng.integers(int(np.ceil(lo)), int(np.floor(hi)) + 1, shape).astype(NP[dtype])

    def new_value(self, shape, dtype: int = F, lo: float = -2.0, hi: float = 2.0, const: bool | None = None,
                  pool: bool = True) -> V:
        """A new graph input (or, about one time in three, a constant) with elements in [lo, hi]."""
        arr = self.data(tuple(shape), dtype, lo, hi)
        const = self.chance(3) if const is None else const
        v = V(self.fresh("c" if const else "x"), tuple(shape), dtype, lo, hi, True, const)
        if const:
            self.inits.append(numpy_helper.from_array(arr, v.name))
        else:
            self.inputs.append((v, arr))
        if pool:
            self.pool.append(v)
        return v

    def const(self, arr, dtype: int | None = None) -> str:
        """A constant that is an op parameter (axes, shapes, indices): not in the pool."""
        arr = np.asarray(arr, NP[dtype] if dtype is not None else None)
        name = self.fresh("k")
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def operand(self, dtypes=(F,), rank=None, min_rank: int = 0, positive: bool = False, exact: bool = False,
                max_mag: float = MAX_MAG, shape=None, lo: float = -2.0, hi: float = 2.0, pred=None,
                fresh=None) -> V:
        """A value from the pool that fits, or (sometimes, or when none does) a new one (of shape
        `fresh()` when given)."""
        def fits(v: V) -> bool:
            return (0 not in v.shape and v.dtype in dtypes and (rank is None or v.rank == rank) and v.rank >= min_rank
                    and (not positive or v.lo >= 0.1) and (not exact or v.exact) and v.mag <= max_mag
                    and (shape is None or v.shape == tuple(shape)) and (pred is None or pred(v)))
        fit = [v for v in self.pool if fits(v)]
        if fit and not self.chance(4):
            return fit[-1 - self.int(0, len(fit) - 1)]  # shrinks towards the newest value
        dtype = self.choice(dtypes)
        const = False if pred is not None and not pred(V("", (), dtype, lo, hi, True, True)) else None
        if shape is None:
            shape = fresh() if fresh else self.shape(rank if rank is not None else self.int(max(min_rank, 1), 4))
        if positive:
            lo, hi = 0.5, 2.0
        if dtype in (I32, I64):
            lo, hi = (1, 4) if positive else (-5, 5)
        return self.new_value(shape, dtype, lo, hi, const=const)

    def broadcast_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts with `shape` (numpy rules; may add leading dimensions)."""
        out = []
        for d in shape[len(shape) - self.int(0, len(shape)):] if shape else ():
            out.append(self.choice([d, 1]) if d != 1 else self.int(1, 3))
        lead = self.int(0, 1) if len(shape) < 4 else 0
        return tuple([self.int(1, 3) for _ in range(lead)] + out)

    def partner(self, v: V, dtypes=None, positive: bool = False, exact: bool = False, max_mag: float = MAX_MAG) -> V:
        """A second operand that broadcasts with `v`."""
        dtypes = dtypes or (v.dtype,)
        if not self.chance(3):
            fit = [u for u in self.pool if u is not v and 0 not in u.shape and u.dtype in dtypes and _broadcasts(u.shape, v.shape)
                   and (not positive or u.lo >= 0.1) and (not exact or u.exact) and u.mag <= max_mag]
            if fit and self.chance(2):
                return fit[-1 - self.int(0, len(fit) - 1)]
        shape = self.broadcast_shape(v.shape) if not self.chance(4) else v.shape
        return self.operand(dtypes, shape=shape, positive=positive, exact=exact, max_mag=max_mag)

    # -- nodes ------------------------------------------------------------------------------
    def node(self, op: str, inputs: list[str], intervals: list[tuple[float, float]], exact: bool = False,
             **attrs) -> list[V]:
        """Adds a node with one output per interval; their shapes and types come from ONNX shape inference."""
        outs = [self.fresh("t") for _ in intervals]
        node = helper.make_node(op, inputs, outs, **attrs)
        self.nodes.append(node)
        try:
            inferred = onnx.shape_inference.infer_shapes(self.model([]), strict_mode=True)
        except Exception as exc:
            self.nodes.pop()
            raise GenReject(f"{op}: {exc}") from exc
        types = {vi.name: vi.type.tensor_type for vi in inferred.graph.value_info}
        made, by_name = [], {v.name: v for v in self.pool}
        folded = all(by_name[i].folded if i in by_name else i.startswith("k") for i in inputs if i)
        for name, (lo, hi) in zip(outs, intervals):
            t = types.get(name)
            if t is None or not t.HasField("shape") or any(not d.HasField("dim_value") for d in t.shape.dim):
                self.nodes.pop()
                raise GenReject(f"{op}: no static shape inferred")
            v = V(name, tuple(d.dim_value for d in t.shape.dim), t.elem_type, float(lo), float(hi), exact, folded)
            if v.dtype in (F, F16) and v.mag > MAX_MAG or v.dtype in (I32, I64) and v.mag > 1e6:
                self.nodes.pop()
                raise GenReject(f"{op}: magnitude {v.mag:.3g}")
            made.append(v)
        self.pool.extend(made)
        return made

    def model(self, outputs: list[V]) -> onnx.ModelProto:
        graph = helper.make_graph(
            list(self.nodes), "fuzz",
            [helper.make_tensor_value_info(v.name, v.dtype, v.shape) for v, _ in self.inputs],
            [helper.make_tensor_value_info(v.name, v.dtype, v.shape) for v in outputs],
            list(self.inits))
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)], ir_version=8)


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(a), reversed(b)))


@st.composite
def graph_cases(draw, max_nodes: int = 6) -> Case:
    from tests.fuzz_ops import OPS  # noqa: PLC0415 - fuzz_ops imports this module

    global DRAWN
    DRAWN = DRAWN or _drawn()
    opset = draw(st.sampled_from([17, 13, 18]))
    ctx = Ctx(draw, opset, draw(st.integers(0, 2**32 - 1)))
    first = ctx.operand((F,) if not ctx.chance(5) else (I64, I32))
    if not first.name.startswith("x"):  # the graph has at least one input
        ctx.new_value(first.shape, first.dtype, first.lo, first.hi, const=False)
    target = draw(st.integers(1, max_nodes))
    ops, tries = [], 0
    while len(ops) < target and tries < 4 * target:
        tries += 1
        name = draw(st.sampled_from(DRAWN))
        before = (len(ctx.nodes), len(ctx.inputs), len(ctx.inits), len(ctx.pool))
        try:
            OPS[name](ctx)
        except (GenReject, ArithmeticError):  # an interval that overflows: the op is not built
            del ctx.nodes[before[0]:], ctx.inputs[before[1]:], ctx.inits[before[2]:], ctx.pool[before[3]:]
            continue
        ops.append(name)
    if not ops:
        from hypothesis import reject

        reject()
    used = {i for n in ctx.nodes for i in n.input}
    made = [v for v in ctx.pool if not v.name.startswith(("x", "c"))]
    outputs = [v for v in made if v.name not in used] or made[-1:]
    extra = [v for v in made if v not in outputs]
    if extra and ctx.chance(4):
        outputs.append(ctx.choice(extra))
    model = ctx.model(outputs)
    mag = max([v.mag for v in ctx.pool if v.dtype in (F, F16)] + [1.0])
    rtol = 1e-3 if ctx.loose else 1e-4
    return Case(model, {v.name: a for v, a in ctx.inputs}, rtol, 1e-5 * mag * (10 if ctx.loose else 1), ops)


WEIGHTS = {"Unary": 4, "Binary": 4, "conv": 4, "pool": 3, "matmul": 2, "reduce": 3, "softmax": 2}


def _drawn() -> list[str]:
    """The builder names hypothesis draws from, Relu first (what a node shrinks to), the ops with
    many variants more than once."""
    from tests.fuzz_ops import OPS  # noqa: PLC0415 - fuzz_ops imports this module

    names = sorted(OPS, key=lambda n: (n != "Relu", n))
    return [n for n in names for _ in range(WEIGHTS.get(n, 1))]


def reference_deviates(model, outputs) -> str | None:
    """Why onnxruntime's outputs cannot serve as the reference: an output shape other than the one
    ONNX shape inference gives (onnxruntime's MaxPool with SAME_UPPER and a dilation makes a 2x2
    input 2x1 where the spec, onnx.reference and ziggurat make it 2x2), or a pool with SAME padding
    and a dilation at all: onnxruntime places the padding as if the window were not dilated (a
    [1,1,1,1] input, kernel 2, dilation 2, stride 2: the spec pads 1 and 1, so the one window holds
    only padding; onnxruntime pads 0 and 1 and returns the input; seed 2032)."""
    import onnx

    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        auto_pad = attrs.get("auto_pad", b"NOTSET")
        auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
        if (node.op_type in ("MaxPool", "AveragePool", "LpPool") and auto_pad.startswith("SAME")
                and any(d != 1 for d in attrs.get("dilations", []))):
            return f"onnxruntime pads {node.op_type} with {auto_pad} and dilations {list(attrs['dilations'])} unlike the spec"

    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph.output
    except Exception:  # noqa: BLE001 - no inference, no check
        return None
    for info, out in zip(inferred, outputs):
        dims = info.type.tensor_type.shape.dim
        shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims)
        if dims and -1 not in shape and shape != tuple(out.shape):
            return f"onnxruntime's output '{info.name}' has shape {tuple(out.shape)}, ONNX shape inference {shape}"
    return None


def check_case(worker, case: Case) -> tuple[str, str] | None:
    """(kind, detail) of a finding for a generated case, or None.

    Kinds: crash, hang, unclean (an exception that is not a ZigguratError),
    refused (a ZigguratError on a model onnxruntime runs), wrong. A model that
    onnxruntime rejects is a generator problem: ("invalid", why), not a finding."""
    data = case.model.SerializeToString()
    ref = worker.call({"op": "ort", "model": data, "feeds": case.feeds})
    if ref["status"] != "ok":
        return ("invalid", f"onnxruntime: {ref.get('msg', ref['status'])[:300]}")
    if (why := reference_deviates(case.model, ref["outputs"])) is not None:
        return ("invalid", why)
    got = worker.call({"op": "zig", "model": data, "feeds": case.feeds})
    status = got["status"]
    if status in ("crash", "hang"):
        return (status, got["msg"])
    if status == "unclean":
        return ("unclean", f"{got['phase']}: {got['type']}: {got['msg'][:300]}\n{got['tb']}")
    if status == "error":
        return ("refused", f"{got['phase']}: {got['type']}: {got['msg'][:300]}")
    if got["names"] != ref["names"]:
        return ("wrong", f"output names {got['names']} vs {ref['names']}")
    from tests.fuzz_worker import compare, ort_fusion_deviates

    why = compare(got["outputs"], ref["outputs"], case.rtol, case.atol)
    if why and ort_fusion_deviates(worker, data, case.feeds, got["outputs"], case.rtol, case.atol):
        return ("invalid", f"onnxruntime's graph optimizations deviate from the graph as written: {why}")
    return ("wrong", why) if why else None
