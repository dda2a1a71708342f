"""The unit table of one scope: its memory units stored as columns, a MemoryUnit built only when asked for.

A scope's state holds every unit of its Markdown. Unpickling 100k MemoryUnit dataclasses takes about a second,
which a cold `memclaw recall` pays before answering; the same table as a few lists and packed arrays loads in
a few tens of milliseconds. Recall builds units only for the ids it returns; sync needs only ids and hashes.

The table is a read-only Mapping id -> MemoryUnit in file order. `to_bytes`/`from_bytes` (and `json_rows` for a
few rows) convert it for the index state (memclaw.index.scope_state): JSON strings and raw integer arrays, checked on
the
way in, so a hostile state file can be refused but never run code.
"""

from __future__ import annotations

import json
import struct
import sys
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memclaw.markdown.units import Kind, MemoryUnit

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
        scopes, sources, extras = _Interner(), _Interner(), _Interner()
        cols: dict[str, Any] = {k: [] for k in ("ids", "texts", "hashes", "timestamps", "sections")}
        cols.update(lines=array("q"), kinds=array("b"), scope_ix=array("q"), source_ix=array("q"), extra_ix=array("q"))
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
    def to_bytes(self) -> bytes:
        """The table for the index state: a JSON header (the optional string columns, the small value tables, how the
        rest is stored), then ids, texts and hashes each as one NUL-separated UTF-8 string (JSON if a value holds a
        NUL), then the integer columns as raw little-endian arrays (int64; kinds int8). A 100k-row table loads in a
        few tens of ms."""
        c = self._c
        head: dict[str, Any] = {k: c[k] for k in ("timestamps", "sections", "scopes", "sources")}
        head["extras"] = [[list(kv) for kv in e] for e in c["extras"]]
        head["n"] = len(self)
        blobs = []
        for k in _JOINED_COLUMNS:
            joined = "\x00".join(c[k])
            plain = joined.count("\x00") == max(len(self) - 1, 0)
            blobs.append((joined if plain else json.dumps(c[k], ensure_ascii=False)).encode("utf-8", "surrogatepass"))
            head[f"{k}_as"] = "joined" if plain else "json"
        head["sizes"] = [len(b) for b in blobs]
        text = json.dumps(head, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
        ints = [_little(c[k]) for k in _INT_COLUMNS] + [_little(c["kinds"])]
        return b"".join([struct.pack("<Q", len(text)), text, *blobs, *ints])

    @classmethod
    def from_bytes(cls, data: bytes, *, check_ids: bool = True) -> UnitTable:
        """The table `to_bytes` wrote. Raises ValueError if it is not exactly such a table."""
        (n_text,) = struct.unpack_from("<Q", data, 0)
        head = json.loads(data[8 : 8 + n_text])
        if not isinstance(head, dict) or type(head.get("n")) is not int or not isinstance(head.get("sizes"), list):
            raise ValueError("unexpected columns")
        n, off = head.pop("n"), 8 + n_text
        modes = {k: head.pop(f"{k}_as", None) for k in _JOINED_COLUMNS}
        for k, size in zip(_JOINED_COLUMNS, head.pop("sizes"), strict=True):
            text = data[off : off + size].decode("utf-8", "surrogatepass")
            off += size
            head[k] = json.loads(text) if modes[k] == "json" else (text.split("\x00") if n else [])
            if not isinstance(head[k], list) or len(head[k]) != n:
                raise ValueError(f"column {k} does not have {n} rows")
        if len(data) != off + n * (8 * len(_INT_COLUMNS) + 1):
            raise ValueError("the integer columns do not match the rows")
        for k in _INT_COLUMNS:
            head[k] = _from_little("q", data[off : off + 8 * n])
            off += 8 * n
        head["kinds"] = _from_little("b", data[off:])
        joined = tuple(k for k in _JOINED_COLUMNS if modes[k] != "json")
        return cls._checked(head, check_ids=check_ids, known_str=joined)

    def json_rows(self) -> list[list[Any]]:
        """The rows as JSON values, one list each: id, text, hash, line, kind, timestamp, section, scope, source,
        extra (a list of [key, value] pairs). For a few rows (the state's log); `to_bytes` for a table."""
        c = self._c
        return [
            [c["ids"][r], c["texts"][r], c["hashes"][r], c["lines"][r], c["kinds"][r], c["timestamps"][r],
             c["sections"][r], c["scopes"][c["scope_ix"][r]], c["sources"][c["source_ix"][r]],
             [list(kv) for kv in c["extras"][c["extra_ix"][r]]]]
            for r in range(len(self))
        ]  # fmt: skip

    @classmethod
    def from_json_rows(cls, rows: Any) -> list[tuple]:
        """The rows `json_rows` wrote, checked (ValueError otherwise), as tuples for `from_row_tuples`."""
        if not isinstance(rows, list):
            raise ValueError("rows are not a list")
        out = []
        for row in rows:
            if not (isinstance(row, list) and len(row) == 10):
                raise ValueError("a row is not a list of 10 values")
            uid, text, h, line, kind, ts, section, scope, source, extra = row
            if not (type(uid) is str and type(text) is str and type(h) is str and type(scope) is str
                    and type(source) is str and type(line) is int and kind in (0, 1) and type(kind) is int
                    and (ts is None or type(ts) is str) and (section is None or type(section) is str)
                    and isinstance(extra, list)):  # fmt: skip
                raise ValueError("a row has a value of the wrong type")
            if ts is not None:
                datetime.fromisoformat(ts)
            pairs = tuple((kv[0], kv[1]) for kv in extra if isinstance(kv, list) and len(kv) == 2)
            if len(pairs) != len(extra) or not all(type(k) is str and type(v) is str for k, v in pairs):
                raise ValueError("a row's extra is not a list of string pairs")
            out.append((uid, text, h, line, kind, ts, section, scope, source, pairs))
        return out

    @classmethod
    def from_row_tuples(cls, rows: Sequence[tuple], *, check_ids: bool = True) -> UnitTable:
        """A table of rows from `from_json_rows`."""
        scopes, sources, extras = _Interner(), _Interner(), _Interner()
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
    def _checked(cls, cols: dict[str, Any], *, check_ids: bool, known_str: tuple[str, ...] = ()) -> UnitTable:
        """Check what JSON gave for the string columns (`known_str`: made by str.split, strings already) and the
        extras (at C speed: a 100k-row table loads on every cold recall), then the columns' consistency."""
        if set(cols) != set(_COLUMNS) or not all(type(cols[k]) is list for k in (*_STR_COLUMNS, "extras")):
            raise ValueError("unexpected columns")
        for k in (k for k in _STR_COLUMNS if k not in known_str):
            allowed = {str, type(None)} if k in ("timestamps", "sections") else {str}
            if not set(map(type, cols[k])) <= allowed:
                raise ValueError(f"column {k} is not a list of strings")
        extras = []
        for e in cols["extras"]:
            if not isinstance(e, list) or not all(
                isinstance(kv, list) and len(kv) == 2 and type(kv[0]) is str and type(kv[1]) is str for kv in e
            ):
                raise ValueError("column extras is not a list of string pairs")
            extras.append(tuple((k, v) for k, v in e))
        cols["extras"] = extras
        for ts in filter(None, cols["timestamps"]):
            datetime.fromisoformat(ts)
        return cls.from_columns(cols, check_ids=check_ids)

    @classmethod
    def from_columns(cls, cols: dict[str, Any], *, check_ids: bool = True) -> UnitTable:
        """A table of these columns. Raises ValueError if they are inconsistent (`check_ids`: or repeat an id)."""
        n = len(cols["ids"])
        for k in _ROW_COLUMNS:
            if len(cols[k]) != n:
                raise ValueError(f"column {k} has {len(cols[k])} rows, expected {n}")
        for k, top in (("scope_ix", len(cols["scopes"])), ("source_ix", len(cols["sources"])),
                       ("extra_ix", len(cols["extras"])), ("kinds", 2)):  # fmt: skip
            if n and not (_least(cols[k]) >= 0 and _most(cols[k]) < top):
                raise ValueError(f"column {k} is out of range")
        table = cls(cols)
        if check_ids:
            table.check_ids()
        return table

    def check_ids(self) -> None:
        """Raise ValueError if an id repeats (builds the id -> row map a lookup needs anyway)."""
        if len(self._rows()) != len(self):
            raise ValueError("duplicate ids")

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
_STR_COLUMNS = ("ids", "texts", "hashes", "timestamps", "sections", "scopes", "sources")
_INT_COLUMNS = ("lines", "scope_ix", "source_ix", "extra_ix")  # int64 (kinds: int8)
_JOINED_COLUMNS = ("ids", "texts", "hashes")


def _least(a: array) -> int:
    return int(np.frombuffer(a, dtype=a.typecode).min())  # (C speed: min() over 100k rows costs ms)


def _most(a: array) -> int:
    return int(np.frombuffer(a, dtype=a.typecode).max())


def _little(a: array) -> bytes:
    if sys.byteorder == "little":
        return a.tobytes()
    b = array(a.typecode, a)
    b.byteswap()
    return b.tobytes()


def _from_little(code: str, data: bytes) -> array:
    a = array(code)
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a


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
