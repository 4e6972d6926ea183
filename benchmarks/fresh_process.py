"""One measurement in a fresh Python process: the benchmarks whose figures an earlier compile in the
same process would change (compile time, peak memory) run their `--worker` this way.

```python
r = run_worker("ziggurat.benchmarks.memory", ["zig-cold", folder], env)   # the JSON the worker printed
r.get("error")                                                          # or its last line of stderr
```
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any


def run_worker(module: str, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs `python -m <module> --worker <args...>` and returns the JSON object its last stdout line
    holds, or `{"error": ...}` with the last line of its stderr when it failed."""
    proc = subprocess.run([sys.executable, "-m", module, "--worker", *args], capture_output=True, text=True,
                          env=dict(os.environ) if env is None else env)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:160]}
    return json.loads(proc.stdout.strip().splitlines()[-1])
