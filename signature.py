"""A compiled model's signature: its inputs, its outputs, its run-time index checks and extents.

`TensorSpec` names one input or output (name, static shape, dtype). An output
whose spec carries an `IndexCheck` is not the model's: the entry function
writes into it the smallest and the largest value of one node's run-time
indices (frontends/onnx/index_checks.py adds the two reductions), and the
executor compares them with the node's bounds after each call, raising
`InputError` naming the node, the input and the offending index. An output
whose spec carries an `Extent` is not the model's either: the entry function
writes into it (int64, one element) how many entries one output really has
along one axis, where that is known only at run time (NonZero, Unique,
Compress, TopK with a run-time k: frontends/onnx/convert_data_dependent.py);
the output's own spec has the upper bound, and the executor returns it cut to
the extent.

The compiler, the disk cache (cache.py) and the exported library's `.json`
(runtime/export.py) all write a signature with `to_json` and read it back with
`from_json`. numpy alone: no xDSL, no llvmlite.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ziggurat.errors import InputError
from ziggurat.symbolic import Sym


@dataclass(frozen=True)
class IndexCheck:
    """The bounds of one node's run-time indices: its output holds the minimum of each index
    coordinate, then the maximum of each (`2 * len(bounds)` values). A coordinate `j` is legal in
    `[-bounds[j], bounds[j])` (ONNX: negative indices count from the end)."""

    node: str  # the node's label (its ONNX name, or '<node #i>')
    op: str  # its op type
    input: str  # the name of its indices input
    bounds: tuple[int, ...]  # the size of the data axis each index coordinate addresses

    def verify(self, values: np.ndarray, binding: Mapping[str, int] | None = None) -> None:
        """Raises `InputError` when `values` (the check's output) holds an index out of bounds; a
        symbolic bound (a model compiled for every shape) is evaluated at `binding`."""
        k = len(self.bounds)
        for j, size in enumerate(self.bounds):
            if binding is not None and not isinstance(size, int):
                size = size.evaluate(binding)  # type: ignore[union-attr]
            low, high = int(values[j]), int(values[k + j])
            if low < -size or high >= size:
                bad = low if low < -size else high
                where = f" (coordinate {j} of each index tuple)" if k > 1 else ""
                raise InputError(
                    f"{self.op} node '{self.node}': input '{self.input}' holds the index {bad}{where}, out of range "
                    f"[{-size}, {size - 1}] for an axis of size {size}. Pass indices within the data's shape "
                    "(negative ones count from the end).")


@dataclass(frozen=True)
class Extent:
    """The run-time size of model output `output` along `axis`, computed by the node `node` (an `op`):
    the output's spec holds the upper bound; `cut` keeps the first `n` entries along the axis."""

    output: int
    axis: int
    node: str
    op: str

    def cut(self, array: np.ndarray, n: int) -> np.ndarray:
        """`array` (the output at its upper bound) cut to `n` entries along the axis (a contiguous
        copy where the cut is not a leading block); `InputError` when `n` leaves [0, bound]."""
        bound = array.shape[self.axis]
        if not 0 <= n <= bound:
            hint = " (TopK: k must lie in [0, the axis' size])" if self.op == "TopK" else ""
            raise InputError(f"{self.op} node '{self.node}': its output {self.output} would hold {n} entries along "
                             f"axis {self.axis}, outside [0, {bound}]{hint}. Check the node's run-time inputs.")
        if n == bound:
            return array
        cut = array[(slice(None),) * self.axis + (slice(0, n),)]
        return cut if self.axis == 0 else np.ascontiguousarray(cut)


@dataclass(frozen=True)
class TensorSpec:
    """Name, static shape and dtype of a model input or output (`check`: see `IndexCheck`;
    `extent`: see `Extent`; an output with either is hidden, not returned)."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    check: IndexCheck | None = None
    extent: Extent | None = None

    @property
    def hidden(self) -> bool:
        return self.check is not None or self.extent is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "shape": [str(d) if isinstance(d, Sym) else int(d) for d in self.shape],
                               "dtype": dtype_name(np.dtype(self.dtype))}
        if self.check is not None:
            c = self.check
            out["check"] = {"node": c.node, "op": c.op, "input": c.input,
                            "bounds": [str(b) if isinstance(b, Sym) else int(b) for b in c.bounds]}
        if self.extent is not None:
            e = self.extent
            out["extent"] = {"output": e.output, "axis": e.axis, "node": e.node, "op": e.op}
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TensorSpec:
        c = d.get("check")
        check = None if c is None else IndexCheck(str(c["node"]), str(c["op"]), str(c["input"]),
                                                  tuple(Sym.parse(b) if isinstance(b, str) else int(b) for b in c["bounds"]))
        e = d.get("extent")
        extent = None if e is None else Extent(int(e["output"]), int(e["axis"]), str(e["node"]), str(e["op"]))
        shape = tuple(Sym.parse(x) if isinstance(x, str) else int(x) for x in d["shape"])  # a symbolic extent as text
        return cls(str(d["name"]), shape, dtype_from_name(str(d["dtype"])), check, extent)


def finish_outputs(hidden: list[TensorSpec], values: list[np.ndarray]) -> dict[int, int]:
    """After a call: verifies the index checks among the `hidden` outputs (their `values`) and
    returns the run-time extents, output index -> entries along its `Extent.axis`."""
    extents: dict[int, int] = {}
    for spec, value in zip(hidden, values):
        if spec.check is not None:
            spec.check.verify(value.reshape(-1))
        elif spec.extent is not None:
            extents[spec.extent.output] = int(value.reshape(-1)[0])
    return extents


def cut_outputs(hidden: list[TensorSpec], results: list[np.ndarray], extents: dict[int, int]) -> list[np.ndarray]:
    """`results` with every output that has a run-time extent cut to it (`Extent.cut`)."""
    for spec in hidden:
        if spec.extent is not None:
            i = spec.extent.output
            results[i] = spec.extent.cut(results[i], extents[i])
    return results


def dtype_name(dtype: np.dtype) -> str:
    """`dtype` as a signature writes it: numpy's `str` ('<f4'), or `ml_dtypes.NAME` for the types
    numpy cannot name (bfloat16 is '<V2' to numpy, float8_e5m2 '<f1'); ValueError for others."""
    try:
        if np.dtype(dtype.str) == dtype:
            return dtype.str
    except TypeError:
        pass
    if dtype.type.__module__.split(".")[0] == "ml_dtypes":
        return f"ml_dtypes.{dtype.name}"
    raise ValueError(f"dtype {dtype} has no name a signature can read back")


def dtype_from_name(name: str) -> np.dtype:
    """The dtype `dtype_name` wrote as `name`."""
    if name.startswith("ml_dtypes."):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name.partition(".")[2]))
    return np.dtype(name)
