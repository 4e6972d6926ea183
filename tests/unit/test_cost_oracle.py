"""The cost oracle: its three sources, the cached machine peaks, work counting, and #graph.cost."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.helpers import tensor
from ziggurat.autotune.cost_model import GBTCostModel
from ziggurat.transforms.costs import cost_oracle
from ziggurat.transforms.costs.cost_oracle import DefaultCostOracle, Peaks, count_work, machine_peaks, oracle_from_options
from ziggurat.database import JSONDatabase, TuningRecord
from ziggurat.dialects import graph, make_context
from ziggurat.errors import ZigguratError
from ziggurat.transforms.costs.kernels import kernel_of_ops, lower_kernel, price_kernel

FIXED = Peaks(gflops=100.0, bandwidth_gbs=20.0)


def _relu_kernel(n: int):
    x = graph.ConstantOp("x", tensor([n]))
    y = graph.ReluOp(x.results[0])
    return kernel_of_ops([y])


def test_roofline_of_an_elementwise_kernel_is_bandwidth_bound() -> None:
    est = price_kernel(_relu_kernel(4096), DefaultCostOracle(peaks=FIXED))
    assert (est.flops, est.bytes, est.source) == (4096, 2 * 4096 * 4, "roofline")
    assert est.time == pytest.approx(2 * 4096 * 4 / 20e9)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 64), st.integers(1, 64))
def test_count_work_matches_the_shape(m: int, n: int) -> None:
    """A relu touches its input and output once: n flops, 8 bytes per element."""
    x = graph.ConstantOp("x", tensor([m, n]))
    module, _ = lower_kernel(kernel_of_ops([graph.ReluOp(x.results[0])]))
    work = count_work(module, "kernel")
    assert work.flops == m * n
    assert work.bytes == 8 * m * n


def test_database_record_wins_over_model_and_roofline(tmp_path) -> None:
    module, key = lower_kernel(_relu_kernel(1024))
    with JSONDatabase(tmp_path / "db.json") as db:
        db.commit(TuningRecord(key, "llvm", trace={"knob": 1}, costs=[3e-6, 5e-6]))
        oracle = DefaultCostOracle(database=db, peaks=FIXED)
        est = oracle.cost(module, "kernel", key)
        assert (est.source, est.time) == ("database", pytest.approx(4e-6))
        # Another workload has no record: the roofline answers.
        other, other_key = lower_kernel(_relu_kernel(2048))
        assert oracle.cost(other, "kernel", other_key).source == "roofline"


class _HalfSpeedModel:
    def predict(self, features: np.ndarray) -> np.ndarray:
        return np.array([0.5])


def test_model_scales_the_roofline_bound_and_untrained_falls_through() -> None:
    module, key = lower_kernel(_relu_kernel(1024))
    bound = DefaultCostOracle(peaks=FIXED).cost(module, "kernel", key)
    est = DefaultCostOracle(model=_HalfSpeedModel(), peaks=FIXED).cost(module, "kernel", key)
    assert est.source == "model" and est.time == pytest.approx(2 * bound.time)
    untrained = DefaultCostOracle(model=GBTCostModel(), peaks=FIXED).cost(module, "kernel", key)
    assert untrained.source == "roofline"


def test_machine_peaks_are_measured_once_then_cached(tmp_path, monkeypatch) -> None:
    path = tmp_path / "roofline-test.json"
    measured = []
    real = cost_oracle.measure_peaks

    def counting_measure() -> Peaks:
        measured.append(real())
        return measured[-1]

    monkeypatch.setattr(cost_oracle, "measure_peaks", counting_measure)
    peaks = machine_peaks(path)
    assert len(measured) == 1 and peaks == measured[0]  # no cache file yet: measured exactly once
    assert peaks.gflops > 0.5 and peaks.bandwidth_gbs > 0.5
    assert json.loads(path.read_text()) == {"gflops": peaks.gflops, "bandwidth_gbs": peaks.bandwidth_gbs}

    def no_measure() -> Peaks:
        raise AssertionError("the cached figures should have been used")

    monkeypatch.setattr(cost_oracle, "measure_peaks", no_measure)
    assert machine_peaks(path) == peaks


def test_the_test_session_prices_with_fixed_peaks() -> None:
    """tests/conftest.py writes fixed peaks into a temporary roofline cache: no test measures them."""
    from tests.conftest import BANDWIDTH_GBS, PEAK_GFLOPS

    assert str(cost_oracle.cache_path()).startswith(os.environ["XDG_CACHE_HOME"])
    assert DefaultCostOracle().peaks == Peaks(PEAK_GFLOPS, BANDWIDTH_GBS)


def test_cache_path_is_per_cpu_under_the_user_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cost_oracle.cache_path("skylake") == tmp_path / "ziggurat" / "roofline-skylake.json"


def test_half_given_peaks_is_one_clear_error() -> None:
    with pytest.raises(ZigguratError, match="give both peak-gflops and bandwidth-gbs"):
        oracle_from_options(100, 0)


def test_cost_attribute_prints_and_parses_back() -> None:
    from xdsl.parser import Parser

    attr = graph.CostAttr(12.34567, 4096, 32768, "model")
    text = str(attr)
    assert text == '#graph.cost<time_us = 12.3457, flops = 4096, bytes = 32768, source = "model">'
    parsed = Parser(make_context(), text).parse_attribute()
    assert parsed == attr


def test_unknown_source_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown cost source"):
        cost_oracle.CostEstimate(1.0, 1, 1, "guess")



def test_annotate_costs_takes_times_from_a_tuning_database(tmp_path) -> None:
    """The pass's `database` option: a record for the kernel's workload key wins over the roofline."""
    from xdsl.parser import Parser

    from ziggurat.transforms.graph.annotate_costs import AnnotateCostsPass

    text = """func.func @f(%x: tensor<512xf32>) -> tensor<512xf32> {
  %y = graph.relu %x : tensor<512xf32>
  %z = graph.exp %x : tensor<512xf32>
  %w = graph.add %y, %z : tensor<512xf32>, tensor<512xf32> -> tensor<512xf32>
  func.return %w : tensor<512xf32>
}"""
    ctx = make_context()
    module = Parser(ctx, text).parse_module()
    relu = next(op for op in module.walk() if isinstance(op, graph.ReluOp))
    from ziggurat.lowering.convert_graph_to_te import build_kernel

    _, key = lower_kernel(build_kernel(relu, "kernel")[0])
    path = tmp_path / "records.json"
    with JSONDatabase(path) as db:
        db.commit(TuningRecord(key, "llvm", trace={"tiles": [1]}, costs=[2.5e-6]))
    AnnotateCostsPass(peak_gflops=100, bandwidth_gbs=20, database=str(path)).apply(ctx, module)
    costs = {op.name: op.attributes["graph.cost"] for op in module.walk() if "graph.cost" in op.attributes}
    assert costs["graph.relu"].source.data == "database" and costs["graph.relu"].time_us.data == 2.5
    assert costs["graph.exp"].source.data == "roofline" and costs["graph.add"].source.data == "roofline"


def test_missing_tuning_database_is_one_clear_error(tmp_path) -> None:
    with pytest.raises(ZigguratError, match="does not exist"):
        oracle_from_options(0, 0, str(tmp_path / "nope.json"))
