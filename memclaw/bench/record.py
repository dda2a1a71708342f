"""The benchmark converters' writer: a benchmark's conversations written as memclaw writes what it consolidates.

Each session of a benchmark becomes one `ConsolidationRecord` (memclaw.service.consolidation_record) written with
`MemoryService.record_consolidation(..., sync=False)`: its turns (verbatim) as the archived conversation, the
benchmark's summary as the history entry and its facts as fact adds, standing in for the model's answer. The
converter gives only what consolidation would know: the conversation's time and its turns. Learned-marks, stamps,
consolidation ids in them and relative dates resolved are memclaw's code; the caller syncs once afterwards.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from memclaw.markdown.archive import ArchivedTurn, consolidation_id
from memclaw.markdown.fact_ops import FactOp
from memclaw.service.consolidation_record import ConsolidationRecord

if TYPE_CHECKING:
    from memclaw.bench.prepared import PreparedCorpus
    from memclaw.config import Config


def bench_cid(*parts: str) -> str:
    """A stable consolidation id for one benchmark session (its dataset ids hashed)."""
    return consolidation_id(hashlib.sha1("\x00".join(parts).encode("utf-8")).hexdigest())


@dataclass
class BenchSession:
    """One benchmark session as consolidation would see it, and what the benchmark says it learned."""

    # The dataset's id of the session (LoCoMo: its number; LongMemEval: its session id)
    key: str
    when: datetime
    turns: tuple[ArchivedTurn, ...] = ()
    summary: str = ""
    # Text, section
    facts: Sequence[tuple[str, str | None]] = ()
    cid: str = ""


def write_sessions(root: Path, sessions: Sequence[BenchSession], config: Config | None = None) -> None:
    """Write every session through `record_consolidation` into the workspace at `root` (owner scope), in order, no
    index sync (an add whose text the scope holds already is not written again: memclaw's writer)."""
    from memclaw.bench.run_config import bench_config
    from memclaw.markdown.units import OWNER_SCOPE
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    (Path(root) / "memory").mkdir(parents=True, exist_ok=True)
    svc = MemoryService(Workspace(Path(root)), config or bench_config())
    try:
        for s in sessions:
            ops = tuple(FactOp("add", text=t, section=sec) for t, sec in s.facts)
            record = ConsolidationRecord(s.cid, s.when, tuple(s.turns), s.summary, ops)
            svc.record_consolidation(OWNER_SCOPE, record, sync=False)
    finally:
        svc.close()


@dataclass
class DiskUse:
    """What the archive costs on disk over a run's workspaces: its Markdown, and the whole index (measured after
    the sync; it holds the facts and summaries too, when the corpus has them)."""

    turns: int = 0
    archive_bytes: int = 0
    index_bytes: int = 0

    def add(self, root: Path, prepared: PreparedCorpus) -> None:
        from memclaw.workspace import Workspace

        ws = Workspace(Path(root))
        files = ws.archive_files()
        self.turns += sum(1 for u in prepared.corpus.units if u.kind == "archive")
        self.archive_bytes += sum(p.stat().st_size for p in files)
        index = Path(prepared.services[0].layout.root) if prepared.services else None
        if index is not None and index.is_dir():
            self.index_bytes += sum(p.stat().st_size for p in index.rglob("*") if p.is_file())

    def report(self) -> dict[str, float]:
        per = 1000.0 / self.turns if self.turns else 0.0
        return {"archived_turns": self.turns, "archive_md_bytes": self.archive_bytes, "index_bytes": self.index_bytes,
                "archive_md_bytes_per_1000_turns": round(self.archive_bytes * per),
                "index_bytes_per_1000_turns": round(self.index_bytes * per)}  # fmt: skip
