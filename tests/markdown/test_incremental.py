"""The append fast path (memclaw.markdown.incremental): whenever it parses only the appended tail of a memory file, the
units (ids, lines, texts, sections, extras, timestamps) and the mark are exactly those of a full parse; a hand
edit anywhere before the end (or an append that is not at a clean boundary) rules it out."""

from __future__ import annotations

import json
from datetime import datetime, time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memclaw.markdown.incremental import FileMark, parse_appended, parse_file

SCOPE, SRC = "owner", "memory/MEMORY.md"
ARCHIVE_SRC = "memory/archive/2026-11-25.md"

# Lines that exercise the parser's state: items (nested, numbered, lazy continuations), headings (ATX, and setext
# underlines under a paragraph), comments opening and closing, fences, thematic breaks, paragraphs, dated facts
# (and dates that are none), identical texts, CR line ends.
MEMORY_LINES = [
    "- tea", "- tea", "* Lena lives in Porto", "1. first", "  - nested tea", "    continuation", "lazy line",
    "# Work", "## Projects", "### Deep", "#NotAHeading", "", "", "<!-- note -->", "<!-- open", "still open -->",
    "```", "~~~", "code line", "---", "* * *", "Plain paragraph text", "- dated fact (2024-05-01)",
    "- [2023-01-02] leading date", "\t- tabbed", "- tea\r", "# About me\r", "- ", "+ plus item",
    "Setext title", "===", "-", "  ---", "=== not an underline", "- no such day (2026-02-30)", "  ```",
]  # fmt: skip
HISTORY_LINES = [
    "[2026-01-01 10:00] Talked about tea", "[2026-01-01 10:00] Talked about tea", "[2026-02-03] dated only",
    "continued line", "", "", "<!-- hidden", "-->", "<!-- one line -->", "prelude text", "[2026-13-40 10:00] bad",
    "  indented", "[2026-03-04 05:06:07] with seconds\r", "[2026-02-30] no such day", "[2026-11-25 24:30 #c7f3a9b21] x",
]  # fmt: skip

ARCHIVE_LINES = [
    "# 2026-11-25", "## 14:02 #c7f3a9b21", "## 14:02 #c7f3a9b21", "## 9:05 #c0123abcd", "## 25:99 #cdeadbeef",
    "- 14:02 **Maya**: Did Lena say which restaurant?", "- 14:03 **memclaw**: Taberna da Ribeira.",
    "- Maya: no time, no bold", "* 10:00 **Lena**: star marker", "  indented continuation", "unindented text",
    "", "", "- 14:02 **Maya**:", "## not a header", "\t- tabbed turn", "- 14:02 **Maya**: tea\r",
]  # fmt: skip
mem_text = st.lists(st.sampled_from(MEMORY_LINES), max_size=14).map(lambda ls: "\n".join(ls))
hist_text = st.lists(st.sampled_from(HISTORY_LINES), max_size=10).map(lambda ls: "\n".join(ls))
arch_text = st.lists(st.sampled_from(ARCHIVE_LINES), max_size=10).map(lambda ls: "\n".join(ls))
ending = st.sampled_from(["", "\n", "\n\n", "\r\n"])


def _same(a, b) -> None:
    assert [(u.id, u.kind, u.line, u.text, u.section, u.timestamp, u.extra) for u in a] == [
        (u.id, u.kind, u.line, u.text, u.section, u.timestamp, u.extra) for u in b
    ]


def _check(kind: str, old: bytes, new: bytes) -> bool:
    """Parse `old`, then `new` both ways; True if the fast path was taken. The units, the mark and the parse notes
    (what is not a fact, dates that are none) must be the full parse's."""
    src = ARCHIVE_SRC if kind == "archive" else SRC
    old_notes, tail_notes, full_notes = [], [], []
    old_units, mark = parse_file(old, kind=kind, scope=SCOPE, source=src, notes=old_notes)
    full_units, full_mark = parse_file(new, kind=kind, scope=SCOPE, source=src, notes=full_notes)
    known = {u.id for u in old_units}
    res = parse_appended(new, mark, kind=kind, scope=SCOPE, source=src, known=known, notes=tail_notes)
    if res is None:
        return False
    tail, tail_mark = res
    _same(old_units + tail, full_units)
    assert tail_mark == full_mark
    assert old_notes + tail_notes == full_notes
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(old=mem_text, e1=ending, tail=mem_text, e2=ending)
def test_memory_append_matches_full_parse(old, e1, tail, e2):
    _check("fact", (old + e1).encode(), (old + e1 + tail + e2).encode())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(old=hist_text, e1=ending, tail=hist_text, e2=ending)
def test_history_append_matches_full_parse(old, e1, tail, e2):
    _check("history", (old + e1).encode(), (old + e1 + tail + e2).encode())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(old=arch_text, e1=ending, tail=arch_text, e2=ending)
def test_archive_append_matches_full_parse(old, e1, tail, e2):
    _check("archive", (old + e1).encode(), (old + e1 + tail + e2).encode())


def test_an_appended_archive_chunk_takes_the_fast_path_and_continues_occurrences():
    from memclaw.markdown.archive import ArchiveChunk, ArchivedTurn, append_chunk

    def chunk(cid: str, hh: int, *said: str) -> ArchiveChunk:
        said_turns = tuple(ArchivedTurn("Maya", s, time(hh, 0)) for s in said)
        return ArchiveChunk(cid, datetime(2026, 11, 25, hh, 0), said_turns)

    old = append_chunk("", chunk("c7f3a9b21", 9, "tea?", "yes, oolong"))
    new = append_chunk(old, chunk("c0123abcd", 14, "which restaurant?"))
    assert _check("archive", old.encode(), new.encode())
    again = new + "\n## 15:00 #c7f3a9b21\n- 15:00 **Maya**: tea again\n"  # a hand-copied id: occurrence 1
    assert _check("archive", new.encode(), again.encode())
    units, mark = parse_file(again.encode(), kind="archive", scope=SCOPE, source=ARCHIVE_SRC)
    assert len({u.id for u in units}) == 4 and dict((c, n) for n, c in mark.stack)["c7f3a9b21"] == 2
    assert not _check("archive", old.encode(), (old + "  a continuation of oolong\n").encode())


@settings(max_examples=200, deadline=None)
@given(old=mem_text, tail=st.lists(st.sampled_from(["- tea", "- Lena", "# Work", "- tea (2024-05-01)"]), min_size=1))
def test_typical_appends_take_the_fast_path(old, tail):
    """A fact or heading appended to a file that ends cleanly is parsed alone (and correctly)."""
    base = old + "\n"
    _, mark = parse_file(base.encode(), kind="fact", scope=SCOPE, source=SRC)
    taken = _check("fact", base.encode(), (base + "\n".join(tail) + "\n").encode())
    assert taken == mark.resumable


def test_identical_texts_continue_their_occurrence_numbers():
    old = b"# A\n- tea\n- tea\n"
    new = old + b"- tea\n# B\n- tea\n"
    assert _check("fact", old, new)
    units, _ = parse_file(new, kind="fact", scope=SCOPE, source=SRC)
    assert len({u.id for u in units}) == 4


def test_history_append_after_a_blank_separator():
    old = b"[2026-01-01 10:00] first\nmore\n"
    assert _check("history", old, old + b"\n[2026-01-02 11:00] second\n")


def test_a_hand_edit_before_the_append_rules_the_fast_path_out():
    old = b"# A\n- tea\n- coffee\n"
    _, mark = parse_file(old, kind="fact", scope=SCOPE, source=SRC)
    edited = b"# A\n- tee\n- coffee\n- new fact\n"  # same size prefix, one byte changed
    assert parse_appended(edited, mark, kind="fact", scope=SCOPE, source=SRC, known=set()) is None
    shorter = b"# A\n- tea\n"
    assert parse_appended(shorter, mark, kind="fact", scope=SCOPE, source=SRC, known=set()) is None


def test_appends_that_could_change_earlier_units_are_parsed_in_full():
    old = b"- tea\n"
    _, mark = parse_file(old, kind="fact", scope=SCOPE, source=SRC)
    for tail in (b"  continuation of tea\n", b"lazy continuation\n", b"  - nested\n", b"<!-- c -->\n", b"```\n"):
        assert parse_appended(old + tail, mark, kind="fact", scope=SCOPE, source=SRC, known=set()) is None
    # a bare `-` or `===` could underline a paragraph the earlier text ended in (a setext heading)
    _, para = parse_file(b"- tea\n\nTitle\n", kind="fact", scope=SCOPE, source=SRC)
    for tail in (b"-\n- x\n", b"===\n", b"---\n"):
        assert (
            parse_appended(b"- tea\n\nTitle\n" + tail, para, kind="fact", scope=SCOPE, source=SRC, known=set()) is None
        )
    _, open_mark = parse_file(b"- tea\n<!-- open\n", kind="fact", scope=SCOPE, source=SRC)
    assert not open_mark.resumable
    _, no_nl = parse_file(b"- tea", kind="fact", scope=SCOPE, source=SRC)
    assert not no_nl.resumable


def test_mark_round_trips_and_rejects_junk():
    _, mark = parse_file(b"# A\n## B\n- x\n", kind="fact", scope=SCOPE, source=SRC)
    assert mark.section == "A > B"
    assert FileMark.from_json(json.loads(json.dumps(mark.to_json()))) == mark
    for junk in (None, [1, 2], ["a", "", 1, True, []], [1, "", 1, "yes", []], [1, "zz", 1, True, []],
                 [1, "", 1, True, [[1]]], [1, "", 1, True, [["1", "x"]]]):  # fmt: skip
        try:
            FileMark.from_json(junk)
        except ValueError:
            continue
        raise AssertionError(f"accepted {junk!r}")


@pytest.mark.parametrize(
    "text",
    ["# A\n- x\n", "# A\r\n- x\r\n", "- x", "\ufeff- x\n", "# A\n## B\n\n", "- x\n<!-- open\n", "```\ncode\n",
     "- * * *\n", "para\ncontinued\n", "", "# Notes\n- x\n", "# Notes\r\n- x\r\n", "# A\n- a\n# Notes\n\n",
     "# Notes\n- x\n\n<!-- c -->\n\n", "# Notes\n- x\n- * * *\n", "# Notes\n- x\n<!-- open\n", "# B\n# A\n- y\n"],
)  # fmt: skip
@pytest.mark.parametrize("section", [None, "A"])
@pytest.mark.parametrize("stale", [False, True])
def test_append_fact_fast_path_writes_what_the_full_path_writes(tmp_path, monkeypatch, text, section, stale):
    """memfiles.append_fact with the index's mark (the fast path) leaves the very bytes the full path
    (plan + verify) leaves, or fails the same way; also with a mark taken before another append. The full
    path runs only where the file does not end cleanly or does not end in the fact's section (DEFAULT_SECTION
    without one)."""
    from memclaw.errors import MemoryFileError
    from memclaw.markdown import fact_ops as memfiles
    from memclaw.markdown.fact_ops import DEFAULT_SECTION, append_fact

    full_path_calls = []
    real = memfiles._apply_locked  # the full path's read, plan, check and write (under append_fact's lock)
    monkeypatch.setattr(memfiles, "_apply_locked", lambda *a, **kw: full_path_calls.append(a[0]) or real(*a, **kw))

    full, fast = tmp_path / "full.md", tmp_path / "fast.md"
    base = text.encode()
    _, mark = parse_file(base, kind="fact", scope=SCOPE, source=SRC)
    if stale:
        base += b"- appended by hand\n" if base.endswith(b"\n") or not base else b""
    results = []
    for p, m in ((full, None), (fast, mark)):
        p.write_bytes(base)
        try:
            append_fact(p, "a new fact", section=section, mark=m)
            results.append(p.read_bytes())
        except MemoryFileError as e:
            results.append(type(e))
    assert results[0] == results[1]
    assert (fast in full_path_calls) == (not mark.resumable or mark.section != (section or DEFAULT_SECTION))
