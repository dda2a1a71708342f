"""Appending to an archive day file and to HISTORY.md (memclaw.markdown.archive_file, history_file): true appends
under the lock, fsynced, never through a symlink, each idempotent by consolidation id."""

from __future__ import annotations

import os
import threading
from datetime import datetime, time

import pytest

from memclaw.errors import MemoryFileError
from memclaw.markdown.archive import ArchiveChunk, ArchivedTurn, parse_day
from memclaw.markdown.archive_file import append_archive_chunk
from memclaw.markdown.formats import parse_history
from memclaw.markdown.history_file import append_history

WHEN = datetime(2026, 11, 25, 14, 2)


def chunk(cid: str, *texts: str, when: datetime = WHEN) -> ArchiveChunk:
    turns = tuple(
        ArchivedTurn("Maya" if i % 2 == 0 else "memclaw", t, time(when.hour, when.minute + i))
        for i, t in enumerate(texts)
    )
    return ArchiveChunk(cid, when, turns)


def test_a_new_day_file_gets_its_title_and_later_chunks_append_whole(tmp_path):
    path = tmp_path / "archive" / "2026-11-25.md"
    assert append_archive_chunk(path, chunk("c00000001", "Did Lena say which restaurant?", "Taberna da Ribeira."))
    first = path.read_bytes()
    assert first.startswith(b"# 2026-11-25\n\n## 14:02 #c00000001\n- 14:02 **Maya**: Did Lena say")
    assert append_archive_chunk(path, chunk("c00000002", "And the address?", "Rua dos Douradores 12.\nFirst floor."))
    text = path.read_text("utf-8")
    assert text.startswith(first.decode())  # a true append: earlier bytes untouched
    day = parse_day(text)
    assert [c.cid for c in day.chunks] == ["c00000001", "c00000002"]
    assert day.chunks[1].turns[1].text == "Rua dos Douradores 12.\nFirst floor."
    assert "\n\n## 14:02 #c00000002\n" in text and text.endswith("First floor.\n")


def test_the_same_chunk_again_is_not_written_twice(tmp_path):
    path = tmp_path / "2026-11-25.md"
    c = chunk("c0000000a", "hello", "hi")
    assert append_archive_chunk(path, c)
    before = path.read_bytes()
    assert not append_archive_chunk(path, c)  # a write repeated after a crash
    assert path.read_bytes() == before


def test_a_hand_edited_file_is_appended_to_as_it_is(tmp_path):
    path = tmp_path / "2026-11-25.md"
    path.write_bytes(b"# 2026-11-25\r\n\r\nMy own note, no newline at the end")
    assert append_archive_chunk(path, chunk("c0000000b", "one", "two"))
    raw = path.read_bytes()
    assert raw.startswith(b"# 2026-11-25\r\n\r\nMy own note, no newline at the end\r\n\r\n## 14:02 #c0000000b\r\n")
    assert b"\n" not in raw.replace(b"\r\n", b"")  # its line endings kept
    day = parse_day(raw.decode())
    assert day.preamble == "My own note, no newline at the end" and [t.text for t in day.chunks[0].turns] == [
        "one",
        "two",
    ]


def test_concurrent_appends_lose_nothing(tmp_path):
    path = tmp_path / "2026-11-25.md"
    cids = [f"c{n:08x}" for n in range(16)]
    threads = [threading.Thread(target=append_archive_chunk, args=(path, chunk(c, f"turn of {c}"))) for c in cids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(c.cid for c in parse_day(path.read_text("utf-8")).chunks) == cids


def test_a_symlinked_day_file_is_refused(tmp_path):
    target = tmp_path / "elsewhere.md"
    target.write_text("not yours\n")
    link = tmp_path / "2026-11-25.md"
    link.symlink_to(target)
    with pytest.raises(MemoryFileError, match="is a symlink"):
        append_archive_chunk(link, chunk("c0000000c", "secret talk"))
    assert target.read_text() == "not yours\n"


def test_a_day_file_that_is_not_text_is_refused(tmp_path):
    path = tmp_path / "2026-11-25.md"
    path.write_bytes(b"\x00\x01binary")
    with pytest.raises(MemoryFileError, match="not UTF-8 text"):
        append_archive_chunk(path, chunk("c0000000d", "hi"))
    assert path.read_bytes() == b"\x00\x01binary"


def test_history_entry_with_an_id_is_appended_once(tmp_path):
    path = tmp_path / "HISTORY.md"
    path.write_text("[2026-11-20 09:00] An old entry.\n", "utf-8")
    assert append_history(path, WHEN, "Maya asked about the restaurant.", cid="c7f3a9b21")
    assert not append_history(path, WHEN, "Maya asked about the restaurant.", cid="c7f3a9b21")
    text = path.read_text("utf-8")
    assert (
        text == "[2026-11-20 09:00] An old entry.\n\n[2026-11-25 14:02 #c7f3a9b21] Maya asked about the restaurant.\n"
    )
    # another consolidation that happens to share the id (8 hex digits) is not mistaken for a repeat
    assert append_history(path, WHEN, "Something else entirely.", cid="c7f3a9b21")
    units = parse_history(path.read_text("utf-8"), scope="owner", source="memory/HISTORY.md")
    assert [u.extra.get("cid") for u in units] == [None, "c7f3a9b21", "c7f3a9b21"]
    # without an id, an append is always an append (as before)
    assert append_history(path, WHEN, "Maya asked about the restaurant.")


def test_history_append_is_durable_and_new_files_are_created(tmp_path):
    path = tmp_path / "people" / "x" / "HISTORY.md"
    path.parent.mkdir(parents=True)
    assert append_history(path, WHEN, "First.", cid="c00000001")
    assert path.read_text("utf-8") == "[2026-11-25 14:02 #c00000001] First.\n"
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o644)
