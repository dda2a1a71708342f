"""Edits of HISTORY.md: `append_history` (a true append: earlier bytes are never rewritten, blank-line separated,
fsynced) and `delete_history_entries` (when the user forgets an entry: a locked, verified, atomic rewrite like an
edit of MEMORY.md)."""

from __future__ import annotations

import os
from collections import Counter
from datetime import datetime
from pathlib import Path

from memclaw.errors import MemoryFileError
from memclaw.markdown.files import ENCODING, ERRORS, atomic_write, check_text, encode_text, locked, os_reason, read_text
from memclaw.markdown.formats import clean_text, format_history_entry, parse_history, scan_history
from memclaw.markdown.units import MemoryUnit
from memclaw.util.files import fsync_dir
from memclaw.util.safepath import is_symlink_error, open_nofollow, refusal


def _norm(t: str) -> str:
    return " ".join(t.split())


def delete_history_entries(path: Path, scope: str, source: str, ids: list[str]) -> list[MemoryUnit]:
    """Remove the entries with these ids (from parse_history of the file as it is now) from HISTORY.md, with the
    blank line that separated each from the next: one locked, verified, atomic rewrite; every other byte is kept.
    An unknown id raises MemoryFileError before anything is written. Returns the removed entries."""
    path = Path(path)
    with locked(path):
        text = read_text(path) or ""
        blocks = {b.unit.id: b for b in scan_history(text, scope=scope, source=source)}
        unknown = [i for i in ids if i not in blocks]
        if unknown:
            raise MemoryFileError(f"unknown history id {unknown[0]!r} in {path}: use an id from the current entries")
        lines = text.split("\n")
        drop: set[int] = set()
        for i in dict.fromkeys(ids):
            b = blocks[i]
            drop.update(range(b.start, b.end + 1))
            nxt = b.end + 1
            while nxt < len(lines) - 1 and not lines[nxt].strip():  # the separator before the next entry
                drop.add(nxt)
                nxt += 1
        new_text = "\n".join(x for n, x in enumerate(lines) if n not in drop)
        gone = [blocks[i].unit for i in dict.fromkeys(ids)]
        want = Counter((_norm(u.text), u.timestamp) for u in parse_history(text, scope=scope, source=source))
        want.subtract(Counter((_norm(u.text), u.timestamp) for u in gone))
        got = Counter((_norm(u.text), u.timestamp) for u in parse_history(new_text, scope=scope, source=source))
        if got != +want:
            raise MemoryFileError(
                f"could not edit {path} safely (its text is unusual around the forgotten entries); nothing was "
                "changed: remove them by hand"
            )
        atomic_write(path, encode_text(new_text))
    return gone


def append_history(path: Path, ts: datetime, text: str) -> None:
    """Append one entry `[YYYY-MM-DD HH:MM] text` to HISTORY.md: a true append (earlier bytes are never
    rewritten), blank-line separated, fsynced. A line of `text` that would read as a stamp is escaped."""
    path = Path(path)
    body = clean_text(text).strip()
    if not body:
        raise MemoryFileError("empty history entry: nothing to write")
    entry = format_history_entry(ts, body)
    with locked(path):
        try:
            created = not os.path.lexists(path)
            fd = open_nofollow(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as e:
            if is_symlink_error(e, path):
                raise MemoryFileError(refusal(path)) from e
            raise MemoryFileError(f"cannot append to {path}: {os_reason(e)}; fix its permissions") from e
        try:
            size = os.fstat(fd).st_size
            check_text(path, os.pread(fd, size, 0) if size else b"")
            head = os.pread(fd, min(size, 4096), 0)
            tail = os.pread(fd, min(size, 8), max(0, size - 8)) if size else b""
            first_end = head.find(b"\n")
            nl = "\r\n" if first_end > 0 and head[first_end - 1 : first_end] == b"\r" else "\n"
            t = tail.replace(b"\r", b"")
            if not size or (t.endswith(b"\n\n") or t == b"\n"):
                sep = ""
            elif t.endswith(b"\n"):
                sep = nl
            else:
                sep = nl + nl
            data = (sep + entry.replace("\n", nl) + nl).encode(ENCODING, ERRORS)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        except OSError as e:
            raise MemoryFileError(f"cannot append to {path}: {os_reason(e)}; check disk space and permissions") from e
        finally:
            os.close(fd)
    if created:
        fsync_dir(path.parent)
