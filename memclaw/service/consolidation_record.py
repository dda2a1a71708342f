"""One consolidation, three linked records: the writer that every path from conversation to memory goes through.

The agent's consolidation uses it, and so do the benchmarks' converters standing in for the model. A
`ConsolidationRecord` is what one consolidation learned for one scope. It holds the turns it read verbatim, the
summary and the fact operations. Its id `cid` comes from memclaw.markdown.archive.consolidation_id; its time is the
conversation's.
`ConsolidationWriter.record` writes it in three steps (`Step`), in this order, each durable before the next:

1. **archive**: the turns, secrets masked by pattern, as one chunk `## HH:MM #cid`. It is appended to the scope's
   day file of the conversation's first turn, as `memory/archive/2026-11-25.md`. A conversation past midnight
   stays one chunk in the file of the day it began. Skipped when `memory.archive` is false.
2. **facts**: the operations applied to MEMORY.md in one atomic edit. Each added or rewritten fact ends in the
   learned-mark ` (2026-11-25 #cid)` (memclaw.service.learned). An add whose bare text is already a fact of the
   scope is not written. An update or delete of a fact that is gone is dropped.
3. **history**: the summary appended to HISTORY.md, stamped `[2026-11-25 14:02 #cid]`.

Facts and the summary are masked for secrets as the archive is, with one warning line when they are.

Every step is idempotent by `cid`, so a consolidation repeated after a crash writes nothing twice. The archive step
skips a chunk whose id the day file holds. The facts step is done when a fact it would write is there word for word.
The history step is done when an entry with that id and text is. A session notes each step done as
`<scope>#<step>`, so a step's value is an on-disk format. `sync=False` leaves the index to the caller, a bulk writer
that records many and syncs once.
See docs/decisions/0033-the-archive-modules-and-consolidation-steps.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from memclaw.markdown.archive import ArchiveChunk, ArchivedTurn
from memclaw.markdown.fact_ops import FactOp, FactOpsResult

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.workspace import Workspace

log = logging.getLogger(__name__)


class Step(StrEnum):
    """A step of `record`. Its value is what a session's progress notes as `<scope>#<step>`, so it never changes."""

    ARCHIVE = "archive"
    FACTS = "facts"
    HISTORY = "history"


STEPS: tuple[Step, ...] = (Step.ARCHIVE, Step.FACTS, Step.HISTORY)
"""Every step, in the order `record` runs them."""


@dataclass(frozen=True)
class ConsolidationRecord:
    # memclaw.markdown.archive.consolidation_id(fingerprint)
    cid: str
    # the conversation's time (its first turn), naive local time
    when: datetime
    # verbatim, in order
    turns: tuple[ArchivedTurn, ...]
    # the summary ("" = none)
    history_entry: str = ""
    fact_ops: tuple[FactOp, ...] = ()


@dataclass
class RecordResult:
    scope: str
    cid: str
    # the steps that wrote something now
    written: list[Step] = field(default_factory=list)
    # the steps found done already (by cid), or with nothing to write
    skipped: list[Step] = field(default_factory=list)
    # the day file the chunk is in
    archive_file: Path | None = None
    facts: FactOpsResult | None = None
    # the summary is in HISTORY.md (now or before)
    history: bool = False


class ConsolidationWriter:
    """`record` for one workspace; `sync(scopes)` brings the index in line afterwards."""

    def __init__(self, workspace: Workspace, config: Config, sync: Callable[[Sequence[str]], object]) -> None:
        self.workspace = workspace
        self.config = config
        self._sync = sync

    def record(
        self, scope: str, record: ConsolidationRecord, *, steps: Sequence[str] = STEPS, sync: bool = True
    ) -> RecordResult:
        """Run the asked `steps` in the order of STEPS, each by its writer in the table below; then sync if asked."""
        unknown = [s for s in steps if s not in STEPS]
        if unknown:
            raise ValueError(f"unknown consolidation step {unknown[0]!r}: use {', '.join(STEPS)}")
        writers: dict[Step, Callable[[str, ConsolidationRecord, RecordResult], bool]] = {
            Step.ARCHIVE: self._archive,
            Step.FACTS: self._facts,
            Step.HISTORY: self._history,
        }
        res = RecordResult(scope, record.cid)
        for step in STEPS:
            if step not in steps:
                continue
            wrote = writers[step](scope, record, res)
            (res.written if wrote else res.skipped).append(step)
        if sync and res.written:
            self._sync([scope])
        return res

    def _archive(self, scope: str, record: ConsolidationRecord, res: RecordResult) -> bool:
        from memclaw.markdown.archive_file import append_archive_chunk
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
            # written by this consolidation before a crash: the step is done
            if text in texts:
                return False
            if op.op == "add" and bare_fact(text) in known:
                # already a fact of the scope
                continue
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
