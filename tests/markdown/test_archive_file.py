"""Forgetting in an archive day file (memclaw.markdown.archive_file): whole chunks or single turns removed, every
other byte kept (a property over rendered and hand-edited day files), the rewrite verified before it lands."""

from __future__ import annotations

from datetime import datetime, time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memclaw.errors import MemoryFileError
from memclaw.markdown.archive import ArchiveChunk, ArchiveDay, ArchivedTurn, archive_units, render_day
from memclaw.markdown.archive_file import chunk_rows, remove_from_day

SRC = "memory/archive/2026-11-25.md"
words = st.lists(st.sampled_from(["tea", "Porto", "Lena", "cello", "*bold*", "a: b", "<x>", "  "]), min_size=1,
                 max_size=5).map(" ".join)  # fmt: skip
turn = st.tuples(st.sampled_from(["Maya", "memclaw", "Lena"]), st.lists(words, min_size=1, max_size=2))
chunks = st.lists(st.lists(turn, min_size=1, max_size=4), min_size=1, max_size=4)


def day_text(spec: list, crlf: bool, extra_blank: bool) -> str:
    cs = [
        ArchiveChunk(f"c{n:08x}", datetime(2026, 11, 25, 9 + n, 0),
                     tuple(ArchivedTurn(s, "\n".join(lines), time(9 + n, i)) for i, (s, lines) in enumerate(turns)))
        for n, turns in enumerate(spec)
    ]  # fmt: skip
    text = render_day(ArchiveDay(datetime(2026, 11, 25).date(), cs, "Notes before the first chunk."))
    if extra_blank:
        text = text.replace("\n## ", "\n\n## ")
    return text.replace("\n", "\r\n") if crlf else text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=chunks, crlf=st.booleans(), extra_blank=st.booleans(), pick=st.integers(0, 100), whole=st.booleans())
def test_removing_a_chunk_or_a_turn_keeps_every_other_byte(tmp_path, spec, crlf, extra_blank, pick, whole):
    path = tmp_path / "2026-11-25.md"
    text = day_text(spec, crlf, extra_blank)
    path.write_bytes(text.encode())
    units = archive_units(text, scope="owner", source=SRC)
    if not units:
        return
    target = units[pick % len(units)]
    if whole:
        removed = remove_from_day(path, scope="owner", source=SRC, cids={target.extra["cid"]}, turn_ids=())
        gone = [u for u in units if u.extra["cid"] == target.extra["cid"]]
        assert [r.id for r in removed.chunks] == [target.extra["cid"]] and not removed.turns
    else:
        removed = remove_from_day(path, scope="owner", source=SRC, cids=(), turn_ids={target.id})
        gone = [target]
        assert removed.turns == [target] and not removed.chunks
    new = path.read_bytes().decode()
    left = archive_units(new, scope="owner", source=SRC)
    assert [(u.extra["cid"], u.text) for u in left] == [(u.extra["cid"], u.text) for u in units if u not in gone]
    # every other byte kept: the new text is the old one less whole lines
    old_lines, new_lines = text.split("\n"), new.split("\n")
    it = iter(old_lines)
    assert all(any(line == o for o in it) for line in new_lines)
    assert "Notes before the first chunk." in new


def test_chunk_rows_say_id_time_speakers_turns_and_first_words():
    text = day_text(
        [[("Maya", ["Did Lena say which restaurant?"]), ("memclaw", ["Taberna da Ribeira."])]], False, False
    )
    [row] = chunk_rows(text, scope="owner", source=SRC)
    assert (row.id, row.kind, row.timestamp, row.line) == ("c00000000", "archive", datetime(2026, 11, 25, 9, 0), 5)
    assert row.extra == {"speakers": "Maya\nmemclaw", "turns": "2"}
    assert row.text == "Did Lena say which restaurant? Taberna da Ribeira."


def test_an_edit_that_would_change_other_turns_is_refused(tmp_path, monkeypatch):
    import memclaw.markdown.archive_file as af

    path = tmp_path / "2026-11-25.md"
    text = day_text([[("Maya", ["one"])], [("Maya", ["two"])]], False, False)
    path.write_text(text, "utf-8")
    monkeypatch.setattr(af, "_unit_at", lambda units, line, turn: units[0])  # a wrong line range
    first = archive_units(text, scope="owner", source=SRC)[0].id
    with pytest.raises(MemoryFileError, match="could not edit"):
        remove_from_day(path, scope="owner", source=SRC, cids=(), turn_ids={first})
    assert path.read_text("utf-8") == text
