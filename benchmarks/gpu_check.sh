#!/usr/bin/env bash
# Every GPU test and benchmark of the CUDA target in one go (issue 26; 2-5 minutes on an H100).
#
#   benchmarks/gpu_check.sh pack    # where ziggurat's compiler is installed: compile into $GPU_PACKS
#   benchmarks/gpu_check.sh run     # on the GPU machine (numpy, ctypes, onnx, onnxruntime; torch optional)
#   benchmarks/gpu_check.sh         # both, on a GPU machine with the compiler installed
#
# pack writes $GPU_PACKS/gemm (GEMM cases) and $GPU_PACKS/models (the shared models: GPU_MODELS=a,b
# chooses, GPU_DYNAMIC=1 adds the dynamic models at each shape with expected outputs, GPU_BATCH16=1 at
# batch 16; ZIGGURAT_MODELS names the model folders if not ../shared/models). run runs the GPU tests of
# the suite (GPU_TESTS=0 skips them), the GEMM benchmark (GPU_GEMM=0 skips it) and every packed model
# folder, with a per-kernel profile, printing a table of each; with OUT set, JSON lines go there too.
# Wheels in .whl/ (a GPU machine without xDSL: xdsl, immutabledict, ordered-set) are installed into a
# temporary folder first. GPU_PASS_OPTIONS='{"gpu-rfactor": {"convolutions": false}, "gpu-gemm": {"convolutions": false, "deep-k": false}}' also packs
# the models with those options (into models_options), run beside the defaults. A timing run that cannot carry the models' weights: benchmarks/gpu_synthetic.py
# (strip here, restore there, ZIGGURAT_MODELS at its folder). GPU_WORKERS compile processes pack side by side (default: every core);
# GPU_TEST_ARGS goes to pytest, GPU_TEST_K as its -k (GPU_TEST_ARGS="-n 8" GPU_TEST_K="not emulate": the GPU runs only, in 8 processes).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
PACKS=${GPU_PACKS:-$ROOT/.gpu/packs}
MODE=${1:-all}
WORKERS=${GPU_WORKERS:-$(nproc 2>/dev/null || echo 1)}  # compile processes side by side
PKG=$(mktemp -d)
ln -s "$ROOT" "$PKG/ziggurat"
export PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ -d "$ROOT/.whl" ] && ! "$PY" -c "import xdsl" 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$PKG/site" "$ROOT"/.whl/*.whl \
        && export PYTHONPATH="$PYTHONPATH:$PKG/site"
fi
status=0

if [ "$MODE" = pack ] || [ "$MODE" = all ]; then
    if [ "${GPU_GEMM:-1}" = 1 ]; then "$PY" -m ziggurat.benchmarks.gpu_gemm pack "$PACKS/gemm" || status=1; fi
    "$PY" -m ziggurat.benchmarks.gpu_models pack "$PACKS/models" --only "${GPU_MODELS:-}" --workers "$WORKERS" \
        ${GPU_DYNAMIC:+--dynamic} ${GPU_BATCH16:+--batch16} || status=1
    if [ -n "${GPU_PASS_OPTIONS:-}" ]; then  # the same models with other GPU pass options, beside the defaults
        "$PY" -m ziggurat.benchmarks.gpu_models pack "$PACKS/models_options" --only "${GPU_MODELS:-}" --workers "$WORKERS" \
            ${GPU_DYNAMIC:+--dynamic} ${GPU_BATCH16:+--batch16} --pass-options "$GPU_PASS_OPTIONS" || status=1
    fi
fi
if [ "$MODE" = run ] || [ "$MODE" = all ]; then
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv || true
    if [ "${GPU_TESTS:-1}" = 1 ]; then
        (cd "$ROOT" && "$PY" -m pytest -q -p no:cacheprovider -rs ${GPU_TEST_ARGS:-} ${GPU_TEST_K:+-k "$GPU_TEST_K"} tests/unit/test_cuda_*.py) || status=1
    fi
    if [ "${GPU_GEMM:-1}" = 1 ] && [ -d "$PACKS/gemm" ]; then
        "$PY" -m ziggurat.benchmarks.gpu_gemm run "$PACKS/gemm" || status=1
    fi
    for d in "$PACKS"/*/; do
        ls "$d"*/program.json >/dev/null 2>&1 || continue
        "$PY" -m ziggurat.benchmarks.gpu_models run "$d" --profile || status=1
    done
fi
rm -rf "$PKG"
exit $status
