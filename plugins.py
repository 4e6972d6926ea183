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
from pathlib import Path
from types import ModuleType

from ziggurat import registry
from ziggurat.errors import ZigguratError

_LOADED: dict[str, ModuleType] = {}

# Registration lives in the registry, the one place that merges plugins with ours and
# upstream xDSL's and refuses clashes; plugin authors call it through this module.
PluginError = registry.PluginError
register_dialect = registry.register_dialect
register_pass = registry.register_pass
plugin_dialects = registry.plugin_dialects
plugin_passes = registry.plugin_passes


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
