"""A long elementwise chain compiles at the default recursion limit and matches numpy.

Long models are where a recursive walk overflows the stack and where a
quadratic step (inlining a chain of computes, post-dominators of a value read
all along the chain) shows. The compile time itself is measured by
`benchmarks/compile_time.py`, not here.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import ziggurat
from ziggurat.benchmarks.workloads import add_chain, add_chain_reference

DEFAULT_RECURSION_LIMIT = 1000  # CPython's default


@pytest.fixture
def default_recursion_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def test_a_5000_node_add_chain_compiles_and_matches_numpy(default_recursion_limit) -> None:
    nodes = 5000  # the reliability issue's scale case
    _, model, inputs, _ = add_chain(nodes)
    compiled = ziggurat.compile(model, target="llvm -num-cores=1", cache=False)
    (out,) = compiled(inputs["x"])
    np.testing.assert_allclose(out, add_chain_reference(nodes, inputs["x"], model), rtol=1e-5, atol=1e-3)
