"""Archive day files for tests, written as consolidation writes them (memclaw.markdown.archive.append_chunk: a true
append to the day's file), with the facts' learned-marks and HISTORY stamps that carry the same consolidation id."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime, time
from pathlib import Path

from memclaw.config import Config
from memclaw.embedding.base import Embedder
from memclaw.markdown.archive import ArchiveChunk, ArchivedTurn, append_chunk
from memclaw.markdown.formats import fact_mark, format_history_entry
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace


def chunk(cid: str, when: datetime, *said: tuple[str, str]) -> ArchiveChunk:
    """A chunk of `said` (speaker, text) turns, one minute apart from `when`."""
    turns = tuple(
        ArchivedTurn(s, t, time((when.hour + (when.minute + i) // 60) % 24, (when.minute + i) % 60))
        for i, (s, t) in enumerate(said)
    )
    return ArchiveChunk(cid, when, turns)


MUSEUM = chunk(
    "c7f3a9b21",
    datetime(2026, 11, 25, 14, 2),
    ("Caroline", "How did the kids like the dinosaur exhibit at the museum?"),
    ("Melanie", "They were stoked! They keep asking to go back."),
    ("Caroline", "Glad to hear it."),
)
"""A question and its short answer, "They were stoked!", which says none of the question's words (the turn context
tests: the vector's, memclaw.index.passages, and BM25's, memclaw.index.bm25_context)."""


def append_day(ws: Workspace, scope: str, *chunks: ArchiveChunk) -> Path:
    """Append the chunks to the day file of the first one's date (a true append, as consolidation writes)."""
    path = ws.archive_file(scope, chunks[0].when.date())
    path.parent.mkdir(parents=True, exist_ok=True)
    before = path.read_text("utf-8") if path.exists() else ""
    after = before
    for c in chunks:
        after = append_chunk(after, c)
    with open(path, "a", encoding="utf-8") as f:
        f.write(after[len(before) :])
    return path


def consolidation(ws: Workspace, scope: str, c: ArchiveChunk, summary: str, facts: list[str]) -> None:
    """What one consolidation writes: the chunk, its facts (learned-marked with its id) and its summary (stamped with
    it)."""
    append_day(ws, scope, c)
    mem, hist = ws.memory_file(scope), ws.history_file(scope)
    mem.parent.mkdir(parents=True, exist_ok=True)
    with open(mem, "a", encoding="utf-8") as f:
        f.write("".join(f"- {t}{fact_mark(c.when.date(), c.cid)}\n" for t in facts))
    old = hist.read_text("utf-8") if hist.exists() else ""
    sep = "\n" if old and not old.endswith("\n\n") else ""
    with open(hist, "a", encoding="utf-8") as f:
        f.write(sep + format_history_entry(c.when, summary, cid=c.cid) + "\n")


@contextmanager
def archive_service(
    root: Path,
    embedder: Embedder,
    write: Callable[[Workspace], object] | None = None,
    *,
    config: Config | None = None,
    sync: bool = False,
) -> Iterator[MemoryService]:
    """A MemoryService over a fresh workspace under `root` (what `write` puts there first; `config`'s settings, else
    the defaults), synced first if `sync`, closed after."""
    ws = Workspace(root / "ws")
    ws.memory_root.mkdir(parents=True)
    if write is not None:
        write(ws)
    cfg = (config or Config()).model_copy(update={"workspace": ws.root})
    svc = MemoryService(ws, cfg, embedder=embedder)
    try:
        if sync:
            svc.sync()
        yield svc
    finally:
        svc.close()


DAY = date(2026, 11, 25)
