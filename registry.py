"""The registry: the one place that merges ziggurat's dialects and passes with
the plugins' (`plugins.py`) and upstream xDSL's.

    all_dialects()   name -> factory: ours, the plugins', then upstream xDSL's
    all_passes()     name -> factory: ours, the plugins', then upstream xDSL's
    make_context()   a Context with all_dialects() registered
    parse_pipeline() pass instances for a pipeline string

Our own lists stay where their code is (`dialects/__init__.py`,
`transforms/__init__.py`); plugins register here (`plugins.py` is the
plugin author's face of it and loads plugin modules). The
merge refuses a name clash instead of letting one side silently win: a plugin
may not reuse a name of ours or of upstream xDSL (a plugin pass named `cse`
is an error, at registration). Our `hw` dialect and upstream's CIRCT `hw` are the one known
clash; ours takes the name. Passes import none of this (they parse with
`dialects.make_context`), so no import ring runs through the registry.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect
from xdsl.passes import ModulePass

from ziggurat.dialects import get_all_dialects
from ziggurat.errors import CompileError, ZigguratError
from ziggurat.transforms import get_all_passes

_DIALECTS: dict[str, Dialect] = {}
_PASSES: dict[str, type[ModulePass]] = {}


class PluginError(ZigguratError):
    """A plugin that cannot be loaded, or a registration that clashes."""


def _refuse_clash(kind: str, name: str, ours: dict, upstream: dict) -> None:
    if name in ours or name in upstream:
        owner = "ziggurat's own" if name in ours else "upstream xDSL's"
        raise PluginError(f"plugin {kind} '{name}' clashes with {owner} {kind} of that name; rename it")


def register_dialect(dialect: Dialect) -> Dialect:
    """Makes a plugin's `dialect` known to every context ziggurat builds (`make_context`, `ziggurat-opt`)."""
    _refuse_clash("dialect", dialect.name, get_all_dialects(), upstream_dialects())
    _DIALECTS[dialect.name] = dialect
    return dialect


def register_pass(pass_cls: type[ModulePass]) -> type[ModulePass]:
    """Makes a plugin's `pass_cls` usable by its `name` in every pipeline string; usable as a class decorator."""
    name = getattr(pass_cls, "name", None)
    if not isinstance(name, str) or not name:
        raise PluginError(f"plugin pass {pass_cls.__qualname__} has no `name`; give the class a kebab-case `name`")
    _refuse_clash("pass", name, get_all_passes(), upstream_passes())
    _PASSES[name] = pass_cls
    return pass_cls


def plugin_dialects() -> dict[str, Callable[[], Dialect]]:
    """name -> factory of every registered plugin dialect (the shape of `get_all_dialects`)."""
    return {name: (lambda d=d: d) for name, d in _DIALECTS.items()}


def plugin_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """name -> factory of every registered plugin pass (the shape of `get_all_passes`)."""
    return {name: (lambda p=p: p) for name, p in _PASSES.items()}


def _merge(ours: dict, theirs: dict, upstream: dict) -> dict:
    """Ours over upstream (our `hw` dialect shadows upstream's CIRCT `hw`); plugins never clash
    (refused at registration)."""
    return {**{k: v for k, v in upstream.items() if k not in ours}, **theirs, **ours}


def upstream_dialects() -> dict[str, Callable[[], Dialect]]:
    """xDSL's dialects and those of packages registered with xDSL's multiverse."""
    from xdsl.universe import Universe

    return dict(Universe.get_multiverse().all_dialects)


def upstream_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """xDSL's passes and those of packages registered with xDSL's multiverse."""
    from xdsl.universe import Universe

    return dict(Universe.get_multiverse().all_passes)


def all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Every dialect by name: ziggurat's, the loaded plugins' and upstream xDSL's."""
    return _merge(get_all_dialects(), plugin_dialects(), upstream_dialects())


def all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every pass by name: ziggurat's, the loaded plugins' and upstream xDSL's."""
    return _merge(get_all_passes(), plugin_passes(), upstream_passes())


def make_context(allow_unregistered: bool = False) -> Context:
    """A context with every dialect of `all_dialects()` registered (loaded on first use)."""
    ctx = Context(allow_unregistered=allow_unregistered)
    for name, factory in all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx


def parse_pipeline(spec: str) -> list[ModulePass]:
    """Pass instances for a pipeline string. A bad string raises one CompileError that names the
    pass (and the option) at fault, with the closest known names ("did you mean ...?")."""
    from xdsl.utils.arg_spec import parse_pipeline as split_pipeline

    if not spec.strip():
        return []
    passes = all_passes()
    try:
        specs = list(split_pipeline(spec))
    except BaseException as err:  # xDSL's ArgSpecParseError derives from BaseException
        if isinstance(err, KeyboardInterrupt | SystemExit):
            raise
        raise CompileError(f"bad pass pipeline '{spec}': {err}. Write passes as "
                           "'a,b{option=value other=value}' (options separated by spaces)") from None
    out = []
    for s in specs:
        if s.name not in passes:
            raise CompileError(f"bad pass pipeline '{spec}': unknown pass '{s.name}'{_did_you_mean(s.name, passes)}; "
                               "`ziggurat-opt --list-passes` lists them")
        cls = passes[s.name]()
        fields = option_names(cls)
        for option in s.parameters:
            if option.replace("_", "-") not in fields:
                raise CompileError(f"pass '{s.name}' has no option '{option}'{_did_you_mean(option, fields)}; "
                                   f"its options: {', '.join(fields) or 'none'}")
        for option, values in s.parameters.items():
            problem = _option_problem(cls, option.replace("-", "_"), values)
            if problem:
                raise CompileError(f"pass '{s.name}': option '{option.replace('_', '-')}' {problem}")
        try:
            out.append(cls.from_pass_spec(s))
        except BaseException as err:
            if isinstance(err, KeyboardInterrupt | SystemExit):
                raise
            raise CompileError(f"pass '{s.name}': bad options {str(s)[len(s.name):]}: "
                               f"{err}") from None
    return out


def option_names(pass_cls: type[ModulePass]) -> list[str]:
    """A pass's options as a pipeline string spells them (kebab case), in declaration order."""
    return [f.name.replace("_", "-") for f in dataclasses.fields(pass_cls)]


def _did_you_mean(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=3)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


_KINDS = {bool: "a bool (true or false)", int: "an integer", float: "a number", str: 'a string (quote it: "...")'}
_PLURAL = {bool: "bools", int: "integers", float: "numbers", str: "strings"}


def _option_problem(pass_cls: type[ModulePass], field: str, values: tuple) -> str | None:
    """What is wrong with `values` for the option `field` of `pass_cls` ("expects a bool (true or false),
    got 'maybe'"), for the types options have (bool, int, float, str, tuple[int, ...], Literal, X | None);
    None when they fit or the type is another."""
    import types
    import typing

    try:
        hint = typing.get_type_hints(pass_cls).get(field)
    except Exception:  # an annotation that does not resolve: leave the check to xDSL
        return None
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            return None
        hint, args = rest[0], typing.get_args(rest[0])
    got = ",".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)
    if typing.get_origin(hint) is typing.Literal:
        ok = len(values) == 1 and values[0] in args
        return None if ok else f"expects one of {', '.join(repr(a) for a in args)}, got '{got}'"
    if typing.get_origin(hint) is tuple and args[-1:] == (Ellipsis,) and args[0] in _KINDS:
        ok = all(_fits(v, args[0]) for v in values)
        return None if ok else f"expects {_PLURAL[args[0]]} separated by commas (e.g. 8,16), got '{got}'"
    if hint in _KINDS:
        ok = len(values) == 1 and _fits(values[0], hint)
        return None if ok else f"expects {_KINDS[hint]}, got '{got}'"
    return None


def _fits(value: object, kind: type) -> bool:
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)
