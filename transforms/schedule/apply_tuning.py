"""apply-tuning: schedules the kernels a tuning database holds records of, by their best record."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import UnitAttr
from xdsl.passes import ModulePass

from ziggurat.errors import CompileError, ScheduleError
from ziggurat.lowering.locations import SOURCE_NODES
from ziggurat.target import Target
from ziggurat.transforms.schedule.mark import SCHEDULED
from ziggurat.transforms.schedule.replay import apply_trace

if TYPE_CHECKING:
    from ziggurat.database import JSONDatabase


def record_target(target: str | Target) -> str:
    """The target string records are filed under, with the thread count spelled out (`llvm` on a
    2-core machine and `llvm -num-cores=2` share records)."""
    return str(Target.parse(target).resolved())


def kernel_text(module: builtin.ModuleOp, name: str) -> str:
    """A module holding only kernel `name` of `module`: the text workload keys are made of."""
    fn = next(f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == name).clone()
    fn.attributes.pop(SOURCE_NODES, None)  # the kernel's source nodes are no part of its workload
    return str(builtin.ModuleOp([fn]))


def kernel_names(module: builtin.ModuleOp) -> list[str]:
    """The kernel functions of a loop-level module (every function but the model entry `@main`)."""
    return [f.sym_name.data for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data != "main"]


def _replay(text: str, name: str, trace: object, target: Target) -> func.FuncOp:
    """Kernel `name` of the module `text`, scheduled by `trace` (ScheduleError when it does not replay).
    Replayed on a module parsed from the text, as the tuner measured it (autotune/space.py)."""
    from xdsl.parser import Parser

    from ziggurat.dialects import make_context

    tmp = Parser(make_context(), text).parse_module()
    apply_trace(tmp, name, trace, target)
    fn = next(f for f in tmp.ops if isinstance(f, func.FuncOp))
    fn.detach()
    return fn


@dataclass(frozen=True)
class ApplyTuningPass(ModulePass):
    """Schedules every kernel that a tuning database holds a record of by its best record's trace.

    **Input invariant:** loop-level kernels as the lowering leaves them
    (convert-te-to-loop, loop-simplify-index, dedupe-kernels, plan-memory),
    not yet scheduled: a kernel's workload key is the structural hash of its
    text at this stage (`WorkloadKey.from_text`), the key `ziggurat tune`
    files its records under.

    **Output IR:** each kernel whose key has a best record for `target` (and,
    among equals, one measured on this host's CPU) is replaced by the kernel
    scheduled by that record's trace (a list of Schedule steps, a template
    plan, or the default-schedule marker), and gets the unit attribute
    `loop.scheduled`. Other kernels are left as they are.

    **Invariants:** loop-default-schedule, loop-parallelize-outer and
    loop-vectorize-innermost skip functions marked `loop.scheduled`, so a
    tuned kernel gets its record's schedule and nothing else. A record that
    does not replay (ScheduleError) leaves its kernel to the default schedule
    with a warning; records only for other targets, and records measured on
    another CPU, give a warning each too.

    **Options:** `database` (path of the JSON-lines record database that
    `ziggurat tune` writes; required: the default, empty, is an error),
    `target` (the target the records are filed under and replayed for, e.g.
    `llvm -mcpu=haswell -num-cores=2`: its vector width and instruction sets
    shape the default and template schedules; without `-num-cores` the
    number of threads of this process counts; default `llvm`). The default
    pipelines (`lowering/pipelines.py` `schedule_stage`) pass both.

    Example (`ziggurat-opt -p 'apply-tuning{database="db.jsonl" target="llvm -num-cores=1"}'`,
    a record of `@mm_0` that parallelizes its outer loop):
    ```mlir
    func.func @mm_0(...) {
      loop.for %i0 = 0 to 64 serial { ... }
    }
    ```
    becomes
    ```mlir
    func.func @mm_0(...) attributes {loop.scheduled} {
      loop.for %i0 = 0 to 64 parallel { ... }
    }
    ```
    """

    name = "apply-tuning"
    database: str = ""
    target: str = "llvm"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        from ziggurat.database import JSONDatabase

        if not self.database:
            raise CompileError("apply-tuning needs a tuning database: apply-tuning{database=\"FILE\"} "
                               "(records written by `ziggurat tune MODEL --db FILE`)")
        try:
            with open(self.database, "rb"):
                pass
        except OSError as err:
            raise CompileError(f"apply-tuning: cannot read tuning database '{self.database}': {err.strerror}. "
                               "Create it with `ziggurat tune MODEL --db FILE`.") from None
        with JSONDatabase(self.database, fsync=False) as db:
            self._apply(op, db)

    def _apply(self, module: builtin.ModuleOp, db: JSONDatabase) -> None:
        from ziggurat.database import WorkloadKey
        from ziggurat.target import host_cpu

        key_target = record_target(self.target)
        here = host_cpu()[0]
        tuned: dict[str, func.FuncOp] = {}
        elsewhere: set[str] = set()
        foreign: dict[str, str] = {}  # kernel -> the other CPU its replayed record was measured on
        for name in kernel_names(module):
            text = kernel_text(module, name)
            key = WorkloadKey.from_text(text, name)
            best = db.best(key, key_target, cpu=here)
            if best is None:
                elsewhere |= {r.target for r in db.records(key) if r.ok}
                continue
            if best.versions.get("cpu", here) != here:
                foreign[name] = best.versions["cpu"]
            try:
                tuned[name] = _replay(text, name, best.trace, Target.parse(self.target))
            except ScheduleError as err:
                warnings.warn(f"tuning record of kernel '{name}' does not replay ({err}); using the default schedule",
                              stacklevel=3)
        if elsewhere:
            warnings.warn(f"the tuning database holds records of some kernels for target(s) {sorted(elsewhere)} "
                          f"but not for '{key_target}'; those kernels keep the default schedule "
                          f"(tune with --target '{self.target}')",
                          stacklevel=3)
        if foreign:
            cpus = sorted(set(foreign.values()))
            warnings.warn(f"the tuning records replayed for kernel(s) {sorted(foreign)} were measured on CPU {cpus}, "
                          f"this host is '{here}': they give correct results, but the fastest schedule there "
                          f"may not be the fastest here (tune again on this machine with ziggurat tune)",
                          stacklevel=3)
        for old in [f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data in tuned]:
            new = tuned[old.sym_name.data]
            new.attributes[SCHEDULED] = UnitAttr()
            if SOURCE_NODES in old.attributes:
                new.attributes[SOURCE_NODES] = old.attributes[SOURCE_NODES]
            module.body.block.insert_op_before(new, old)
            old.detach()
            old.erase()
