"""Edits of MEMORY.md, and where an added fact goes.

The function `apply_fact_ops` adds, updates and deletes, all or nothing. Its edit is checked, re-parsed and verified
before one locked atomic write. The function `append_fact` adds one fact, appending without a full parse when the file
is still what the index last saw.

A fact added without a section goes under DEFAULT_SECTION ("# Notes", created at the end of the file the first
time), never under whatever heading happens to be last. A fact for the file's last section is appended at the very
end, so an append to a synced file needs no full parse. Missing headings are created below the nearest existing
parent.

Every fact written is masked for secrets (memclaw.util.redact.mask_secrets), whoever wrote it. The service masks
first and warns (`mask_for_memory`); this is the floor under every writer.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from memclaw.errors import MemoryFileError
from memclaw.markdown._syntax import bullet_first_line, heading_line, is_thematic_break, joins_item_above, underlines
from memclaw.markdown.files import atomic_write, encode_text, locked, read_bytes, read_text, read_units
from memclaw.markdown.formats import MAX_HEADING_LEVEL, SECTION_SEP, clean_text, normalize_section, section_pieces
from memclaw.markdown.memory_md import FactBlock, MemoryDoc, parse_memory, scan_memory
from memclaw.markdown.units import MemoryUnit
from memclaw.util.redact import mask_secrets

if TYPE_CHECKING:
    from memclaw.markdown.incremental import FileMark

# where a fact added without a section goes
DEFAULT_SECTION = "Notes"


@dataclass(frozen=True)
class FactOp:
    """One edit of MEMORY.md. `id` (update/delete) is a unit id from parse_memory of the current file."""

    op: Literal["add", "update", "delete"]
    id: str | None = None
    text: str | None = None
    # add: the heading path to file the fact under (default DEFAULT_SECTION)
    section: str | None = None


@dataclass
class FactOpsResult:
    added: list[MemoryUnit] = field(default_factory=list)
    # old id -> the fact as it now reads
    updated: dict[str, MemoryUnit] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    # every fact of the file after the edit
    facts: list[MemoryUnit] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.deleted)


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
    # old id, new text, section
    updates: list[tuple[str, str, str | None]]
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
            new_text = mask_secrets(normalize_fact_text(op.text or ""))
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
                # a blank line keeps a paragraph and a break that met from making a heading
                kept = [nl_r]
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
    # at the very end (after a final line without newline)
    for pos in sorted(insert):
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
        # e.g. "* " + "* *"
        if is_thematic_break(first):
            first = b.prefix[: len(b.prefix) - len(b.prefix.lstrip())] + bullet_first_line(new_text)
    else:
        first = b.prefix + bullet_first_line(new_text)
    rest = [x for x in residue[1:] if x]
    head = residue[0].rstrip("\r") if residue else ""
    # the line began inside a comment: keep its end before the fact
    if head and b.comment_before:
        return [head + cr, bom + first + cr, *rest]
    return [bom + first + (" " + head if head else "") + cr, *rest]


def _verify(plan: _Plan, path: Path, scope: str, source: str) -> list[MemoryUnit]:
    units = parse_memory(plan.new_text, scope=scope, source=source)
    got = Counter((_norm(u.text), u.section) for u in units)
    if got != plan.expect:
        raise MemoryFileError(
            f"could not edit {path} safely (its Markdown is unusual around the changed facts); nothing was "
            "changed: tidy the file by hand"
        )
    return units


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
        plan, units = _apply_locked(path, scope, source, ops)
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


def _apply_locked(path: Path, scope: str, source: str, ops: list[FactOp]) -> tuple[_Plan, list[MemoryUnit]]:
    """apply_fact_ops' read, plan, check and write, on the file as it is now; the caller holds the lock."""
    text = read_text(path)
    old = text if text is not None else ""
    plan = _plan(old, path, scope, source, ops)
    units = _verify(plan, path, scope, source)
    if plan.new_text != old or text is None:
        atomic_write(path, encode_text(plan.new_text))
    return plan, units


def append_fact(
    path: Path,
    text: str,
    *,
    section: str | None = None,
    mark: FileMark | None = None,
    known: Callable[[], MemoryUnit | None] | None = None,
) -> MemoryUnit | None:
    """Add one fact under `section`, a heading path created if missing (DEFAULT_SECTION if None).

    The callback `known`, if given, is asked under the lock, after every other writer's edit has landed, for the fact
    already in the file that this one would repeat. When it names one, nothing is written and that fact is returned, so
    processes adding the same fact at once write it once. None means the fact was written.

    The synced index's FileMark of this file, `mark`, allows a fast path when the file ends in that section. A file
    that gets its facts through memclaw mostly does. When the file is still the marked bytes, perhaps plus an append
    (memclaw.markdown.incremental), the new line alone is parsed from the parser's end state and appended. Any other
    file takes the full path (`apply_fact_ops`), which also puts a fact for the last section at the very end. Both
    paths write the same bytes."""
    path = Path(path)
    section = normalize_section(section) or DEFAULT_SECTION
    # one hold for the check and the write: no other writer lands between them
    with locked(path):
        found = known() if known is not None else None
        if found is not None:
            return found
        if mark is None or not _append_fast(path, text, section, mark):
            _apply_locked(path, "owner", path.name, [FactOp("add", text=text, section=section)])
    return None


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
    new_text = mask_secrets(normalize_fact_text(text))
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
        # the full path re-checks and explains
        return False
    atomic_write(path, data + encode_text(line))
    return True


# ----- where an added fact goes: under its section, creating missing headings ---------------------------
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
    slots = [
        _section_slot(doc, lines, sec, [bullet_first_line(t) for t in texts], eof) for sec, texts in groups.items()
    ]
    # Blocks meant for one place go in an order that keeps each under its heading: bullets for the section there
    # first, then new headings nested in it, then new top-level headings (which end the sections above them).
    for pos, new, _rank in sorted(slots, key=lambda slot: slot[2]):
        if pos == eof and (doc.open_comment or doc.open_fence):
            what = "an unclosed HTML comment (<!--)" if doc.open_comment else "an unclosed code fence (```)"
            raise MemoryFileError(f"{path} ends inside {what}: close it, then add the fact again")
        insert.setdefault(pos, []).extend(new)


def _section_slot(
    doc: MemoryDoc, lines: list[str], section: str, bullets: list[str], eof: int
) -> tuple[int, list[str], int]:
    """(line to insert at, the lines, rank: 0 bullets alone, 1 under new nested headings, 2 a new top heading)."""
    if eof_section(doc) == section and not (doc.open_comment or doc.open_fence):
        # the file ends in this section: at the very end (what append_fact's fast path does)
        return eof, bullets, 0
    in_section = [b for b in doc.facts if b.unit.section == section]
    if in_section:
        # After the section's last fact; a fact holding an unclosed code fence runs to the end of the file (its last
        # line included), so the line after it is the end, never past it (place_adds then refuses that spot).
        pos = min(max(b.end for b in in_section) + 1, eof)
        return pos, bullets + ([""] if joins_item_above(lines[pos]) else []), 0
    heads = [h for h in doc.headings if h.path == section]
    if heads:
        pos = heads[-1].index + 1
        return pos, bullets + ([""] if joins_item_above(lines[pos]) else []), 0
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
        return pos, ([""] if blank_before else []) + new + ([""] if pos != eof else []), 1
    blank_before = eof > 0 and lines[eof - 1].strip() != ""
    return eof, ([""] if blank_before else []) + _heading_block(pieces, 1, bullets), 2


def eof_section(doc: MemoryDoc) -> str | None:
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
