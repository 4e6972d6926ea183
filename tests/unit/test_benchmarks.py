"""The benchmark suite's workloads are valid ONNX, and one row end to end."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from ziggurat.benchmarks.run import bench, format_table, geomean_lines
from ziggurat.benchmarks.workloads import BUILDERS, eltwise_chain


@pytest.mark.parametrize("key", sorted(BUILDERS))
def test_workloads_are_valid_onnx(key):
    if key == "matmul_1024":
        pytest.skip("same builder as matmul_512")
    name, model, inputs, flops = BUILDERS[key]()
    onnx.checker.check_model(model, full_check=True)
    declared = {i.name for i in model.graph.input}
    assert set(inputs) == declared
    assert flops is None or flops > 0


def test_bench_row_and_table():
    name, model, inputs, flops = eltwise_chain(4096)
    row = bench(name, model, inputs, threads=1, rounds=4, flops=flops)
    assert row["max_error"] < 1e-6
    assert row["ratio"] == pytest.approx(row["ziggurat_ms"] / row["ort_ms"])
    table = format_table([row, {"workload": "x", "threads": 1, "skipped": "why"}])
    assert name in table and "skipped: why" in table
    (line,) = geomean_lines([row])
    assert f"{np.exp(np.log(row['ratio'])):.2f}" in line


def test_compile_time_benchmark_runs_one_case_in_a_worker():
    from ziggurat.benchmarks.compile_time import chain_table, model_table, run_case

    row = run_case("chain:20", "llvm", repeat=1)
    assert isinstance(row, dict), row
    assert row["total"] > 0 and {"import", "passes", "translate", "llvm", "cpu"} <= set(row)
    assert "| 20 |" in chain_table([(20, row)])
    table = model_table([("m", row), ("bad", "ShapeError: dynamic")])
    assert "| m |" in table and "error: ShapeError" in table and "median / max" in table
