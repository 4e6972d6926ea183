"""How both command lines print an error: one line (`PROG: error: MESSAGE`), the pass named when a
pass raised it; with `--debug` (anywhere on the command line) or ZIGGURAT_DEBUG=1 the Python
traceback first."""

from __future__ import annotations

import os
import sys
import traceback

from ziggurat.errors import ZigguratError

DEBUG_ENV = "ZIGGURAT_DEBUG"


def pop_debug(argv: list[str]) -> tuple[bool, list[str]]:
    """Whether `--debug` is in `argv` or ZIGGURAT_DEBUG is set (not 0/false/empty); `argv` without it."""
    env = os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")
    return env or "--debug" in argv, [a for a in argv if a != "--debug"]


def error_message(err: BaseException) -> str:
    """The message of `err`: a ZigguratError's or a diagnostic's own text; an exception a pass raised
    (`compiler.name_pass`) after `pass 'NAME{options}' failed`, with its type when it is a bug."""
    from xdsl.utils.exceptions import DiagnosticException, ParseError

    name = getattr(err, "ziggurat_pass", None)
    if isinstance(err, ZigguratError | ParseError):
        return str(err)
    if isinstance(err, DiagnosticException):
        return f"pass '{name}' failed: {err}" if name else str(err)
    if not isinstance(err, Exception):  # e.g. xDSL's ArgSpecParseError
        return str(err)
    text = f"{type(err).__name__}: {err}"
    return f"pass '{name}' failed with {text}" if name else f"internal error: {text}"


def report_error(prog: str, err: BaseException, debug: bool) -> int:
    """Prints `err` for `prog` (the traceback too when `debug`); returns the exit status, 1."""
    if debug:
        traceback.print_exception(err, file=sys.stderr)
    message = error_message(err)
    internal = isinstance(err, Exception) and not isinstance(err, ZigguratError) and \
        type(err).__module__.split(".")[0] != "xdsl"
    if internal and not debug:
        message += f" (`{prog} --debug ...` or {DEBUG_ENV}=1 shows the traceback)"
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 1
