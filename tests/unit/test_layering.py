"""The import graph keeps the floors of design.md section 8: dependencies point down.

Read from the source with `ast` (nothing is imported): every `import` and
`from ... import` of a `ziggurat` module, at module level or inside a function.

* Module-level imports go to the same floor or below, except the few listed in
  `UPWARD` (at most three).
* Import cycles (every import counted, lazy ones too): at most three, none
  spanning two top-level folders, none through the registry or between the
  compiler and the tuner.
* Graph passes import neither the ONNX frontend nor the tuner.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {"tests", ".venv", "docs", ".git", ".ci"}

# design.md section 8; the longest matching prefix decides.
FLOORS = {
    "ziggurat.errors": 1, "ziggurat.dtypes": 1, "ziggurat.target": 1, "ziggurat.weights": 1,
    "ziggurat.database": 1, "ziggurat.limits": 1, "ziggurat.signature": 1,
    "ziggurat.components": 1, "ziggurat.symbolic": 1, "ziggurat.arena": 1,
    "ziggurat.runtime.cuda_program": 1,  # a GPU program as data (stdlib only): the CUDA backend writes it
    "ziggurat.dialects": 2, "ziggurat.transforms": 2,  # transforms/__init__.py: the lazy list of our passes
    "ziggurat.registry": 2, "ziggurat.plugins": 2,
    "ziggurat.frontends": 3, "ziggurat.lowering": 3, "ziggurat.backends": 3,
    "ziggurat.transforms.graph": 3, "ziggurat.transforms.loop": 3, "ziggurat.transforms.schedule": 3,
    "ziggurat.transforms.costs": 3, "ziggurat.transforms.gpu": 3, "ziggurat.transforms.te": 3,
    "ziggurat": 4, "ziggurat.compiler": 4, "ziggurat.runtime": 4,
    "ziggurat.autotune": 5,
    "ziggurat.cli": 6, "ziggurat.benchmarks": 6,
}

# Module-level imports from a lower floor up to a higher one that are allowed (at most three).
UPWARD: set[tuple[str, str]] = set()

MAX_CYCLES = 3


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["ziggurat", *parts])


def modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        if SKIP & set(path.relative_to(ROOT).parts):
            continue
        out[module_name(path)] = path
    return out


def imports(mods: dict[str, Path]) -> list[tuple[str, str, bool]]:
    """(importer, imported module, at module level) for every ziggurat import."""
    edges = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        top = set(map(id, tree.body))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module
                           for a in node.names]
            for t in targets:
                if t.startswith("ziggurat") and t in mods and t != name:
                    edges.append((name, t, id(node) in top))
    return edges


def floor(name: str) -> int:
    best = max((p for p in FLOORS if name == p or name.startswith(p + ".")), key=len)
    return FLOORS[best]


def cycles(edges: list[tuple[str, str, bool]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for a, b, _ in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def top_folder(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 else "(root)"


EDGES = imports(modules())


def test_every_module_has_a_floor() -> None:
    for name in modules():
        assert floor(name) in range(1, 7), name


def test_module_level_imports_point_down() -> None:
    upward = {(a, b) for a, b, top in EDGES if top and floor(b) > floor(a)}
    assert upward <= UPWARD, f"imports from a lower floor up to a higher one: {sorted(upward - UPWARD)}"
    assert len(UPWARD) <= 3


def test_few_import_cycles_and_none_across_folders() -> None:
    found = cycles(EDGES)
    for comp in found:
        assert len({top_folder(m) for m in comp}) == 1, f"an import cycle spans folders: {sorted(comp)}"
        assert "ziggurat.registry" not in comp and "ziggurat.plugins" not in comp, sorted(comp)
    assert len(found) <= MAX_CYCLES, [sorted(c) for c in found]


def test_compiler_does_not_import_the_tuner() -> None:
    assert not [b for a, b, _ in EDGES if a == "ziggurat.compiler" and b.startswith("ziggurat.autotune")]


def test_graph_passes_import_neither_frontends_nor_autotune() -> None:
    bad = [(a, b) for a, b, _ in EDGES if a.startswith("ziggurat.transforms.graph")
           and (b.startswith("ziggurat.frontends") or b.startswith("ziggurat.autotune"))]
    assert not bad, bad


def test_the_checker_sees_a_planted_cycle_and_upward_import() -> None:
    """The checks above can fail: a cycle and an upward import planted in a copy of the edges are found."""
    planted = EDGES + [("ziggurat.target", "ziggurat.compiler", True), ("ziggurat.compiler", "ziggurat.target", True)]
    assert any({"ziggurat.target", "ziggurat.compiler"} <= c for c in cycles(planted))
    assert ("ziggurat.target", "ziggurat.compiler") in {(a, b) for a, b, top in planted if top and floor(b) > floor(a)}
