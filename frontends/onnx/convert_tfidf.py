"""TfIdfVectorizer (opsets 9+) on integer input with an int64 pool.

The pool's n-grams are constants, so the counting is a fixed set of window
comparisons. As onnx's reference (and onnxruntime) count: an n-gram P of
size n >= 2 (min_gram_length <= n <= max_gram_length) occurs at start s with
skip distance d (1 .. max_skip_count + 1) when x[s + k*d] == P[k] for every
k; unigrams are counted once per position (their count does not depend on d).
For one size n and distance d, with S = L - (n-1)*d starts and G n-grams:

```
M_k  = (x[:, k*d : k*d + S] as [B, 1, S]) == (P[:, k] as [1, G, 1])   (i1 -> float32)
C   += sum_s prod_k M_k                                                 [B, G]
Y    = C @ O                  O[g, v] = 1 where n-gram g's ngram_indexes entry is v
```

then the mode: TF counts, IDF `weights` (or 1) where the count is > 0,
TFIDF `weights` * count. A 1-D input gives a 1-D output. Counts are exact in
float32 (below 2**24).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.dialects.builtin import IntegerType, TensorType
from xdsl.ir import SSAValue

import ziggurat.dtypes as dtypes
from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, shape_of, tensor_type
from ziggurat.frontends.onnx.convert_tensor import slice_value


def _ngrams(ctx: ConversionContext, attrs: dict) -> dict[int, tuple[np.ndarray, list[int]]]:
    """Size -> (the pool's n-grams of that size [G, n], their output indices),
    for the sizes between min_gram_length and max_gram_length."""
    pool = [int(v) for v in attrs.get("pool_int64s", [])]
    counts = [int(c) for c in attrs["ngram_counts"]]
    indexes = [int(i) for i in attrs["ngram_indexes"]]
    lo, hi = int(attrs["min_gram_length"]), int(attrs["max_gram_length"])
    out: dict[int, tuple[np.ndarray, list[int]]] = {}
    ngram_id = 0
    for size_minus_one, start in enumerate(counts):
        size = size_minus_one + 1
        end = counts[size_minus_one + 1] if size_minus_one + 1 < len(counts) else len(pool)
        grams = (end - start) // size
        if lo <= size <= hi and grams > 0:
            if ngram_id + grams > len(indexes):
                raise ctx.shape_error(f"ngram_indexes holds {len(indexes)} entries; the pool has more n-grams")
            out[size] = (np.array(pool[start:start + grams * size], np.int64).reshape(grams, size),
                         indexes[ngram_id:ngram_id + grams])
        ngram_id += max(grams, 0)
    return out


def convert_tfidf_vectorizer(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    attrs = attributes(node)
    if attrs.get("pool_strings"):
        raise ctx.unsupported("string pools are not supported; only pool_int64s")
    x = ctx.value(node.input[0])
    elt = element_type(x)
    if not dtypes.is_int(elt):
        raise ctx.unsupported(f"input of element type {dtypes.describe(elt)} is not supported; int32/int64 are")
    shape = shape_of(x)
    if len(shape) not in (1, 2):
        raise ctx.shape_error(f"input must be 1-D [C] or 2-D [B, C], got {shape}")
    x2 = ctx.reshape(x, (1, shape[0])) if len(shape) == 1 else x
    rows, length = shape_of(x2)
    indexes = [int(i) for i in attrs["ngram_indexes"]]
    if not indexes or min(indexes) < 0:
        raise ctx.shape_error(f"ngram_indexes {indexes} must be non-empty and non-negative")
    width = max(indexes) + 1
    mode = attrs.get("mode", "TF")
    if mode not in ("TF", "IDF", "TFIDF"):
        raise ctx.unsupported(f"mode '{mode}' is not TF, IDF or TFIDF")
    skips = int(attrs.get("max_skip_count", 0)) + 1
    dtype = dtypes.to_numpy(elt)

    def const(array: np.ndarray, label: str, np_dtype=np.float32) -> SSAValue:
        return ctx.add_constant(np.ascontiguousarray(array, np_dtype), f"{ctx.node_label}.{label}")

    total: SSAValue | None = None
    for size, (grams, outputs) in sorted(_ngrams(ctx, attrs).items()):
        g = len(grams)
        counts: SSAValue | None = None
        for d in range(1, (skips if size > 1 else 1) + 1):
            starts = length - (size - 1) * d
            if starts <= 0:
                continue
            match: SSAValue | None = None
            for k in range(size):
                window = slice_value(ctx, x2, [0, k * d], [1, 1], [rows, starts])
                window = ctx.reshape(window, (rows, 1, starts))
                values = const(grams[:, k].reshape(1, g, 1), f"gram{size}_{k}", dtype)
                flag = ctx.emit(graph.CompareOp(window, values, "eq", TensorType(IntegerType(1), [rows, g, starts])))
                mask = ctx.emit(CastOp(flag, tensor_type((rows, g, starts))))
                match = mask if match is None else ctx.emit(graph.MulOp(match, mask, mask.type))
            assert match is not None
            found = ctx.emit(graph.ReduceOp(match, "sum", [2], False, tensor_type((rows, g))))
            counts = found if counts is None else ctx.emit(graph.AddOp(counts, found, found.type))
        if counts is None:
            continue
        scatter = np.zeros((g, width), np.float32)
        for row, v in enumerate(outputs):
            scatter[row, v] += 1.0
        placed = ctx.emit(graph.MatmulOp(counts, const(scatter, f"place{size}"), tensor_type((rows, width))))
        total = placed if total is None else ctx.emit(graph.AddOp(total, placed, placed.type))
    if total is None:  # no n-gram can occur: all counts are zero
        result: Value = np.zeros((rows, width), np.float32)
    else:
        weights = attrs.get("weights")
        w = None if not weights else const(np.asarray(weights, np.float32).reshape(1, -1), "weights")
        if w is not None and shape_of(w)[1] != width:
            raise ctx.shape_error(f"weights hold {shape_of(w)[1]} values for {width} outputs")
        result = total
        if mode == "IDF":
            present = ctx.emit(graph.CompareOp(total, const(np.zeros(1), "zero"), "gt", total.type))
            result = present if w is None else ctx.emit(graph.MulOp(present, w, total.type))
        elif mode == "TFIDF" and w is not None:
            result = ctx.emit(graph.MulOp(total, w, total.type))
    if len(shape) == 1:
        return [result.reshape(width) if isinstance(result, np.ndarray) else ctx.reshape(result, (width,))]
    return [result]
