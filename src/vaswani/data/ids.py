"""The token-id files of a prepared split: `SPLIT.SIDE.bin` holds every sequence's ids one after
another, `SPLIT.SIDE.idx` the end offset of each (int64, after a leading 0); `PreparedData`
memory-maps them."""

from __future__ import annotations

import hashlib
from itertools import chain
from pathlib import Path

import numpy as np


class IdsWriter:
    """Appends id sequences to a .bin file and their end offsets to an .idx file, hashing both."""

    def __init__(self, prefix: Path, dtype: np.dtype) -> None:
        self.dtype = dtype
        self.bin = open(f"{prefix}.bin", "wb")  # noqa: SIM115 - closed in close()
        self.idx = open(f"{prefix}.idx", "wb")  # noqa: SIM115
        self.sha = hashlib.sha256()
        self.end = 0
        self._write(self.idx, np.zeros(1, dtype="<i8"))

    def _write(self, handle, array: np.ndarray) -> None:
        data = array.tobytes()
        handle.write(data)
        self.sha.update(data)

    def add(self, sequences: list[list[int]]) -> np.ndarray:
        """Append `sequences`; returns their lengths (int32: a whole split's stay small)."""
        lengths = np.fromiter(map(len, sequences), dtype=np.int32, count=len(sequences))
        if not sequences:
            return lengths
        total = int(lengths.sum(dtype=np.int64))
        self._write(self.bin, np.fromiter(chain.from_iterable(sequences), self.dtype, total))
        self._write(self.idx, self.end + np.cumsum(lengths, dtype="<i8"))
        self.end += total
        return lengths

    def close(self) -> str:
        self.bin.close()
        self.idx.close()
        return self.sha.hexdigest()
