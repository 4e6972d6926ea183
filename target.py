"""Compilation targets, written as TVM-style strings.

`Target.parse("llvm -mcpu=native -num-cores=2")` gives the backend kind and
its options. `-mcpu` and `-mattr` default to the host CPU and its features;
the thread count comes from `-num-cores`, else the `ZIGGURAT_NUM_THREADS`
environment variable, else the number of CPUs.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from ziggurat.errors import ZigguratError

KINDS = ("llvm",)


@dataclass(frozen=True)
class Target:
    """A code-generation target."""

    kind: str = "llvm"
    mcpu: str | None = None
    mattr: str | None = None
    num_cores: int | None = None

    @classmethod
    def parse(cls, text: str | Target) -> Target:
        if isinstance(text, Target):
            return text
        words = shlex.split(text)
        if not words or words[0] not in KINDS:
            raise ZigguratError(f"unknown target '{text}': the supported target kinds are {', '.join(KINDS)} (e.g. 'llvm -num-cores=2')")
        fields: dict[str, object] = {"kind": words[0]}
        for word in words[1:]:
            key, eq, value = word.lstrip("-").partition("=")
            if not eq:
                raise ZigguratError(f"target option '{word}' needs a value, e.g. -num-cores=2")
            if key == "mcpu":
                fields["mcpu"] = None if value == "native" else value
            elif key == "mattr":
                fields["mattr"] = value
            elif key == "num-cores":
                if not value.isdigit() or int(value) < 1:
                    raise ZigguratError(f"-num-cores must be a positive integer, got '{value}'")
                fields["num_cores"] = int(value)
            else:
                raise ZigguratError(f"unknown target option '-{key}'; known: -mcpu, -mattr, -num-cores")
        return cls(**fields)  # type: ignore[arg-type]

    @property
    def num_threads(self) -> int:
        if self.num_cores is not None:
            return self.num_cores
        env = os.environ.get("ZIGGURAT_NUM_THREADS")
        if env:
            if not env.isdigit() or int(env) < 1:
                raise ZigguratError(f"ZIGGURAT_NUM_THREADS must be a positive integer, got '{env}'")
            return int(env)
        return os.cpu_count() or 1

    def features(self) -> str:
        """The LLVM feature string: -mattr, else the host's."""
        if self.mattr is not None:
            return self.mattr
        import llvmlite.binding as llvm

        return llvm.get_host_cpu_features().flatten()

    @property
    def vector_width(self) -> int:
        """f32 lanes in one vector register of this target."""
        feats = self.features()
        if "+avx512f" in feats:
            return 16
        if "+avx" in feats:
            return 8
        return 4

    def __str__(self) -> str:
        parts = [self.kind]
        if self.mcpu:
            parts.append(f"-mcpu={self.mcpu}")
        if self.mattr:
            parts.append(f"-mattr={self.mattr}")
        if self.num_cores:
            parts.append(f"-num-cores={self.num_cores}")
        return " ".join(parts)
