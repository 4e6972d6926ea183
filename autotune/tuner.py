"""The tuner: sample -> predict -> measure -> record -> retrain, per kernel and per model.

* `tune_kernel(text, name, trials, db)` tunes one loop-level kernel (a module
  holding `func.func @name`, as convert-te-to-loop emits it). The first batch
  holds the default schedule, so the best record is never worse than it. A
  rerun with the same database resumes: recorded candidates are neither
  measured again nor lost (the cost model is retrained on them first).
  Two tuners may share a database (it locks; `database.py`): each reads the
  other's new records before choosing a batch and skips what it measured.
* `tune_model(onnx, trials, db, time_budget=...)` runs the pipeline up to the
  schedule (`lowering/pipelines.py` `graph_stage` and `lowering_stage`: graph
  passes, TO_LOOP, MODULE with dedupe-kernels), takes each distinct kernel as
  a task with its calls per model run, and hands out the trials batch by batch
  through the task scheduler (autotune/scheduler.py): every task first gets
  one batch (its default schedule is measured), then the task whose time is
  expected to fall fastest (Ansor's gradient of the model's estimated latency)
  gets the next; kernels under 1% of the estimate get no more. It stops at
  `trials` new measurements or before a batch would overrun `time_budget`
  seconds (the validation round reserved). The tasks share one cost model,
  trained first on the database's records of other kernels (transfer: records
  carry their features). A progress line per batch goes to stderr: the
  model's estimated kernel time, its speedup over the defaults, an ETA.
* With `validate=N` (the CLI's `--validate`, default 4), the default schedule
  and the N best traces of each task are re-measured together at the end, in
  two passes, as one validation round; the database's `best` picks among them
  (a lucky measurement during a load spike cannot win).
* The compile-time side is the pass `apply-tuning{database=FILE ...}`
  (transforms/schedule/apply_tuning.py, put in the pipeline by
  `ziggurat.compile(..., tuning_db=FILE)`): the best record of each kernel
  whose workload key (the structural hash of the kernel's text at the same
  stage) is in the database replaces the default schedule.

Scripts that tune need the multiprocessing guard (`if __name__ == "__main__":`).
"""

from __future__ import annotations

import dataclasses
import random
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
from xdsl.dialects import func

from ziggurat.autotune.cost_model import GBTCostModel
from ziggurat.database import VALIDATION, JSONDatabase, WorkloadKey
from ziggurat.autotune.measure import Builder, LocalBuilder, LocalRunner, MeasureInput, Runner, to_record
from ziggurat.autotune.search import EvolutionarySearch
from ziggurat.autotune.space import DEFAULT_TRACE, SearchSpace, apply_trace
from ziggurat.dialects import loop
from ziggurat.lowering import pipelines
from ziggurat.errors import ScheduleError, TuningError
from ziggurat.target import Target
from ziggurat.transforms.costs.features import FEATURE_NAMES
from ziggurat.transforms.schedule.apply_tuning import kernel_names, kernel_text, record_target


HOPELESS_FACTOR, MIN_TIMEOUT_S = 50.0, 2.0
SLOW_FACTOR = 3.0  # a candidate whose first call is this much slower than the best is timed once


def _signature(fn: func.FuncOp) -> tuple[tuple[tuple[int, ...], ...], int]:
    """Argument shapes and how many trailing arguments are outputs (stored to)."""
    shapes = tuple(tuple(a.type.get_shape()) for a in fn.args)
    stored = {o.buffer for o in fn.walk() if isinstance(o, loop.StoreOp)}
    outs = 0
    for a in reversed(fn.args):
        if a not in stored:
            break
        outs += 1
    return shapes, max(outs, 1)


@dataclass
class Task:
    """One kernel to tune, its search state and its best-so-far."""

    name: str
    text: str
    key: WorkloadKey
    calls: int
    space: SearchSpace
    search: EvolutionarySearch
    model: GBTCostModel
    shapes: tuple[tuple[int, ...], ...]
    num_outputs: int
    default_cost: float = float("inf")
    best_cost: float = float("inf")
    best_trace: Any = None
    trials: int = 0
    known: int = 0  # records of the database (all workloads) this task has looked at


@dataclass
class TuneResult:
    """What `tune_kernel` found (costs in seconds per call)."""

    name: str
    key: WorkloadKey
    trials: int
    default_cost: float
    best_cost: float
    best_trace: Any
    seconds: float
    calls: int = 1  # calls per model run (tune_model)
    model_check: Any = None  # tune_model's ModelCheck (autotune/model_check.py), the same for every kernel


class Tuner:
    """Shared measuring machinery and the per-task loop; `tune_kernel`/`tune_model` drive it."""

    def __init__(self, db: JSONDatabase, target: str | Target = "llvm", timeout: float = 10.0,
                 parallel_builds: int = 2, seed: int = 0, batch_size: int = 8,
                 runner_options: dict[str, Any] | None = None, builder: Builder | None = None,
                 runner: Runner | None = None, shared_model: GBTCostModel | None = None):
        self.db = db
        self.shared_model = shared_model  # one cost model for every task (tune_model), else one per task
        self.target = Target.parse(target)
        self.target_key = record_target(self.target)
        self.vector_width = self.target.vector_width
        self.num_threads = self.target.num_threads
        self.batch_size = batch_size
        self.timeout = timeout
        self.seed = seed
        # builder/runner: given (e.g. autotune/distributed.py's Dask ones, built with the same options),
        # or the default local process pools
        self.builder = builder or LocalBuilder(n_parallel=parallel_builds, timeout=max(60.0, 6 * timeout))
        # 5 repeats of >= 15 ms each, ranked by their median: one repeat slowed by another process on
        # this shared 2-core machine does not decide (about 0.1 s of timing per candidate)
        opts = {"timeout": timeout, "repeat": 5, "min_repeat_ms": 15.0, **(runner_options or {})}
        self.runner = runner or LocalRunner(**opts)
        self.timing = {"search": 0.0, "build": 0.0, "run": 0.0, "model": 0.0}  # wall seconds per phase
        self.measured = 0  # candidates measured by `step`

    def _refresh(self) -> None:
        """Reads in the records other processes appended to the database since (JSONDatabase.refresh)."""
        refresh = getattr(self.db, "refresh", None)
        if refresh is not None:
            refresh()

    def _catch_up(self, t: Task) -> None:
        """Refreshes the database and takes the best and default costs of task `t` from the records
        another tuner appended since (its cost model is not retrained on them)."""
        self._refresh()
        if len(self.db) == t.known:
            return
        new = self.db.records()[t.known:] if len(self.db) > t.known else self.db.records()
        t.known = len(self.db)
        for r in new:
            if r.workload.hash != t.key.hash or r.target != self.target_key or not r.ok:
                continue
            if r.cost < t.best_cost:
                t.best_cost, t.best_trace = r.cost, r.trace
            if r.trace == DEFAULT_TRACE and not np.isfinite(t.default_cost):
                t.default_cost = r.cost

    def close(self) -> None:
        self.builder.close()
        self.runner.close()

    def __enter__(self) -> Tuner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def task(self, text: str, name: str, calls: int = 1) -> Task:
        """A task for kernel `name` of `text`, resumed from the database's records of it."""
        space = SearchSpace(text, name, self.vector_width, self.num_threads, target=self.target)
        key = WorkloadKey.from_text(text, name)
        model = self.shared_model or GBTCostModel(n_estimators=60, seed=self.seed)
        rng = random.Random(f"{self.seed}:{key.hash}")
        search = EvolutionarySearch(space, model, self.db, key, rng)
        shapes, outs = _signature(next(f for f in space.module.ops if isinstance(f, func.FuncOp)
                                       and f.sym_name.data == name))
        t = Task(name, text, key, calls, space, search, model, shapes, outs, known=len(self.db))
        feats, costs = [], []
        for r in self.db.records(key):
            if r.target != self.target_key:
                continue
            t.trials += 1
            if r.ok and r.cost < t.best_cost:
                t.best_cost, t.best_trace = r.cost, r.trace
            if r.trace == DEFAULT_TRACE and r.ok:
                t.default_cost = r.cost
            f = stored_features(r)  # stored since 2026-11-27; replaying the trace costs ~40 ms a record
            if f is None:
                f = self._features(space, r.trace)
            if f is not None:
                feats.append(f)
                costs.append(r.cost)
        if feats:  # a shared model is fitted once, after every task has been loaded (tune_model)
            model.update(np.stack(feats), costs, key.hash, refit=self.shared_model is None)
        return t

    def _features(self, space: SearchSpace, trace: Any) -> np.ndarray | None:
        from ziggurat.transforms.costs.features import extract_features

        module = space.module.clone()
        try:
            apply_trace(module, space.name, trace, self.target)
        except ScheduleError:
            return None
        return extract_features(module, space.name)

    def step(self, t: Task, n: int) -> int:
        """Measures up to `n` new candidates of task `t`; returns how many were measured."""
        batch = []
        t0 = time.perf_counter()
        self._catch_up(t)  # another tuner on this database: what it measured is not measured again
        if not self.db.has_measured(t.key, DEFAULT_TRACE):
            batch.append(t.space.default())
        batch += t.search.next_batch(n - len(batch))
        self.timing["search"] += time.perf_counter() - t0
        if not batch:
            return 0
        pipeline = pipelines.hw_stage(3, self.target)
        # the reference is the untuned kernel as it would run: the default schedule (tested against numpy;
        # the naive loops take seconds per call at 1024^3 and would eat the measuring timeout)
        reference = t.space.default().mlir
        inputs = [MeasureInput(c.mlir, t.name, t.shapes, t.num_outputs, pipeline, reference=reference, trace=c.trace,
                               workload=t.key, num_threads=self.num_threads, target=str(self.target))
                  for c in batch]
        config = getattr(self.runner, "config", None)
        if isinstance(config, dict):  # LocalRunner / DaskRunner: time hopeless candidates only once
            config["slow_s"] = SLOW_FACTOR * t.best_cost if np.isfinite(t.best_cost) else None
        if hasattr(self.runner, "timeout") and np.isfinite(t.best_cost):
            # a candidate 50x slower than the best is a timeout record, not seconds of timing
            self.runner.timeout = min(self.timeout, max(MIN_TIMEOUT_S, HOPELESS_FACTOR * t.best_cost))
        t0 = time.perf_counter()
        builds = self.builder.build(inputs)
        t1 = time.perf_counter()
        results = self.runner.run(inputs, builds)
        t2 = time.perf_counter()
        self.timing["build"] += t1 - t0
        self.timing["run"] += t2 - t1
        costs = []
        before = t.best_cost
        for c, inp, res in zip(batch, inputs, results):
            features = [float(x) for x in c.features] or None
            self.db.commit(dataclasses.replace(to_record(inp, res, self.target_key), features=features))
            costs.append(res.median)
            if res.median < t.best_cost:
                t.best_cost, t.best_trace = res.median, c.trace
            if c.trace == DEFAULT_TRACE and res.error == "ok":
                t.default_cost = res.median
        t.trials += len(batch)
        self.measured += len(batch)
        t.model.update(np.stack([c.features for c in batch]), costs, t.key.hash)
        t.search.observe(batch, costs)
        self.timing["model"] += time.perf_counter() - t2
        return len(batch)

    def validate(self, t: Task, top: int = 4, passes: int = 5, revert: bool = False) -> int:
        """Re-measures the default schedule and the `top` best traces of task `t` together, `passes`
        times in turn, as one validation round (records with message `validation <round>`); the
        database's `best` then picks among them. One measurement taken during a load spike (this
        machine is shared) can no longer crown a candidate. With `revert`, the round holds the default
        alone, so the database's `best` answers the default again (what the model check does when the
        tuned kernels do not make the whole model faster). Returns the measurements taken."""
        self._refresh()  # finalists found by another tuner on this database compete too
        recs = [r for r in self.db.records(t.key) if r.target == self.target_key and r.ok
                and not r.message.startswith(VALIDATION)]
        seen, finalists = set(), []
        # only candidates measured faster than the default at least once can win the round
        default = min((r.cost for r in recs if r.trace == DEFAULT_TRACE), default=float("inf"))
        for r in sorted(recs, key=lambda r: r.cost):
            if r.trace_hash not in seen and r.trace != DEFAULT_TRACE and r.cost < default:
                seen.add(r.trace_hash)
                finalists.append(r.trace)
        traces = [DEFAULT_TRACE] + finalists[:top]
        if revert:  # a round of the default alone: `best` then answers the default (model_check.py)
            traces = [DEFAULT_TRACE]
        elif len(traces) < 2:
            return 0
        inputs = []
        reference = t.space.default().mlir
        pipeline = pipelines.hw_stage(3, self.target)
        for trace in traces:
            module = t.space.module.clone()
            try:
                apply_trace(module, t.name, trace, self.target)
            except ScheduleError:
                continue
            inputs.append(MeasureInput(str(module), t.name, t.shapes, t.num_outputs, pipeline, reference=reference,
                                       trace=trace, workload=t.key, num_threads=self.num_threads,
                                       target=str(self.target)))
        config = getattr(self.runner, "config", None)
        if isinstance(config, dict):
            config["slow_s"] = None
        if hasattr(self.runner, "timeout"):
            self.runner.timeout = self.timeout
        round_id = f"{VALIDATION}{time.time():017.6f}"
        builds = self.builder.build(inputs)
        for _ in range(passes):
            for inp, res in zip(inputs, self.runner.run(inputs, builds)):
                rec = to_record(inp, res, self.target_key)
                self.db.commit(dataclasses.replace(rec, message=round_id) if rec.ok else rec)
        return passes * len(inputs)


def _fmt(s: float) -> str:
    if not np.isfinite(s):
        return "-"
    return f"{s * 1e6:.1f}us" if s < 1e-2 else f"{s * 1e3:.2f}ms"


def progress_line(done: int, total: int | None, tasks: list[Task], started: float, width: int = 20,
                  timing: dict[str, float] | None = None, current: Task | None = None,
                  budget: float | None = None) -> str:
    """`[#####.....] 12/40 trials 8.1s ETA 19s (0.68 s/trial: search 0.10 build 0.31 run 0.22 model 0.05) |
    model ~1.52ms (1.08x) | dense_0 31.2us (default 40.1us)`: the bar follows the trials or, with a
    `budget` (seconds), the time; the model's estimated kernel time (calls x best, scheduler.py) and
    its speedup over the defaults; then `current` (or, without it, every task)."""
    from ziggurat.autotune.scheduler import estimated_latency, speedup

    elapsed = time.time() - started
    fractions = ([done / total] if total else []) + ([elapsed / budget] if budget else [])
    frac = min(1.0, max(fractions)) if fractions else 0.0
    filled = int(width * frac)
    eta = f" ETA {elapsed / frac - elapsed:.0f}s" if 0 < frac < 1 else ""
    shown = [current] if current is not None else tasks
    parts = [f"{t.name} {_fmt(t.best_cost)} (default {_fmt(t.default_cost)})" for t in shown]
    per = ""
    if timing is not None and done:
        per = f" ({elapsed / done:.2f} s/trial: " + " ".join(f"{k} {v / done:.2f}" for k, v in timing.items()) + ")"
    model = f"model ~{_fmt(estimated_latency(tasks))} ({speedup(tasks):.2f}x)"
    count = f"{done}/{total}" if total else f"{done}"
    return (f"[{'#' * filled}{'.' * (width - filled)}] {count} trials {elapsed:.1f}s"
            + (f"/{budget:.0f}s" if budget else "") + f"{eta}{per} | {model} | " + " | ".join(parts))


def tune_kernel(kernel_module_text: str, name: str, trials: int, db: JSONDatabase, target: str | Target = "llvm",
                timeout: float = 10.0, parallel_builds: int = 2, seed: int = 0, batch_size: int = 8,
                runner_options: dict[str, Any] | None = None, log: TextIO | None = None,
                builder: Builder | None = None, runner: Runner | None = None, validate: int = 0) -> TuneResult:
    """Tunes kernel `name` of a loop-level module for `trials` new measurements (fewer when the space runs dry)."""
    started = time.time()
    with Tuner(db, target, timeout, parallel_builds, seed, batch_size, runner_options, builder, runner) as tuner:
        t = tuner.task(kernel_module_text, name)
        done = 0
        while done < trials:
            got = tuner.step(t, min(batch_size, trials - done))
            if got == 0:
                break
            done += got
            if log is not None:
                print(progress_line(done, trials, [t], started, timing=tuner.timing, current=t), file=log, flush=True)
        if validate:
            tuner.validate(t, validate)
    return TuneResult(name, t.key, done, t.default_cost, t.best_cost, t.best_trace, time.time() - started)


def extract_tasks(model: Any, opt_level: int = 3, target: str | Target = "llvm") -> list[tuple[str, str, int]]:
    """(kernel name, kernel module text, calls from @main) of a model's distinct kernels, before scheduling."""
    from ziggurat.compiler import parse_pipeline, run_passes
    from ziggurat.frontends.onnx import ImportedModel, import_onnx
    from ziggurat.weights import WeightStore
    from ziggurat.transforms.graph.weight_binding import bind_weights

    tgt = Target.parse(target)
    imported = model if isinstance(model, ImportedModel) else import_onnx(model)
    module = imported.module.clone()
    bind_weights(module, WeightStore(imported.weights))
    # the kernels as apply-tuning sees them: the pipeline up to the schedule stage
    run_passes(module, parse_pipeline(pipelines.join(pipelines.graph_stage(opt_level, tgt),
                                                     pipelines.lowering_stage(opt_level))))
    main = next((f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == "main"), None)
    calls: dict[str, int] = {}
    if main is not None:
        for o in main.walk():
            if isinstance(o, func.CallOp):
                calls[o.callee.root_reference.data] = calls.get(o.callee.root_reference.data, 0) + 1
    return [(n, kernel_text(module, n), calls.get(n, 1)) for n in kernel_names(module)]


def stored_features(r: Any) -> np.ndarray | None:
    """The feature vector a record carries, when it has one of this version's length."""
    return np.asarray(r.features) if r.features is not None and len(r.features) == len(FEATURE_NAMES) else None


def pretrain_from_db(model: GBTCostModel, db: JSONDatabase, target_key: str, own: set[str]) -> int:
    """Trains `model` on the database's records of other workloads for this target that carry their
    features (records written by earlier tuning runs, of this model or any other); how many."""
    records = [r for r in db.records() if r.target == target_key and r.workload.hash not in own and r.ok
               and not r.message.startswith(VALIDATION)]
    return model.pretrain(records, stored_features)


def _validation_reserve(tuner: Tuner, tasks: list[Task], validate: int, revert: bool = False) -> float:
    """Seconds the final validation round is expected to take: per task the default and `validate`
    finalists, each built once and run 5 times, at the build and run seconds per candidate so far.
    With `revert`, also the model check's revert round (the default alone, once per task the
    tuned build changes), which it runs when the tuned model is not faster: unreserved, it took
    llama_tiny_lm's 10-minute run to 628 s."""
    if not (validate or revert) or not tuner.measured:
        return 0.0
    per_build, per_run = tuner.timing["build"] / tuner.measured, tuner.timing["run"] / tuner.measured
    # a task is validated when a candidate was measured faster than its default (Tuner.validate)
    improved = [t for t in tasks if np.isfinite(t.best_cost) and t.best_cost < t.default_cost]
    traces = sum(min(1 + validate, 1 + max(t.trials - 1, 0)) for t in improved) if validate else 0
    traces += len(improved) if revert else 0
    return traces * (per_build + 5 * per_run)


def tune_model(model: Any, trials: int | None, db: JSONDatabase, target: str | Target = "llvm", opt_level: int = 3,
               timeout: float = 10.0, parallel_builds: int = 2, seed: int = 0, batch_size: int = 8,
               runner_options: dict[str, Any] | None = None, log: TextIO | None = None,
               progress: bool = True, builder: Builder | None = None,
               runner: Runner | None = None, validate: int = 0, time_budget: float | None = None,
               transfer: bool = True, model_check: bool = False) -> list[TuneResult]:
    """Tunes a model's distinct kernels; one result per kernel.

    The batches go where the task scheduler (autotune/scheduler.py) expects the model's estimated
    latency to fall fastest; kernels under 1% of it get only their first batch. It stops after
    `trials` new measurements, or once `time_budget` seconds (everything included: extraction,
    search, measuring and the validation round, which is reserved for from the measured build and
    run times) would be exceeded by another batch, whichever comes first; at least one of the two
    must be given. All tasks share one cost model, first trained (`transfer`) on the database's
    records of other kernels, of this model or others, that carry their features. With
    `model_check`, the model built with the tuned kernels is timed against the default build at the
    end (autotune/model_check.py); unless it is at least 1% faster, the defaults are re-measured as
    the latest validation round of every kernel the database would change, so compile keeps them
    (the budget reserves time for this too). With `progress`, a progress line per batch goes to
    `log` (default: stderr).
    """
    from ziggurat.autotune.model_check import BLOCKS, RUNS, check_model
    from ziggurat.autotune.scheduler import TaskScheduler, estimated_latency

    if trials is None and time_budget is None:
        raise TuningError("tune_model needs a number of trials, a time budget or both")
    log = (log or sys.stderr) if progress else None
    started = time.time()
    specs = extract_tasks(model, opt_level, target)
    extract_s = time.time() - started
    if not specs:
        raise TuningError("the model has no kernel to tune")
    shared = GBTCostModel(n_estimators=60, seed=seed)
    with Tuner(db, target, timeout, parallel_builds, seed, batch_size, runner_options, builder, runner,
               shared_model=shared) as tuner:
        if transfer:
            pretrain_from_db(shared, db, tuner.target_key, {WorkloadKey.from_text(text, name).hash for name, text, _ in specs})
        tasks = [tuner.task(text, name, calls) for name, text, calls in specs]
        shared.fit()
        sched = TaskScheduler(tasks)
        done, batches, looping = 0, 0, time.time()
        while trials is None or done < trials:
            if time_budget is not None and batches:
                per_batch = (time.time() - looping) / batches
                reserve = _validation_reserve(tuner, tasks, validate, revert=model_check)
                if model_check:  # two compiles (each about an extraction) and the paired timing
                    reserve += 2.5 * extract_s + 3 * (BLOCKS * RUNS + 1) * estimated_latency(tasks)
                if time.time() - started + per_batch + reserve > time_budget:
                    break
            t = sched.next()
            if t is None:
                break
            got = tuner.step(t, batch_size if trials is None else min(batch_size, trials - done))
            if got == 0:
                sched.mark_dry(t)
                continue
            done, batches = done + got, batches + 1
            sched.observe(t)
            if log is not None:
                print(progress_line(done, trials, tasks, started, timing=tuner.timing, current=t,
                                    budget=time_budget), file=log, flush=True)
        if validate:
            for t in tasks:
                tuner.validate(t, validate)
            for t in tasks:  # what compile-time will replay: the validation round's best
                best = tuner.db.best(t.key, tuner.target_key)
                if best is not None:
                    t.best_trace = best.trace
                    t.best_cost = float(np.median([r.cost for r in tuner.db.records(t.key)
                                                   if r.message == best.message and r.trace_hash == best.trace_hash]))
                    t.default_cost = float(np.median([r.cost for r in tuner.db.records(t.key)
                                                      if r.message == best.message and r.trace == DEFAULT_TRACE]
                                                     or [t.default_cost]))
        check = None
        if model_check and getattr(db, "path", None) is not None:
            changed = [t for t in tasks if (b := tuner.db.best(t.key, tuner.target_key)) is not None
                       and b.trace != DEFAULT_TRACE]
            check = check_model(model, str(db.path), str(tuner.target), opt_level, len(changed))
            if log is not None:
                print(check.line(), file=log, flush=True)
            if not check.kept:
                for t in changed:
                    tuner.validate(t, revert=True)
                    t.best_trace, t.best_cost = DEFAULT_TRACE, t.default_cost
    elapsed = time.time() - started
    return [TuneResult(t.name, t.key, t.trials, t.default_cost, t.best_cost, t.best_trace, elapsed, t.calls, check)
            for t in tasks]
