"""Checks the string-keyed tables: dialects, passes, compute definitions, op docs."""

from __future__ import annotations

import re

import pytest
from ziggurat.dialects import get_all_dialects, make_context
from ziggurat.dialects import graph as graph_dialect
from ziggurat.lowering.topi import COMPUTE_DEFS
from ziggurat.transforms import get_all_passes

NOT_COMPUTE = (graph_dialect.ConstantOp, graph_dialect.CallKernelOp, graph_dialect.FusedOp, graph_dialect.YieldOp)


def test_dialect_registry_keys_match_names() -> None:
    for key, factory in get_all_dialects().items():
        assert factory().name == key


def test_pass_registry_keys_match_names() -> None:
    for key, factory in get_all_passes().items():
        cls = factory()
        assert cls.name == key
        module = cls.__module__.rsplit(".", 1)[1]
        assert module == key.replace("-", "_"), f"pass {key} lives in {module}.py"
        doc = cls.__doc__ or ""
        assert "**Input" in doc and "**Output" in doc and "```mlir" in doc, f"{key}: docstring needs input, output and an example"


def test_every_graph_compute_op_has_a_compute_definition() -> None:
    for op in graph_dialect.GRAPH_OPS:
        if op in NOT_COMPUTE:
            continue
        assert op in COMPUTE_DEFS, f"{op.name} has no compute definition in lowering/topi.py"


@pytest.mark.parametrize("dialect", sorted(get_all_dialects()))
def test_ops_are_named_and_documented(dialect: str) -> None:
    d = get_all_dialects()[dialect]()
    for op in d.operations:
        assert op.__name__.endswith("Op"), op.__name__
        assert op.name.startswith(f"{dialect}."), op.name
        doc = op.__doc__ or ""
        assert "```mlir" in doc, f"{op.name} needs an example in its docstring"


@pytest.mark.parametrize("dialect", sorted(get_all_dialects()))
def test_docstring_examples_mention_their_op(dialect: str) -> None:
    d = get_all_dialects()[dialect]()
    for op in d.operations:
        example = re.search(r"```mlir\n(.*?)```", op.__doc__ or "", re.S)
        assert example and op.name in example.group(1), op.name


def test_context_prefers_our_hw_over_circt() -> None:
    ctx = make_context()
    assert ctx.get_optional_op("hw.vload") is not None
    assert ctx.get_optional_op("graph.conv2d") is not None


def test_pattern_kinds_are_traits() -> None:
    for op in graph_dialect.GRAPH_OPS:
        traits = [t for t in op.traits if isinstance(t, graph_dialect.OpPattern)]
        assert len(traits) == 1, f"{op.name} must declare exactly one op-pattern kind"
    kind = graph_dialect.PatternKind
    assert graph_dialect.ReluOp.get_trait(graph_dialect.OpPattern).kind == kind.ELEMWISE  # type: ignore[union-attr]
    assert graph_dialect.AddOp.get_trait(graph_dialect.OpPattern).kind == kind.BROADCAST  # type: ignore[union-attr]
    assert graph_dialect.Conv2dOp.get_trait(graph_dialect.OpPattern).kind == kind.OUT_ELEMWISE_FUSABLE  # type: ignore[union-attr]
    assert graph_dialect.ReshapeOp.get_trait(graph_dialect.OpPattern).kind == kind.INJECTIVE  # type: ignore[union-attr]


def test_pyproject_lists_every_package() -> None:
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"ziggurat"}
    for init in root.rglob("__init__.py"):
        rel = init.parent.relative_to(root)
        if rel.parts and rel.parts[0] not in (".venv", "tests", "build") and not rel.parts[0].startswith("."):
            found.add(".".join(("ziggurat", *rel.parts)))
    assert listed == found
