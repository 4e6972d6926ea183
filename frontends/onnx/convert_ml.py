"""Ops of the `ai.onnx.ml` domain: Binarizer, ArrayFeatureExtractor and
TreeEnsemble (version 5), following onnx.reference.ops.aionnxml.

* Binarizer: x > threshold as a 1/0 tensor of x's type (`graph.compare`).
* ArrayFeatureExtractor: x[..., indices] with run-time int64 indices
  (`graph.gather` on the last axis); a 1-D x gives one row, as onnxruntime.
* TreeEnsemble: the trees are static, so each root-to-leaf path is known at
  import time. Every node's test is evaluated for all nodes at once
  (`graph.compare` per mode on the gathered feature columns, chosen per node
  by constant masks); a path's indicator is the product over nodes of
  m (test must hold), 1 - m (must fail) or 1 (not on the path). SUM and
  AVERAGE aggregate with one matmul by the [paths, targets] weight table;
  MIN and MAX with where + reduce over the paths.

```mlir
// Binarizer, threshold 1.0
%y = graph.compare %x, %t {kind = "gt"} : tensor<3x4xf32>, tensor<1xf32> -> tensor<3x4xf32>
```
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import numpy_helper
from xdsl.dialects.builtin import i1
from xdsl.ir import SSAValue

import ziggurat.dtypes as dtypes
from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp, GatherOp
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, shape_of, tensor_type
from ziggurat.frontends.onnx.convert_index import const, reduce
from ziggurat.frontends.onnx.convert_window import like, reshape

ML_DOMAIN = "ai.onnx.ml"
ML_DEFAULT_OPSET = 21
"""The default-domain opset released with ai.onnx.ml 5 (ONNX 1.16)."""

MAX_TREE_TABLE = 1 << 24
"""TreeEnsemble's [batch, paths, nodes] indicator tensor above this size is refused."""


def convert_binarizer(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Binarizer (ai.onnx.ml 1): 1 where x > threshold, else 0, in x's type."""
    x = ctx.value(node.input[0])
    elt = element_type(x)
    threshold = const(ctx, x, np.array([attributes(node).get("threshold", 0.0)]), "threshold")
    if dtypes.is_float(elt):
        return [ctx.emit(graph.CompareOp(x, threshold, "gt", x.type))]
    hit = ctx.emit(graph.CompareOp(x, threshold, "gt", tensor_type(shape_of(x), i1)))
    return [ctx.emit(CastOp(hit, x.type))]


def convert_array_feature_extractor(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """ArrayFeatureExtractor (ai.onnx.ml 1): x[..., indices], indices flattened."""
    x = ctx.value(node.input[0])
    idx = ctx.value(node.input[1])
    shape, count = shape_of(x), math.prod(shape_of(idx))
    if not shape or count == 0:
        raise ctx.shape_error(f"x of shape {shape} and {count} indices give no features")
    if not dtypes.is_int(element_type(idx)):
        raise ctx.unsupported("indices must be integers")
    flat = ctx.reshape(idx, [count])
    picked = ctx.emit(GatherOp(x, flat, len(shape) - 1, like(x, (*shape[:-1], count))))
    return [reshape(ctx, picked, (1, count)) if len(shape) == 1 else picked]


# ---------------------------------------------------------------------------
# TreeEnsemble
# ---------------------------------------------------------------------------

_MODES = {0: "le", 1: "lt", 2: "ge", 3: "gt", 4: "eq", 5: "ne"}
_MEMBER = 6


def _array(value) -> np.ndarray:
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


def _paths(ctx: ConversionContext, attrs: dict, n_nodes: int) -> list[tuple[int, list[tuple[int, bool]]]]:
    """(leaf index, [(node, branch taken)]) of every root-to-leaf path."""
    true_ids, false_ids = list(attrs["nodes_truenodeids"]), list(attrs["nodes_falsenodeids"])
    true_leaf, false_leaf = list(attrs["nodes_trueleafs"]), list(attrs["nodes_falseleafs"])
    paths: list[tuple[int, list[tuple[int, bool]]]] = []

    def walk(index: int, steps: list[tuple[int, bool]]) -> None:
        if not 0 <= index < n_nodes or len(steps) > n_nodes:
            raise ctx.shape_error(f"node id {index} is out of range or the trees have a cycle")
        for taken, child, leaf in ((True, true_ids[index], true_leaf[index]),
                                   (False, false_ids[index], false_leaf[index])):
            if leaf:
                paths.append((child, [*steps, (index, taken)]))
            else:
                walk(child, [*steps, (index, taken)])

    for root in attrs["tree_roots"]:
        if true_leaf[root] and false_leaf[root] and true_ids[root] == false_ids[root]:
            paths.append((true_ids[root], []))  # a tree that is a single leaf
        else:
            walk(root, [])
    return paths


def _node_masks(ctx: ConversionContext, x: SSAValue, attrs: dict, n_nodes: int) -> SSAValue:
    """[B, nodes] 1/0 masks: whether each node's test holds for each row."""
    modes = _array(attrs["nodes_modes"]).astype(np.int64).reshape(-1)
    features = np.asarray(attrs["nodes_featureids"], np.int64)
    splits = _array(attrs.get("nodes_splits", np.zeros(n_nodes))).astype(np.float64).reshape(-1)
    batch = shape_of(x)[0]
    if np.any(features < 0) or np.any(features >= shape_of(x)[1]):
        raise ctx.shape_error(f"feature ids {features.tolist()} leave the {shape_of(x)[1]} features")
    cols = ctx.emit(GatherOp(x, ctx.add_constant(features, f"{ctx.node_label}.features"), 1,
                             like(x, (batch, n_nodes))))
    out_type = like(x, (batch, n_nodes))
    masks = None
    for mode in sorted(set(modes.tolist())):
        if mode == _MEMBER:
            hit = _membership(ctx, cols, attrs, modes)
        elif mode in _MODES:
            hit = ctx.emit(graph.CompareOp(cols, const(ctx, x, splits[None, :], f"splits{mode}"), _MODES[mode],
                                           out_type))
        else:
            raise ctx.unsupported(f"node mode {mode} is not one of 0-6 (BRANCH_LEQ .. BRANCH_MEMBER)")
        if masks is None:
            masks = hit  # the first mode's masks, replaced below for the nodes of the other modes
        else:
            chosen = const(ctx, x, (modes == mode)[None, :].astype(np.float64), f"mode{mode}")
            masks = ctx.emit(graph.WhereOp(chosen, hit, masks, out_type))
    tracks = np.asarray(attrs.get("nodes_missing_value_tracks_true", [0] * n_nodes), np.int64)
    if np.any(tracks):
        nan = ctx.emit(graph.CompareOp(cols, cols, "ne", out_type))
        nan = ctx.emit(graph.MulOp(nan, const(ctx, x, tracks[None, :].astype(np.float64), "tracks"), out_type))
        masks = ctx.emit(graph.MaxOp(masks, nan, out_type))
    return masks


def _membership(ctx: ConversionContext, cols: SSAValue, attrs: dict, modes: np.ndarray) -> SSAValue:
    """Masks of the BRANCH_MEMBER nodes: x in the node's set (NaN-separated in membership_values)."""
    values = _array(attrs.get("membership_values", np.zeros(0))).astype(np.float64).reshape(-1)
    sets: list[list[float]] = []
    current: list[float] = []
    for v in values.tolist():
        if np.isnan(v):
            sets.append(current)
            current = []
        else:
            current.append(v)
    members = int(np.sum(modes == _MEMBER))
    if len(sets) != members:
        raise ctx.shape_error(f"membership_values hold {len(sets)} sets for {members} BRANCH_MEMBER nodes")
    width = max(1, max(len(s) for s in sets))
    table = np.full((modes.size, width), np.nan)  # NaN never equals: padding and non-member nodes
    for node, members_of in zip(np.flatnonzero(modes == _MEMBER).tolist(), sets):
        table[node, :len(members_of)] = members_of
    batch, n_nodes = shape_of(cols)
    wide = tensor_type((batch, n_nodes, width), element_type(cols))
    eq = ctx.emit(graph.CompareOp(reshape(ctx, cols, (batch, n_nodes, 1)), const(ctx, cols, table[None], "members"),
                                  "eq", wide))
    return reduce(ctx, eq, "max", [2], False)


def convert_tree_ensemble(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """TreeEnsemble (ai.onnx.ml 5) on X [B, F], float or double; post_transform NONE."""
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    if not dtypes.is_float(element_type(x)) or len(shape_of(x)) != 2:
        raise ctx.unsupported(f"X must be a 2-D float tensor, got {dtypes.describe(element_type(x))}"
                              f"{list(shape_of(x))}")
    if attrs.get("post_transform", 0) != 0:
        raise ctx.unsupported(f"post_transform {attrs['post_transform']} is not supported; only 0 (NONE)")
    aggregate = attrs.get("aggregate_function", 1)
    if aggregate not in (0, 1, 2, 3):
        raise ctx.unsupported(f"aggregate_function {aggregate} is not one of 0-3 (AVERAGE, SUM, MIN, MAX)")
    n_nodes = len(attrs["nodes_featureids"])
    n_targets = int(attrs["n_targets"])
    leaf_weights = _array(attrs["leaf_weights"]).astype(np.float64).reshape(-1)
    leaf_targets = np.asarray(attrs["leaf_targetids"], np.int64)
    paths = _paths(ctx, attrs, n_nodes)
    batch = shape_of(x)[0]
    n_paths = len(paths)
    if batch * n_paths * max(n_nodes, 1) > MAX_TREE_TABLE:
        raise ctx.unsupported(f"{n_paths} leaves over {n_nodes} nodes for {batch} rows exceed {MAX_TREE_TABLE} "
                              "indicator entries")
    if any(not 0 <= leaf < leaf_weights.size for leaf, _ in paths) or np.any(leaf_targets >= n_targets):
        raise ctx.shape_error("a leaf id or target id is out of range")
    need_true, need_false = np.zeros((n_paths, n_nodes)), np.zeros((n_paths, n_nodes))
    for p, (_, steps) in enumerate(paths):
        for index, taken in steps:
            (need_true if taken else need_false)[p, index] = 1.0
    masks = reshape(ctx, _node_masks(ctx, x, attrs, n_nodes), (batch, 1, n_nodes))
    wide = like(x, (batch, n_paths, n_nodes))
    # factor = m * T + (1 - m) * F + (1 - T - F) = m * (T - F) + (1 - T)
    factor = ctx.emit(graph.AddOp(ctx.emit(graph.MulOp(masks, const(ctx, x, (need_true - need_false)[None], "tf"),
                                                       wide)),
                                  const(ctx, x, (1.0 - need_true)[None], "free"), wide))
    reached = reduce(ctx, factor, "prod", [2], False)  # [B, paths]
    targets = np.zeros((n_paths, n_targets))
    weight = np.array([leaf_weights[leaf] for leaf, _ in paths])
    hits = np.zeros((n_paths, n_targets))
    for p, (leaf, _) in enumerate(paths):
        targets[p, leaf_targets[leaf]] = weight[p] / (len(attrs["tree_roots"]) if aggregate == 0 else 1)
        hits[p, leaf_targets[leaf]] = 1.0
    if aggregate in (0, 1):
        return [ctx.emit(graph.MatmulOp(reached, const(ctx, x, targets, "weights"), like(x, (batch, n_targets))))]
    info = np.finfo(dtypes.to_numpy(element_type(x)))
    init = info.max if aggregate == 2 else info.min
    cube = like(x, (batch, n_paths, n_targets))
    on = ctx.emit(graph.MulOp(reshape(ctx, reached, (batch, n_paths, 1)), const(ctx, x, hits[None], "hits"), cube))
    picked = ctx.emit(graph.WhereOp(on, const(ctx, x, weight[None, :, None], "leaf_weights"),
                                    const(ctx, x, np.array([[[init]]]), "init"), cube))
    return [reduce(ctx, picked, "min" if aggregate == 2 else "max", [1], False)]


ML_CONVERTERS = {
    (ML_DOMAIN, "Binarizer"): convert_binarizer,
    (ML_DOMAIN, "ArrayFeatureExtractor"): convert_array_feature_extractor,
    (ML_DOMAIN, "TreeEnsemble"): convert_tree_ensemble,
}
"""(domain, op type) -> converter, merged into the importer's table of other-domain ops."""
