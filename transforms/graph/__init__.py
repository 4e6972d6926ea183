"""Graph-level passes: rewrites of the `graph` dialect (folding, simplification,
layout, Winograd, fusion) and the cost queries that guide fusion and layout.
Registered by name in `transforms/__init__.py`."""
