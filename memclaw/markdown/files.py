"""Memory Markdown files on disk: read them into units, and edit them safely.

* Reading decodes with errors="surrogateescape": a stray byte that is not UTF-8 (say a Latin-1 "é" in a
  hand-edited file) survives a rewrite unchanged, while the units handed to the index carry valid text
  (U+FFFD in its place).
* A file that is not text is refused (MemoryFileError, exit 3), never indexed and never written to: one holding
  a NUL byte (binary files and UTF-16 do; a text editor never writes one), or one in which more than 1 byte in
  MAX_UNDECODABLE_SHARE is not UTF-8 (mojibake: a binary without NULs, or text in another encoding). See
  `check_text`.
* Every edit of MEMORY.md is read-modify-write under an exclusive lock (fcntl.flock on a hidden sidecar
  `.MEMORY.md.lock`) and lands with one atomic replace (temp file in the same folder, fsync, os.replace,
  fsync of the folder): a crash leaves the old file or the new one, never half of one.
* An op list is all-or-nothing: it is checked (unknown ids, empty texts) and the result re-parsed and verified
  before anything is written.
* HISTORY.md is only ever appended to (with fsync); earlier entries are never rewritten, except when the user
  forgets one (`delete_history_entries`: a locked, verified, atomic rewrite like an edit of MEMORY.md).
* A fact added without a section goes under DEFAULT_SECTION ("# Notes", created at the end of the file the
  first time), never under whatever heading happens to be last. A fact for a section that is the file's last
  one is appended at the very end (so an append to a synced file needs no full parse, see `append_fact`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from memclaw.errors import MemoryFileError
from memclaw.markdown.formats import (
    MAX_HEADING_LEVEL,
    SECTION_SEP,
    clean_text,
    format_history_entry,
    normalize_section,
    parse_history,
    scan_history,
    section_pieces,
)
from memclaw.markdown.memory_md import FactBlock, MemoryDoc, parse_memory, scan_memory
from memclaw.markdown.syntax import bullet_first_line, heading_line, is_thematic_break, joins_item_above, underlines
from memclaw.markdown.units import MemoryUnit
from memclaw.util.files import fsync_dir, replace_atomically
from memclaw.util.safepath import is_symlink_error, open_nofollow, read_nofollow, refusal

if TYPE_CHECKING:
    from memclaw.markdown.incremental import FileMark

try:  # POSIX only; elsewhere writes are still atomic, just not locked across processes
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

ENCODING = "utf-8"
ERRORS = "surrogateescape"
DEFAULT_SECTION = "Notes"  # where a fact added without a section goes
MAX_UNDECODABLE_SHARE = 8  # a memory file with more than 1 byte in 8 that is not UTF-8 is not text


# ----- types ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FactOp:
    """One edit of MEMORY.md. `id` (update/delete) is a unit id from parse_memory of the current file."""

    op: Literal["add", "update", "delete"]
    id: str | None = None
    text: str | None = None
    section: str | None = None  # add: the heading path to file the fact under (default DEFAULT_SECTION)


@dataclass
class FactOpsResult:
    added: list[MemoryUnit] = field(default_factory=list)
    updated: dict[str, MemoryUnit] = field(default_factory=dict)  # old id -> the fact as it now reads
    deleted: list[str] = field(default_factory=list)
    facts: list[MemoryUnit] = field(default_factory=list)  # every fact of the file after the edit

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.deleted)


# ----- low-level file helpers ----------------------------------------------------------------------------
def _why(e: OSError) -> str:
    return e.strerror or e.__class__.__name__


def _fix(e: OSError) -> str:
    """What to do about an OSError on a memory file that should be a readable regular file."""
    if isinstance(e, IsADirectoryError):
        return "it is a folder: move it out of the way"
    if e.errno == errno.ELOOP:
        return "it is a symlink loop: fix or remove the link"
    if isinstance(e, NotADirectoryError):
        return "a folder on its path is a file: move that file out of the way"
    return "fix its permissions"


def check_text(path: Path, data: bytes) -> None:
    """Raise MemoryFileError (naming the file and the fix) if a memory file's bytes are not text: a NUL byte, or
    more than 1 byte in MAX_UNDECODABLE_SHARE that is not UTF-8. A few stray non-UTF-8 bytes are kept."""
    if b"\x00" in data:
        why = "it is UTF-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "it holds NUL bytes, as binary files do"
    else:
        try:
            data.decode(ENCODING)
            return
        except UnicodeDecodeError:
            pass
        bad = len(data) - len(data.decode(ENCODING, "ignore").encode(ENCODING))
        if bad * MAX_UNDECODABLE_SHARE <= len(data):
            return
        why = f"{bad:,} of its {len(data):,} bytes are not UTF-8"
    raise MemoryFileError(
        f"memory file {path} is not UTF-8 text ({why}); memclaw neither indexes nor changes it: re-save it as "
        "UTF-8, or move it out of the way if it is not your memory"
    )


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None if it does not exist. MemoryFileError if it cannot be read or is not text."""
    try:
        data = read_nofollow(Path(path))
    except FileNotFoundError:
        return None
    except OSError as e:
        if is_symlink_error(e, path):
            raise MemoryFileError(refusal(Path(path))) from e
        raise MemoryFileError(f"cannot read memory file {path}: {_why(e)}; {_fix(e)}") from e
    check_text(path, data)
    return data


def read_text(path: Path) -> str | None:
    """The file's text (surrogate-escaped where not UTF-8), or None if it does not exist."""
    data = read_bytes(path)
    return None if data is None else data.decode(ENCODING, ERRORS)


def file_signature(path: Path) -> tuple[int, int, int] | None:
    """(mtime_ns, size, inode): changes whenever the file is rewritten or appended to; None if missing."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise MemoryFileError(f"cannot read memory file {path}: {_why(e)}; {_fix(e)}") from e
    if stat.S_ISLNK(st.st_mode):
        raise MemoryFileError(refusal(Path(path)))
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def lock_path(path: Path) -> Path:
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Exclusive lock for edits of `path` (a sidecar lock file; works across threads and processes)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_nofollow(lock_path(path), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        if is_symlink_error(e, lock_path(path)):
            raise MemoryFileError(refusal(lock_path(path))) from e
        raise MemoryFileError(f"cannot lock memory file {path}: {_why(e)}; check the folder's permissions") from e
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` atomically (see memclaw.util.files), as a MemoryFileError naming the fix."""
    path = Path(path)
    try:
        st = os.lstat(path)
        mode = stat.S_IMODE(st.st_mode)
    except FileNotFoundError:
        mode = 0o644
    except OSError as e:
        raise MemoryFileError(f"cannot write memory file {path}: {_why(e)}; fix its permissions") from e
    else:
        if stat.S_ISLNK(st.st_mode):
            raise MemoryFileError(refusal(path))
    try:
        replace_atomically(path, data, mode=mode)
    except OSError as e:
        if is_symlink_error(e, path):
            raise MemoryFileError(refusal(path)) from e
        raise MemoryFileError(f"cannot write memory file {path}: {_why(e)}; check disk space and permissions") from e


# ----- reading -------------------------------------------------------------------------------------------
def read_units(path: Path, *, scope: str, kind: str, source: str) -> list[MemoryUnit]:
    """Units of one memory file (`kind` "fact" for MEMORY.md, "history" for HISTORY.md); [] if missing. A unit over
    the size limit is cut to it, with a warning (memclaw.markdown.unit_size)."""
    from memclaw.markdown.unit_size import cap_units

    if kind not in ("fact", "history"):
        raise MemoryFileError(f"unknown memory kind {kind!r}: use 'fact' or 'history'")
    text = read_text(path)
    if text is None:
        return []
    if kind == "fact":
        return cap_units(parse_memory(text, scope=scope, source=source))
    return cap_units(parse_history(text, scope=scope, source=source))


# ----- facts ---------------------------------------------------------------------------------------------
def normalize_fact_text(text: str) -> str:
    """A fact is one line of plain text; an HTML comment opener is defused so the fact cannot vanish."""
    t = " ".join(clean_text(text).split())
    while "<!--" in t:
        t = t.replace("<!--", "<\\!--")
    return t


def _norm(t: str) -> str:
    return " ".join(t.split())


def _comment_residue(raw: list[str], in_comment: bool) -> list[str]:
    """Per line, only the HTML comments of `raw` ("" where none), so that removing the text around them keeps
    the comments balanced."""
    out: list[str] = []
    for line in raw:
        cr = line[len(line.rstrip("\r")) :]
        body = line.rstrip("\r")
        keep: list[str] = []
        pos = 0
        if in_comment:
            end = body.find("-->")
            if end < 0:
                keep.append(body)
                pos = len(body)
            else:
                keep.append(body[: end + 3])
                pos = end + 3
                in_comment = False
        while pos < len(body):
            start = body.find("<!--", pos)
            if start < 0:
                break
            end = body.find("-->", start + 4)
            if end < 0:
                keep.append(body[start:])
                in_comment = True
                break
            keep.append(body[start : end + 3])
            pos = end + 3
        kept = " ".join(k.strip() for k in keep if k.strip())
        out.append(kept + cr if kept else "")
    return out


@dataclass
class _Plan:
    new_text: str
    expect: Counter
    adds: list[tuple[str, str]]
    updates: list[tuple[str, str, str | None]]  # (old id, new text, section)
    deletes: list[str]
    old_ids: set[str]


def _line_end(line: str) -> str:
    return line[len(line.rstrip("\r")) :]


def _plan(text: str, path: Path, scope: str, source: str, ops: list[FactOp]) -> _Plan:
    doc = scan_memory(text, scope=scope, source=source)
    by_id = {b.unit.id: b for b in doc.facts}
    lines = text.split("\n")
    nl_r = "\r" if lines and lines[0].endswith("\r") else ""
    touched: set[str] = set()
    replace: dict[int, tuple[int, list[str]]] = {}
    adds: list[tuple[str, str]] = []
    updates: list[tuple[str, str, str | None]] = []
    deletes: list[str] = []
    for n, op in enumerate(ops, 1):
        kind = getattr(op, "op", None)
        if kind not in ("add", "update", "delete"):
            raise MemoryFileError(f"op {n}: unknown fact op {kind!r}: use add, update or delete")
        new_text = None
        if kind in ("add", "update"):
            new_text = normalize_fact_text(op.text or "")
            if not new_text:
                raise MemoryFileError(f"op {n} ({kind}): empty fact text: say what to remember")
        if kind == "add":
            adds.append((new_text or "", normalize_section(op.section) or DEFAULT_SECTION))
            continue
        if not op.id or op.id not in by_id:
            raise MemoryFileError(
                f"op {n} ({kind}): unknown fact id {op.id!r} in {path}: use an id from the current facts "
                "(they change when the file is edited)"
            )
        if op.id in touched:
            raise MemoryFileError(f"op {n} ({kind}): fact {op.id} is changed twice in one edit; merge the ops")
        touched.add(op.id)
        b = by_id[op.id]
        residue = [] if b.style == "code" else _comment_residue(lines[b.start : b.end + 1], b.comment_before)
        if kind == "delete":
            deletes.append(op.id)
            kept = [x for x in residue if x]
            around = lines[b.start - 1] if b.start else "", lines[b.end + 1] if b.end + 1 < len(lines) else ""
            if not kept and underlines(*around):
                kept = [nl_r]  # a blank line keeps a paragraph and a break that met from making a heading
            replace[b.start] = (b.end, kept)
            continue
        assert new_text is not None
        updates.append((op.id, new_text, b.unit.section))
        replace[b.start] = (b.end, _updated_lines(lines[b.start], b, new_text, residue))

    insert: dict[int, list[str]] = {}
    if adds:
        _place_adds(doc, lines, adds, insert, path)
    # Build the new text.
    out: list[str] = []
    i = 0
    n_lines = len(lines)
    while i < n_lines:
        if i in insert:
            out.extend(x + nl_r for x in insert.pop(i))
        if i in replace:
            end, repl = replace[i]
            out.extend(repl)
            i = end + 1
            continue
        out.append(lines[i])
        i += 1
    for pos in sorted(insert):  # at the very end (after a final line without newline)
        out.extend(x + nl_r for x in insert[pos])
    new_text = "\n".join(out)

    expect: Counter = Counter((_norm(b.unit.text), b.unit.section) for b in doc.facts if b.unit.id not in touched)
    for _old, t, sec in updates:
        expect[(_norm(t), sec)] += 1
    for t, sec in adds:
        expect[(_norm(t), sec)] += 1
    return _Plan(new_text, expect, adds, updates, deletes, set(by_id))


def _updated_lines(raw_first: str, b: FactBlock, new_text: str, residue: list[str]) -> list[str]:
    cr = _line_end(raw_first)
    bom = "\ufeff" if b.start == 0 and raw_first.startswith("\ufeff") else ""
    if b.style == "bullet":
        first = b.prefix + new_text
        if is_thematic_break(first):  # e.g. "* " + "* *"
            first = b.prefix[: len(b.prefix) - len(b.prefix.lstrip())] + bullet_first_line(new_text)
    else:
        first = b.prefix + bullet_first_line(new_text)
    rest = [x for x in residue[1:] if x]
    head = residue[0].rstrip("\r") if residue else ""
    if head and b.comment_before:  # the line began inside a comment: keep its end before the fact
        return [head + cr, bom + first + cr, *rest]
    return [bom + first + (" " + head if head else "") + cr, *rest]


def _place_adds(
    doc: MemoryDoc, lines: list[str], adds: list[tuple[str, str]], insert: dict[int, list[str]], path: Path
) -> None:
    """Decide where each added fact goes: under its section (creating the headings)."""
    # The end of the file: make sure the last line ends with a newline.
    if lines[-1] != "":
        lines[-1] += "\r" if lines[0].endswith("\r") else ""
        lines.append("")
    eof = len(lines) - 1
    groups: dict[str, list[str]] = {}
    for t, sec in adds:
        groups.setdefault(sec, []).append(t)
    for sec, texts in groups.items():
        bullets = [bullet_first_line(t) for t in texts]
        pos, new = _section_slot(doc, lines, sec, bullets, eof)
        if pos == eof and (doc.open_comment or doc.open_fence):
            what = "an unclosed HTML comment (<!--)" if doc.open_comment else "an unclosed code fence (```)"
            raise MemoryFileError(f"{path} ends inside {what}: close it, then add the fact again")
        insert.setdefault(pos, []).extend(new)


def _section_slot(
    doc: MemoryDoc, lines: list[str], section: str, bullets: list[str], eof: int
) -> tuple[int, list[str]]:
    if _eof_section(doc) == section and not (doc.open_comment or doc.open_fence):
        return eof, bullets  # the file ends in this section: at the very end (what append_fact's fast path does)
    in_section = [b for b in doc.facts if b.unit.section == section]
    if in_section:
        pos = max(b.end for b in in_section) + 1
        return pos, bullets + ([""] if joins_item_above(lines[pos]) else [])
    heads = [h for h in doc.headings if h.path == section]
    if heads:
        pos = heads[-1].index + 1
        return pos, bullets + ([""] if joins_item_above(lines[pos]) else [])
    pieces = section_pieces(section)
    for j in range(len(pieces) - 1, 0, -1):
        prefix = SECTION_SEP.join(pieces[:j])
        found = [h for h in doc.headings if h.path == prefix]
        if not found:
            continue
        h = found[-1]
        if h.level >= MAX_HEADING_LEVEL:
            break
        pos = eof
        for later in doc.headings:
            if later.index > h.index and later.level <= h.level:
                pos = later.start
                break
        new = _heading_block(pieces[j:], h.level + 1, bullets)
        blank_before = pos > 0 and lines[pos - 1].strip() != ""
        return pos, ([""] if blank_before else []) + new + ([""] if pos != eof else [])
    blank_before = eof > 0 and lines[eof - 1].strip() != ""
    return eof, ([""] if blank_before else []) + _heading_block(pieces, 1, bullets)


def _eof_section(doc: MemoryDoc) -> str | None:
    """The section a line appended at the end of the file falls under (as FileMark.section)."""
    return SECTION_SEP.join(t for _, t in doc.stack) or None


def _heading_block(pieces: list[str], level: int, bullets: list[str]) -> list[str]:
    room = MAX_HEADING_LEVEL - level + 1
    if len(pieces) > room:
        pieces = pieces[: room - 1] + [SECTION_SEP.join(pieces[room - 1 :])]
    out: list[str] = []
    for k, p in enumerate(pieces):
        out.append(heading_line(level + k, p))
    return [*out, "", *bullets]


def _verify(plan: _Plan, path: Path, scope: str, source: str) -> list[MemoryUnit]:
    units = parse_memory(plan.new_text, scope=scope, source=source)
    got = Counter((_norm(u.text), u.section) for u in units)
    if got != plan.expect:
        raise MemoryFileError(
            f"could not edit {path} safely (its Markdown is unusual around the changed facts); nothing was "
            "changed: tidy the file by hand"
        )
    return units


def _encode(text: str) -> bytes:
    return text.encode(ENCODING, ERRORS)


def apply_fact_ops(path: Path, scope: str, source: str, ops: list[FactOp]) -> FactOpsResult:
    """Apply add/update/delete ops to MEMORY.md in one atomic, locked write; all or nothing.

    Ids are those parse_memory gives for the file as it is now. An unknown id raises MemoryFileError before
    anything is written. Update keeps the item's indentation and marker; delete removes the item's lines
    (and its continuation lines) only; add goes under `section` (created if missing; DEFAULT_SECTION if None)."""
    path = Path(path)
    ops = list(ops)
    if not ops:
        return FactOpsResult(facts=read_units(path, scope=scope, kind="fact", source=source))
    with locked(path):
        text = read_text(path)
        old = text if text is not None else ""
        plan = _plan(old, path, scope, source, ops)
        units = _verify(plan, path, scope, source)
        if plan.new_text != old or text is None:
            atomic_write(path, _encode(plan.new_text))
    fresh = [u for u in units if u.id not in plan.old_ids]
    result = FactOpsResult(deleted=list(plan.deletes), facts=units)

    def take(t: str, sec: str | None) -> MemoryUnit | None:
        for pool in (fresh, units):
            for u in pool:
                if _norm(u.text) == _norm(t) and (sec is None or u.section == sec):
                    if pool is fresh:
                        fresh.remove(u)
                    return u
        return None

    for old_id, t, sec in plan.updates:
        u = take(t, sec)
        if u is not None:
            result.updated[old_id] = u
    for t, sec in plan.adds:
        u = take(t, sec)
        if u is not None:
            result.added.append(u)
    return result


def append_fact(path: Path, text: str, *, section: str | None = None, mark: FileMark | None = None) -> None:
    """Add one fact under `section` (heading path, created if missing; DEFAULT_SECTION if None).

    `mark` (the synced index's FileMark of this file, if any) allows a fast path when the file ends in that
    section (a file that gets its facts through memclaw mostly does: they land under DEFAULT_SECTION): when the
    file is still the marked bytes (or those plus an append, see memclaw.markdown.incremental), the new line is appended
    without parsing the whole file (twice) again; the new line alone is parsed and checked from the state the
    parser has at the end of the file. Any other file takes the full path (apply_fact_ops), which puts a fact
    for the file's last section at the very end too, so both write the same bytes."""
    path = Path(path)
    section = normalize_section(section) or DEFAULT_SECTION
    if mark is not None:
        with locked(path):
            if _append_fast(path, text, section, mark):
                return
    apply_fact_ops(path, "owner", path.name, [FactOp("add", text=text, section=section)])


def _append_fast(path: Path, text: str, section: str, mark: FileMark) -> bool:
    """Append one fact when the file is exactly the marked bytes, ends cleanly (see memclaw.markdown.incremental) and
    ends in `section`; False (nothing written) when that does not hold. The caller holds the lock."""
    from memclaw.markdown.incremental import clean_boundary, parse_appended

    data = read_bytes(path)
    if data is None:
        return False
    if len(data) != mark.size or hashlib.sha256(data).digest() != mark.digest:
        # Appended to since the mark (another writer, not yet synced): the mark of the file as it is now.
        appended = parse_appended(data, mark, kind="fact", scope="owner", source=path.name, known=())
        if appended is None:
            return False
        mark = appended[1]
    if not mark.resumable or mark.section != section:
        return False
    new_text = normalize_fact_text(text)
    if not new_text:
        raise MemoryFileError("op 1 (add): empty fact text: say what to remember")
    first_end = data.find(b"\n")
    nl_r = "\r" if first_end > 0 and data[first_end - 1 : first_end] == b"\r" else ""
    line = bullet_first_line(new_text) + nl_r + "\n"
    if not clean_boundary(line, "fact"):
        return False
    doc = scan_memory(line, scope="owner", source=path.name, line_offset=mark.n_lines - 1, stack=mark.stack)
    got = [(_norm(b.unit.text), b.unit.section) for b in doc.facts]
    if got != [(_norm(new_text), mark.section)]:
        return False  # the full path re-checks and explains
    atomic_write(path, data + _encode(line))
    return True


# ----- history -------------------------------------------------------------------------------------------
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
        atomic_write(path, _encode(new_text))
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
            raise MemoryFileError(f"cannot append to {path}: {_why(e)}; fix its permissions") from e
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
            raise MemoryFileError(f"cannot append to {path}: {_why(e)}; check disk space and permissions") from e
        finally:
            os.close(fd)
    if created:
        fsync_dir(path.parent)
