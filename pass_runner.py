"""Running passes: a pipeline's passes over a module, verified, with errors that name the pass.

`run_passes` is what `compile`, `ziggurat-opt` and the tools run a pipeline with (compiler.py
re-exports it): it verifies after each pass, at stage ends only, or at the end (`verify`), turns
invalid IR into one `CompileError` naming the pass and the failing op (`invalid_ir_error`), and
gives any other exception a pass raises a note naming that pass (`name_pass`), so the CLIs print
which pass failed; `pass_text` writes a pass as a pipeline string does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from ziggurat.errors import CompileError, ZigguratError
from ziggurat.lowering import pipelines
from ziggurat.registry import make_context


PassCallback = Callable[[ModulePass, builtin.ModuleOp, float], None]


def pass_text(p: ModulePass) -> str:
    """A pass as a pipeline string writes it, with the options that differ from their defaults:
    `fuse-ops{cost-guided=true}`."""
    def value(v: object) -> str:
        return str(v).lower() if isinstance(v, bool) else f'"{v}"' if isinstance(v, str) else str(v)

    spec = p.spec(include_default=False)
    options = " ".join(f"{k.replace('_', '-')}={','.join(value(v) for v in vs)}" for k, vs in spec.parameters.items())
    return f"{p.name}{{{options}}}" if options else p.name


def invalid_ir_error(module: builtin.ModuleOp, err: Exception, where: str) -> CompileError:
    """The error for IR that does not verify after `where` (a pass): the failing op, its message
    and ONNX node (or location) on the first line, then the op shown in its function."""
    from ziggurat.lowering.locations import invalid_ir_report

    return CompileError(f"the IR is invalid after {where}: {invalid_ir_report(module, err)}")


def run_passes(
    module: builtin.ModuleOp,
    passes: list[ModulePass],
    ctx: Context | None = None,
    verify: bool | str = True,
    after_pass: PassCallback | None = None,
) -> list[str]:
    """Applies `passes` in order, verifying after each (`verify=True`), only at stage ends
    (`verify="stages"`: after the passes of `pipelines.STAGE_ENDS`, the last pass before lowering
    and the last pass; verifying every pass cost 2-3.5 s of a CNN's compile), the same but not after
    the last pass (`verify="deferred"`: the caller checks the lowered IR only where translating it
    fails, `verify_lowered`; verifying segformer_b0_seg's 23,000 hw ops took 1.1 s of its 17), or
    never. Invalid IR
    is a CompileError naming the pass with its options (or the passes since the last check), the
    failing op and its ONNX node (`invalid_ir_error`). Any other exception a pass raises keeps its
    type and gets a note and the attribute `ziggurat_pass` naming the pass (the CLIs print it).
    Returns the passes (as `pass_text`) applied since the IR was last verified."""
    ctx = ctx or make_context()
    since = 0
    for k, p in enumerate(passes):
        start = time.perf_counter()
        last = k == len(passes) - 1
        stage_end = not last and (p.name in pipelines.STAGE_ENDS or passes[k + 1].name == pipelines.TO_LOOP[0])
        check = verify is True or (verify == "stages" and (last or stage_end)) or (verify == "deferred" and stage_end)
        try:
            p.apply(ctx, module)
        except ZigguratError:
            raise
        except VerifyException as err:  # the pass checked the IR it made (or an op it built)
            raise invalid_ir_error(module, err, f"pass '{pass_text(p)}'") from None
        except Exception as err:  # a bug in the pass: the CLIs name it, --debug shows the traceback
            name_pass(err, pass_text(p))
            raise
        if check:
            try:
                module.verify()
            except VerifyException as err:
                names = [pass_text(q) for q in passes[since:k + 1]]
                where = (f"pass '{names[0]}'" if len(names) == 1 else
                         f"one of the passes {', '.join(repr(n) for n in names)} (verified at stage ends; "
                         "`ziggurat compile --print-after all` verifies after each)")
                raise invalid_ir_error(module, err, where) from None
            since = k + 1
        if after_pass is not None:
            after_pass(p, module, time.perf_counter() - start)
    return [pass_text(q) for q in passes[since:]]


def verify_lowered(module: builtin.ModuleOp, unverified: list[str]) -> None:
    """Verifies IR that `run_passes(verify="deferred")` left unchecked (called where translating
    it failed): invalid IR is the CompileError naming the passes since the last check."""
    if not unverified:
        return
    try:
        module.verify()
    except VerifyException as err:
        names = ", ".join(repr(n) for n in unverified)
        raise invalid_ir_error(module, err, f"one of the passes {names} (`ziggurat compile --print-after all` "
                               "verifies after each)") from None


def name_pass(err: BaseException, text: str) -> None:
    """Notes on `err` that pass `text` raised it (`ziggurat_pass`, and a note in its traceback)."""
    if getattr(err, "ziggurat_pass", None) is None:
        try:
            err.ziggurat_pass = text  # type: ignore[attr-defined]
        except AttributeError:
            pass
        err.add_note(f"(raised in pass '{text}')")
