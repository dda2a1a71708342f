"""Appending a chunk to an archive day file (`memory/archive/YYYY-MM-DD.md`, memclaw.markdown.archive): the same
discipline as HISTORY.md (memclaw.markdown.files.append_block: a true append under the file's lock, fsynced, never
through a symlink), idempotent by consolidation id."""

from __future__ import annotations

from pathlib import Path

from memclaw.markdown.archive import ArchiveChunk, append_chunk
from memclaw.markdown.files import append_block


def append_archive_chunk(path: Path, chunk: ArchiveChunk) -> bool:
    """Append `chunk` to the day file at `path` (created with its `# YYYY-MM-DD` title, the chunk's day, when
    missing). A chunk whose consolidation id the file already holds (a write repeated after a crash) is not written
    again: False, nothing changed."""

    def make(current: str) -> str | None:
        new = append_chunk(current, chunk)
        if new == current:
            return None
        return new[len(current) :].lstrip("\n") if new.startswith(current) else new

    return append_block(Path(path), make)
