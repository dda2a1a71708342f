"""One consolidation, three linked records: the writer every path that turns conversation into memory goes through
(the agent's consolidation, and the benchmarks' converters standing in for the model).

A `ConsolidationRecord` is what one consolidation learned for one scope: the turns it read (verbatim), the summary,
the fact operations, its id (`cid`, memclaw.markdown.archive.consolidation_id) and the conversation's time (its
first turn). `record_consolidation` writes it in three steps, in this order, each durable before the next:

1. **archive**: the turns, secrets masked by pattern (memclaw.util.redact.mask_secrets), as one chunk `## HH:MM
   #cid` appended to the scope's day file of the conversation's first turn (`memory/archive/2026-11-25.md`, or
   `memory/people/<id>/archive/...`): a conversation that runs past midnight stays one chunk, in the file of the
   day it began, its later turns stamped with their own time (00:12). Skipped when `memory.archive` is false.
2. **facts**: the operations applied to MEMORY.md in one atomic edit, each added or rewritten fact ending in the
   learned-mark ` (2026-11-25 #cid)` with its relative dates resolved (memclaw.service.learned). An add whose text
   (without its mark) is already a fact of the scope is not written; an update or delete of a fact that is gone is
   dropped (a delete repeated, or a hand edit since).
3. **history**: the summary appended to HISTORY.md stamped `[2026-11-25 14:02 #cid]`.

Facts and the summary are masked for secrets as the archive is (`mask_for_memory`: one warning line when it masks).

Every step is idempotent by `cid`, so a consolidation repeated after a crash writes nothing twice: the archive skips
a chunk whose id the day file holds, the facts step is done when a fact it would write is already there word for
word (marks included), the history step when an entry with that id and text is. `sync=False` leaves the index to
the caller (a bulk writer records many and syncs once); the Markdown is written either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from memclaw.markdown.archive import ArchiveChunk, ArchivedTurn
from memclaw.markdown.fact_ops import FactOp, FactOpsResult

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.workspace import Workspace

log = logging.getLogger(__name__)

STEPS = ("archive", "facts", "history")


@dataclass(frozen=True)
class ConsolidationRecord:
    cid: str  # memclaw.markdown.archive.consolidation_id(fingerprint)
    when: datetime  # the conversation's time (its first turn), naive local time
    turns: tuple[ArchivedTurn, ...]  # verbatim, in order
    history_entry: str = ""  # the summary ("" = none)
    fact_ops: tuple[FactOp, ...] = ()


@dataclass
class RecordResult:
    scope: str
    cid: str
    written: list[str] = field(default_factory=list)  # the steps that wrote something now
    skipped: list[str] = field(default_factory=list)  # found done already (by cid), or nothing to write
    archive_file: Path | None = None  # the day file the chunk is in
    facts: FactOpsResult | None = None
    history: bool = False  # the summary is in HISTORY.md (now or before)


class ConsolidationWriter:
    """`record` for one workspace; `sync(scopes)` brings the index in line afterwards."""

    def __init__(self, workspace: Workspace, config: Config, sync: Callable[[Sequence[str]], object]) -> None:
        self.workspace = workspace
        self.config = config
        self._sync = sync

    def record(
        self, scope: str, record: ConsolidationRecord, *, steps: Sequence[str] = STEPS, sync: bool = True
    ) -> RecordResult:
        unknown = [s for s in steps if s not in STEPS]
        if unknown:
            raise ValueError(f"unknown consolidation step {unknown[0]!r}: use {', '.join(STEPS)}")
        res = RecordResult(scope, record.cid)
        for step in STEPS:
            if step not in steps:
                continue
            wrote = getattr(self, f"_{step}")(scope, record, res)
            (res.written if wrote else res.skipped).append(step)
        if sync and res.written:
            self._sync([scope])
        return res

    def _archive(self, scope: str, record: ConsolidationRecord, res: RecordResult) -> bool:
        from memclaw.markdown.archive_append import append_archive_chunk
        from memclaw.util.redact import mask_secrets

        if not self.config.memory.archive or not record.turns:
            return False
        turns = tuple(ArchivedTurn(t.speaker, mask_secrets(t.text), t.at) for t in record.turns)
        path = self.workspace.archive_file(scope, record.when.date())
        res.archive_file = path
        return append_archive_chunk(path, ArchiveChunk(record.cid, record.when, turns))

    def _facts(self, scope: str, record: ConsolidationRecord, res: RecordResult) -> bool:
        from memclaw.markdown.fact_ops import apply_fact_ops
        from memclaw.markdown.files import read_units
        from memclaw.service.learned import bare_fact, mark_fact
        from memclaw.util.redact import mask_for_memory

        if not record.fact_ops:
            return False
        path = self.workspace.memory_file(scope)
        source = self.workspace.source_of(path)
        current = {u.id: u for u in read_units(path, scope=scope, kind="fact", source=source)}
        texts = {u.text for u in current.values()}
        known = {bare_fact(t) for t in texts}
        on = record.when.date()
        ops: list[FactOp] = []
        for op in record.fact_ops:
            if op.op != "add" and op.id not in current:
                log.info("consolidation %s: fact %s is gone; its %s is dropped", record.cid, op.id, op.op)
                continue
            if op.op == "delete":
                ops.append(op)
                continue
            old = current[op.id].text if op.op == "update" and op.id else None
            text = mark_fact(mask_for_memory(op.text or ""), on, record.cid, replaces=old)
            if text in texts:  # written by this consolidation before a crash: the step is done
                return False
            if op.op == "add" and bare_fact(text) in known:
                continue  # already a fact of the scope
            known.add(bare_fact(text))
            ops.append(FactOp(op.op, id=op.id, text=text, section=op.section))
        if not ops:
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        res.facts = apply_fact_ops(path, scope, source, ops)
        return True

    def _history(self, scope: str, record: ConsolidationRecord, res: RecordResult) -> bool:
        from memclaw.markdown.history_file import append_history
        from memclaw.util.redact import mask_for_memory

        if not record.history_entry.strip():
            return False
        path = self.workspace.history_file(scope)
        path.parent.mkdir(parents=True, exist_ok=True)
        wrote = append_history(path, record.when, mask_for_memory(record.history_entry), cid=record.cid)
        res.history = True
        return wrote
