"""A unit table in the index state's forms (memclaw.index.scope_state): `table_to_bytes` / `table_from_bytes` for a
whole table (JSON strings and raw integer arrays, loaded in tens of ms for 100k rows), `table_json_rows` /
`rows_from_json` for the few rows of the state's log. Everything read back is checked on the way in, so a hostile
state file can be refused but never run code.

A table's distinct extras (an archived turn's are its own: 100k turns, 100k extras of six pairs) are written by
column: the distinct key lists, each extra's key list, and all values as one NUL-separated string. As JSON pairs
they took most of a cold recall's load (1.3 s of JSON at 110k rows, measured:
docs/decisions/0014-the-unit-table-by-column.md). Tables written with the extras as JSON pairs are still read."""

from __future__ import annotations

import json
import struct
from datetime import datetime
from itertools import chain, islice
from typing import Any

from memclaw.index.unit_columns import COLUMNS, INT_COLUMNS, JOINED_COLUMNS, STR_COLUMNS, from_little, little
from memclaw.index.unittable import UnitTable
from memclaw.markdown.units import KINDS

EXTRA_VALUES = "extra_values"
"""The blob of every extra's values, in order (see the module docstring)."""


def table_to_bytes(table: UnitTable) -> bytes:
    """The table for the index state: a JSON header (the optional string columns, the small value tables, the
    extras' key lists, how the rest is stored), then ids, texts, hashes and the extras' values each as one
    NUL-separated UTF-8 string (JSON if a value holds a NUL), then the integer columns as raw little-endian arrays
    (int64; kinds int8)."""
    c = table.columns
    head: dict[str, Any] = {k: c[k] for k in ("timestamps", "sections", "scopes", "sources")}
    head["n"] = len(table)
    shapes: dict[tuple[str, ...], int] = {}
    head["extra_shapes"] = [shapes.setdefault(tuple(k for k, _v in e), len(shapes)) for e in c["extras"]]
    head["extra_keys"] = [list(keys) for keys in shapes]
    values = [v for e in c["extras"] for _k, v in e]
    blobs = []
    for k, col in (*((k, c[k]) for k in JOINED_COLUMNS), (EXTRA_VALUES, values)):
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
    by_column = "extras" not in head  # (else: the extras as JSON pairs, as tables were written before)
    blobs = (*JOINED_COLUMNS, EXTRA_VALUES) if by_column else JOINED_COLUMNS
    modes = {k: head.pop(f"{k}_as", None) for k in blobs}
    for k, size in zip(blobs, head.pop("sizes"), strict=True):
        if type(size) is not int or size < 0:
            raise ValueError("unexpected sizes")
        text = data[off : off + size].decode("utf-8", "surrogatepass")
        off += size
        rows = n if k != EXTRA_VALUES else _n_values(head)
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
    if set(cols) != set(COLUMNS) or not all(type(cols[k]) is list for k in (*STR_COLUMNS, "extras")):
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
    raw = cols["extras"]  # (checked a level at a time at C speed: an archived turn's extras are its own, 100k of them)
    pairs = list(chain.from_iterable(raw)) if set(map(type, raw)) <= {list} else None
    if pairs is None or not set(map(type, pairs)) <= {list} or not set(map(len, pairs)) <= {2}:
        raise ValueError("column extras is not a list of string pairs")
    if not set(map(type, chain.from_iterable(pairs))) <= {str}:
        raise ValueError("column extras is not a list of string pairs")
    cols["extras"] = [tuple(map(tuple, e)) for e in raw]
