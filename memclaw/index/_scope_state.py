"""One scope's index state in one SQLite file, `scopes/<key>/state.sqlite3`, and `ScopeState`, what it holds.

The file keeps the scope's unit table, session links, file marks and signatures, the units whose vectors are
pending, and its BM25 index.
Nothing read from it can run code: SQLite rows of JSON and raw little-endian arrays, each checked on the way in.

Its table `meta(key, value)` holds JSON values: format, scope, signatures, marks, pending, warned.
Its table `snapshot(name, data)` holds the parts "units", "links" and "bm25", the last as memclaw.index._bm25 writes it.
It may hold "contexts", BM25's turn contexts (memclaw.index.bm25_context) for the state saved with them.
Every save writes or deletes them, and they name a digest of the rest of the file: a cold load need not build them.
Its table `log(seq, part, n, data)` holds what changed since each part's snapshot, in order, `n` rows per entry.
The "units" log holds rows appended to one memory file and the files' order after it.
The "links" log holds session links set or dropped; the "bm25" log, documents removed and added with their tokens.
Adding one fact inserts a row or two instead of rewriting the whole state.
A part is folded into its snapshot when its log holds more than `compact_after(n)` rows, or when a sync rewrites it.
Every save is one SQLite transaction, so a reader or a crash sees the state before it or after it.
The sync lock (memclaw.index.layout) keeps writers apart.
A file that is not a database of this layout is damage: DerivedIndexError, and the caller rebuilds the scope.
A folder or other non-file at the path is not memclaw's to replace: DerivedIndexError with the fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memclaw.errors import DerivedIndexError, MemclawError
from memclaw.index._bm25 import InvertedBM25
from memclaw.index.unittable import UnitTable, rows_from_json, table_from_bytes, table_json_rows, table_to_bytes
from memclaw.markdown.incremental import FileMark
from memclaw.markdown.units import OWNER_SCOPE
from memclaw.util.safepath import read_regular


@dataclass
class ScopeState:
    """What the index holds for one scope: the units, the file signatures they were parsed from, and per file
    the mark an append-only parse resumes from (memclaw.markdown.incremental)."""

    scope: str
    signatures: dict[str, tuple | None]
    units: UnitTable
    links: dict[str, list[str]] = field(default_factory=dict)
    marks: dict[str, FileMark] = field(default_factory=dict)
    # unit ids without vectors yet (the provider was down)
    pending: set[str] = field(default_factory=set)
    # per file, the keys of the parse notes already said as warnings (memclaw.index.sync: each is said once)
    warned: dict[str, list[str]] = field(default_factory=dict)

    @property
    def hashes(self) -> dict[str, str]:
        return self.units.hashes()


# ---- the SQLite file: schema, connections, and the checks that tell it from damage

HEADER = b"SQLite format 3\x00"
SCHEMA = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE snapshot(name TEXT PRIMARY KEY, data BLOB NOT NULL)",
    "CREATE TABLE log(seq INTEGER PRIMARY KEY, part TEXT NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL)",
)
OBJECTS = {("table", "meta"), ("table", "snapshot"), ("table", "log"), ("index", "sqlite_autoindex_meta_1"),
            ("index", "sqlite_autoindex_snapshot_1")}  # fmt: skip
BUSY_TIMEOUT_S = 60.0


def check_path(path: Path) -> bool:
    """Whether a state file is there (False: none yet); DerivedIndexError if something else stands there."""
    from memclaw.index.layout import regular_file

    return regular_file(path, path.parent.parent.parent)


def read_header(path: Path) -> bytes:
    """The file's first bytes, as many as SQLite's header."""
    return read_regular(path, len(HEADER), follow=True)


def connect(path: Path, *, create: bool) -> sqlite3.Connection:
    """A connection in autocommit mode (callers open their own transactions); `create` makes the file if absent."""
    # (urllib.request.pathname2url on POSIX, without importing urllib.request: http, ssl, email, ~15 ms of a start)
    uri = f"file:{quote(str(path))}?mode={'rwc' if create else 'rw'}"
    con = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    try:
        # nothing in the file's schema may call a function
        con.execute("PRAGMA trusted_schema = OFF")
        con.execute("PRAGMA synchronous = FULL")
    except BaseException:
        con.close()
        raise
    return con


def schema_ok(con: sqlite3.Connection) -> bool:
    """Whether the file holds exactly this layout's tables and indexes."""
    return set(con.execute("SELECT type, name FROM sqlite_master")) == OBJECTS


def damaged(path: Path, why: str) -> DerivedIndexError:
    """The error for a state file that is not of this layout (the caller rebuilds the scope)."""
    return DerivedIndexError(f"index state {path} is corrupted ({why})")


def permission_denied(e: sqlite3.DatabaseError) -> bool:
    """Whether SQLite's error means the file or its folder may not be read or written."""
    text = str(e).lower()
    return "readonly" in text or "permission" in text or "unable to open" in text


def write_error(path: Path, e: sqlite3.DatabaseError) -> DerivedIndexError:
    """The error for a failed save, naming the fix."""
    if permission_denied(e):
        return DerivedIndexError(f"cannot write the index state {path} ({e}): fix the permissions of {path.parent}")
    return DerivedIndexError(f"cannot write the index state {path} ({type(e).__name__}: {e}); check the disk")


@contextlib.contextmanager
def writable(path: Path, *, page_size: int = 16384) -> Iterator[sqlite3.Connection]:
    """A connection to a state file of this layout: created if absent (with pages of `page_size` bytes); a damaged
    file (not SQLite, or another schema) is replaced, since it is memclaw's own derived data."""
    exists = check_path(path)
    if not exists:
        # check_path said every parent is a folder or absent
        path.parent.mkdir(parents=True, exist_ok=True)
    elif not _usable(path):
        _discard(path)
    con = connect(path, create=True)
    try:
        if not schema_ok(con):
            con.execute(f"PRAGMA page_size = {int(page_size)}")
            con.execute("BEGIN IMMEDIATE")
            for sql in SCHEMA:
                con.execute(sql)
            con.execute("COMMIT")
        yield con
    finally:
        con.close()


def _usable(path: Path) -> bool:
    try:
        if read_header(path) != HEADER:
            return False
        with contextlib.closing(connect(path, create=False)) as con:
            return schema_ok(con)
    except sqlite3.DatabaseError as e:
        if permission_denied(e):
            raise write_error(path, e) from e
        return False


def _discard(path: Path) -> None:
    """Remove a damaged state file and its journal (a hot journal would be rolled back into the new file)."""
    for p in (path, path.with_name(path.name + "-journal")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


# ---- loading and saving a scope's state

FORMAT = "memclaw-scope-state-3"
COMPACT_MAX = 500
"""A part's log is folded into its snapshot once it holds more rows than this (or than a quarter of the scope): a
cold load replays ~50 us a row, a fold costs ~0.4 s at 100k memories."""


def compact_after(n_units: int) -> int:
    """How many log rows a part may hold before it is folded into its snapshot."""
    return min(COMPACT_MAX, max(64, n_units // 4))


@dataclass
class Changes:
    """What one sync changed, so that a save can append it to the log. A part left None is written whole."""

    # (source, rows appended to it), in table order
    appended: list[tuple[str, UnitTable]] | None = None
    # the sources in table order after the append
    order: list[str] = field(default_factory=list)
    # session links set (a list) or dropped (None)
    links: dict[str, list[str] | None] | None = None
    bm25_removed: list[str] = field(default_factory=list)
    # (id, tokens); None: write the BM25 index whole
    bm25_added: list[tuple[str, list[str]]] | None = None


@dataclass
class Loaded:
    state: ScopeState
    # None when the BM25 part is damaged (`lexical_error` says how)
    lexical: InvertedBM25 | None
    lexical_error: str | None = None
    # (the digest of the state as loaded, the turn contexts' bytes saved with it), if there are any
    contexts: tuple[str, bytes] | None = None


def file_sig(path: Path) -> tuple | None:
    """Changes whenever a save commits (inode, mtime, size and SQLite's file change counter); None if absent."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError:
        return ("unreadable",)
    try:
        st = os.fstat(fd)
        head = os.pread(fd, 4, 24) if stat.S_ISREG(st.st_mode) else b"not a file"
    except OSError:
        return ("unreadable",)
    finally:
        os.close(fd)
    return (st.st_ino, st.st_mtime_ns, st.st_size, head)


def load(path: Path) -> Loaded | None:
    """The saved state and BM25 index, None if there is none. Raises DerivedIndexError if the file is damaged or of
    another format (the caller rebuilds the scope from the Markdown), PermissionError as it is."""
    if not check_path(path):
        return None
    try:
        head = read_header(path)
    except PermissionError:
        raise
    except OSError as e:
        raise DerivedIndexError(f"cannot read index state {path}: {e.strerror}") from e
    if head != HEADER:
        raise damaged(path, "not a memclaw index state")
    try:
        with contextlib.closing(connect(path, create=False)) as con:
            # one read transaction: a consistent snapshot while a writer waits
            con.execute("BEGIN")
            if not schema_ok(con):
                raise damaged(path, "unexpected tables")
            meta = {k: v for k, v in con.execute("SELECT key, value FROM meta")}
            snaps = dict(con.execute("SELECT name, data FROM snapshot"))
            log = con.execute("SELECT part, data FROM log ORDER BY seq").fetchall()
            contexts = (_digest(con), snaps.pop(CONTEXTS)) if CONTEXTS in snaps else None
            con.execute("COMMIT")
    except sqlite3.DatabaseError as e:
        if permission_denied(e):
            raise PermissionError(13, "permission denied", str(path)) from e
        raise damaged(path, f"{type(e).__name__}: {e}") from e
    if meta.get("format") != json.dumps(FORMAT):
        raise DerivedIndexError(f"index state {path} has another format ({meta.get('format')})")
    try:
        state = _state_from(meta, snaps, log)
    except MemclawError:
        raise
    # anything unexpected in the content is damage, never a traceback
    except Exception as e:
        raise damaged(path, f"{type(e).__name__}: {e}") from e
    try:
        lexical = _lexical_from(snaps, log, path)
    except Exception as e:
        return Loaded(state, None, str(e))
    return Loaded(state, lexical, contexts=contexts)


CONTEXTS = "contexts"


def _digest(con: sqlite3.Connection) -> str:
    """What identifies the saved state: its metadata, its parts' sizes and its log, read in the caller's transaction.
    A save by a memclaw that knows no turn contexts changes it, so it never meets contexts of another state."""
    h = hashlib.sha1()
    parts = ("SELECT key, value FROM meta ORDER BY key",
             f"SELECT name, length(data) FROM snapshot WHERE name != '{CONTEXTS}' ORDER BY name",
             "SELECT count(*), COALESCE(MAX(seq), 0), COALESCE(SUM(length(data)), 0) FROM log")  # fmt: skip
    for row in (row for sql in parts for row in con.execute(sql)):
        h.update(json.dumps(list(row)).encode("ascii"))
    return h.hexdigest()


def _json(raw: str | bytes, kind: type) -> Any:
    v = json.loads(raw)
    if not isinstance(v, kind):
        raise ValueError(f"expected a JSON {kind.__name__}")
    return v


def _state_from(meta: dict[str, str], snaps: dict[str, bytes], log: list[tuple[str, bytes]]) -> ScopeState:
    scope = _json(meta["scope"], str)
    signatures: dict[str, tuple | None] = {}
    for src, sig in _json(meta["signatures"], dict).items():
        if sig is not None and not (isinstance(sig, list) and all(type(x) is int for x in sig)):
            raise ValueError("bad file signature")
        signatures[src] = tuple(sig) if sig is not None else None
    marks = {src: FileMark.from_json(m) for src, m in _json(meta["marks"], dict).items()}
    pending = _json(meta["pending"], list)
    if not all(isinstance(i, str) for i in pending):
        raise ValueError("bad pending ids")
    warned = _json(meta.get("warned", "{}"), dict)
    if not all(isinstance(keys, list) and all(isinstance(k, str) for k in keys) for keys in warned.values()):
        raise ValueError("bad warned notes")
    table = table_from_bytes(snaps["units"], check_ids=False)
    links = _links(_json(snaps["links"], dict))
    appended: dict[str, list[tuple]] = {}
    order: list[str] | None = None
    for part, data in log:
        if part == "units":
            entry = _json(data, dict)
            src, order = entry["source"], entry["order"]
            if not isinstance(src, str) or not isinstance(order, list) or src not in order:
                raise ValueError("bad log entry")
            appended.setdefault(src, []).extend(rows_from_json(entry["rows"]))
        elif part == "links":
            for uid, targets in _json(data, dict).items():
                if targets is None:
                    links.pop(uid, None)
                else:
                    links.update(_links({uid: targets}))
        elif part != "bm25":
            raise ValueError(f"unknown log part {part!r}")
    if appended:
        table = _with_appended(table, appended, order or [])
    return ScopeState(scope, signatures, table, links, marks, set(pending), warned)


def _links(raw: dict[str, Any]) -> dict[str, list[str]]:
    for uid, targets in raw.items():
        if not (isinstance(targets, list) and all(isinstance(t, str) for t in targets)):
            raise ValueError(f"bad session links of {uid}")
    return raw


def _with_appended(table: UnitTable, appended: dict[str, list[tuple]], order: list[str]) -> UnitTable:
    """The snapshot's rows with the logged appends (row tuples), each file's rows together, files in `order`."""
    if not all(isinstance(s, str) for s in order) or len(set(order)) != len(order):
        raise ValueError("bad source order")
    sources = list(dict.fromkeys([*order, *table.sources()]))
    parts: list[UnitTable] = []
    for src in sources:
        seg = table.segment(src)
        if seg is None:
            raise ValueError(f"the rows of {src} are not together")
        rows = appended.pop(src, [])
        parts += [seg, UnitTable.from_row_tuples(rows, check_ids=False)] if rows else [seg]
    if appended:
        raise ValueError("rows appended to an unknown file")
    return UnitTable.concat([p for p in parts if len(p)] or [UnitTable.from_units([])])


def _lexical_from(snaps: dict[str, bytes], log: list[tuple[str, bytes]], path: Path) -> InvertedBM25:
    where = f"{path} (BM25)"
    lexical = InvertedBM25.from_bytes(snaps.get("bm25", b""), where)
    for part, data in log:
        if part != "bm25":
            continue
        entry = _json(data, dict)
        removed, added = entry["removed"], entry["added"]
        if not (isinstance(removed, list) and isinstance(added, list)):
            raise damaged(path, "bad BM25 log entry")
        for uid in removed:
            lexical.remove(str(uid))
        for item in added:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], list) and all(isinstance(t, str) for t in item[1])):  # fmt: skip
                raise damaged(path, "bad BM25 log entry")
            lexical.add(item[0], item[1])
    return lexical


def read_scope_name(path: Path) -> str | None:
    """The scope a state file belongs to (its metadata alone), None if it cannot be read."""
    try:
        if not check_path(path):
            return None
        with contextlib.closing(connect(path, create=False)) as con:
            row = con.execute("SELECT value FROM meta WHERE key = 'scope'").fetchone()
        return _json(row[0], str) if row else None
    except (MemclawError, OSError, sqlite3.Error, ValueError):
        return None


def page_size(scope: str) -> int:
    """The page size of a new state file: 16 KiB for the owner's, 4 KiB for an outsider's.

    The owner's big blobs read 30 % faster than with 4 KiB pages.
    An outsider's file holds one page per table and index: 24 KiB for a few facts, not 96.
    """
    return 16384 if scope == OWNER_SCOPE else 4096


def save(
    path: Path,
    state: ScopeState,
    lexical_bytes: Callable[[], bytes],
    changes: Changes | None = None,
    contexts: Callable[[str], bytes | None] | None = None,
) -> None:
    """Write the state in one transaction: appended to the log when `changes` says what changed (and the log is
    short enough), else whole. `lexical_bytes()` gives the whole BM25 index when it is written whole.
    `contexts(digest)` gives the turn contexts of the state as saved, for that digest, or None for none."""
    meta = {
        "format": FORMAT,
        "scope": state.scope,
        "signatures": {src: list(sig) if sig is not None else None for src, sig in state.signatures.items()},
        "marks": {src: m.to_json() for src, m in state.marks.items()},
        "pending": sorted(state.pending),
        "warned": state.warned,
    }
    try:
        with writable(path, page_size=page_size(state.scope)) as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                con.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                [(k, json.dumps(v, ensure_ascii=False)) for k, v in meta.items()])  # fmt: skip
                limit = compact_after(len(state.units))
                _save_units(con, state, changes, limit)
                _save_bm25(con, lexical_bytes, changes, limit)
                con.execute("DELETE FROM snapshot WHERE name = ?", (CONTEXTS,))
                data = contexts(_digest(con)) if contexts is not None else None
                if data is not None:
                    _snapshot(con, CONTEXTS, data)
                con.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    con.execute("ROLLBACK")
                raise
    except sqlite3.DatabaseError as e:
        raise write_error(path, e) from e


def _save_units(con: sqlite3.Connection, state: ScopeState, changes: Changes | None, limit: int) -> None:
    appended = changes.appended if changes is not None else None
    if appended is not None:
        n_log = _log_rows(con, ("units", "links"))
        n_new = sum(len(t) for _, t in appended) + len(changes.links or {})
        if n_log + n_new <= limit:
            for src, rows in appended:
                _log(con, "units", len(rows), {"source": src, "order": changes.order, "rows": table_json_rows(rows)})
            if changes.links:
                _log(con, "links", len(changes.links), changes.links)
            return
    con.execute("DELETE FROM log WHERE part IN ('units', 'links')")
    _snapshot(con, "units", table_to_bytes(state.units))
    _snapshot(con, "links", _dumps(state.links))


def _save_bm25(
    con: sqlite3.Connection, lexical_bytes: Callable[[], bytes], changes: Changes | None, limit: int
) -> None:
    added = changes.bm25_added if changes is not None else None
    if added is not None:
        if not added and not changes.bm25_removed:
            return
        if _log_rows(con, ("bm25",)) + len(added) + len(changes.bm25_removed) <= limit:
            entry = {"removed": changes.bm25_removed, "added": [[i, t] for i, t in added]}
            _log(con, "bm25", len(added) + len(changes.bm25_removed), entry)
            return
    con.execute("DELETE FROM log WHERE part = 'bm25'")
    _snapshot(con, "bm25", lexical_bytes())


def _log_rows(con: sqlite3.Connection, parts: tuple[str, ...]) -> int:
    marks = ",".join("?" * len(parts))
    return int(con.execute(f"SELECT COALESCE(SUM(n), 0) FROM log WHERE part IN ({marks})", parts).fetchone()[0])


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _log(con: sqlite3.Connection, part: str, n: int, entry: Any) -> None:
    con.execute("INSERT INTO log(part, n, data) VALUES (?, ?, ?)", (part, n, _dumps(entry)))


def _snapshot(con: sqlite3.Connection, name: str, data: bytes) -> None:
    con.execute("INSERT OR REPLACE INTO snapshot VALUES (?, ?)", (name, data))
