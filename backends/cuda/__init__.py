"""The CUDA backend: GPU-scheduled loop-level modules to PTX through LLVM's NVPTX backend
(`translate.py`, `math.py`), built into a `GpuProgram` and run by runtime/cuda.py (`build.py`)."""
