"""An import: a `Source` turned into `ConsolidationRecord`s and written through memclaw's one writer.

* A conversation is split by sender as consolidation splits a session (memclaw.agent.conversation: whole turns by
  the scope of the user who started them) and archived verbatim, dated by its first message. Its consolidation id
  is the one consolidation would give the same messages in a session (`chunk_fingerprint`), so `--consolidate`
  finds the archive step done and adds only facts and a history entry.
* Facts are added with the day each was learned (one record per day); history entries keep their own time.
  A fact the owner's MEMORY.md already holds (compared without its date), or a history entry whose text HISTORY.md
  already holds, is skipped.
* Every record is idempotent by its id (memclaw.service.consolidation_record), so an import run again, finished
  or interrupted, adds only what is missing. The index is synced once at the end.
See docs/decisions/0038-importing-through-the-consolidation-writer.md.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memclaw.agent.consolidate import chunk_fingerprint
from memclaw.agent.conversation import USER_SPEAKER, archived_turns, conversation_start, group_by_scope
from memclaw.context.senders import Sender, clean_name, scope_for
from memclaw.errors import ImportSourceError, InvalidSenderError
from memclaw.importers.sources import Conversation, Dated, Source
from memclaw.markdown.archive import consolidation_id
from memclaw.markdown.fact_ops import FactOp
from memclaw.markdown.units import OWNER_SCOPE
from memclaw.service.consolidation_record import ConsolidationRecord

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.service.facade import MemoryService
    from memclaw.util.progress import ProgressFactory

INTERRUPT_AFTER_ENV = "_MEMCLAW_TEST_IMPORT_INTERRUPT_AFTER"
"""Tests only: raise KeyboardInterrupt after this many records are written (a deterministic Ctrl-C)."""


@dataclass(frozen=True)
class Item:
    """One record to write for one scope, and what it counts as."""

    scope: str
    record: ConsolidationRecord
    # "conversation", "facts" or "history"
    kind: str
    # Turns of a conversation, facts of a day, 1 for a history entry
    count: int
    # A conversation's session messages (all scopes), for --consolidate
    messages: tuple[dict[str, Any], ...] = ()


@dataclass
class Summary:
    source: str
    dry_run: bool = False
    # Archived now (or, in a dry run, would be)
    conversations: int = 0
    turns: int = 0
    facts: int = 0
    history: int = 0
    skipped: dict[str, int] = field(default_factory=lambda: {"conversations": 0, "facts": 0, "history": 0})
    scopes: list[str] = field(default_factory=list)
    records: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    consolidated: int = 0
    counted: set[str] = field(default_factory=set)
    # the one index sync after the writes: its seconds and the vectors it embedded
    index_seconds: float = 0.0
    vectors: int = 0

    def to_json(self) -> dict[str, Any]:
        added = {"conversations": self.conversations, "turns": self.turns, "facts": self.facts,
                 "history_entries": self.history}  # fmt: skip
        return {"source": self.source, "dry_run": self.dry_run, "added": added, "skipped": self.skipped,
                "scopes": self.scopes, "seconds": round(self.seconds, 2), "turns_per_s": round(self.rate, 1),
                "interrupted": self.interrupted, "consolidated": self.consolidated,
                "index": self.index_json()}  # fmt: skip

    def index_json(self) -> dict[str, float]:
        rate = self.vectors / self.index_seconds if self.index_seconds > 0 else 0.0
        return {"seconds": round(self.index_seconds, 2), "vectors": self.vectors, "vectors_per_s": round(rate, 1)}

    @property
    def rate(self) -> float:
        return self.turns / self.seconds if self.seconds > 0 else 0.0


def _cid(*parts: str) -> str:
    return consolidation_id(hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:16])


def sender_scope_of(config: Config, sender: str) -> str:
    """The scope of a message's `sender` ("channel:id"; "owner" is the owner), by memclaw's one owner rule."""
    if sender.strip().lower() == "owner":
        return OWNER_SCOPE
    channel, sep, sid = sender.partition(":")
    if not sep:
        channel, sid = "import", sender
    try:
        return scope_for(config, Sender(channel=channel.strip() or "import", sender_id=sid))
    except InvalidSenderError as e:
        raise ImportSourceError(f"a message's sender {sender!r} cannot name a memory scope ({e})") from None


def session_messages(config: Config, conv: Conversation) -> list[dict[str, Any]]:
    """A conversation as memclaw's session would hold it (memclaw.agent.sessions): role, content, ts, and the scope
    and name of a user message from someone else."""
    out = []
    for m in conv.messages:
        d: dict[str, Any] = {"role": m.role, "content": m.text, "ts": m.at.isoformat(timespec="seconds")}
        if m.role == "user":
            d["scope"] = sender_scope_of(config, m.sender) if m.sender else OWNER_SCOPE
            if m.name and clean_name(m.name):
                d["sender_name"] = clean_name(m.name)
        out.append(d)
    return out


def conversation_items(config: Config, conv: Conversation, owner_name: str) -> list[Item]:
    msgs = session_messages(config, conv)
    cid = consolidation_id(chunk_fingerprint(msgs))
    items = []
    for scope, part in group_by_scope(msgs, OWNER_SCOPE).items():
        speaker = owner_name if scope == OWNER_SCOPE else USER_SPEAKER
        turns = archived_turns(part, config.agent.name, speaker)
        if turns:
            rec = ConsolidationRecord(cid=cid, when=conversation_start(part), turns=turns)
            items.append(Item(scope, rec, "conversation", len(turns), tuple(msgs)))
    return items


def fact_items(kind: str, facts: list[Dated]) -> list[Item]:
    by_day: dict[str, list[Dated]] = {}
    for f in facts:
        by_day.setdefault(f.at.date().isoformat(), []).append(f)
    items = []
    for day, group in sorted(by_day.items()):
        cid = _cid(kind, "facts", day, *(f.text for f in group))
        ops = tuple(FactOp("add", text=f.text, section=f.section) for f in group)
        when = datetime.fromisoformat(day)
        items.append(Item(OWNER_SCOPE, ConsolidationRecord(cid=cid, when=when, turns=(), fact_ops=ops), "facts",
                          len(ops)))  # fmt: skip
    return items


def history_items(kind: str, entries: list[Dated]) -> list[Item]:
    items = []
    for e in entries:
        cid = _cid(kind, "history", e.at.isoformat(), e.text)
        items.append(Item(OWNER_SCOPE, ConsolidationRecord(cid=cid, when=e.at, turns=(), history_entry=e.text),
                          "history", 1))  # fmt: skip
    return items


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


class Importer:
    """Plans and writes one source into one workspace's memory."""

    def __init__(self, memory: MemoryService, config: Config) -> None:
        self.memory = memory
        self.config = config
        self._archives: dict[Any, str] = {}
        self.conversations: list[Item] = []
        """Every conversation item of the last plan, archived before or not (what --consolidate reads)."""
        self.scopes: set[str] = set()
        """Every scope the last plan's source maps to, written now or before: the index sync after the writes
        covers them all, so a run after a Ctrl-C in that sync finishes it."""

    def plan(self, source: Source) -> tuple[list[Item], Summary]:
        """The records still to write (what memory holds already is counted as skipped), oldest first."""
        from memclaw.agent.conversation import owner_speaker
        from memclaw.service.learned import bare_fact

        summary = Summary(source.kind)
        owner_name = owner_speaker(self.memory.workspace)
        known_facts = {_norm(bare_fact(u.text)) for u in self.memory.list_units(OWNER_SCOPE, "fact")}
        known_history = {_norm(u.text) for u in self.memory.list_units(OWNER_SCOPE, "history")}
        todo: list[Item] = []
        for conv in source.conversations:
            items = conversation_items(self.config, conv, owner_name)
            self.conversations += items
            if items and all(self.archived(i) for i in items):
                summary.skipped["conversations"] += 1
                continue
            todo += [i for i in items if not self.archived(i)]
        for item in fact_items(source.kind, source.facts):
            fresh = []
            for op in item.record.fact_ops:
                key = _norm(bare_fact(op.text or ""))
                if key in known_facts:
                    summary.skipped["facts"] += 1
                    continue
                known_facts.add(key)
                fresh.append(op)
            if fresh:
                rec = ConsolidationRecord(item.record.cid, item.record.when, (), fact_ops=tuple(fresh))
                todo.append(Item(item.scope, rec, "facts", len(fresh)))
        for item in history_items(source.kind, source.history):
            key = _norm(item.record.history_entry)
            if key in known_history:
                summary.skipped["history"] += 1
                continue
            known_history.add(key)
            todo.append(item)
        todo.sort(key=lambda i: i.record.when)
        self.scopes = {i.scope for i in self.conversations}
        if source.facts or source.history:
            self.scopes.add(OWNER_SCOPE)
        return todo, summary

    def archived(self, item: Item) -> bool:
        """Whether the conversation's chunk is in its day file already (by its id)."""
        if not self.config.memory.archive:
            return True
        path = self.memory.workspace.archive_file(item.scope, item.record.when.date())
        if path not in self._archives:
            try:
                self._archives[path] = path.read_text("utf-8", "replace")
            except FileNotFoundError:
                self._archives[path] = ""
        return f"#{item.record.cid}" in self._archives[path]

    def write(
        self,
        items: list[Item],
        summary: Summary,
        *,
        progress: ProgressFactory | None = None,
        on_written: Callable[[Item], None] | None = None,
    ) -> Summary:
        """Write `items` in order (no index sync: the caller syncs once). A Ctrl-C stops between records and is
        raised again after `summary` counts what was written; the next run adds the rest."""
        import contextlib

        limit = int(os.environ.get(INTERRUPT_AFTER_ENV, "0") or 0)
        scopes = set(summary.scopes)
        t0 = time.monotonic()
        total_turns = sum(i.count for i in items if i.kind == "conversation")
        bar = progress(total_turns, "importing") if progress and total_turns else contextlib.nullcontext(None)
        try:
            with bar as advance:
                for n, item in enumerate(items, 1):
                    res = self.memory.record_consolidation(item.scope, item.record, sync=False)
                    self._count(item, res.written, summary)
                    scopes.add(item.scope)
                    summary.records += 1
                    if advance is not None and item.kind == "conversation":
                        advance(item.count)
                    if on_written is not None:
                        on_written(item)
                    if limit and n >= limit:
                        raise KeyboardInterrupt
        except KeyboardInterrupt:
            summary.interrupted = True
            raise
        finally:
            summary.seconds += time.monotonic() - t0
            summary.scopes = sorted(scopes)
        return summary

    @staticmethod
    def _count(item: Item, written: list[str], summary: Summary) -> None:
        if item.kind == "conversation":
            # a conversation with several senders is one record per scope: counted once
            new = item.record.cid not in summary.counted
            summary.counted.add(item.record.cid)
            if "archive" in written:
                summary.conversations += new
                summary.turns += item.count
            else:
                summary.skipped["conversations"] += new
        elif item.kind == "facts":
            if "facts" in written:
                summary.facts += item.count
            else:
                summary.skipped["facts"] += item.count
        elif "history" in written:
            summary.history += 1
        else:
            summary.skipped["history"] += 1


def dry_run_summary(items: list[Item], summary: Summary) -> Summary:
    """What writing `items` would add."""
    summary.dry_run = True
    convs = {i.record.cid for i in items if i.kind == "conversation"}
    summary.conversations = len(convs)
    summary.turns = sum(i.count for i in items if i.kind == "conversation")
    summary.facts = sum(i.count for i in items if i.kind == "facts")
    summary.history = sum(1 for i in items if i.kind == "history")
    summary.scopes = sorted({i.scope for i in items})
    return summary
