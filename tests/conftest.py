"""Session-wide test isolation: nothing a test runs writes under $HOME or the working tree.

The cost oracle caches the machine's roofline peaks in `$XDG_CACHE_HOME/ziggurat/roofline-<cpu>.json`
(transforms/costs/cost_oracle.py, `cache_path`/`machine_peaks`), and fusion and layout cost records
go under the same cache folder (transforms/costs/fusion_costs.py, layout_costs.py); the ONNX
conformance cases under `$ZIGGURAT_CACHE_DIR`; Hypothesis keeps its example database in
`./.hypothesis`. The fixture below points all of these (and $HOME itself, for anything that uses
`Path.home()`) at one temporary folder for the session, and writes FIXED peaks into the roofline
cache there: fusion decisions in tests then never depend on a peak measured while the machine was
busy, and are the same on every host and every run.
"""

from __future__ import annotations

import json
import os

import pytest

# Realistic single-thread figures for a current x86 core (vector FMA GFLOP/s, streaming-read GB/s);
# what matters is that they are fixed.
PEAK_GFLOPS = 100.0
BANDWIDTH_GBS = 20.0


@pytest.fixture(scope="session", autouse=True)
def isolated_caches(tmp_path_factory):
    from hypothesis import configuration as hypothesis_configuration

    from ziggurat.transforms.costs import cost_oracle

    root = tmp_path_factory.mktemp("ziggurat-session")
    env = {
        "HOME": root / "home",
        "XDG_CACHE_HOME": root / "cache",
        "ZIGGURAT_CACHE_DIR": root / "cache" / "ziggurat",
        "HYPOTHESIS_STORAGE_DIRECTORY": root / "hypothesis",  # subprocesses; this one is set below
    }
    saved = {k: os.environ.get(k) for k in env}
    for key, path in env.items():
        path.mkdir(parents=True, exist_ok=True)
        os.environ[key] = str(path)
    hypothesis_configuration.set_hypothesis_home_dir(env["HYPOTHESIS_STORAGE_DIRECTORY"])
    peaks = cost_oracle.cache_path()
    assert str(peaks).startswith(str(root)), peaks
    peaks.parent.mkdir(parents=True, exist_ok=True)
    peaks.write_text(json.dumps({"gflops": PEAK_GFLOPS, "bandwidth_gbs": BANDWIDTH_GBS}))
    assert cost_oracle.machine_peaks() == cost_oracle.Peaks(PEAK_GFLOPS, BANDWIDTH_GBS)
    yield root
    # Hypothesis keeps its folder (it may still write at exit); the rest is restored
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
