"""The SQLite file of a scope's state (memclaw.index.scope_state): its schema, connections, and the checks that
tell a file of this layout from damage (replaced) or from something that is not memclaw's (an error naming the
fix).

Tables:
    meta(key, value)          JSON values: format, scope, signatures, marks, pending, warned
    snapshot(name, data)      "units" (the unit table: JSON strings, raw integer arrays), "links" (JSON), "bm25"
                              (memclaw.index.bm25's bytes: a JSON header and raw arrays)
    log(seq, part, n, data)   what changed since the snapshot of each part, in order: "units" (rows appended to one
                              memory file, and the files' order after it), "links" (session links set or dropped),
                              "bm25" (documents removed, and added with their tokens); `n` counts the rows it holds
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from memclaw.errors import IndexError_
from memclaw.util.safepath import read_regular

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
    """Whether a state file is there (False: none yet); IndexError_ if something else stands there."""
    from memclaw.index.paths import regular_file

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
        con.execute("PRAGMA trusted_schema = OFF")  # nothing in the file's schema may call a function
        con.execute("PRAGMA synchronous = FULL")
    except BaseException:
        con.close()
        raise
    return con


def schema_ok(con: sqlite3.Connection) -> bool:
    """Whether the file holds exactly this layout's tables and indexes."""
    return set(con.execute("SELECT type, name FROM sqlite_master")) == OBJECTS


def damaged(path: Path, why: str) -> IndexError_:
    """The error for a state file that is not of this layout (the caller rebuilds the scope)."""
    return IndexError_(f"index state {path} is corrupted ({why})")


def permission_denied(e: sqlite3.DatabaseError) -> bool:
    """Whether SQLite's error means the file or its folder may not be read or written."""
    text = str(e).lower()
    return "readonly" in text or "permission" in text or "unable to open" in text


def write_error(path: Path, e: sqlite3.DatabaseError) -> IndexError_:
    """The error for a failed save, naming the fix."""
    if permission_denied(e):
        return IndexError_(f"cannot write the index state {path} ({e}): fix the permissions of {path.parent}")
    return IndexError_(f"cannot write the index state {path} ({type(e).__name__}: {e}); check the disk")


@contextlib.contextmanager
def writable(path: Path, *, page_size: int = 16384) -> Iterator[sqlite3.Connection]:
    """A connection to a state file of this layout: created if absent (with pages of `page_size` bytes); a damaged
    file (not SQLite, or another schema) is replaced, since it is memclaw's own derived data."""
    exists = check_path(path)
    if not exists:
        path.parent.mkdir(parents=True, exist_ok=True)  # (check_path said every parent is a folder or absent)
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
