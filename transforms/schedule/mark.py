"""The `loop.scheduled` mark: a kernel function whose schedule is already decided.

`apply-tuning` sets it on the kernels it schedules from tuning records;
`loop-default-schedule`, `loop-parallelize-outer` and
`loop-vectorize-innermost` leave marked functions alone; the compiler reports
the marked kernels as `CompileStats.tuned_kernels`. Its own module, so that the
passes that read it import no pass that sets it.
"""

from __future__ import annotations

from xdsl.dialects import builtin, func
from xdsl.ir import Operation

SCHEDULED = "loop.scheduled"  # unit attribute of a kernel function whose schedule is decided


def is_scheduled(op: Operation | None) -> bool:
    """True when `op` is, or lies inside, a function marked `loop.scheduled`."""
    while op is not None and not isinstance(op, func.FuncOp):
        op = op.parent_op()
    return op is not None and SCHEDULED in op.attributes


def scheduled_kernels(module: builtin.ModuleOp) -> list[str]:
    """The names of the kernel functions of `module` marked `loop.scheduled`, in module order."""
    return [f.sym_name.data for f in module.ops if isinstance(f, func.FuncOp) and SCHEDULED in f.attributes]
