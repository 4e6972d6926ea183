#!/usr/bin/env bash
# Every GPU test and benchmark of the CUDA target in one go (issue 26; about 2-5 minutes on an H100).
#
#   benchmarks/gpu_check.sh pack    # where ziggurat's compiler is installed: compile into .gpu/
#   benchmarks/gpu_check.sh run     # on the GPU machine (numpy, ctypes, onnx, onnxruntime; torch optional)
#   benchmarks/gpu_check.sh         # both, on a GPU machine with the compiler installed
#
# `pack` writes .gpu/gemm (GEMM cases) and .gpu/models (the shared models, GPU_MODELS=a,b to choose;
# GPU_BATCH16=1 adds the dynamic models at batch 16). `run` runs the GPU tests of the suite (they
# skip what needs the compiler where it is missing), the GEMM benchmark and every .gpu/*/ model
# folder, printing a table of each; with OUT set, JSON lines go there too.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
PACKS=${GPU_PACKS:-$ROOT/.gpu}
MODE=${1:-all}
PKG=$(mktemp -d)
ln -s "$ROOT" "$PKG/ziggurat"
export PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}"
status=0

if [ "$MODE" = pack ] || [ "$MODE" = all ]; then
    "$PY" -m ziggurat.benchmarks.gpu_gemm pack "$PACKS/gemm" || status=1
    "$PY" -m ziggurat.benchmarks.gpu_models pack "$PACKS/models" --only "${GPU_MODELS:-}" \
        ${GPU_BATCH16:+--batch16} || status=1
fi
if [ "$MODE" = run ] || [ "$MODE" = all ]; then
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv || true
    (cd "$ROOT" && "$PY" -m pytest -q -p no:cacheprovider -rs tests/unit/test_cuda_runtime.py \
        tests/unit/test_cuda_target.py) || status=1
    [ -d "$PACKS/gemm" ] && { "$PY" -m ziggurat.benchmarks.gpu_gemm run "$PACKS/gemm" || status=1; }
    for d in "$PACKS"/*/; do
        [ -f "$d/program.json" ] && continue
        ls "$d"/*/program.json >/dev/null 2>&1 || continue
        "$PY" -m ziggurat.benchmarks.gpu_models run "$d" || status=1
    done
fi
rm -rf "$PKG"
exit $status
