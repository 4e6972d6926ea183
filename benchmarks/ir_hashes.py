"""Hashes of the LLVM IR that the default build of every shared model produces.

A refactoring that should not change generated code is checked by running this
before and after and comparing the two JSON files:

    python -m ziggurat.benchmarks.ir_hashes --threads 1,2 --out before.json
    ... change ...
    python -m ziggurat.benchmarks.ir_hashes --threads 1,2 --out after.json --compare before.json

Models are the `model.onnx` files under `--models` (default `../shared/models`,
`real/` included). A model that does not compile is recorded with its error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path


def model_paths(root: Path) -> list[Path]:
    return sorted(root.rglob("model.onnx"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=str(Path(__file__).resolve().parents[2] / "shared" / "models"))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--target", default="llvm", help="target string; -num-cores=T is appended")
    p.add_argument("--opt-level", type=int, default=3)
    p.add_argument("--only", default="", help="comma-separated substrings of model paths")
    p.add_argument("--out", required=True)
    p.add_argument("--compare", default="", help="an earlier --out file: prints the models whose IR differs")
    args = p.parse_args(argv)

    import ziggurat

    root = Path(args.models)
    result: dict[str, str] = {}
    for path in model_paths(root):
        rel = str(path.parent.relative_to(root))
        if args.only and not any(s in rel for s in args.only.split(",")):
            continue
        for t in (int(x) for x in args.threads.split(",")):
            start = time.perf_counter()
            try:
                m = ziggurat.compile(str(path), target=f"{args.target} -num-cores={t}", opt_level=args.opt_level)
                digest = hashlib.sha256(m.info["llvm_ir"].encode()).hexdigest()[:16]
            except Exception as err:  # noqa: BLE001 - recorded, the run goes on
                digest = f"error: {type(err).__name__}: {str(err).splitlines()[0][:120]}"
            result[f"{rel}@{t}"] = digest
            print(f"{rel}@{t}: {digest} ({time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)
            ziggurat.compiler.clear_cache()
    Path(args.out).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        diff = sorted(k for k in result if before.get(k) != result[k])
        for k in diff:
            print(f"DIFFERS {k}: {before.get(k)} -> {result[k]}")
        print(f"{len(result) - len(diff)} of {len(result)} builds identical")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
