"""Session-wide test isolation: nothing a test runs writes under $HOME or the working tree.

The cost oracle caches the machine's roofline peaks in `$XDG_CACHE_HOME/ziggurat/roofline-<cpu>.json`
(transforms/costs/cost_oracle.py, `cache_path`/`machine_peaks`), and fusion and layout cost records
go under the same cache folder (transforms/costs/fusion_costs.py, layout_costs.py); the ONNX
conformance cases under `$ZIGGURAT_CACHE_DIR`; Hypothesis keeps its example database in
`./.hypothesis`; onnxruntime its telemetry files under `$XDG_CACHE_HOME/Microsoft`. All of these
(and $HOME itself, for anything that uses `Path.home()`) point at one temporary folder for the
session, removed at its end.

The environment is set in `pytest_configure`, before any test module is imported (onnxruntime,
for one, reads it at import time); the session fixture `isolated_caches` writes FIXED peaks into
the roofline cache there, so fusion decisions in tests never depend on a peak measured while the
machine was busy, and are the same on every host and every run.

`ZIGGURAT_VERIFY=1`: every compile in the tests verifies the lowered IR too (compiler.py `_lower`),
which a user's compile does only where translating it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Realistic single-thread figures for a current x86 core (vector FMA GFLOP/s, streaming-read GB/s);
# what matters is that they are fixed.
PEAK_GFLOPS = 100.0
BANDWIDTH_GBS = 20.0

_ENV: dict[str, Path] = {}  # variable -> the session's folder for it (set by pytest_configure)
_SAVED: dict[str, str | None] = {}


def pytest_configure(config) -> None:
    from hypothesis import configuration as hypothesis_configuration

    root = Path(tempfile.mkdtemp(prefix="ziggurat-tests-"))
    _ENV.update({
        "HOME": root / "home",
        "XDG_CACHE_HOME": root / "cache",
        "ZIGGURAT_CACHE_DIR": root / "cache" / "ziggurat",
        "HYPOTHESIS_STORAGE_DIRECTORY": root / "hypothesis",
    })
    for key, path in _ENV.items():
        _SAVED[key] = os.environ.get(key)
        path.mkdir(parents=True, exist_ok=True)
        os.environ[key] = str(path)
    _SAVED.setdefault("ZIGGURAT_VERIFY", os.environ.get("ZIGGURAT_VERIFY"))
    os.environ["ZIGGURAT_VERIFY"] = "1"
    hypothesis_configuration.set_hypothesis_home_dir(_ENV["HYPOTHESIS_STORAGE_DIRECTORY"])


def pytest_unconfigure(config) -> None:
    for key, value in _SAVED.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    if _ENV:
        shutil.rmtree(_ENV["HOME"].parent, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def isolated_caches() -> Path:
    """The session's temporary cache root, with the fixed roofline peaks in place: for this host's
    CPU, and for every CPU a test may make the default target's (`ZIGGURAT_HOST_CPU`)."""
    from ziggurat import target
    from ziggurat.transforms.costs import cost_oracle

    root = _ENV["HOME"].parent
    for key, path in _ENV.items():
        assert os.environ.get(key) == str(path), f"${key} is not the session's temporary folder"
    fixed = json.dumps({"gflops": PEAK_GFLOPS, "bandwidth_gbs": BANDWIDTH_GBS})
    for path in {cost_oracle.cache_path(), *(cost_oracle.cache_path(cpu) for cpu in getattr(target, "CPU_ISA", ()))}:
        assert path.is_relative_to(root), path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(fixed)
    assert cost_oracle.machine_peaks() == cost_oracle.Peaks(PEAK_GFLOPS, BANDWIDTH_GBS)
    return root


@pytest.fixture(scope="module", autouse=True)
def plugins_of_this_module_only():
    """Plugin passes and dialects a test module registers (plugins.load_plugin) are unregistered
    after it: they enter the compile cache's key (cache_key.py), so a plugin left loaded made a
    later module's compiles miss entries that child processes without it had written."""
    from ziggurat import plugins, registry

    passes, dialects, loaded = dict(registry._PASSES), dict(registry._DIALECTS), dict(plugins._LOADED)
    yield
    plugins._LOADED.clear()
    plugins._LOADED.update(loaded)
    registry._PASSES.clear()
    registry._PASSES.update(passes)
    registry._DIALECTS.clear()
    registry._DIALECTS.update(dialects)
