"""Graph-fuzzer builders for contractions, convolutions, pools, reductions,
normalizations and data movement (see tests/fuzz_ops.py for the elementwise ones)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from tests.fuzz_graphs import B, F, I32, I64, GenReject

INTS = (I32, I64)


def op_matmul(c) -> None:
    a = c.operand((F,), min_rank=1, max_mag=100)
    k, n = a.shape[-1], c.int(1, 4)
    if a.rank == 1:
        bshape = c.choice([(k,), (k, n), (c.int(1, 2), k, n)])
    elif c.chance(5):
        bshape = (k,)
    else:
        bshape = c.broadcast_shape(a.shape[:-2]) + (k, n)
    b = c.operand((F,), shape=bshape, max_mag=100)
    bound = k * a.mag * b.mag
    c.node("MatMul", [a.name, b.name], [(-bound, bound)])


def op_gemm(c) -> None:
    a = c.operand((F,), rank=2, max_mag=100)
    ta, tb = c.int(0, 1), c.int(0, 1)
    m, k = a.shape[::-1] if ta else a.shape
    n = c.int(1, 4)
    b = c.operand((F,), shape=(n, k) if tb else (k, n), max_mag=100)
    alpha, beta = c.choice([1.0, 0.5, -2.0]), c.choice([1.0, 0.0, 2.0])
    ins, bound = [a.name, b.name], abs(alpha) * k * a.mag * b.mag
    if not c.chance(4):
        cc = c.operand((F,), shape=c.choice([(m, n), (n,), (1, n), (m, 1), (), (1,)]))
        ins.append(cc.name)
        bound += abs(beta) * cc.mag
    c.node("Gemm", ins, [(-bound, bound)], transA=ta, transB=tb, alpha=alpha, beta=beta)


def _window_attrs(c, spatial, kernel, dilation, pool: bool) -> dict:
    """strides and pads (or auto_pad) for a window of `kernel` over `spatial`; GenReject if empty."""
    strides = [c.int(1, 3) if c.chance(2) else 1 for _ in spatial]
    auto = c.choice(["NOTSET", "NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"])
    attrs = {"strides": strides} if c.chance(4) or any(s > 1 for s in strides) else {}
    eff = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    if auto == "NOTSET":
        limit = kernel if pool else eff
        pads = [c.int(0, lim - 1) if c.chance(2) else 0 for lim in limit for _ in (0, 1)]
        pads = pads[0::2] + pads[1::2]
        if any(pads):
            attrs["pads"] = pads
        total = [s + pads[i] + pads[i + len(spatial)] for i, s in enumerate(spatial)]
    else:
        attrs["auto_pad"] = auto
        total = list(spatial) if auto == "VALID" else [10**6] * len(spatial)
        if auto != "VALID" and any((-(-n // s) - 1) * s + e < n for n, s, e in zip(spatial, strides, eff)):
            raise GenReject("onnxruntime refuses the negative SAME padding (stride > window) that ONNX clamps to 0")
    if any(t < e for t, e in zip(total, eff)):
        raise GenReject("window larger than the padded input")
    if pool and c.chance(3):
        if auto != "NOTSET":
            raise GenReject("ceil_mode with auto_pad")
        for i, (n, s, e) in enumerate(zip(spatial, strides, eff)):
            out = -(-(total[i] - e) // s) + 1
            if (out - 1) * s >= n + pads[i]:
                # ONNX shape inference keeps a last window that starts in the right padding, onnxruntime
                # drops it (as the spec says since opset 19): the two disagree on the output shape
                raise GenReject("ceil_mode window that starts in the padding")
        attrs["ceil_mode"] = 1
    return attrs


def _image(c, spatial: int) -> tuple[int, ...]:
    """A fresh N, C, spatial... shape for a window op (spatial dims big enough for most windows)."""
    return (c.int(1, 2), c.int(1, 4), *(c.int(2, 6) for _ in range(spatial)))


def op_conv(c) -> None:
    sd = c.choice([2, 1, 3]) if c.chance(3) else 2
    x = c.operand((F,), rank=2 + sd, max_mag=100, fresh=lambda: _image(c, sd))
    ch = x.shape[1]
    group = c.choice([g for g in range(1, ch + 1) if ch % g == 0])
    m = group * c.int(1, 3)
    kernel = [c.int(1, 3) for _ in range(sd)]
    dilation = [c.int(1, 2) if c.chance(3) else 1 for _ in range(sd)]
    attrs = _window_attrs(c, x.shape[2:], kernel, dilation, pool=False)
    if any(d > 1 for d in dilation) and attrs.get("auto_pad", "").startswith("SAME"):
        raise GenReject("onnxruntime: Dilation not supported for AutoPadType::SAME_UPPER or SAME_LOWER")
    if any(d > 1 for d in dilation) or c.chance(4):
        attrs["dilations"] = dilation
    if group > 1:
        attrs["group"] = group
    if c.chance(2):
        attrs["kernel_shape"] = kernel
    w = c.new_value((m, ch // group, *kernel), F, -1.0, 1.0, const=not c.chance(6), pool=False)
    ins, bound = [x.name, w.name], x.mag * math.prod(kernel) * (ch // group)
    if c.chance(2):
        ins.append(c.new_value((m,), F, -1.0, 1.0, const=not c.chance(6), pool=False).name)
        bound += 1
    c.node("Conv", ins, [(-bound, bound)], **attrs)


def op_pool(c) -> None:
    op = c.choice(["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"])
    sd = c.choice([2, 1]) if c.chance(3) else 2
    # no constant X: ziggurat folds it with onnx.reference, whose GlobalMaxPool drops a dim of a 3-D
    # input and whose MaxPool SAME_LOWER with stride > kernel gives an empty result (findings F5, F6
    # in /work/scratch/fuzz_findings.md)
    x = c.operand((F,), rank=2 + sd, pred=lambda v: not v.folded, fresh=lambda: _image(c, sd))
    iv, exact = (x.lo, x.hi), op.endswith("MaxPool") and x.exact
    if op.startswith("Global"):
        c.node(op, [x.name], [iv], exact=exact)
        return
    kernel = [c.int(1, 3) for _ in range(sd)]
    dilation = [c.int(1, 2) if op == "MaxPool" and c.chance(3) else 1 for _ in range(sd)]
    attrs = _window_attrs(c, x.shape[2:], kernel, dilation, pool=True)
    attrs["kernel_shape"] = kernel
    if any(d > 1 for d in dilation):
        attrs["dilations"] = dilation
    if op == "AveragePool":
        if c.chance(2):
            attrs["count_include_pad"] = 1
        iv = (min(x.lo, 0), max(x.hi, 0))
    c.node(op, [x.name], [iv], exact=exact, **attrs)


REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceSumSquare", "ReduceLogSumExp", "ReduceLogSum"]


def op_reduce(c) -> None:
    op = c.choice(REDUCE)
    ints = op in ("ReduceSum", "ReduceMax", "ReduceMin") and c.chance(4)
    x = c.operand(INTS if ints else (F,), min_rank=1, positive=op == "ReduceLogSum")
    axes = [a for a in range(x.rank) if c.chance(2)]
    if not axes and not c.chance(4):
        axes = [c.int(0, x.rank - 1)]
    axes = [a - x.rank if c.chance(3) else a for a in axes]
    n = math.prod(x.shape[a] for a in axes) if axes else math.prod(x.shape)
    m = x.mag
    prod = m**n if n * math.log10(max(m, 1.0)) < 300 else math.inf
    iv = {"ReduceSum": lambda: (n * x.lo, n * x.hi), "ReduceMean": lambda: (x.lo, x.hi),
          "ReduceMax": lambda: (x.lo, x.hi), "ReduceMin": lambda: (x.lo, x.hi), "ReduceProd": lambda: (-prod, prod),
          "ReduceL1": lambda: (0, n * m), "ReduceL2": lambda: (0, math.sqrt(n) * m),
          "ReduceSumSquare": lambda: (0, n * m * m), "ReduceLogSumExp": lambda: (x.lo, x.hi + math.log(n)),
          "ReduceLogSum": lambda: (math.log(x.lo), math.log(n * x.hi))}[op]()
    if op != "ReduceMax" and op != "ReduceMin" and (n > 16 or op in ("ReduceLogSumExp", "ReduceLogSum", "ReduceProd")):
        c.loose = True
    attrs = {} if c.chance(2) else {"keepdims": c.int(0, 1)}
    ins = [x.name]
    if axes:
        if c.opset >= 18 or op == "ReduceSum":
            ins.append(c.const(np.array(axes), I64))
        else:
            attrs["axes"] = axes
    c.node(op, ins, [iv], exact=x.exact and op in ("ReduceMax", "ReduceMin"), **attrs)


def op_arg(c) -> None:
    # float only: ziggurat refuses integer ArgMax/ArgMin cleanly (dtype_policy.NATIVE has no entry)
    x = c.operand((F,), min_rank=1, exact=True)
    attrs = {"axis": c.int(-x.rank, x.rank - 1)}
    if c.chance(2):
        attrs["keepdims"] = c.int(0, 1)
    if c.chance(3):
        attrs["select_last_index"] = 1
    c.node(c.choice(["ArgMax", "ArgMin"]), [x.name], [(0, max(x.shape) - 1)], exact=True, **attrs)


def op_softmax(c) -> None:
    op = c.choice(["Softmax", "LogSoftmax", "Hardmax"])
    x = c.operand((F,), min_rank=1, exact=op == "Hardmax")
    axis = c.int(-x.rank, x.rank - 1)
    attrs = {"axis": axis} if c.chance(4) or axis != -1 else {}
    iv = {"Softmax": (0, 1), "Hardmax": (0, 1), "LogSoftmax": (x.lo - x.hi - math.log(max(x.shape)), 0)}[op]
    c.loose = True
    c.node(op, [x.name], [iv], exact=op == "Hardmax", **attrs)


def op_layernorm(c) -> None:
    if c.opset < 17:
        raise GenReject("LayerNormalization needs opset 17")
    x = c.operand((F,), min_rank=1)
    axis = c.int(-x.rank, x.rank - 1)
    norm = x.shape[axis:]
    ins = [x.name, c.new_value(norm, F, 0.5, 1.5, pool=False).name]
    if c.chance(2):
        ins.append(c.new_value(norm, F, -1.0, 1.0, pool=False).name)
    bound = math.sqrt(math.prod(norm)) * 1.5 + 1
    c.loose = True
    c.node("LayerNormalization", ins, [(-bound, bound)], axis=axis, epsilon=c.choice([1e-5, 1e-3]))


def op_norm(c) -> None:
    op = c.choice(["BatchNormalization", "InstanceNormalization"])
    # opset < 14 and constant X: finding F4 (folded with onnx.reference's BatchNormalization_9, which
    # uses the batch statistics)
    x = c.operand((F,), min_rank=3 if op == "InstanceNormalization" else 2,
                  pred=None if op != "BatchNormalization" or c.opset >= 14 else lambda v: not v.folded)
    ch = x.shape[1]
    ins = [x.name, c.new_value((ch,), F, 0.5, 1.5, pool=False).name, c.new_value((ch,), F, -1.0, 1.0, pool=False).name]
    if op == "BatchNormalization":
        ins += [c.const(c.data((ch,), F, -1, 1)), c.const(c.data((ch,), F, 0.5, 2))]
        bound = (x.mag + 1) / math.sqrt(0.5) * 1.5 + 1
    else:
        bound = math.sqrt(math.prod(x.shape[2:])) * 1.5 + 1
    c.loose = True
    c.node(op, ins, [(-bound, bound)], epsilon=c.choice([1e-5, 1e-3]))


def _any(c, min_rank=1):
    return c.operand((F,) if not c.chance(4) else INTS + (B,), min_rank=min_rank)


def _moved(c, op, x, ins, **attrs):
    return c.node(op, ins, [(x.lo, x.hi)], exact=x.exact, **attrs)


def op_transpose(c) -> None:
    x = _any(c)
    perm = c.draw(st.permutations(range(x.rank)))
    _moved(c, "Transpose", x, [x.name], **({} if c.chance(5) else {"perm": list(perm)}))


def op_reshape(c) -> None:
    x = _any(c, 0)
    left, dims = math.prod(x.shape), []
    if not left:
        raise GenReject("Reshape of an empty tensor")
    for _ in range(c.int(0, 3)):
        d = c.choice([d for d in range(1, left + 1) if left % d == 0]) 
        dims.append(d)
        left = left // d if d else left
    dims.append(left)
    if c.chance(2):
        dims[c.int(0, len(dims) - 1)] = -1
    same = [i for i, d in enumerate(dims) if i < x.rank and d == x.shape[i] and d > 0]
    if same and c.chance(3):
        dims[c.choice(same)] = 0
    _moved(c, "Reshape", x, [x.name, c.const(np.array(dims), I64)])


def op_flatten(c) -> None:
    x = _any(c)
    _moved(c, "Flatten", x, [x.name], axis=c.int(-x.rank, x.rank))


def op_squeeze(c) -> None:
    x = _any(c)
    if c.chance(2):
        axes = [c.int(0, x.rank)]
        _moved(c, "Unsqueeze", x, [x.name, c.const(np.array(axes), I64)])
        return
    ones = [i - x.rank if c.chance(2) else i for i, d in enumerate(x.shape) if d == 1 and c.chance(2)]
    _moved(c, "Squeeze", x, [x.name] + ([c.const(np.array(ones), I64)] if ones else []))


def op_concat(c) -> None:
    x = _any(c)
    axis = c.int(-x.rank, x.rank - 1)
    others = []
    for _ in range(c.int(1, 2)):
        shape = list(x.shape)
        shape[axis] = c.int(1, 3)
        others.append(c.operand((x.dtype,), shape=tuple(shape)))
    vs = [x] + others
    c.node("Concat", [v.name for v in vs], [(min(v.lo for v in vs), max(v.hi for v in vs))],
           exact=all(v.exact for v in vs), axis=axis)


def op_slice(c) -> None:
    x = _any(c)
    axes = [a for a in range(x.rank) if c.chance(2)] or [c.int(0, x.rank - 1)]
    starts, ends, steps = [], [], []
    for a in axes:
        d = x.shape[a]
        steps.append(c.choice([1, 1, -1, 2, -2]))
        starts.append(c.int(-d - 1, d + 1))
        # a huge end only in the direction of the step: onnxruntime and ONNX shape inference disagree
        # on Slice(starts=[0], ends=[INT32_MAX], steps=[-1]) (empty by the spec, not by onnxruntime)
        ends.append(c.choice([c.int(-d - 1, d + 1), 2**62 if steps[-1] > 0 else -(2**62)]))
    itype = c.choice([I64, I32])
    if itype == I32:
        ends = [max(min(e, 2**31 - 1), -(2**31)) for e in ends]
    ins = [x.name, c.const(np.array(starts), itype), c.const(np.array(ends), itype)]
    if c.chance(4) or any(s != 1 for s in steps) or axes != list(range(len(axes))):
        ins.append(c.const(np.array([a - x.rank if c.chance(3) else a for a in axes]), itype))
        if c.chance(4) or any(s != 1 for s in steps):
            ins.append(c.const(np.array(steps), itype))
    _moved(c, "Slice", x, ins)


def op_gather(c) -> None:
    x = _any(c)
    axis = c.int(-x.rank, x.rank - 1)
    d = x.shape[axis]
    shape = c.shape(c.int(0, 2), hi=3)
    idx = c.data(shape, c.choice([I64, I32]), -d, d - 1)
    _moved(c, "Gather", x, [x.name, c.const(idx)], **({"axis": axis} if axis or c.chance(2) else {}))


def op_split(c) -> None:
    x = _any(c)
    axis = c.int(-x.rank, x.rank - 1)
    d = x.shape[axis]
    if c.opset >= 18 and c.chance(2):
        n = c.int(1, min(d, 3))
        outs, ins, attrs = n, [x.name], {"num_outputs": n}
        if -(-d // -(-d // n)) != n:
            raise GenReject("num_outputs that leaves an empty part")
    else:
        sizes = []
        while sum(sizes) < d and len(sizes) < 3:
            sizes.append(c.int(1, d - sum(sizes)))
        sizes[-1] += d - sum(sizes)
        outs, ins, attrs = len(sizes), [x.name, c.const(np.array(sizes), I64)], {}
    c.node("Split", ins, [(x.lo, x.hi)] * outs, exact=x.exact, axis=axis, **attrs)


def op_tile_expand(c) -> None:
    x = _any(c)
    if c.chance(2):
        reps = [c.int(1, 2) for _ in x.shape]
        _moved(c, "Tile", x, [x.name, c.const(np.array(reps), I64)])
        return
    shape = [c.int(1, 3) if d == 1 else c.choice([d, 1]) for d in x.shape]
    shape = [c.int(1, 2) for _ in range(c.int(0, 1))] + shape
    _moved(c, "Expand", x, [x.name, c.const(np.array(shape), I64)])


def op_pad(c) -> None:
    x = _any(c)
    mode = c.choice(["constant", "reflect", "edge"])
    pads = []
    for d in x.shape * 2:
        hi = d - 1 if mode == "reflect" else 2
        # negative pads (cropping) not on a constant: folded with onnx.reference, which fails (finding F7)
        lo = -(d - 1) if mode == "constant" and not x.folded and c.chance(4) else 0
        pads.append(c.int(lo, max(lo, min(hi, 2))) if c.chance(2) else 0)
    ins = [x.name, c.const(np.array(pads), I64)]
    iv = (x.lo, x.hi)
    if mode == "constant" and c.chance(2):
        val = c.choice([1.0, -3.0, 0.5]) if x.dtype == F else c.choice([1, 7])
        ins.append(c.const(np.array(val), x.dtype))
        iv = (min(x.lo, val), max(x.hi, val))
    elif mode == "constant":
        iv = (min(x.lo, 0), max(x.hi, 0))
    c.node("Pad", ins, [iv], exact=x.exact, mode=mode)


def op_depth_space(c) -> None:
    bs = c.int(1, 2)
    if c.chance(2):
        x = c.operand((F,), shape=(c.int(1, 2), bs * bs * c.int(1, 2), c.int(1, 3), c.int(1, 3)))
        attrs = {"blocksize": bs, **({"mode": c.choice(["DCR", "CRD"])} if c.chance(2) else {})}
        _moved(c, "DepthToSpace", x, [x.name], **attrs)
    else:
        x = c.operand((F,), shape=(c.int(1, 2), c.int(1, 3), bs * c.int(1, 2), bs * c.int(1, 2)))
        _moved(c, "SpaceToDepth", x, [x.name], blocksize=bs)


def op_cumsum(c) -> None:
    x = c.operand((F,) + INTS, min_rank=1)
    axis = c.const(np.array(c.int(-x.rank, x.rank - 1)), c.choice([I64, I32]))
    n = max(x.shape)
    attrs = {k: 1 for k in ("exclusive", "reverse") if c.chance(3)}
    c.node("CumSum", [x.name, axis], [(n * min(x.lo, 0), n * max(x.hi, 0))], exact=x.dtype in INTS, **attrs)


def op_trilu(c) -> None:
    x = _any(c, 2)
    ins = [x.name] + ([c.const(np.array(c.int(-2, 2)), I64)] if c.chance(2) else [])
    c.node("Trilu", ins, [(min(x.lo, 0), max(x.hi, 0))], exact=x.exact, upper=c.int(0, 1))
