"""What a kernel costs, as the passes ask it: the cost-oracle protocol and its
roofline default (`cost_oracle.py`), numeric features of scheduled loop IR
(`features.py`) and the fusion and layout cost queries of the graph passes
(`fusion_costs.py`, `layout_costs.py`). The tuner (`autotune/`) builds on these
and hands its learned model and records in; nothing here imports `autotune`."""
