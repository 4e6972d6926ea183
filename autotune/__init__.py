"""Autotuning: measured schedules, a learned cost model and a record database (design.md, section 5).

Each part is a small `typing.Protocol` with one default implementation:

* `database`: `Database` / `JSONDatabase`, append-only JSON-lines tuning records;
* `measure`: `Builder` / `LocalBuilder` and `Runner` / `LocalRunner`, compiling and
  timing candidates in owned, isolated worker processes (`workers`: `Worker`,
  `WorkerPool`, forkserver or spawn, never fork);
* `features`: `FeatureExtractor` / `LoopFeatures`, numeric features of a scheduled
  loop-level kernel;
* `cost_model`: `CostModel` / `GBTCostModel`, a scikit-learn ranking model trained
  online, saved without pickle, with Spearman and top-k recall metrics.

The search space and search strategy come with the loop-level Schedule API.
"""

from ziggurat.autotune.cost_model import CostModel, GBTCostModel, spearman, top_k_recall
from ziggurat.autotune.database import (
    ERROR_CODES,
    Database,
    JSONDatabase,
    TuningRecord,
    WorkloadKey,
    structural_hash,
)
from ziggurat.autotune.features import FEATURE_NAMES, FeatureExtractor, LoopFeatures, extract_features
from ziggurat.autotune.measure import (
    Builder,
    BuildResult,
    LocalBuilder,
    LocalRunner,
    MeasureInput,
    MeasureResult,
    Runner,
    measure,
    to_record,
)
from ziggurat.autotune.workers import TaskResult, Worker, WorkerPool

__all__ = [
    "ERROR_CODES",
    "FEATURE_NAMES",
    "Builder",
    "BuildResult",
    "CostModel",
    "Database",
    "FeatureExtractor",
    "GBTCostModel",
    "JSONDatabase",
    "LocalBuilder",
    "LocalRunner",
    "LoopFeatures",
    "MeasureInput",
    "MeasureResult",
    "Runner",
    "TaskResult",
    "TuningRecord",
    "Worker",
    "WorkerPool",
    "WorkloadKey",
    "extract_features",
    "measure",
    "spearman",
    "structural_hash",
    "to_record",
    "top_k_recall",
]
