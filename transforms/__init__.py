"""Every pass of ziggurat, by its pipeline name.

`get_all_passes()` maps each kebab-case name to a function that imports the
pass class on call, so the CLI starts fast and this list is the one place that
names every pass. Lowerings between levels live in `lowering/`, passes that
stay within one level in `transforms/`; both are registered here. A test
checks that every key equals its class's `name`.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass


def _convert_graph_to_te() -> type[ModulePass]:
    from ziggurat.lowering.convert_graph_to_te import ConvertGraphToTePass

    return ConvertGraphToTePass


def _convert_te_to_loop() -> type[ModulePass]:
    from ziggurat.lowering.convert_te_to_loop import ConvertTeToLoopPass

    return ConvertTeToLoopPass


def _convert_loop_to_hw() -> type[ModulePass]:
    from ziggurat.lowering.convert_loop_to_hw import ConvertLoopToHwPass

    return ConvertLoopToHwPass


def _loop_vectorize_innermost() -> type[ModulePass]:
    from ziggurat.transforms.loop_vectorize_innermost import LoopVectorizeInnermostPass

    return LoopVectorizeInnermostPass


def _loop_parallelize_outer() -> type[ModulePass]:
    from ziggurat.transforms.loop_parallelize_outer import LoopParallelizeOuterPass

    return LoopParallelizeOuterPass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """ziggurat's own passes (upstream xDSL passes are added by the CLI)."""
    return {
        "convert-graph-to-te": _convert_graph_to_te,
        "convert-te-to-loop": _convert_te_to_loop,
        "loop-parallelize-outer": _loop_parallelize_outer,
        "loop-vectorize-innermost": _loop_vectorize_innermost,
        "convert-loop-to-hw": _convert_loop_to_hw,
    }
