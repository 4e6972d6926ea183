"""Search: evolutionary search over the cost model's predictions.

Seeds first: the space's template decisions equal to the default schedule and
its neighbours (`SearchSpace.seeds`) form the first batches. Then each round starts from a population of random sketch candidates plus
mutations of the best measured ones, then runs a few generations: score
every candidate with the cost model (predicted normalized throughput,
higher is faster), keep the best half, and refill by mutating one decision
(a tile factor, which loop is vectorized or parallel, unroll on/off). The
measured batch is chosen epsilon-greedily: a fraction `epsilon` of it is
random unmeasured candidates, the rest the best-predicted ones. A candidate
whose trace the database already holds for this workload, or that is already
in the batch, is never chosen again.

```python
search = EvolutionarySearch(space, model, db, key, rng=random.Random(0))
batch = search.next_batch(8)            # Candidates not yet measured
search.observe(batch, costs)            # seeds later mutations with the best
```
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from ziggurat.autotune.cost_model import CostModel
from ziggurat.database import Database, WorkloadKey, structural_hash
from ziggurat.autotune.space import Candidate, SearchSpace


class EvolutionarySearch:
    """Evolutionary search with epsilon-greedy batch selection; see the module docstring."""

    def __init__(self, space: SearchSpace, model: CostModel, db: Database, workload: WorkloadKey,
                 rng: random.Random | None = None, population: int = 48, generations: int = 3,
                 epsilon: float = 0.25, elites: int = 8):
        self.space, self.model, self.db, self.workload = space, model, db, workload
        self.rng = rng or random.Random(0)
        self.population, self.generations = population, generations
        self.epsilon, self.elites = epsilon, elites
        self._measured: list[tuple[float, Candidate]] = []  # (cost, candidate) of this session
        self._seeds: list | None = None  # the space's seed decisions, measured before any search
        self._seen_ir: set[str] = set()  # IR of the candidates measured or batched in this session

    def _new_ir(self, cand: Candidate, batch: set[str]) -> bool:
        """Whether `cand`'s scheduled IR differs from every one measured in this session and in the batch
        so far (different decisions can give the same IR: the default's own template knobs), and
        claims it for the batch."""
        h = structural_hash(cand.mlir)
        if h in self._seen_ir or h in batch:
            return False
        batch.add(h)
        return True

    def _fresh(self, cand: Candidate, taken: set[str]) -> bool:
        return cand.trace_hash not in taken and not self.db.has_measured(self.workload, cand.trace)

    def _score(self, cands: Sequence[Candidate]) -> np.ndarray:
        if not cands:
            return np.zeros(0)
        return np.asarray(self.model.predict(np.stack([c.features for c in cands])), dtype=float)

    def _mutants(self, parents: Sequence[Candidate], n: int) -> list[Candidate]:
        out = []
        for _ in range(3 * n):
            if len(out) >= n or not parents:
                break
            p = self.rng.choice(parents)
            if not isinstance(p.knobs, (list, dict)):
                continue
            c = self.space.build(self.space.mutate(self.rng, p.knobs))
            if c is not None:
                out.append(c)
        return out

    def next_batch(self, n: int) -> list[Candidate]:
        """Up to `n` unmeasured candidates: mostly the best predicted, `epsilon` of them random.

        The space's seeds (the default schedule's template decisions and their neighbours) come first."""
        if self._seeds is None:
            self._seeds = [c for c in (self.space.build(k) for k in self.space.seeds()) if c is not None]
        first: list[Candidate] = []
        irs: set[str] = set()
        while self._seeds and len(first) < n:
            c = self._seeds.pop(0)
            if self._fresh(c, {x.trace_hash for x in first}) and self._new_ir(c, irs):
                first.append(c)
        if first:
            return first
        seeds = [c for _, c in sorted(self._measured, key=lambda x: x[0])[:self.elites]]
        pool: dict[str, Candidate] = {}
        for c in self.space.sample(self.rng, self.population) + self._mutants(seeds, self.population // 2):
            pool.setdefault(c.trace_hash, c)
        for _ in range(self.generations):
            cands = list(pool.values())
            scores = self._score(cands)
            keep = [cands[i] for i in np.argsort(-scores)[:max(1, self.population // 2)]]
            for c in self._mutants(keep + seeds, self.population // 2):
                pool.setdefault(c.trace_hash, c)
        cands = list(pool.values())
        ranked = [cands[i] for i in np.argsort(-self._score(cands), kind="stable")]
        taken: set[str] = set()
        batch: list[Candidate] = []
        n_random = int(round(n * self.epsilon))
        unmeasured = [c for c in ranked if self._fresh(c, set())]
        irs = set()
        for c in unmeasured:
            if len(batch) >= n - n_random:
                break
            taken.add(c.trace_hash)
            if self._new_ir(c, irs):
                batch.append(c)
        rest = [c for c in unmeasured if c.trace_hash not in taken]
        self.rng.shuffle(rest)
        for c in rest:
            if len(batch) >= n:
                break
            if self._new_ir(c, irs):
                batch.append(c)
        return batch

    def observe(self, cands: Sequence[Candidate], costs: Sequence[float]) -> None:
        """Remembers measured candidates (cost in seconds, inf for an error) as mutation seeds."""
        for c, cost in zip(cands, costs):
            self._seen_ir.add(structural_hash(c.mlir))
            if np.isfinite(cost):
                self._measured.append((float(cost), c))
