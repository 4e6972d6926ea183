"""Connected components of a small undirected graph (union-find with path halving).

Shared by the layout rewrite (the regions of ops that move to a blocked layout together,
transforms/graph/layout_rewrite.py) and parallel code generation (the kernel groups that go to one
part, backends/llvm/split.py).

```python
connected_components(["a", "b", "c"], [("a", "c")])   # [["a", "c"], ["b"]]
```
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

N = TypeVar("N", bound=Hashable)


def connected_components(nodes: Sequence[N], edges: Iterable[tuple[N, N]]) -> list[list[N]]:
    """The components of `nodes` joined by `edges` (both ends must be nodes), each listed in the
    order of `nodes`, the components in the order of their first node."""
    parent: dict[N, N] = {n: n for n in nodes}

    def root(n: N) -> N:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for a, b in edges:
        parent[root(a)] = root(b)
    groups: dict[N, list[N]] = {}
    for n in nodes:
        groups.setdefault(root(n), []).append(n)
    return list(groups.values())
