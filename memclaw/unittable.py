"""The unit table of one scope: its memory units stored as columns, a MemoryUnit built only when asked for.

A scope's state holds every unit of its Markdown. Unpickling 100k MemoryUnit dataclasses takes about a second,
which a cold `memclaw recall` pays before answering; the same table as a few lists and packed arrays loads in
a few tens of milliseconds. Recall builds units only for the ids it returns; sync needs only ids and hashes.

The table is a read-only Mapping id -> MemoryUnit in file order. `to_json`/`from_json` convert it to JSON for
the index state (memclaw.scope_state): plain lists and strings, checked on the way in, so a hostile state file can
be refused but never run code.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from memclaw.units import Kind, MemoryUnit

_KINDS: tuple[Kind, Kind] = ("fact", "history")
_COLUMNS = ("ids", "texts", "hashes", "lines", "kinds", "timestamps", "sections", "scope_ix", "scopes",
            "source_ix", "sources", "extra_ix", "extras")  # fmt: skip


class _Interner:
    """Small table of distinct values (sources, scopes, extras) and the row -> value index."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._pos: dict[Any, int] = {}

    def __call__(self, value: Any) -> int:
        i = self._pos.get(value)
        if i is None:
            i = self._pos[value] = len(self.values)
            self.values.append(value)
        return i


class UnitTable(Mapping[str, MemoryUnit]):
    """The units of one scope, column-wise. Immutable: a sync builds a new table."""

    __slots__ = ("_c", "_row", "_hash_map")

    def __init__(self, columns: dict[str, Any]) -> None:
        self._c = columns
        self._row: dict[str, int] | None = None
        self._hash_map: dict[str, str] | None = None

    # ----- building --------------------------------------------------------------------------------------
    @classmethod
    def from_units(cls, units: Iterable[MemoryUnit], hashes: Sequence[str] | None = None) -> UnitTable:
        us = list(units)
        scopes, sources, extras = _Interner(), _Interner(), _Interner()
        cols: dict[str, Any] = {
            "ids": [u.id for u in us],
            "texts": [u.text for u in us],
            "hashes": list(hashes) if hashes is not None else [u.content_hash for u in us],
            "lines": array("q", [u.line for u in us]),
            "kinds": array("b", [_KINDS.index(u.kind) for u in us]),
            "timestamps": [u.timestamp.isoformat() if u.timestamp is not None else None for u in us],
            "sections": [u.section for u in us],
            "scope_ix": array("l", [scopes(u.scope) for u in us]),
            "source_ix": array("l", [sources(u.source) for u in us]),
            "extra_ix": array("l", [extras(tuple(u.extra.items())) for u in us]),
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
        scopes, sources, extras = _Interner(), _Interner(), _Interner()
        cols: dict[str, Any] = {k: [] for k in ("ids", "texts", "hashes", "timestamps", "sections")}
        cols.update(lines=array("q"), kinds=array("b"), scope_ix=array("l"), source_ix=array("l"), extra_ix=array("l"))
        for p in parts:
            c = p._c
            for k in ("ids", "texts", "hashes", "timestamps", "sections", "lines", "kinds"):
                cols[k].extend(c[k])
            for ix, table, vals in (("scope_ix", scopes, "scopes"), ("source_ix", sources, "sources"),
                                    ("extra_ix", extras, "extras")):  # fmt: skip
                remap = [table(v) for v in c[vals]]
                if remap == list(range(len(remap))):
                    cols[ix].extend(c[ix])
                else:
                    cols[ix].extend(remap[i] for i in c[ix])
        cols["scopes"], cols["sources"], cols["extras"] = scopes.values, sources.values, extras.values
        return cls(cols)

    def segment(self, source: str) -> UnitTable | None:
        """The rows whose source is `source` (empty if none), or None if they are not contiguous."""
        c = self._c
        try:
            s = c["sources"].index(source)
        except ValueError:
            return UnitTable.from_units([])
        ix = c["source_ix"]
        n = ix.count(s)
        if not n:
            return UnitTable.from_units([])
        first = ix.index(s)
        if ix[first : first + n].count(s) != n:
            return None
        cols = {k: (v[first : first + n] if k in _ROW_COLUMNS else v) for k, v in c.items()}
        return UnitTable(cols)

    # ----- persistence -----------------------------------------------------------------------------------
    def to_json(self) -> bytes:
        return json.dumps(self.json_columns(), ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "surrogatepass"
        )

    @classmethod
    def from_json(cls, data: bytes) -> UnitTable:
        """The table saved by `to_json`. Raises ValueError if it is not exactly such a table."""
        return cls.from_json_columns(json.loads(data.decode("utf-8", "surrogatepass")))

    def json_columns(self) -> dict[str, list[Any]]:
        """The columns as JSON values (integer arrays as lists, each extra as a list of [key, value] pairs)."""
        c = self._c
        cols = {k: (v.tolist() if isinstance(v, array) else v) for k, v in c.items()}
        cols["extras"] = [[list(kv) for kv in e] for e in c["extras"]]
        return cols

    @classmethod
    def from_json_columns(cls, cols: Any) -> UnitTable:
        """The table of `json_columns`. Raises ValueError if it is not exactly such a table."""
        if not isinstance(cols, dict) or set(cols) != set(_COLUMNS):
            raise ValueError("unexpected columns")
        for k in ("lines", "kinds", "scope_ix", "source_ix", "extra_ix"):
            if not isinstance(cols[k], list) or not all(type(x) is int for x in cols[k]):
                raise ValueError(f"column {k} is not a list of integers")
        for k in ("ids", "texts", "hashes", "scopes", "sources"):
            if not isinstance(cols[k], list) or not all(type(x) is str for x in cols[k]):
                raise ValueError(f"column {k} is not a list of strings")
        for k in ("timestamps", "sections"):
            if not isinstance(cols[k], list) or not all(x is None or type(x) is str for x in cols[k]):
                raise ValueError(f"column {k} is not a list of strings")
        extras = []
        for e in cols["extras"] if isinstance(cols["extras"], list) else [None]:
            if not isinstance(e, list) or not all(
                isinstance(kv, list) and len(kv) == 2 and type(kv[0]) is str and type(kv[1]) is str for kv in e
            ):
                raise ValueError("column extras is not a list of string pairs")
            extras.append(tuple((k, v) for k, v in e))
        cols["extras"] = extras
        try:
            for ts in cols["timestamps"]:
                if ts is not None:
                    datetime.fromisoformat(ts)
            cols["lines"] = array("q", cols["lines"])
            cols["kinds"] = array("b", cols["kinds"])
            for k in ("scope_ix", "source_ix", "extra_ix"):
                cols[k] = array("l", cols[k])
        except OverflowError as e:
            raise ValueError("an integer column is out of range") from e
        return cls.from_columns(cols)

    @classmethod
    def from_columns(cls, cols: dict[str, Any]) -> UnitTable:
        """A table of these columns. Raises ValueError if they are inconsistent."""
        n = len(cols["ids"])
        for k in _ROW_COLUMNS:
            if len(cols[k]) != n:
                raise ValueError(f"column {k} has {len(cols[k])} rows, expected {n}")
        for k, vals in (("scope_ix", "scopes"), ("source_ix", "sources"), ("extra_ix", "extras")):
            if n and (min(cols[k]) < 0 or max(cols[k]) >= len(cols[vals])):
                raise ValueError(f"column {k} is out of range")
        if n and (min(cols["kinds"]) < 0 or max(cols["kinds"]) > 1):
            raise ValueError("column kinds is out of range")
        table = cls(cols)
        if len(table._rows()) != n:  # (the id -> row map a lookup builds anyway)
            raise ValueError("duplicate ids")
        return table

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
            kind=_KINDS[c["kinds"][row]],
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
        return _KINDS[self._c["kinds"][self._rows()[uid]]]

    def day_of(self, row: int) -> str | None:
        """The row's timestamp date as YYYY-MM-DD (what session links group by), None if undated."""
        ts = self._c["timestamps"][row]
        return datetime.fromisoformat(ts).date().isoformat() if ts is not None else None

    def last_match(self, kind: Kind, text: str) -> MemoryUnit | None:
        """The last unit of `kind` whose text is exactly `text`."""
        c = self._c
        k = _KINDS.index(kind)
        texts, kinds = c["texts"], c["kinds"]
        for row in range(len(texts) - 1, -1, -1):
            if texts[row] == text and kinds[row] == k:
                return self.unit(row)
        return None

    def last(self, kind: Kind) -> MemoryUnit | None:
        kinds = self._c["kinds"]
        k = _KINDS.index(kind)
        for row in range(len(kinds) - 1, -1, -1):
            if kinds[row] == k:
                return self.unit(row)
        return None

    def dated_rows(self) -> Iterator[tuple[int, Kind, str]]:
        """(row, kind, iso timestamp) of every dated unit."""
        c = self._c
        kinds = c["kinds"]
        for row, ts in enumerate(c["timestamps"]):
            if ts is not None:
                yield row, _KINDS[kinds[row]], ts


_ROW_COLUMNS = ("ids", "texts", "hashes", "lines", "kinds", "timestamps", "sections", "scope_ix", "source_ix",
                "extra_ix")  # fmt: skip


class FewLookups:
    """Membership in a list of ids for a caller that asks about a few: a C-level scan of the list for the
    first lookups, a set once there are more (a sync that appends one fact asks about one or two ids, where
    hashing 100k ids into a set would cost more than the whole append)."""

    __slots__ = ("_ids", "_set", "_scans")

    def __init__(self, ids: list[str]) -> None:
        self._ids = ids
        self._set: set[str] | None = None
        self._scans = 0

    def __contains__(self, uid: object) -> bool:
        if self._set is None:
            self._scans += 1
            if self._scans <= 8:
                return uid in self._ids
            self._set = set(self._ids)
        return uid in self._set
