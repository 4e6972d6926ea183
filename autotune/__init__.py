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

* `space`: `SearchSpace`, sketch-rule schedule traces of one loop-level kernel;
* `search`: `EvolutionarySearch` over the cost model's predictions, epsilon-greedy batches;
* `tuner`: `tune_kernel`, `tune_model` (tasks sharing trials); at compile time the
  pass `apply-tuning` (transforms/schedule/apply_tuning.py,
  `ziggurat.compile(..., tuning_db=FILE)`) replays the best records.
"""

from ziggurat.autotune.cost_model import CostModel, GBTCostModel, spearman, top_k_recall
from ziggurat.database import (
    ERROR_CODES,
    Database,
    JSONDatabase,
    TuningRecord,
    WorkloadKey,
    structural_hash,
)
from ziggurat.transforms.costs.features import FEATURE_NAMES, FeatureExtractor, LoopFeatures, extract_features
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
from ziggurat.autotune.search import EvolutionarySearch
from ziggurat.autotune.space import DEFAULT_TRACE, Candidate, SearchSpace, apply_trace
from ziggurat.autotune.tuner import TuneResult, extract_tasks, tune_kernel, tune_model
from ziggurat.autotune.workers import TaskResult, Worker, WorkerPool

__all__ = [
    "DEFAULT_TRACE",
    "ERROR_CODES",
    "FEATURE_NAMES",
    "Builder",
    "BuildResult",
    "Candidate",
    "CostModel",
    "Database",
    "EvolutionarySearch",
    "FeatureExtractor",
    "GBTCostModel",
    "JSONDatabase",
    "LocalBuilder",
    "LocalRunner",
    "LoopFeatures",
    "MeasureInput",
    "MeasureResult",
    "Runner",
    "SearchSpace",
    "TaskResult",
    "TuneResult",
    "TuningRecord",
    "Worker",
    "WorkerPool",
    "WorkloadKey",
    "apply_trace",
    "extract_tasks",
    "extract_features",
    "measure",
    "spearman",
    "structural_hash",
    "to_record",
    "top_k_recall",
    "tune_kernel",
    "tune_model",
]
