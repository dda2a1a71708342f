"""The unit table of one scope: its memory units stored as columns, a MemoryUnit built only when asked for.

A scope's state holds every unit of its Markdown. Unpickling 100k MemoryUnit dataclasses takes about a second,
which a cold `memclaw recall` pays before answering; the same table as a few lists and packed arrays loads in
a few tens of milliseconds. Recall builds units only for the ids it returns; sync needs only ids and hashes.

The table is a read-only Mapping id -> MemoryUnit in file order. memclaw.index.unittable_codec converts it for the
index state; memclaw.index.unit_columns describes its columns.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memclaw.index.unit_columns import ROW_COLUMNS, Interner, least, most
from memclaw.markdown.archive import chunk_of
from memclaw.markdown.units import KINDS, Kind, MemoryUnit


class UnitTable(Mapping[str, MemoryUnit]):
    """The units of one scope, column-wise. Immutable: a sync builds a new table."""

    __slots__ = ("_c", "_row", "_hash_map", "_bounds")

    def __init__(self, columns: dict[str, Any]) -> None:
        self._c = columns
        self._row: dict[str, int] | None = None
        self._hash_map: dict[str, str] | None = None
        self._bounds: dict[int, tuple[int, int, bool]] | None = None

    # ----- building --------------------------------------------------------------------------------------
    @classmethod
    def from_units(cls, units: Iterable[MemoryUnit], hashes: Sequence[str] | None = None) -> UnitTable:
        us = list(units)
        scopes, sources, extras = Interner(), Interner(), Interner()
        cols: dict[str, Any] = {
            "ids": [u.id for u in us],
            "texts": [u.text for u in us],
            "hashes": list(hashes) if hashes is not None else [u.content_hash for u in us],
            "lines": array("q", [u.line for u in us]),
            "kinds": array("b", [KINDS.index(u.kind) for u in us]),
            "timestamps": [u.timestamp.isoformat() if u.timestamp is not None else None for u in us],
            "sections": [u.section for u in us],
            "scope_ix": array("q", [scopes(u.scope) for u in us]),
            "source_ix": array("q", [sources(u.source) for u in us]),
            "extra_ix": array("q", [extras(tuple(u.extra.items())) for u in us]),
        }
        cols["scopes"], cols["sources"], cols["extras"] = scopes.values, sources.values, extras.values
        if len(cols["hashes"]) != len(us):
            raise ValueError("one hash per unit")
        return cls(cols)

    @classmethod
    def concat(cls, parts: Sequence[UnitTable]) -> UnitTable:
        """The rows of `parts`, in order (one table; the small value tables are merged)."""
        if len(parts) == 1:
            return parts[0]
        scopes, sources, extras = Interner(), Interner(), Interner()
        cols: dict[str, Any] = {k: [] for k in ("ids", "texts", "hashes", "timestamps", "sections")}
        cols.update(lines=array("q"), kinds=array("b"), scope_ix=array("q"), source_ix=array("q"), extra_ix=array("q"))
        # Segments of one table share its value tables (the same list objects): each is mapped once, not once per
        # part (a scope with a thousand archive days is a thousand segments of one table).
        remaps: dict[int, tuple[list, list[int], bool]] = {}
        for p in parts:
            c = p._c
            for k in ("ids", "texts", "hashes", "timestamps", "sections", "lines", "kinds"):
                cols[k].extend(c[k])
            for ix, table, vals in (("scope_ix", scopes, "scopes"), ("source_ix", sources, "sources"),
                                    ("extra_ix", extras, "extras")):  # fmt: skip
                key = id(c[vals])
                if key not in remaps and table.seed(c[vals]):  # (the first: as it is, at C speed)
                    remaps[key] = (c[vals], [], True)
                elif key not in remaps:
                    remap = [table(v) for v in c[vals]]
                    remaps[key] = (c[vals], remap, remap == list(range(len(remap))))  # (the list kept: ids stay unique)
                _vals, remap, identity = remaps[key]
                if identity:
                    cols[ix].extend(c[ix])
                else:
                    cols[ix].extend(remap[i] for i in c[ix])
        cols["scopes"], cols["sources"], cols["extras"] = scopes.values, sources.values, extras.values
        _drop_unused_extras(cols)
        return cls(cols)

    def segment(self, source: str) -> UnitTable | None:
        """The rows whose source is `source` (empty if none), or None if they are not contiguous."""
        c = self._c
        bounds = self._segment_bounds()
        try:
            s = c["sources"].index(source)
        except ValueError:
            return UnitTable.from_units([])
        if s not in bounds:
            return UnitTable.from_units([])
        first, n, together = bounds[s]
        if not together:
            return None
        cols = {k: (v[first : first + n] if k in ROW_COLUMNS else v) for k, v in c.items()}
        return UnitTable(cols)

    def _segment_bounds(self) -> dict[int, tuple[int, int, bool]]:
        """Source index -> (first row, rows, whether they are consecutive): one pass over the rows, kept (a scope
        with a thousand archive days asks for a thousand segments)."""
        if self._bounds is None:
            ix = np.frombuffer(self._c["source_ix"], dtype=np.int64) if len(self) else np.zeros(0, np.int64)
            vals, first, counts = np.unique(ix, return_index=True, return_counts=True)
            last = len(ix) - 1 - np.unique(ix[::-1], return_index=True)[1]
            self._bounds = {int(v): (int(f), int(n), int(la) - int(f) + 1 == int(n))
                            for v, f, n, la in zip(vals, first, counts, last, strict=True)}  # fmt: skip
        return self._bounds

    @classmethod
    def from_row_tuples(cls, rows: Sequence[tuple], *, check_ids: bool = True) -> UnitTable:
        """A table of rows from `from_json_rows`."""
        scopes, sources, extras = Interner(), Interner(), Interner()
        cols: dict[str, Any] = {
            "ids": [r[0] for r in rows],
            "texts": [r[1] for r in rows],
            "hashes": [r[2] for r in rows],
            "lines": array("q", [r[3] for r in rows]),
            "kinds": array("b", [r[4] for r in rows]),
            "timestamps": [r[5] for r in rows],
            "sections": [r[6] for r in rows],
            "scope_ix": array("q", [scopes(r[7]) for r in rows]),
            "source_ix": array("q", [sources(r[8]) for r in rows]),
            "extra_ix": array("q", [extras(r[9]) for r in rows]),
        }
        cols["scopes"], cols["sources"], cols["extras"] = scopes.values, sources.values, extras.values
        try:
            return cls.from_columns(cols, check_ids=check_ids)
        except OverflowError as e:
            raise ValueError("a line number is out of range") from e

    @classmethod
    def from_columns(cls, cols: dict[str, Any], *, check_ids: bool = True) -> UnitTable:
        """A table of these columns. Raises ValueError if they are inconsistent (`check_ids`: or repeat an id)."""
        n = len(cols["ids"])
        for k in ROW_COLUMNS:
            if len(cols[k]) != n:
                raise ValueError(f"column {k} has {len(cols[k])} rows, expected {n}")
        for k, top in (("scope_ix", len(cols["scopes"])), ("source_ix", len(cols["sources"])),
                       ("extra_ix", len(cols["extras"])), ("kinds", len(KINDS))):  # fmt: skip
            if n and not (least(cols[k]) >= 0 and most(cols[k]) < top):
                raise ValueError(f"column {k} is out of range")
        table = cls(cols)
        if check_ids:
            table.check_ids()
        return table

    def check_ids(self) -> None:
        """Raise ValueError if an id repeats (builds the id -> row map a lookup needs anyway)."""
        if len(self._rows()) != len(self):
            raise ValueError("duplicate ids")

    @property
    def columns(self) -> dict[str, Any]:
        """The raw columns (read-only; for memclaw.index.unittable_codec)."""
        return self._c

    # ----- Mapping ---------------------------------------------------------------------------------------
    def _rows(self) -> dict[str, int]:
        if self._row is None:
            ids = self._c["ids"]
            self._row = dict(zip(ids, range(len(ids)), strict=True))
        return self._row

    def __getitem__(self, uid: str) -> MemoryUnit:
        return self.unit(self._rows()[uid])

    def __contains__(self, uid: object) -> bool:
        return uid in self._rows()

    def __iter__(self) -> Iterator[str]:
        return iter(self._c["ids"])

    def __len__(self) -> int:
        return len(self._c["ids"])

    def __repr__(self) -> str:
        return f"UnitTable({len(self)} units)"

    # ----- columns ---------------------------------------------------------------------------------------
    @property
    def ids(self) -> list[str]:
        return self._c["ids"]

    @property
    def texts(self) -> list[str]:
        return self._c["texts"]

    def sources(self) -> list[str]:
        """The distinct sources of the rows, in row order."""
        c = self._c
        return [c["sources"][i] for i in dict.fromkeys(c["source_ix"])]

    def source_at(self, row: int) -> str:
        c = self._c
        return c["sources"][c["source_ix"][row]]

    def unit(self, row: int) -> MemoryUnit:
        c = self._c
        ts = c["timestamps"][row]
        return MemoryUnit(
            id=c["ids"][row],
            kind=KINDS[c["kinds"][row]],
            scope=c["scopes"][c["scope_ix"][row]],
            source=c["sources"][c["source_ix"][row]],
            line=c["lines"][row],
            text=c["texts"][row],
            timestamp=datetime.fromisoformat(ts) if ts is not None else None,
            section=c["sections"][row],
            extra=dict(c["extras"][c["extra_ix"][row]]),
        )

    def units(self) -> list[MemoryUnit]:
        """Every unit, in file order (builds them all: for small tables and tests)."""
        return [self.unit(i) for i in range(len(self))]

    def hashes(self) -> dict[str, str]:
        """id -> content hash (what sync compares against)."""
        if self._hash_map is None:
            self._hash_map = dict(zip(self._c["ids"], self._c["hashes"], strict=True))
        return self._hash_map

    def kind_of(self, uid: str) -> Kind:
        return KINDS[self._c["kinds"][self._rows()[uid]]]

    def day_of(self, row: int) -> str | None:
        """The row's timestamp date as YYYY-MM-DD (what session links group by), None if undated."""
        ts = self._c["timestamps"][row]
        return datetime.fromisoformat(ts).date().isoformat() if ts is not None else None

    def last_match(self, kind: Kind, text: str) -> MemoryUnit | None:
        """The last unit of `kind` whose text is exactly `text`."""
        c = self._c
        k = KINDS.index(kind)
        texts, kinds = c["texts"], c["kinds"]
        backwards = texts[::-1]  # list.index compares in C: ~1 ms at 100k rows, where a Python loop took 16
        start = 0
        while True:
            try:
                i = backwards.index(text, start)
            except ValueError:
                return None
            row = len(texts) - 1 - i
            if kinds[row] == k:
                return self.unit(row)
            start = i + 1

    def with_prefix(self, kind: Kind, prefix: str) -> list[MemoryUnit]:
        """The units of `kind` whose text starts with `prefix`, last first (one pass over the texts: ~5x the cost of
        `last_match`'s exact lookup)."""
        k = KINDS.index(kind)
        kinds = self._c["kinds"]
        rows = [row for row, t in enumerate(self._c["texts"]) if t.startswith(prefix)]
        return [self.unit(row) for row in reversed(rows) if kinds[row] == k]

    def last(self, kind: Kind) -> MemoryUnit | None:
        kinds = self._c["kinds"]
        k = KINDS.index(kind)
        for row in range(len(kinds) - 1, -1, -1):
            if kinds[row] == k:
                return self.unit(row)
        return None

    def rows_of(self, kind: Kind) -> list[int]:
        """The rows of units of `kind`, in order."""
        k = KINDS.index(kind)
        kinds = self._c["kinds"]
        if k not in kinds:
            return []
        return [row for row, x in enumerate(kinds) if x == k]

    def extra_at(self, row: int) -> dict[str, str]:
        c = self._c
        return dict(c["extras"][c["extra_ix"][row]])

    def cid_at(self, row: int) -> str | None:
        """The consolidation id of the row's unit (`extra["cid"]`), if it has one."""
        c = self._c
        for k, v in c["extras"][c["extra_ix"][row]]:
            if k == "cid":
                return v
        return None

    def row_of(self, uid: str) -> int | None:
        return self._rows().get(uid)

    def chunk_span(self, row: int, before: int, after: int) -> range:
        """The rows of the archive chunk `row` is a turn of (memclaw.markdown.archive.chunk_of), from `before`
        turns before it to `after` after it, fewer at the chunk's edges; the row alone when it is no chunk's turn."""
        key = self._chunk_at(row)
        first = last = row
        if key is not None:
            while first > 0 and row - first < before and self._chunk_at(first - 1) == key:
                first -= 1
            while last + 1 < len(self) and last - row < after and self._chunk_at(last + 1) == key:
                last += 1
        return range(first, last + 1)

    def _chunk_at(self, row: int) -> tuple[str, str, str] | None:
        return chunk_of(self.source_at(row), self.extra_at(row))

    def dated_rows(self) -> Iterator[tuple[int, Kind, str]]:
        """(row, kind, iso timestamp) of every dated unit."""
        c = self._c
        kinds = c["kinds"]
        for row, ts in enumerate(c["timestamps"]):
            if ts is not None:
                yield row, KINDS[kinds[row]], ts


def _drop_unused_extras(cols: dict[str, Any]) -> None:
    """Drop the extras no row refers to any more (an archived turn's are its own: a table that keeps losing rows
    would carry them forever), when they are most of the table."""
    n_vals, n_rows = len(cols["extras"]), len(cols["ids"])
    if n_vals <= 2 * n_rows + 64:
        return
    remap: dict[int, int] = {}
    kept: list[Any] = []
    ix = cols["extra_ix"]
    for i in ix:
        if i not in remap:
            remap[i] = len(kept)
            kept.append(cols["extras"][i])
    cols["extra_ix"] = array("q", (remap[i] for i in ix))
    cols["extras"] = kept
