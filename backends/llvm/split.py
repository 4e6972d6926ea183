"""Split a module's LLVM IR text into parts that compile separately (parallel code generation).

LLVM optimizes and generates code for one module on one core; a whole model is one module, and on
the real models LLVM took 1-9 s of the compile (docs/benchmarks.md, "Compile time"). `split_module`
cuts the text that `translate_module` prints into `parts` self-contained modules that LLVM can
compile at the same time (jit.py hands all but the first to codegen workers, `codegen_pool.py`); MCJIT
then links the objects into one engine. MLIR's pass manager and LLVM's own `-split-module` /
ThinLTO backends parallelize the same way: by function, with declarations for what another part
defines.

The unit of splitting is a *group*: a function with everything it calls, except that calls out of
the functions in `keep` (`main` and the entry point, which call every kernel) do not join groups.
So a kernel stays with the OpenMP bodies it outlines, and the kernels of a model spread over the
parts. Groups go to the part with the fewest lines so far, largest first; the `keep` group always
goes to part 0. In each part:

* every top-level line that is not a function definition (declarations of externals, `target`
  lines, internal constants, attributes, metadata) is copied: each part has its own copy of a
  constant;
* a function that another part calls loses `internal` (it becomes an external symbol that the
  object linker resolves; the entry point's caller sees no difference);
* a function defined in another part and called here is declared.

The text must be what llvmlite prints: `define` at the start of a line, the body's closing `}` alone
at the start of a line. Returns None (compile the module whole) when it has fewer than two groups,
or when it defines a global variable (the parts must share it: the profile counters) or a constant that
is not internal or private (copying it would define it twice).

```python
parts = split_module(llvm_ir, 2)   # [text with main and half the kernels, text with the rest]
```
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ziggurat.components import connected_components

_NAME = re.compile(r'@("(?:[^"\\]|\\.)*"|[-a-zA-Z$._][-a-zA-Z$._0-9]*)')
_GLOBAL_DEF = re.compile(r'^@("(?:[^"\\]|\\.)*"|[-a-zA-Z$._][-a-zA-Z$._0-9]*)\s*=\s*(\w+)')
KEEP = ('"main"', '"ziggurat_entry"')


@dataclass
class _Function:
    name: str  # as the text spells it, quotes included
    lines: list[str]
    calls: set[str] = field(default_factory=set)


def _parse(text: str) -> tuple[list[str], list[_Function]] | None:
    header: list[str] = []
    functions: list[_Function] = []
    current: _Function | None = None
    for line in text.splitlines():
        if current is not None:
            current.lines.append(line)
            if line.startswith("}"):
                current = None
            continue
        if line.startswith("define "):
            m = _NAME.search(line)
            if m is None:
                return None
            current = _Function(m.group(1), [line])
            functions.append(current)
            continue
        g = _GLOBAL_DEF.match(line)
        if g is not None and (g.group(2) not in ("internal", "private") or " constant " not in line):
            return None  # one definition each part would copy, or a variable the parts must share
        header.append(line)
    if current is not None:
        return None
    defined = {f.name for f in functions}
    for f in functions:
        f.calls = {m.group(1) for line in f.lines[1:] for m in _NAME.finditer(line)} & defined - {f.name}
    return header, functions


def _declaration(define_line: str) -> str:
    """`define internal void @"k"(float* noalias %".1") "a"="b" nounwind` -> `declare void @"k"(float* noalias %".1")`."""
    rest = define_line[len("define "):]
    for linkage in ("internal ", "private ", "dso_local "):
        if rest.startswith(linkage):
            rest = rest[len(linkage):]
    start = rest.index("(", _NAME.search(rest).end() - 1)  # type: ignore[union-attr]
    depth = 0
    for i in range(start, len(rest)):
        depth += {"(": 1, ")": -1}.get(rest[i], 0)
        if depth == 0:
            return "declare " + rest[: i + 1]
    raise ValueError(f"unbalanced parentheses in {define_line!r}")


def _groups(functions: list[_Function], keep: tuple[str, ...]) -> list[list[_Function]]:
    """Each function with what it calls; the functions in `keep` together, their calls not followed."""
    kept = [f.name for f in functions if f.name in keep]
    edges = list(zip(kept, kept[1:])) + [(f.name, c) for f in functions if f.name not in keep
                                          for c in f.calls if c not in keep]
    by_name = {f.name: f for f in functions}
    return [[by_name[n] for n in g] for g in connected_components([f.name for f in functions], edges)]


def split_module(text: str, parts: int, keep: tuple[str, ...] = KEEP) -> list[str] | None:
    """`text` as `parts` (or fewer) modules that together define what it defines; None when it does
    not split (see the module docstring). Part 0 holds the functions named in `keep`."""
    parsed = _parse(text) if parts > 1 else None
    if parsed is None:
        return None
    header, functions = parsed
    groups = _groups(functions, keep)
    if len(groups) < 2:
        return None
    size = [0] * parts
    bins: list[list[_Function]] = [[] for _ in range(parts)]
    first = [g for g in groups if any(f.name in keep for f in g)]
    for g in first:
        bins[0] += g
        size[0] += sum(len(f.lines) for f in g)
    for g in sorted((g for g in groups if g not in first), key=lambda g: -sum(len(f.lines) for f in g)):
        k = size.index(min(size))
        bins[k] += g
        size[k] += sum(len(f.lines) for f in g)
    bins = [b for b in bins if b]
    if len(bins) < 2:
        return None
    home = {f.name: k for k, b in enumerate(bins) for f in b}
    exported = {c for k, b in enumerate(bins) for f in b for c in f.calls if home[c] != k}
    by_name = {f.name: f for f in functions}
    out = []
    for k, b in enumerate(bins):
        lines = list(header)
        foreign = sorted({c for f in b for c in f.calls if home[c] != k})
        lines += [_declaration(by_name[c].lines[0]) for c in foreign]
        for f in b:
            first_line = f.lines[0]
            if f.name in exported:
                first_line = re.sub(r"^define (internal |private )", "define ", first_line)
            lines.append(first_line)
            lines += f.lines[1:]
        out.append("\n".join(lines) + "\n")
    return out


_METADATA_ID = re.compile(r"!(\d+)\b")


def merge_modules(texts: list[str]) -> str:
    """One module text that defines what `texts` define (the inverse of `split_module`; the parts
    of `fork_build.lower_tail`): header lines once each (a declaration once per name, none for a
    function some part defines), numbered metadata renumbered part by part, then every function.
    Raises ValueError for text `split_module` would not split (a global variable, a constant that is
    not internal or private)."""
    parsed = [_parse(t) for t in texts]
    if any(p is None for p in parsed):
        raise ValueError("merge_modules: a part defines a global variable or a shared constant")
    defined = {f.name for _, functions in parsed for f in functions}  # type: ignore[union-attr]
    header: list[str] = []
    seen: set[str] = set()
    declared: set[str] = set()
    body: list[str] = []
    offset = 0
    for head, functions in parsed:  # type: ignore[misc]
        lines = head + [line for f in functions for line in f.lines]
        ids = [int(i) for line in lines for i in _METADATA_ID.findall(line)]
        shift = offset

        def renumber(line: str) -> str:
            return _METADATA_ID.sub(lambda m: f"!{int(m.group(1)) + shift}", line) if shift else line

        for line in head:
            line = renumber(line)
            if not line.strip() or line in seen:
                continue
            if line.startswith("declare "):
                name = _NAME.search(line)
                if name is None or name.group(1) in defined or name.group(1) in declared:
                    continue
                declared.add(name.group(1))
            seen.add(line)
            header.append(line)
        for f in functions:
            body.append("")
            body += [renumber(line) for line in f.lines]
        offset += max(ids) + 1 if ids else 0
    return "\n".join(header + body) + "\n"
