"""Denormal floats: compiled x86 models flush them to zero around each call (MXCSR FTZ/DAZ, saved and
restored; every thread of a parallel loop too) unless the target says `-denormals=keep`."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx import numpy_helper as nh

import ziggurat
from ziggurat.errors import ZigguratError
from ziggurat.target import Target

TINY = np.finfo(np.float32).tiny  # the smallest normal float32, 2^-126


def _scale_model(n: int):
    """y = x * 1e-30: normal inputs near 1e-10 give denormal results."""
    g = helper.make_graph([helper.make_node("Mul", ["x", "s"], ["y"])], "scale",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
                          [nh.from_array(np.full(n, 1e-30, np.float32), "s")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.skipif(Target.parse("llvm").arch != "x86_64", reason="MXCSR is x86's")
@pytest.mark.parametrize("threads", [1, 2])
def test_results_below_the_normal_range_flush_to_zero_and_mxcsr_is_restored(threads: int) -> None:
    x = np.full(4096, 1e-10, np.float32)
    flush = ziggurat.compile(_scale_model(4096), target=f"llvm -num-cores={threads}", cache=False)
    keep = ziggurat.compile(_scale_model(4096), target=f"llvm -num-cores={threads} -denormals=keep", cache=False)
    assert not np.any(flush(x)[0])  # 1e-40 flushed
    kept = keep(x)[0]
    assert np.all((kept > 0) & (kept < TINY))  # IEEE denormals, numpy's answer
    np.testing.assert_array_equal(kept, x * np.float32(1e-30))
    flush(x)
    assert np.float32(1e-20) * np.float32(1e-20) > 0  # the caller's thread is back to IEEE after the call


def test_the_option_parses_and_prints() -> None:
    t = Target.parse("llvm -num-cores=2 -denormals=keep")
    assert not t.flush_denormals and str(t) == "llvm -num-cores=2 -denormals=keep"
    assert Target.parse("llvm").flush_denormals == (Target.parse("llvm").arch == "x86_64")
    assert not Target.parse("llvm -mtriple=aarch64-linux-gnu").flush_denormals
    with pytest.raises(ZigguratError, match="-denormals must be flush or keep, got 'off'"):
        Target.parse("llvm -denormals=off")
