"""A codegen worker process (see codegen_pool.py): `python -m ziggurat.backends.llvm.codegen_worker`.

It imports llvmlite and jit.py (not xDSL), reads requests from its stdin and answers on its stdout,
one at a time, until its stdin closes. A request is one JSON line `{"cpu", "features", "opt_level",
"nbytes"}` and `nbytes` of LLVM IR text; a reply is one JSON line `{"ok", "nbytes"}` and `nbytes` of
object code (`jit.emit_jit_object`) or, when not ok, LLVM's message.
"""

from __future__ import annotations

import json
import sys
from typing import IO


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """The worker's loop: one request in, one reply out, until `stdin` closes."""
    from ziggurat.backends.llvm.jit import emit_jit_object

    while head := stdin.readline():
        req = json.loads(head)
        text = stdin.read(req["nbytes"]).decode()
        try:
            body, ok = emit_jit_object(text, req["cpu"], req["features"], req["opt_level"]), True
        except Exception as err:  # noqa: BLE001 - the parent reports it
            body, ok = str(err).encode(), False
        stdout.write(json.dumps({"ok": ok, "nbytes": len(body)}).encode() + b"\n")
        stdout.write(body)
        stdout.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
