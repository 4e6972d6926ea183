"""The price function of cost-guided fusion and its cache.

`make_price` returns seconds of one kernel of a group of graph ops, as the cost
oracle (or, with `measure`, a timing on this machine) says of the loop-level kernel
the group lowers to. `Prices` keeps one price per structure (`structural_key`: the
groups of repeated layers are priced once) and prices batches of groups in two
processes (`prefetch`, `fork_build.map_floats`): fuse-ops asks for every candidate
of a round at once, then decides with the cache.

```python
prices = Prices(make_price(0, 0, "", 16, False), parallel=True)
prices.prefetch([[conv, add], [conv], [add]])   # priced two at a time
prices([conv, add])                              # from the cache
```
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from xdsl.ir import Operation


def make_price(peak_gflops: float, bandwidth_gbs: float, database: str, vector_width: int,
               measure: bool) -> Callable[[list[Operation]], float]:
    """Seconds of one kernel of the given ops, from the cost oracle; with `measure`, a kernel
    without a record is first timed once on this machine and recorded (see FuseOpsPass)."""
    from ziggurat.transforms.costs.cost_oracle import oracle_from_options
    from ziggurat.errors import CompileError, ZigguratError
    from ziggurat.lowering.locations import name_source
    from ziggurat.transforms.costs.kernels import kernel_of_ops, lower_kernel

    db_path = database
    if measure and not db_path:
        from ziggurat.target import Target

        # timed on this machine for the default target; records differ by width
        db_path = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ziggurat"
                      / f"fusion-{Target.parse('llvm').llvm_cpu}-w{vector_width}.jsonl")
        Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        Path(db_path).touch()
    oracle = oracle_from_options(peak_gflops, bandwidth_gbs, db_path)
    # The machine's peaks are read (on a fresh machine: measured and cached) here, before `Prices` may
    # fork: measured in the child and this process apart, at the same moment, the two would price the
    # groups of one decision on different rooflines (whisper's first compile chose 4 of 12 matmul
    # weights in panels, and ran 2x slower).
    oracle.peaks  # noqa: B018

    def price(ops: list[Operation]) -> float:
        try:
            module, key = lower_kernel(kernel_of_ops(ops), vector_width, keyed=oracle.database is not None)
            if measure and key is not None and oracle.database.best(key, oracle.target) is None:
                from ziggurat.database import TuningRecord
                from ziggurat.transforms.costs.layout_costs import time_kernel

                oracle.database.commit(TuningRecord(key, oracle.target, {"schedule": "default"},
                                                    costs=time_kernel(module, "kernel", vector_width)))
            return oracle.cost(module, "kernel", key).time
        except CompileError:
            return float("inf")  # a group that cannot be lowered is never chosen
        except ZigguratError as err:  # a schedule error: name the group's source (ONNX) nodes
            raise name_source(err, ops) from None

    return price


def structural_key(ops: list[Operation]) -> tuple:
    """What the kernel of `ops` (`kernels.kernel_of_ops`) depends on, so that
    groups repeated across layers or time steps are priced once: per op its name,
    properties, attributes and result types, each operand as an earlier op's result
    or as the n-th distinct external value with its type. An op with regions is
    keyed by its whole printed form."""
    index = {op: i for i, op in enumerate(ops)}
    external: dict = {}
    key: list = []
    for op in ops:
        if op.regions:
            key.append(str(op))
            continue
        args = []
        for v in op.operands:
            owner = v.owner
            if isinstance(owner, Operation) and owner in index:
                args.append((index[owner], v.index))  # type: ignore[attr-defined]
            else:
                args.append((-1 - external.setdefault(v, len(external)), str(v.type)))
        key.append((op.name, tuple(sorted((k, str(a)) for k, a in op.properties.items())),
                    tuple(sorted((k, str(a)) for k, a in op.attributes.items())), tuple(args),
                    tuple(str(r.type) for r in op.results)))
    return tuple(key)


class Prices:
    """`price` of a group of ops, once per structure (`structural_key`: repeated layers are priced
    once); with `parallel`, `prefetch` prices a batch of groups in two processes
    (`fork_build.map_floats`; never where pricing measures kernels: timings need the core alone)."""

    def __init__(self, price: Callable[[list[Operation]], float], parallel: bool = False):
        self.price, self.parallel = price, parallel
        self.cache: dict[tuple, float] = {}

    def __call__(self, ops: list[Operation]) -> float:
        key = structural_key(ops)
        if key not in self.cache:
            self.cache[key] = self.price(ops)
        return self.cache[key]

    def prefetch(self, groups: list[list[Operation]]) -> None:
        if not self.parallel:
            return
        from ziggurat.fork_build import map_floats

        todo: dict[tuple, list[Operation]] = {}
        for ops in groups:
            key = structural_key(ops)
            if key not in self.cache:
                todo.setdefault(key, ops)
        if len(todo) < MIN_BATCH:
            return
        keys, batch = list(todo), list(todo.values())
        self.cache.update(zip(keys, map_floats(lambda i: self.price(batch[i]), len(batch))))


MIN_BATCH = 4  # fewer groups than this are priced one by one (a fork costs about one price)
