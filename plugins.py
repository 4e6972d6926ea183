"""Plugins: dialects and passes that live outside ziggurat's source tree.

A researcher writes a dialect and its passes in their own module and
registers them; ziggurat's compiler, `ziggurat-opt` and `ziggurat compile`
then use them as their own, without an edit to ziggurat:

    # my_plugin.py
    from ziggurat import plugins
    plugins.register_dialect(MyDialect)
    plugins.register_pass(MyLoweringPass)

    $ ziggurat-opt --load-plugin my_plugin.py in.mlir -p 'my-lowering,convert-graph-to-te'
    $ ziggurat compile --load-plugin my_plugin model.onnx -p 'my-pass,fuse-ops'

or, from Python, `plugins.load_plugin("my_plugin")` (a module name, or the
path of a `.py` file) before `ziggurat.compile(model, pipeline=...)`. This is
the role of `mlir-opt --load-dialect-plugin/--load-pass-plugin`. Loading a
plugin runs its code: it is the user's own module, named on the command line,
never something read from a model file. docs/tutorial.md builds one,
`docs/examples/act_plugin.py`.

The registries are keyed by the dialect's `name` and the pass's `name`
(checked on registration); a plugin may not take the name of one of
ziggurat's own dialects or passes.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from xdsl.ir import Dialect
from xdsl.passes import ModulePass

from ziggurat.errors import ZigguratError

_DIALECTS: dict[str, Dialect] = {}
_PASSES: dict[str, type[ModulePass]] = {}
_LOADED: dict[str, ModuleType] = {}


class PluginError(ZigguratError):
    """A plugin that cannot be loaded, or a registration that clashes."""


def register_dialect(dialect: Dialect) -> Dialect:
    """Makes `dialect` known to every context ziggurat builds (`make_context`, `ziggurat-opt`)."""
    from ziggurat.dialects import get_all_dialects

    name = dialect.name
    if name in get_all_dialects():
        raise PluginError(f"plugin dialect '{name}' clashes with ziggurat's own dialect of that name; rename it")
    _DIALECTS[name] = dialect
    return dialect


def register_pass(pass_cls: type[ModulePass]) -> type[ModulePass]:
    """Makes `pass_cls` usable by its `name` in every pipeline string; usable as a class decorator."""
    from ziggurat.transforms import get_all_passes

    name = getattr(pass_cls, "name", None)
    if not isinstance(name, str) or not name:
        raise PluginError(f"plugin pass {pass_cls.__qualname__} has no `name`; give the class a kebab-case `name`")
    if name in get_all_passes():
        raise PluginError(f"plugin pass '{name}' clashes with ziggurat's own pass of that name; rename it")
    _PASSES[name] = pass_cls
    return pass_cls


def plugin_dialects() -> dict[str, Callable[[], Dialect]]:
    """name -> factory of every registered plugin dialect (the shape of `get_all_dialects`)."""
    return {name: (lambda d=d: d) for name, d in _DIALECTS.items()}


def plugin_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """name -> factory of every registered plugin pass (the shape of `get_all_passes`)."""
    return {name: (lambda p=p: p) for name, p in _PASSES.items()}


def load_plugin(spec: str) -> ModuleType:
    """Imports the plugin `spec` (a module name, or the path of a .py file) once;
    its import registers its dialects and passes."""
    if spec in _LOADED:
        return _LOADED[spec]
    path = Path(spec)
    try:
        if spec.endswith(".py"):
            if not path.is_file():
                raise PluginError(f"cannot load plugin '{spec}': no such file. Check the path.")
            name = f"ziggurat_plugin_{path.stem}"
            module_spec = importlib.util.spec_from_file_location(name, path)
            assert module_spec is not None and module_spec.loader is not None
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(spec)
    except ZigguratError:
        raise
    except ModuleNotFoundError as err:
        raise PluginError(f"cannot load plugin '{spec}': {err}. Give an importable module name or a .py path.") from None
    except Exception as err:  # the plugin's own code failed while importing
        raise PluginError(f"plugin '{spec}' failed while loading: {type(err).__name__}: {err}") from None
    _LOADED[spec] = module
    return module


def pop_plugin_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """Splits `--load-plugin X` / `--load-plugin=X` out of a command line: (plugins, the rest).

    The CLIs load plugins before they build their pass and dialect tables."""
    specs, rest = [], []
    it = iter(argv)
    for arg in it:
        if arg == "--load-plugin":
            value = next(it, None)
            if value is None:
                raise PluginError("--load-plugin needs a module name or a .py path")
            specs.append(value)
        elif arg.startswith("--load-plugin="):
            specs.append(arg.split("=", 1)[1])
        else:
            rest.append(arg)
    return specs, rest
