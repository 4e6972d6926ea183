"""The side store that holds weights referenced by `graph.constant`.

Printed IR names a weight (`graph.constant "fc1.weight"`); its values live
here, so IR stays small and never spells a tensor out element by element.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np


class WeightStore(Mapping[str, np.ndarray]):
    """Name -> read-only, C-contiguous numpy array."""

    def __init__(self, items: Mapping[str, np.ndarray] | None = None):
        self._data: dict[str, np.ndarray] = {}
        for name, value in (items or {}).items():
            self.add(name, value)

    def add(self, name: str, value: np.ndarray) -> str:
        """Store `value` under `name` (made unique if taken); returns the name used."""
        unique, n = name, 1
        while unique in self._data:
            unique, n = f"{name}_{n}", n + 1
        array = np.require(value, requirements="C")
        array.setflags(write=False)
        self._data[unique] = array
        return unique

    def __getitem__(self, name: str) -> np.ndarray:
        return self._data[name]

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._data.values())

    def save(self, path: str) -> str:
        """Write the store as an .npz file (no pickle); returns the path written (numpy adds `.npz`
        to a name without it)."""
        path = str(path)
        if not path.endswith(".npz"):
            path += ".npz"
        np.savez(path, **self._data)
        return path

    @classmethod
    def load(cls, path: str) -> WeightStore:
        with np.load(path, allow_pickle=False) as f:
            return cls({k: f[k] for k in f.files})
