"""Edits of HISTORY.md: `append_history` (a true append: earlier bytes are never rewritten, blank-line separated,
fsynced; idempotent by consolidation id) and `delete_history_entries` (when the user forgets an entry: a locked,
verified, atomic rewrite like an edit of MEMORY.md)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path

from memclaw.errors import MemoryFileError
from memclaw.markdown.files import append_block, atomic_write, encode_text, locked, read_text
from memclaw.markdown.formats import clean_text, format_history_entry, parse_history, scan_history
from memclaw.markdown.units import MemoryUnit
from memclaw.util.redact import mask_secrets


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
            # the separator before the next entry
            while nxt < len(lines) - 1 and not lines[nxt].strip():
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


def append_history(path: Path, ts: datetime, text: str, *, cid: str | None = None) -> bool:
    """Append one entry `[YYYY-MM-DD HH:MM] text` (`[... #cid]` for a consolidation's entry) to HISTORY.md: a true
    append (earlier bytes are never rewritten), blank-line separated, fsynced. A line of `text` that would read as a
    stamp is escaped; secrets are masked (memclaw.util.redact.mask_secrets). With `cid`, the same entry already
    there with that id (a write repeated after a crash) is not appended again: False, nothing written."""
    body = mask_secrets(clean_text(text)).strip()
    if not body:
        raise MemoryFileError("empty history entry: nothing to write")
    entry = format_history_entry(ts, body, cid=cid)

    def make(current: str) -> str | None:
        return None if cid is not None and has_entry(current, entry, cid) else entry

    return append_block(Path(path), make)


def has_entry(text: str, entry: str, cid: str) -> bool:
    """Whether HISTORY.md `text` holds `entry` (as `format_history_entry` writes it, stamped with `cid`): an entry
    with that consolidation id and the same words (another with the same id is another consolidation's)."""
    # the common case, without a parse
    if f" #{cid}]" not in text:
        return False
    want = [_norm(u.text) for u in parse_history(entry, scope="", source="")]
    return any(u.extra.get("cid") == cid and [_norm(u.text)] == want for u in parse_history(text, scope="", source=""))
