"""Model folders without their large weights, for a GPU machine a run can carry little to.

A lent GPU machine takes 64 MiB per call, and the real models hold 163 MB of weights. Speed does
not depend on the weights' values, so a timing run can carry the models without them:

```
python -m ziggurat.benchmarks.gpu_synthetic strip .gpu/synth            # here: a few MB for every model
python -m ziggurat.benchmarks.gpu_synthetic restore .gpu/synth          # there: weights redrawn
ZIGGURAT_MODELS=$PWD/.gpu/synth GPU_DYNAMIC=1 GPU_BATCH16=1 benchmarks/gpu_check.sh
```

`strip` writes each shared model folder (`target_runs.SHARED`) to `<out>` with every float32
initializer of 1024 or more elements replaced by an empty tensor of its name, and its shape,
mean, standard deviation, minimum and maximum in `weights.json`; `inputs*.npz` and `meta.json` are
copied, `expected*.npz` left out (they hold for the real weights only). `restore` draws each
stripped tensor from a normal distribution of its mean and deviation clipped to its range (seeded by
its name: every restore gives the same model) and writes `model.onnx` back. gpu_models.py then takes
onnxruntime's output on the same machine as the reference where expected.npz is missing, so the
outputs are still compared, for the redrawn weights (which can make activations far larger than the
real ones: efficientnet_b0's output spans 3e4, and f32 differences grow with it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import zlib
from pathlib import Path

import numpy as np

from ziggurat.benchmarks.target_runs import SHARED

LARGE = 1024  # elements from which a float32 initializer is stripped


def _folders() -> list[tuple[str, Path]]:
    out = [(p.name, p) for p in sorted(SHARED.iterdir()) if (p / "model.onnx").exists()]
    real = SHARED / "real"
    out += [(f"real/{p.name}", p) for p in sorted(real.iterdir()) if (p / "model.onnx").exists()] if real.exists() else []
    return out


def strip(out: Path, only: str) -> None:
    import onnx
    from onnx import numpy_helper

    keep = set(only.split(",")) if only else None
    for rel, folder in _folders():
        if keep is not None and folder.name not in keep:
            continue
        dest = out / rel
        dest.mkdir(parents=True, exist_ok=True)
        model = onnx.load(str(folder / "model.onnx"))
        recipe = {}
        for init in model.graph.initializer:
            a = numpy_helper.to_array(init)
            if a.dtype == np.float32 and a.size >= LARGE:
                a64 = a.astype(np.float64)
                recipe[init.name] = {"shape": list(a.shape), "mean": float(a64.mean()), "std": float(a64.std()),
                                     "min": float(a64.min()), "max": float(a64.max())}
                init.CopyFrom(numpy_helper.from_array(np.zeros(0, np.float32), init.name))
        onnx.save(model, str(dest / "model.onnx"))
        (dest / "weights.json").write_text(json.dumps(recipe))
        for f in folder.iterdir():
            if f.name == "meta.json" or (f.name.startswith("inputs") and f.suffix == ".npz"):
                shutil.copyfile(f, dest / f.name)
        print(f"stripped {rel}: {len(recipe)} tensors, {(dest / 'model.onnx').stat().st_size >> 10} KB left", flush=True)


def restore(root: Path) -> None:
    import onnx
    from onnx import numpy_helper

    for recipe_file in sorted(root.rglob("weights.json")):
        folder = recipe_file.parent
        recipe = json.loads(recipe_file.read_text())
        model = onnx.load(str(folder / "model.onnx"))
        for init in model.graph.initializer:
            r = recipe.get(init.name)
            if r is None:
                continue
            rng = np.random.default_rng(zlib.crc32(init.name.encode()))
            a = rng.normal(r["mean"], r["std"], r["shape"]).clip(r["min"], r["max"]).astype(np.float32)
            init.CopyFrom(numpy_helper.from_array(a, init.name))
        onnx.save(model, str(folder / "model.onnx"))
        recipe_file.unlink()
        print(f"restored {folder.relative_to(root)}: {len(recipe)} tensors", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ziggurat.benchmarks.gpu_synthetic", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("strip", help="copy the shared model folders without their large float weights")
    s.add_argument("out", type=Path)
    s.add_argument("--only", default="", help="comma-separated model names (default: all)")
    r = sub.add_parser("restore", help="redraw the stripped weights (on the GPU machine)")
    r.add_argument("root", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "strip":
        strip(args.out, args.only)
    else:
        restore(args.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
