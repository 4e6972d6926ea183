"""lowering/pipelines.py: the one builder of pipeline strings, and its TARGET_OPTIONS table."""

from __future__ import annotations

import dataclasses

import pytest

from ziggurat.lowering import pipelines
from ziggurat.registry import all_passes, parse_pipeline
from ziggurat.target import Target

AVX2 = Target.parse("llvm -mcpu=haswell -num-cores=2")
AVX512 = Target.parse("llvm -mcpu=skylake-avx512 -num-cores=1")


def test_target_options_name_registered_passes_and_their_fields() -> None:
    passes = all_passes()
    for name, options in pipelines.TARGET_OPTIONS.items():
        assert name in passes, name
        fields = {f.name.replace("_", "-") for f in dataclasses.fields(passes[name]())}
        for level in pipelines.OPT_LEVELS:
            for tgt in (AVX2, AVX512):
                assert set(options(tgt, level)) <= fields, (name, options(tgt, level), fields)


@pytest.mark.parametrize("level", pipelines.OPT_LEVELS)
@pytest.mark.parametrize("tgt", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_every_stage_parses_and_names_only_registered_passes(level: int, tgt: Target) -> None:
    spec = pipelines.default_pipeline(level, tgt, tuning_db="db.jsonl")
    passes = parse_pipeline(spec)
    assert [p.name for p in passes] == [s.split("{")[0] for s in spec.split(",") if s]


def test_the_target_width_reaches_every_pass_that_takes_one() -> None:
    for tgt, w in ((AVX2, 8), (AVX512, 16)):
        spec = pipelines.default_pipeline(3, tgt)
        assert f"convert-layout{{block={w}}}" in spec
        assert f"fuse-ops{{cost-guided=true vector-width={w}}}" in spec
        assert f"loop-default-schedule{{vector-width={w}" in spec
        assert f"loop-vectorize-innermost{{min-extent={w}}}" in spec
        assert f"convert-loop-to-hw{{vector-width={w}}}" in spec
        assert "16" not in spec if w == 8 else "=8}" not in spec


def test_stages_compose_to_the_default_pipeline() -> None:
    whole = pipelines.default_pipeline(3, AVX2, tuning_db="t.jsonl")
    parts = pipelines.join(pipelines.graph_stage(3, AVX2), pipelines.lowering_stage(3),
                           pipelines.schedule_stage(3, AVX2, "t.jsonl"), pipelines.hw_stage(3, AVX2))
    assert whole == parts
    assert pipelines.schedule_stage(3, AVX2, "t.jsonl").startswith("apply-tuning{database=\"t.jsonl\"")
    assert "apply-tuning" not in pipelines.default_pipeline(3, AVX2)


def test_skip_and_options_edit_a_stage_without_string_surgery() -> None:
    g = pipelines.graph_stage(3, AVX2, skip=("winograd-conv",), options={"fuse-ops": {"cost-guided": False}})
    assert "winograd-conv" not in g and "fuse-ops{cost-guided=false vector-width=8}" in g
    assert "loop-default-schedule" not in pipelines.loop_stage(3, AVX2, skip=("loop-default-schedule",))


def test_bad_opt_level_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="opt level must be one of"):
        pipelines.default_pipeline(7, AVX2)


def test_the_target_cost_of_a_table_read_reaches_quantized_lookup() -> None:
    """AMD Zen targets keep longer chains arithmetic (`Target.lookup_cost`); the others' pipelines
    leave quantized-lookup at its own default, which is the LOOKUP_COST the builder compares with."""
    from ziggurat.transforms.graph.quantized_lookup import QuantizedLookupPass

    assert QuantizedLookupPass().min_cost == pipelines.LOOKUP_COST
    for cpu, cost in (("haswell", None), ("skylake-avx512", None), ("sapphirerapids", None), ("znver3", 28),
                      ("znver4", 28), ("znver5", 28)):
        tgt = Target.parse(f"llvm -mcpu={cpu}")
        assert tgt.lookup_cost == (cost or pipelines.LOOKUP_COST)
        stage = pipelines.graph_stage(3, tgt)
        assert (f"quantized-lookup{{min-cost={cost}}}" in stage) if cost else (",quantized-lookup," in stage)
