"""Writes to a workspace's memory: the Markdown first, atomically, then a sync of the scope.

Facts are added and deleted, history appended, memories forgotten. `memory list` reads what a scope holds now. The
archive appears there as one row per chunk. `memory forget` takes an archived turn's id, a chunk's consolidation id
or a whole day (`YYYY-MM-DD`). Every id is checked before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from memclaw.errors import DerivedIndexError, UsageError, VectorStoreUnavailable
from memclaw.markdown.units import MemoryUnit
from memclaw.permission_errors import from_permission_error

if TYPE_CHECKING:
    from memclaw.index.scopes import ScopeCache
    from memclaw.markdown.incremental import FileMark
    from memclaw.workspace import Workspace


Mentions = Callable[[Sequence[MemoryUnit], Sequence[MemoryUnit]], Mapping[str, Sequence[str]]]
"""(the units about to be forgotten, every fact and history entry of the scope) -> a forgotten unit's id -> the ids
of the others that restate it"""


class MemoryWriter:
    """The writes of one workspace; `sync(scopes)` brings the index in line afterwards."""

    def __init__(self, scopes: ScopeCache, sync: Callable[[Sequence[str]], object]) -> None:
        self.scopes = scopes
        self.workspace = scopes.workspace
        self._sync = sync

    def facts(self, scope: str) -> list[MemoryUnit]:
        return self.scopes.parse(scope, ("fact",))

    def add_fact(self, text: str, *, scope: str, section: str | None, learned: date | None = None) -> MemoryUnit:
        """`remember_fact`'s fact (written now, or already there)."""
        return self.remember_fact(text, scope=scope, section=section, learned=learned)[0]

    def remember_fact(
        self, text: str, *, scope: str, section: str | None, learned: date | None = None
    ) -> tuple[MemoryUnit, bool]:
        """Add one fact, marked with the day it was learned, unless it is already there (`find_fact`): the fact as
        the synced index reads it, and True if it was written now (False: already remembered). The check and the
        write are one locked read-modify-write on the file as it is then (memclaw.markdown.fact_ops.append_fact), so
        that processes adding the same fact at once write it once, and each reports the one in the file."""
        from memclaw.markdown.fact_ops import DEFAULT_SECTION, append_fact, normalize_fact_text
        from memclaw.markdown.formats import normalize_section
        from memclaw.markdown.unit_size import section_too_long, too_long
        from memclaw.service.learned import mark_fact
        from memclaw.util.redact import mask_for_memory

        if not normalize_fact_text(text):
            raise UsageError("empty fact: say what to remember")
        # a secret is saved as ***, with one warning line
        text = mask_for_memory(text)
        # as it will read back, with when it was learned
        text = mark_fact(text, learned or date.today())
        refused = too_long(text) or section_too_long(section)
        if refused:
            raise UsageError(refused)
        path = self.workspace.memory_file(scope)

        # under the lock: the file as every earlier writer left it
        def known() -> MemoryUnit | None:
            found = self.find_fact(text, scope=scope, section=section)
            # about to be written: a re-run does not write it twice
            if found is None:
                self._check_other_files(scope, path)
            return found

        found = append_fact(path, text, section=section, mark=self._mark(scope, path), known=known)
        try:
            self._sync([scope])
        except (VectorStoreUnavailable, DerivedIndexError, PermissionError) as e:
            err = from_permission_error(e) if isinstance(e, PermissionError) else e
            raise type(err)(f"{err} (the fact is saved in {path}; the next sync indexes it)") from e
        written = found.text if found is not None else text
        match = self._read_back(scope, written, normalize_section(section) or DEFAULT_SECTION)
        if match is None:
            raise DerivedIndexError(f"the fact was written to {path} but could not be read back; check the file")
        return match, found is None

    def _read_back(self, scope: str, text: str, section: str) -> MemoryUnit | None:
        """The scope's last fact reading `text` under `section`, after a sync (the same text under another heading
        is another fact)."""
        sc = self.scopes.get(scope)
        if sc is not None:
            last = sc.state.units.last_match("fact", text)
            if last is None or last.section == section:
                return last
            candidates = sc.state.units.with_prefix("fact", text)
        else:
            candidates = list(reversed(self.facts(scope)))
        return next((u for u in candidates if u.text == text and u.section == section), None)

    def find_fact(
        self, text: str, *, scope: str, section: str | None, learned: date | None = None
    ) -> MemoryUnit | None:
        """The fact `add_fact(text, section=section, learned=learned)` would write again: the scope's last fact
        with this text under that section (DEFAULT_SECTION when None). Texts are compared as written
        (relative dates resolved) without the date they end in: a re-run on another day is the same fact. From the
        synced state when MEMORY.md has not changed since, else from the file. (The same text under another heading
        is another fact.)"""
        from memclaw.markdown.fact_ops import DEFAULT_SECTION
        from memclaw.markdown.formats import normalize_section
        from memclaw.service.learned import bare_fact, mark_fact

        bare = bare_fact(mark_fact(text, learned or date.today()))
        path = self.workspace.memory_file(scope)
        sc = self.scopes.get(scope)
        src = self.workspace.source_of(path)
        if (
            sc is not None
            and src in sc.state.signatures
            and sc.state.signatures[src] == self.scopes.signatures(scope)[src]
        ):
            candidates = sc.state.units.with_prefix("fact", bare)
        else:
            candidates = [u for u in reversed(self.facts(scope)) if u.text.startswith(bare)]
        section = normalize_section(section) or DEFAULT_SECTION
        return next((u for u in candidates if bare_fact(u.text) == bare and u.section == section), None)

    def _check_other_files(self, scope: str, path: Path) -> None:
        """Before writing `path`: refuse (MemoryFileError) if another file of the scope that changed since the
        last sync cannot be read or is not text, so that a write is never followed by a failing sync."""
        from memclaw.markdown.files import read_bytes

        sc = self.scopes.get(scope)
        sigs = self.scopes.signatures(scope)
        for src, (other, _kind) in self.scopes.files(scope).items():
            if other != path and sigs[src] is not None and (sc is None or sc.state.signatures.get(src) != sigs[src]):
                read_bytes(other)

    def _mark(self, scope: str, path: Path) -> FileMark | None:
        """The synced state's mark of a memory file (what the append fast path of memfiles checks against)."""
        sc = self.scopes.get(scope)
        return sc.state.marks.get(self.workspace.source_of(path)) if sc is not None else None

    def append_history(self, scope: str, text: str, ts: datetime) -> MemoryUnit:
        from memclaw.markdown.history_file import append_history
        from memclaw.util.redact import mask_for_memory

        path = self.workspace.history_file(scope)
        path.parent.mkdir(parents=True, exist_ok=True)
        append_history(path, ts, mask_for_memory(text))
        self._sync([scope])
        sc = self.scopes.get(scope)
        last = sc.state.units.last("history") if sc is not None else None
        if last is None:
            last = [u for u in self.scopes.parse(scope) if u.kind == "history"][-1]
        return last

    def list_units(self, scope: str, kind: str | None) -> list[MemoryUnit]:
        """Every memory of a scope as the Markdown holds it now, in file order (facts, then history, then the
        archive's chunks as rows: `_archive_rows`); reads only."""
        if kind not in (None, "fact", "history", "archive"):
            raise UsageError(f"unknown memory kind {kind!r}: use fact, history or archive")
        out = [u for u in self.scopes.parse(scope, ("fact", "history")) if kind is None or u.kind == kind]
        return out + (_archive_rows(self.workspace, scope) if kind in (None, "archive") else [])

    def forget(self, ids: Sequence[str], *, scope: str, mentions: Mentions | None = None) -> list[MemoryUnit]:
        """Remove these memories from the Markdown, then from the index, and return what was forgotten.

        Facts, history entries and archived turns go by id, as `list_units` and recall give them. Whole chunks of
        the archive go by consolidation id, whole days by date (`_plan_forget`). Every id is checked before anything
        is written. The callback `mentions(gone, units)` says which other units restate each forgotten one; they
        are noted with it (memclaw.service.forgotten)."""
        from memclaw.markdown.fact_ops import FactOp, apply_fact_ops
        from memclaw.markdown.history_file import delete_history_entries
        from memclaw.service.forgotten import check_notes, note_forgotten

        check_notes(self.workspace.sessions_dir)
        current = {u.id: u for u in self.scopes.parse(scope, ("fact", "history"))}
        ids = list(dict.fromkeys(ids))
        rest = [i for i in ids if i not in current]
        turns = {u.id: u for u in self.scopes.parse(scope, ("archive",))} if rest else {}
        plan, unknown = _plan_forget(self.workspace, scope, rest, turns)
        if unknown:
            raise UsageError(
                f"no memory with id {unknown[0]!r} in scope {scope}: use an id from `memclaw memory list` or "
                "`memclaw recall --json` (an id changes when its text is edited), a conversation's id (c...) or "
                "a day of the archive (YYYY-MM-DD)"
            )
        facts = [i for i in ids if i in current and current[i].kind == "fact"]
        history = [i for i in ids if i in current and current[i].kind == "history"]
        if facts:
            path = self.workspace.memory_file(scope)
            apply_fact_ops(path, scope, self.workspace.source_of(path), [FactOp("delete", id=i) for i in facts])
        if history:
            path = self.workspace.history_file(scope)
            delete_history_entries(path, scope, self.workspace.source_of(path), history)
        gone = [current[i] for i in ids if i in current]
        said = mentions(gone, list(current.values())) if mentions is not None and gone else None
        # so that no chat that said them writes them back
        note_forgotten(self.workspace.sessions_dir, gone, said)
        gone += _forget_archive(self.workspace, scope, plan) if plan else []
        self._sync([scope])
        return gone


# ----- the archive in `memory list` and `memory forget` ---------------------------------------------
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _is_day_id(s: str) -> bool:
    """`YYYY-MM-DD`, a real date: what `memory forget` reads as a day of the archive."""
    if not _DAY.fullmatch(s):
        return False
    try:
        date.fromisoformat(s)
    except ValueError:
        return False
    return True


def _is_chunk_id(s: str) -> bool:
    from memclaw.markdown.archive import CID

    return CID.fullmatch(s) is not None


def _archive_rows(ws: Workspace, scope: str) -> list[MemoryUnit]:
    """Every chunk of the scope's archive as a row (memclaw.markdown.archive_file.chunk_row), oldest day first."""
    from memclaw.markdown.archive_file import chunk_rows
    from memclaw.markdown.files import read_text

    out: list[MemoryUnit] = []
    for path in ws.archive_files(scope):
        out += chunk_rows(read_text(path) or "", scope=scope, source=ws.source_of(path))
    return out


@dataclass
class _ArchivePlan:
    """What `forget` will remove from the archive: per day file, chunk ids and turn ids; whole days."""

    chunks: dict[Path, set[str]] = field(default_factory=dict)
    turns: dict[Path, set[str]] = field(default_factory=dict)
    days: dict[str, Path] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.chunks or self.turns or self.days)


def _plan_forget(
    ws: Workspace, scope: str, ids: Sequence[str], turns: dict[str, MemoryUnit]
) -> tuple[_ArchivePlan, list[str]]:
    """Sort the archive's ids among `ids` (turn ids found in `turns`, chunk ids, days) into a plan; also returns the
    ids that are none of these in the scope's archive."""
    plan = _ArchivePlan()
    rows = None
    unknown = []
    for i in ids:
        if i in turns:
            path = ws.root / turns[i].source
            plan.turns.setdefault(path, set()).add(i)
        elif _is_day_id(i):
            path = ws.archive_file(scope, date.fromisoformat(i))
            if path.is_file():
                plan.days[i] = path
            else:
                unknown.append(i)
        elif _is_chunk_id(i):
            rows = _archive_rows(ws, scope) if rows is None else rows
            where = {ws.root / r.source for r in rows if r.id == i}
            for path in where:
                plan.chunks.setdefault(path, set()).add(i)
            if not where:
                unknown.append(i)
        else:
            unknown.append(i)
    return plan, unknown


def _forget_archive(ws: Workspace, scope: str, plan: _ArchivePlan) -> list[MemoryUnit]:
    """Carry out a plan: the rows of what was removed (days first, then chunks and turns, file by file)."""
    from memclaw.markdown.archive_file import chunk_rows, remove_from_day
    from memclaw.markdown.files import locked, read_text

    out: list[MemoryUnit] = []
    for day, path in sorted(plan.days.items()):
        with locked(path):
            text = read_text(path) or ""
            rows = chunk_rows(text, scope=scope, source=ws.source_of(path))
            path.unlink(missing_ok=True)
        n_turns = sum(int(r.extra["turns"]) for r in rows)
        out.append(
            MemoryUnit(
                id=day,
                kind="archive",
                scope=scope,
                source=ws.source_of(path),
                line=1,
                text=f"the whole day: {len(rows)} conversation(s), {n_turns} turn(s)",
                timestamp=datetime.fromisoformat(day),
                extra={"turns": str(n_turns)},
            )  # fmt: skip
        )
    for path in sorted(set(plan.chunks) | set(plan.turns)):
        if path in plan.days.values():
            continue
        removed = remove_from_day(path, scope=scope, source=ws.source_of(path), cids=plan.chunks.get(path, set()),
                                  turn_ids=plan.turns.get(path, set()))  # fmt: skip
        out += removed.chunks + removed.turns
    return out
