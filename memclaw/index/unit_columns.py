"""The column layout of a unit table: which columns there are, how each is typed, the small table of distinct
values a column of repeats is stored as (`Interner`), and integer arrays to and from little-endian bytes."""

from __future__ import annotations

import sys
from array import array
from typing import Any

import numpy as np

COLUMNS = ("ids", "texts", "hashes", "lines", "kinds", "timestamps", "sections", "scope_ix", "scopes",
           "source_ix", "sources", "extra_ix", "extras")  # fmt: skip
ROW_COLUMNS = ("ids", "texts", "hashes", "lines", "kinds", "timestamps", "sections", "scope_ix", "source_ix",
                "extra_ix")  # fmt: skip
STR_COLUMNS = ("ids", "texts", "hashes", "timestamps", "sections", "scopes", "sources")
INT_COLUMNS = ("lines", "scope_ix", "source_ix", "extra_ix")  # int64 (kinds: int8)
JOINED_COLUMNS = ("ids", "texts", "hashes")


def least(a: array) -> int:
    return int(np.frombuffer(a, dtype=a.typecode).min())  # (C speed: min() over 100k rows costs ms)


def most(a: array) -> int:
    return int(np.frombuffer(a, dtype=a.typecode).max())


def little(a: array) -> bytes:
    if sys.byteorder == "little":
        return a.tobytes()
    b = array(a.typecode, a)
    b.byteswap()
    return b.tobytes()


def from_little(code: str, data: bytes) -> array:
    a = array(code)
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a


class Interner:
    """Small table of distinct values (sources, scopes, extras) and the row -> value index."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._pos: dict[Any, int] = {}

    def seed(self, values: list[Any]) -> bool:
        """Start an empty table as `values` (distinct), each at its own index; False (and nothing done) otherwise."""
        if self.values:
            return False
        pos = dict(zip(values, range(len(values)), strict=True))
        if len(pos) != len(values):
            return False
        self.values, self._pos = list(values), pos
        return True

    def __call__(self, value: Any) -> int:
        i = self._pos.get(value)
        if i is None:
            i = self._pos[value] = len(self.values)
            self.values.append(value)
        return i
