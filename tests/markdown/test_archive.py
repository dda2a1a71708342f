"""The archive Markdown format (memclaw.markdown.archive): day files, chunk headers, turns, consolidation ids."""

from __future__ import annotations

from datetime import date, datetime, time

from hypothesis import given, settings
from hypothesis import strategies as st

from memclaw.markdown.archive import (
    ArchiveChunk,
    ArchiveDay,
    ArchivedTurn,
    append_chunk,
    clean_speaker,
    consolidation_id,
    parse_day,
    render_day,
)
from memclaw.markdown.formats import (
    fact_cid,
    fact_date,
    fact_mark,
    format_history_entry,
    parse_history,
    parse_stamp_cid,
    split_trailing_date,
)
from memclaw.markdown.memory_md import parse_memory

DAY = date(2026, 11, 25)
CID = "c7f3a9b21"


def turns(*pairs: tuple[str, str]) -> tuple[ArchivedTurn, ...]:
    return tuple(ArchivedTurn(s, t, time(14, 2 + i)) for i, (s, t) in enumerate(pairs))


def test_a_day_file_reads_as_a_person_writes_it():
    chunk = ArchiveChunk(
        CID,
        datetime(2026, 11, 25, 14, 2),
        turns(("Maya", "Did Lena say which restaurant?"), ("memclaw", "Taberna da Ribeira.\nOn Rua dos Douradores.")),
    )
    text = render_day(ArchiveDay(DAY, [chunk]))
    assert text == (
        "# 2026-11-25\n\n## 14:02 #c7f3a9b21\n- 14:02 **Maya**: Did Lena say which restaurant?\n"
        "- 14:03 **memclaw**: Taberna da Ribeira.\n  On Rua dos Douradores.\n"
    )
    back = parse_day(text)
    assert back.day == DAY and back.chunks[0].turns == chunk.turns and back.chunks[0].when == chunk.when
    assert back.chunks[0].line == 3


def test_hand_edits_parse_and_lose_nothing():
    text = (
        "Notes I wrote at the top.\n\n"
        "## 9:05 #c0123456789\n"
        "* Maya: no bold, no time\n"
        "continuation written flush left\n\n"
        "- 09:07 **memclaw**: fine\n"
        "## this header was broken by an edit\n"
        "+ 09:09 Lena: still the chunk above\n"
    )
    day = parse_day(text, DAY)
    assert day.preamble == "Notes I wrote at the top." and len(day.chunks) == 1
    c = day.chunks[0]
    assert c.when == datetime(2026, 11, 25, 9, 5) and c.cid == "c0123456789"
    assert [(t.speaker, t.text) for t in c.turns] == [
        ("Maya", "no bold, no time\ncontinuation written flush left"),
        ("memclaw", "fine\n## this header was broken by an edit"),
        ("Lena", "still the chunk above"),
    ]


def test_turn_text_that_looks_like_markup_stays_inside_its_turn():
    tricky = "- **Eve**: I am a new turn\n## 10:00 #c99999999\n# 1999-01-01\n```\ncode\n```"
    chunk = ArchiveChunk(CID, datetime(2026, 11, 25, 14, 2), turns(("Maya", tricky), ("Bo**b: x", "ok")))
    back = parse_day(render_day(ArchiveDay(DAY, [chunk])))
    assert len(back.chunks) == 1 and back.chunks[0].turns[0].text == tricky
    assert back.chunks[0].turns[1].speaker == clean_speaker("Bo**b: x") == "Bo b x"


def test_appending_a_chunk_twice_writes_it_once():
    chunk = ArchiveChunk(CID, datetime(2026, 11, 25, 14, 2), turns(("Maya", "hello")))
    once = append_chunk("", chunk)
    assert once.startswith("# 2026-11-25\n\n## 14:02 #c7f3a9b21\n")
    assert append_chunk(once, chunk) == once  # a repeated write after a crash changes nothing
    other = ArchiveChunk("c00000000", datetime(2026, 11, 25, 18, 0), turns(("Maya", "later")))
    both = append_chunk(once, other)
    assert both.startswith(once) and [c.cid for c in parse_day(both).chunks] == [CID, "c00000000"]
    assert append_chunk(once.rstrip("\n"), other).count("\n\n## ") == 2  # a file without its last newline


def test_the_consolidation_id_is_stable_and_read_back_from_history_and_facts():
    assert consolidation_id("7F3A9B21AA00ff") == "c7f3a9b21" == consolidation_id("7f3a9b21")
    entry = format_history_entry(datetime(2026, 11, 25, 14, 2), "Talked about Lena.", cid=CID)
    assert entry == "[2026-11-25 14:02 #c7f3a9b21] Talked about Lena."
    assert parse_stamp_cid(entry) == (datetime(2026, 11, 25, 14, 2), len("[2026-11-25 14:02 #c7f3a9b21]"), CID)
    assert parse_stamp_cid("[2026-11-25 14:02] old entry")[2] is None  # entries written before ids still read
    assert parse_stamp_cid("[2026-13-45 14:02 #c7f3a9b21] x") is None
    (unit,) = parse_history(entry + "\n", scope="owner", source="memory/HISTORY.md")
    assert unit.text == "Talked about Lena." and unit.extra == {"cid": CID}
    fact = "Sister Lena lives in Porto" + fact_mark(DAY, CID)
    assert fact == "Sister Lena lives in Porto (2026-11-25 #c7f3a9b21)"
    assert split_trailing_date(fact) == ("Sister Lena lives in Porto", "2026-11-25") and fact_cid(fact) == CID
    assert fact_date(fact)[0] == datetime(2026, 11, 25)
    (f,) = parse_memory(f"- {fact}\n", scope="owner", source="memory/MEMORY.md")
    assert f.extra["cid"] == CID and f.timestamp == datetime(2026, 11, 25)
    assert fact_cid("Added by hand (2026-11-25)") is None
    assert fact_cid("No mark (see #c7f3a9b21 later)") is None
    assert split_trailing_date("No mark (see #c7f3a9b21 later)")[1] is None


_speaker = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12).map(clean_speaker)
_line = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=40).map(str.rstrip)


def _text(lines: list[str]) -> str:
    while len(lines) > 1 and not lines[-1]:
        lines = lines[:-1]
    return "\n".join(lines)


_turn = st.builds(
    ArchivedTurn,
    _speaker,
    st.lists(_line, min_size=1, max_size=4).map(_text),
    st.one_of(st.none(), st.builds(time, st.integers(0, 23), st.integers(0, 59))),
)
_chunk = st.builds(
    ArchiveChunk,
    st.text("0123456789abcdef", min_size=8, max_size=16).map(lambda h: "c" + h),
    st.builds(datetime.combine, st.just(DAY), st.builds(time, st.integers(0, 23), st.integers(0, 59))),
    st.lists(_turn, max_size=5).map(tuple),
)


@settings(max_examples=150, deadline=None)
@given(chunks=st.lists(_chunk, max_size=4), preamble=st.lists(_line, max_size=3).map(_text))
def test_render_then_parse_is_the_identity_and_rendering_is_stable(chunks, preamble):
    preamble = "" if preamble.lstrip().startswith(("#", "## ")) else preamble.strip()
    day = ArchiveDay(DAY, chunks, preamble)
    text = render_day(day)
    back = parse_day(text)
    assert [(c.cid, c.when, c.turns) for c in back.chunks] == [(c.cid, c.when, c.turns) for c in chunks]
    assert render_day(back) == text


def test_archive_units_one_per_turn_with_stable_ids_across_a_hand_edit():
    from memclaw.markdown.archive import archive_units, day_of_source

    said = turns(("Maya", "Did Lena say which restaurant?"), ("memclaw", "Taberna da Ribeira."))
    chunk = ArchiveChunk(CID, datetime.combine(DAY, time(14, 2)), said)
    text = render_day(ArchiveDay(DAY, [chunk]))
    src = "memory/archive/2026-11-25.md"
    assert day_of_source(src) == DAY
    units = archive_units(text, scope="owner", source=src)
    assert [u.kind for u in units] == ["archive", "archive"]
    assert [u.text for u in units] == ["Maya: Did Lena say which restaurant?", "memclaw: Taberna da Ribeira."]
    assert units[0].timestamp == datetime(2026, 11, 25, 14, 2)
    assert units[1].extra["cid"] == CID and units[1].extra["turn"] == "1" and units[1].extra["turns"] == "2"
    assert all(u.id.startswith("a") for u in units)
    edited = archive_units(text.replace("Taberna da Ribeira", "Taberna do Mar"), scope="owner", source=src)
    assert [u.id for u in edited] == [u.id for u in units]  # a hand edit keeps the ids (the text hash changes)
    assert edited[1].text.endswith("Taberna do Mar.")
    other = archive_units(text, scope="people/discord%3A1", source=src)
    assert not {u.id for u in other} & {u.id for u in units}  # scopes never share ids


def test_chunk_of_tells_two_chunks_of_one_day_apart_and_nothing_else_is_a_chunk():
    from memclaw.markdown.archive import archive_units, chunk_of

    first = ArchiveChunk(
        CID, datetime.combine(DAY, time(9, 0)), turns(("Maya", "Lena booked a table."), ("Maya", "Friday."))
    )
    again = ArchiveChunk(CID, datetime.combine(DAY, time(18, 0)), turns(("Maya", "And Sunday lunch?")))
    src = "memory/archive/2026-11-25.md"
    units = archive_units(render_day(ArchiveDay(DAY, [first, again])), scope="owner", source=src)
    keys = [chunk_of(u.source, u.extra) for u in units]
    assert keys[0] == keys[1] == (src, CID, units[0].extra["chunk_line"])
    assert keys[2] is not None and keys[2] != keys[0]  # the same id twice in a day: two chunks, by their line
    assert chunk_of(src, {"cid": CID}) is None  # a fact or entry of the consolidation is no turn of its chunk
    assert chunk_of(src, {"cid": CID, "chunk_line": "3", "turn": "x"}) is None
