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
    from ziggurat.transforms.schedule.loop_vectorize_innermost import LoopVectorizeInnermostPass

    return LoopVectorizeInnermostPass


def _apply_tuning() -> type[ModulePass]:
    from ziggurat.transforms.schedule.apply_tuning import ApplyTuningPass

    return ApplyTuningPass


def _loop_default_schedule() -> type[ModulePass]:
    from ziggurat.transforms.schedule.loop_default_schedule import LoopDefaultSchedulePass

    return LoopDefaultSchedulePass


def _loop_split() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_split import LoopSplitPass

    return LoopSplitPass


def _loop_fuse() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_fuse import LoopFusePass

    return LoopFusePass


def _loop_reorder() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_reorder import LoopReorderPass

    return LoopReorderPass


def _loop_decompose_reduction() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_decompose_reduction import LoopDecomposeReductionPass

    return LoopDecomposeReductionPass


def _loop_tile() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_tile import LoopTilePass

    return LoopTilePass


def _loop_tensorize() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_tensorize import LoopTensorizePass

    return LoopTensorizePass


def _loop_compute_at() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_compute_at import LoopComputeAtPass

    return LoopComputeAtPass


def _loop_reverse_compute_at() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_reverse_compute_at import LoopReverseComputeAtPass

    return LoopReverseComputeAtPass


def _loop_compute_inline() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_compute_inline import LoopComputeInlinePass

    return LoopComputeInlinePass


def _loop_cache_read() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_cache_read import LoopCacheReadPass

    return LoopCacheReadPass


def _loop_cache_write() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_cache_write import LoopCacheWritePass

    return LoopCacheWritePass


def _loop_rfactor() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_rfactor import LoopRfactorPass

    return LoopRfactorPass


def _loop_storage_align() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_storage_align import LoopStorageAlignPass

    return LoopStorageAlignPass


def _loop_parallel() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_parallel import LoopParallelPass

    return LoopParallelPass


def _loop_bind() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_bind import LoopBindPass

    return LoopBindPass


def _loop_vectorize() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_vectorize import LoopVectorizePass

    return LoopVectorizePass


def _loop_unroll() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_unroll import LoopUnrollPass

    return LoopUnrollPass


def _loop_simplify_index() -> type[ModulePass]:
    from ziggurat.transforms.loop.loop_simplify_index import LoopSimplifyIndexPass

    return LoopSimplifyIndexPass


def _pack_weight_panels() -> type[ModulePass]:
    from ziggurat.transforms.graph.pack_weight_panels import PackWeightPanelsPass

    return PackWeightPanelsPass


def _te_row_blocks() -> type[ModulePass]:
    from ziggurat.transforms.te.te_row_blocks import TeRowBlocksPass

    return TeRowBlocksPass


def _loop_dynamic_schedule() -> type[ModulePass]:
    from ziggurat.transforms.schedule.loop_dynamic_schedule import LoopDynamicSchedulePass

    return LoopDynamicSchedulePass


def _loop_parallelize_outer() -> type[ModulePass]:
    from ziggurat.transforms.schedule.loop_parallelize_outer import LoopParallelizeOuterPass

    return LoopParallelizeOuterPass


def _annotate_costs() -> type[ModulePass]:
    from ziggurat.transforms.graph.annotate_costs import AnnotateCostsPass

    return AnnotateCostsPass


def _fuse_ops() -> type[ModulePass]:
    from ziggurat.transforms.graph.fuse_ops import FuseOpsPass

    return FuseOpsPass


def _plan_memory() -> type[ModulePass]:
    from ziggurat.transforms.loop.plan_memory import PlanMemoryPass

    return PlanMemoryPass


def _fold_constants() -> type[ModulePass]:
    from ziggurat.transforms.graph.fold_constants import FoldConstantsPass

    return FoldConstantsPass


def _quantized_lookup() -> type[ModulePass]:
    from ziggurat.transforms.graph.quantized_lookup import QuantizedLookupPass

    return QuantizedLookupPass


def _simplify_graph() -> type[ModulePass]:
    from ziggurat.transforms.graph.simplify_graph import SimplifyGraphPass

    return SimplifyGraphPass


def _convert_layout() -> type[ModulePass]:
    from ziggurat.transforms.graph.convert_layout import ConvertLayoutPass

    return ConvertLayoutPass


def _winograd_conv() -> type[ModulePass]:
    from ziggurat.transforms.graph.winograd_conv import WinogradConvPass

    return WinogradConvPass


def _dedupe_kernels() -> type[ModulePass]:
    from ziggurat.transforms.loop.dedupe_kernels import DedupeKernelsPass

    return DedupeKernelsPass


def _gpu_split_stages() -> type[ModulePass]:
    from ziggurat.transforms.gpu.gpu_split_stages import GpuSplitStagesPass

    return GpuSplitStagesPass


def _gpu_rfactor() -> type[ModulePass]:
    from ziggurat.transforms.gpu.gpu_rfactor import GpuRfactorPass

    return GpuRfactorPass


def _gpu_fold_casts() -> type[ModulePass]:
    from ziggurat.transforms.gpu.gpu_fold_casts import GpuFoldCastsPass

    return GpuFoldCastsPass


def _gpu_gemm() -> type[ModulePass]:
    from ziggurat.transforms.gpu.gpu_gemm import GpuGemmPass

    return GpuGemmPass


def _gpu_default_schedule() -> type[ModulePass]:
    from ziggurat.transforms.gpu.gpu_default_schedule import GpuDefaultSchedulePass

    return GpuDefaultSchedulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """ziggurat's own passes (upstream xDSL passes are added by the CLI)."""
    return {
        "fold-constants": _fold_constants,
        "simplify-graph": _simplify_graph,
        "quantized-lookup": _quantized_lookup,
        "convert-layout": _convert_layout,
        "winograd-conv": _winograd_conv,
        "fuse-ops": _fuse_ops,
        "annotate-costs": _annotate_costs,
        "convert-graph-to-te": _convert_graph_to_te,
        "convert-te-to-loop": _convert_te_to_loop,
        "loop-simplify-index": _loop_simplify_index,
        "dedupe-kernels": _dedupe_kernels,
        "plan-memory": _plan_memory,
        "apply-tuning": _apply_tuning,
        "loop-default-schedule": _loop_default_schedule,
        "loop-parallelize-outer": _loop_parallelize_outer,
        "loop-dynamic-schedule": _loop_dynamic_schedule,
        "te-row-blocks": _te_row_blocks,
        "pack-weight-panels": _pack_weight_panels,
        "gpu-split-stages": _gpu_split_stages,
        "gpu-rfactor": _gpu_rfactor,
        "gpu-fold-casts": _gpu_fold_casts,
        "gpu-gemm": _gpu_gemm,
        "gpu-default-schedule": _gpu_default_schedule,
        "loop-split": _loop_split,
        "loop-fuse": _loop_fuse,
        "loop-reorder": _loop_reorder,
        "loop-decompose-reduction": _loop_decompose_reduction,
        "loop-tile": _loop_tile,
        "loop-compute-at": _loop_compute_at,
        "loop-reverse-compute-at": _loop_reverse_compute_at,
        "loop-compute-inline": _loop_compute_inline,
        "loop-cache-read": _loop_cache_read,
        "loop-cache-write": _loop_cache_write,
        "loop-rfactor": _loop_rfactor,
        "loop-storage-align": _loop_storage_align,
        "loop-tensorize": _loop_tensorize,
        "loop-parallel": _loop_parallel,
        "loop-bind": _loop_bind,
        "loop-vectorize": _loop_vectorize,
        "loop-unroll": _loop_unroll,
        "loop-vectorize-innermost": _loop_vectorize_innermost,
        "convert-loop-to-hw": _convert_loop_to_hw,
    }
