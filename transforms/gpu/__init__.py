"""GPU passes at the loop level: `gpu-split-stages` (one kernel launch per loop nest) and
`gpu-default-schedule` (blocks and threads for every launch). Registered by name in
`transforms/__init__.py`; the CUDA pipeline that runs them is in `lowering/pipelines.py`."""
