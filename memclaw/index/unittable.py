"""The unit table of one scope: its memory units stored as columns, and the table's forms in the index state.

The table is a read-only Mapping id -> MemoryUnit in file order; a MemoryUnit is built only when asked for.
Recall builds units only for the ids it returns; sync needs only ids and hashes.
As a few lists and packed arrays, 100k units load in tens of milliseconds; 100k unpickled units took a second.
The state keeps a whole table as `table_to_bytes` writes it, and its log's rows as `table_json_rows` writes them.
Everything read back is checked on the way in, so a hostile state file can be refused but never run code.
A table's distinct extras are written by column: docs/decisions/0014-the-unit-table-by-column.md says why.
Tables written with the extras as JSON pairs are still read.
"""

from __future__ import annotations

import codecs
import json
import struct
import sys
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from itertools import chain, islice
from typing import Any

import numpy as np

from memclaw.markdown.archive import chunk_of
from memclaw.markdown.units import KINDS, Kind, MemoryUnit

# ---- the columns

COLUMNS = ("ids", "texts", "hashes", "lines", "kinds", "timestamps", "sections", "scope_ix", "scopes",
           "source_ix", "sources", "extra_ix", "extras")  # fmt: skip
ROW_COLUMNS = ("ids", "texts", "hashes", "lines", "kinds", "timestamps", "sections", "scope_ix", "source_ix",
                "extra_ix")  # fmt: skip
STR_COLUMNS = ("ids", "texts", "hashes", "timestamps", "sections", "scopes", "sources")
# int64 (kinds: int8)
INT_COLUMNS = ("lines", "scope_ix", "source_ix", "extra_ix")
JOINED_COLUMNS = ("ids", "texts", "hashes")
# kept as their bytes when read back, decoded a row at a time (TextColumn): recall reads few of their rows
LAZY_COLUMNS = ("texts", "hashes")


def least(a: array) -> int:
    # (C speed: min() over 100k rows costs ms)
    return int(np.frombuffer(a, dtype=a.typecode).min())


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


class TextColumn(Sequence[str]):
    """A column of strings kept as one NUL-separated UTF-8 blob, each row decoded when it is read.

    A year's texts are ~95 MB: decoded and split at load, they cost most of a cold recall's second and twice
    their size at its peak, for the few rows a recall returns. The blob is checked as UTF-8 once, at load.
    Row i spans `blob[bounds[i] : bounds[i + 1] - 1]` (the byte after it is its NUL or the blob's end).
    """

    __slots__ = ("_blob", "_bounds", "_at")

    def __init__(self, blob: bytes | memoryview, bounds: np.ndarray) -> None:
        self._blob = memoryview(blob)
        self._bounds = np.ascontiguousarray(bounds, np.int64)
        # the same bounds as Python ints, without a copy: a row's read costs a third of what numpy's scalars cost
        self._at = memoryview(self._bounds).cast("B").cast("q")

    @classmethod
    def from_joined(cls, blob: bytes | memoryview, n: int) -> TextColumn:
        """The column of `n` rows that `"\x00".join` wrote. Raises ValueError if it has another count of rows or
        is not UTF-8 (surrogates allowed, as written)."""
        view = memoryview(blob).cast("B")
        if not n:
            if len(view):
                raise ValueError("an empty column with bytes")
            return cls(view, np.zeros(1, np.int64))
        _check_utf8(view)
        raw = np.frombuffer(view, np.uint8)
        nuls = [np.flatnonzero(raw[i : i + _CHUNK] == 0) + i for i in range(0, len(raw), _CHUNK)]
        bounds = np.concatenate([np.zeros(1, np.int64), *nuls, np.array([len(raw)], np.int64)]).astype(np.int64)
        bounds[1:] += 1
        if len(bounds) != n + 1:
            raise ValueError(f"{len(bounds) - 1} rows, expected {n}")
        return cls(view, bounds)

    @classmethod
    def of(cls, values: Sequence[str]) -> TextColumn:
        """The column of these strings (none may hold a NUL)."""
        col = list(values)
        return cls.from_joined("\x00".join(col).encode("utf-8", "surrogatepass"), len(col))

    @classmethod
    def concat(cls, parts: Sequence[Sequence[str]]) -> TextColumn | None:
        """The rows of `parts` in order as one column; None if a row of a plain list holds a NUL."""
        cols = []
        for p in parts:
            if not isinstance(p, TextColumn):
                if any("\x00" in t for t in p):
                    return None
                p = cls.of(p)
            if len(p):
                cols.append(p)
        if not cols:
            return cls.of([])
        blob = b"\x00".join(c.joined() for c in cols)
        bounds, at = [np.zeros(1, np.int64)], 0
        for c in cols:
            b = c._bounds
            bounds.append(b[1:] - b[0] + at)
            at += int(b[-1] - b[0])
        return cls(blob, np.concatenate(bounds))

    def byte_lengths(self) -> np.ndarray:
        """Each row's length in UTF-8 bytes (int64), read without decoding it."""
        return np.diff(self._bounds) - 1

    def joined(self) -> bytes:
        """The rows as `"\x00".join` of them would encode them (the blob's own bytes, not decoded)."""
        b = self._bounds
        return self._blob[int(b[0]) : int(b[-1]) - 1].tobytes() if len(b) > 1 else b""

    def __len__(self) -> int:
        return len(self._bounds) - 1

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                return [self[j] for j in range(start, stop, step)]
            return TextColumn(self._blob, self._bounds[start : max(start, stop) + 1])
        at = self._at
        n = len(at) - 1
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("row out of range")
        return str(self._blob[at[i] : at[i + 1] - 1], "utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        blob, b = self._blob, self._bounds.tolist()
        for a, z in zip(b, b[1:]):  # noqa: B905
            yield str(blob[a : z - 1], "utf-8", "surrogatepass")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (TextColumn, list, tuple)):
            return len(self) == len(other) and all(x == y for x, y in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TextColumn({len(self)} rows)"


# Bytes checked or scanned at a time (the temporary arrays stay small)
_CHUNK = 1 << 20


def _check_utf8(view: memoryview) -> None:
    """Raise ValueError (UnicodeDecodeError) unless the bytes are UTF-8, surrogates allowed.

    A chunk at a time, with no large temporary: a chunk of ASCII is valid as it is, and only the others are decoded
    (and let go), with what an earlier chunk left unfinished."""
    raw = np.frombuffer(view, np.uint8)
    dec = codecs.getincrementaldecoder("utf-8")("surrogatepass")
    for i in range(0, len(raw), _CHUNK):
        if raw[i : i + _CHUNK].max() < 0x80 and not dec.getstate()[0]:
            continue
        dec.decode(view[i : i + _CHUNK])
    dec.decode(b"", final=True)


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


# ---- the table


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
        cols: dict[str, Any] = {k: [] for k in ("ids", "timestamps", "sections")}
        cols.update(lines=array("q"), kinds=array("b"), scope_ix=array("q"), source_ix=array("q"), extra_ix=array("q"))
        # Segments of one table share its value tables (the same list objects): each is mapped once, not once per
        # part (a scope with a thousand archive days is a thousand segments of one table).
        remaps: dict[int, tuple[list, list[int], bool]] = {}
        for p in parts:
            c = p._c
            for k in ("ids", "timestamps", "sections", "lines", "kinds"):
                cols[k].extend(c[k])
            for ix, table, vals in (("scope_ix", scopes, "scopes"), ("source_ix", sources, "sources"),
                                    ("extra_ix", extras, "extras")):  # fmt: skip
                key = id(c[vals])
                # the first: as it is, at C speed
                if key not in remaps and table.seed(c[vals]):
                    remaps[key] = (c[vals], [], True)
                elif key not in remaps:
                    remap = [table(v) for v in c[vals]]
                    # the list kept: ids stay unique
                    remaps[key] = (c[vals], remap, remap == list(range(len(remap))))
                _vals, remap, identity = remaps[key]
                if identity:
                    cols[ix].extend(c[ix])
                else:
                    cols[ix].extend(remap[i] for i in c[ix])
        cols["scopes"], cols["sources"], cols["extras"] = scopes.values, sources.values, extras.values
        for k in LAZY_COLUMNS:
            # one column of bytes when any part has one (a loaded table); lists otherwise
            if any(isinstance(p._c[k], TextColumn) for p in parts):
                cols[k] = TextColumn.concat([p._c[k] for p in parts])
            if cols.get(k) is None:
                cols[k] = [t for p in parts for t in p._c[k]]
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
        """The raw columns (read-only; for the state's forms below)."""
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
        # list.index compares in C: ~1 ms at 100k rows, where a Python loop took 16
        backwards = texts[::-1]
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


# ---- the table in the index state

EXTRA_VALUES = "extra_values"
"""The blob of every extra's values, in order (see the module docstring)."""


def table_to_bytes(table: UnitTable) -> bytes:
    """The table for the index state, in three parts.

    First a JSON header: the optional string columns, the small value tables, the extras' key lists, the layout.
    Then ids, texts, hashes and the extras' values, each one NUL-separated UTF-8 string, or JSON if a value has a NUL.
    Then the integer columns as raw little-endian arrays: int64, and int8 for kinds.
    """
    c = table.columns
    head: dict[str, Any] = {k: c[k] for k in ("timestamps", "sections", "scopes", "sources")}
    head["n"] = len(table)
    shapes: dict[tuple[str, ...], int] = {}
    head["extra_shapes"] = [shapes.setdefault(tuple(k for k, _v in e), len(shapes)) for e in c["extras"]]
    head["extra_keys"] = [list(keys) for keys in shapes]
    values = [v for e in c["extras"] for _k, v in e]
    blobs = []
    for k, col in (*((k, c[k]) for k in JOINED_COLUMNS), (EXTRA_VALUES, values)):
        if isinstance(col, TextColumn):
            # its own bytes: no row of it holds a NUL
            blobs.append(col.joined())
            head[f"{k}_as"] = "joined"
            continue
        joined = "\x00".join(col)
        plain = joined.count("\x00") == max(len(col) - 1, 0)
        blobs.append((joined if plain else json.dumps(col, ensure_ascii=False)).encode("utf-8", "surrogatepass"))
        head[f"{k}_as"] = "joined" if plain else "json"
    head["sizes"] = [len(b) for b in blobs]
    text = json.dumps(head, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    ints = [little(c[k]) for k in INT_COLUMNS] + [little(c["kinds"])]
    return b"".join([struct.pack("<Q", len(text)), text, *blobs, *ints])


def table_from_bytes(data: bytes, *, check_ids: bool = True) -> UnitTable:
    """The table `table_to_bytes` wrote. Raises ValueError if it is not exactly such a table."""
    (n_text,) = struct.unpack_from("<Q", data, 0)
    head = json.loads(data[8 : 8 + n_text])
    if not isinstance(head, dict) or type(head.get("n")) is not int or not isinstance(head.get("sizes"), list):
        raise ValueError("unexpected columns")
    n, off = head.pop("n"), 8 + n_text
    # else: the extras as JSON pairs, as tables were written before
    by_column = "extras" not in head
    blobs = (*JOINED_COLUMNS, EXTRA_VALUES) if by_column else JOINED_COLUMNS
    modes = {k: head.pop(f"{k}_as", None) for k in blobs}
    for k, size in zip(blobs, head.pop("sizes"), strict=True):
        if type(size) is not int or size < 0:
            raise ValueError("unexpected sizes")
        rows = n if k != EXTRA_VALUES else _n_values(head)
        if k in LAZY_COLUMNS and modes[k] != "json":
            # a copy of its own bytes: the rest of `data` is decoded below and let go
            head[k] = TextColumn.from_joined(data[off : off + size], rows)
            off += size
            continue
        text = data[off : off + size].decode("utf-8", "surrogatepass")
        off += size
        head[k] = json.loads(text) if modes[k] == "json" else (text.split("\x00") if rows else [])
        if not isinstance(head[k], list) or len(head[k]) != rows:
            raise ValueError(f"column {k} does not have {rows} rows")
    if by_column:
        head["extras"] = _extras(head.pop("extra_keys"), head.pop("extra_shapes"), head.pop(EXTRA_VALUES),
                                 modes[EXTRA_VALUES] == "json")  # fmt: skip
    if len(data) != off + n * (8 * len(INT_COLUMNS) + 1):
        raise ValueError("the integer columns do not match the rows")
    for k in INT_COLUMNS:
        head[k] = from_little("q", data[off : off + 8 * n])
        off += 8 * n
    head["kinds"] = from_little("b", data[off:])
    joined = tuple(k for k in JOINED_COLUMNS if modes[k] != "json")
    return _checked(head, check_ids=check_ids, known_str=joined, extras_checked=by_column)


def _n_values(head: dict[str, Any]) -> int:
    """How many values the extras' key lists call for (ValueError if they are not lists of key lists and indexes)."""
    keys, shapes = head.get("extra_keys"), head.get("extra_shapes")
    if not (type(keys) is list and type(shapes) is list and set(map(type, keys)) <= {list}):
        raise ValueError("column extras is not a list of string pairs")
    if not set(map(type, shapes)) <= {int} or (shapes and not 0 <= min(shapes) <= max(shapes) < len(keys)):
        raise ValueError("column extras is not a list of string pairs")
    if not set(map(type, chain.from_iterable(keys))) <= {str}:
        raise ValueError("column extras is not a list of string pairs")
    sizes = [len(k) for k in keys]
    return sum(sizes[i] for i in shapes)


def _extras(keys: list[list[str]], shapes: list[int], values: list[Any], check: bool) -> list[tuple]:
    """The distinct extras from their columns (`_n_values` checked the keys and the count); `check`: the values
    came from JSON, and must be strings."""
    if check and not set(map(type, values)) <= {str}:
        raise ValueError("column extras is not a list of string pairs")
    key_tuples = [tuple(k) for k in keys]
    lengths = [len(k) for k in key_tuples]
    # one object per distinct pair: most repeat (a chunk's id, a speaker, a position), and the table stays loaded
    one: dict[tuple[str, str], tuple[str, str]] = {}
    pairs = zip(chain.from_iterable(key_tuples[i] for i in shapes), values, strict=True)
    it = iter([one.setdefault(p, p) for p in pairs])
    return [tuple(islice(it, lengths[i])) for i in shapes]


def table_json_rows(table: UnitTable) -> list[list[Any]]:
    """The rows as JSON values, one list each: id, text, hash, line, kind, timestamp, section, scope, source,
    extra (a list of [key, value] pairs). For a few rows (the state's log); `table_to_bytes` for a table."""
    c = table.columns
    return [
        [c["ids"][r], c["texts"][r], c["hashes"][r], c["lines"][r], c["kinds"][r], c["timestamps"][r],
         c["sections"][r], c["scopes"][c["scope_ix"][r]], c["sources"][c["source_ix"][r]],
         [list(kv) for kv in c["extras"][c["extra_ix"][r]]]]
        for r in range(len(table))
    ]  # fmt: skip


def rows_from_json(rows: Any) -> list[tuple]:
    """The rows `table_json_rows` wrote, checked (ValueError otherwise), as tuples for `UnitTable.from_row_tuples`."""
    if not isinstance(rows, list):
        raise ValueError("rows are not a list")
    out = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == 10):
            raise ValueError("a row is not a list of 10 values")
        uid, text, h, line, kind, ts, section, scope, source, extra = row
        if not (type(uid) is str and type(text) is str and type(h) is str and type(scope) is str
                and type(source) is str and type(line) is int and type(kind) is int and 0 <= kind < len(KINDS)
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


def _checked(
    cols: dict[str, Any], *, check_ids: bool, known_str: tuple[str, ...] = (), extras_checked: bool = False
) -> UnitTable:
    """Check what JSON gave for the string columns (`known_str`: made by str.split, strings already) and the
    extras (at C speed: a 100k-row table loads on every cold recall; `extras_checked`: built from checked columns
    already), then the columns' consistency."""
    lazy = {k for k in LAZY_COLUMNS if isinstance(cols.get(k), TextColumn)}
    if set(cols) != set(COLUMNS) or not all(type(cols[k]) is list for k in (*STR_COLUMNS, "extras") if k not in lazy):
        raise ValueError("unexpected columns")
    for k in (k for k in STR_COLUMNS if k not in known_str):
        allowed = {str, type(None)} if k in ("timestamps", "sections") else {str}
        if not set(map(type, cols[k])) <= allowed:
            raise ValueError(f"column {k} is not a list of strings")
    if not extras_checked:
        _check_json_extras(cols)
    for ts in filter(None, cols["timestamps"]):
        datetime.fromisoformat(ts)
    return UnitTable.from_columns(cols, check_ids=check_ids)


def _check_json_extras(cols: dict[str, Any]) -> None:
    """The extras as JSON pairs (tables written before the extras were by column): checked, as tuples."""
    # checked a level at a time at C speed: an archived turn's extras are its own, 100k of them
    raw = cols["extras"]
    pairs = list(chain.from_iterable(raw)) if set(map(type, raw)) <= {list} else None
    if pairs is None or not set(map(type, pairs)) <= {list} or not set(map(len, pairs)) <= {2}:
        raise ValueError("column extras is not a list of string pairs")
    if not set(map(type, chain.from_iterable(pairs))) <= {str}:
        raise ValueError("column extras is not a list of string pairs")
    cols["extras"] = [tuple(map(tuple, e)) for e in raw]
