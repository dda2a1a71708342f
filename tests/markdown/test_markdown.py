"""The Markdown memory formats: parsing rules, odd Markdown, rendering, and a fuzz/round-trip property."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memclaw.markdown.formats import format_history_entry, parse_history, scan_history_doc
from memclaw.markdown.memory_md import ParseNote, describe_notes, parse_memory, scan_memory
from memclaw.markdown.units import unit_id
from tests.markdown.render import render_history, render_memory

SRC = "memory/MEMORY.md"


def facts(text: str, scope: str = "owner"):
    return parse_memory(text, scope=scope, source=SRC)


def texts(text: str) -> list[str]:
    return [u.text for u in facts(text)]


def notes(text: str) -> list[ParseNote]:
    return scan_memory(text, scope="owner", source=SRC).notes


def history(text: str):
    return parse_history(text, scope="owner", source="memory/HISTORY.md")


def key(units):
    return [(u.kind, u.text, u.section, u.timestamp) for u in units]


# ----- MEMORY.md -----------------------------------------------------------------------------------------
def test_bullets_sections_lines_and_ids():
    md = (
        "# About me\n- I live in Lyon\n* I have a cat\n+ I like tea\n1. First\n2) Second\n\n"
        "# Work\n## Projects\n- Tandem\n"
    )
    us = facts(md)
    assert [u.text for u in us] == ["I live in Lyon", "I have a cat", "I like tea", "First", "Second", "Tandem"]
    assert [u.line for u in us] == [2, 3, 4, 5, 6, 10]
    assert [u.section for u in us] == ["About me"] * 5 + ["Work > Projects"]
    assert all(u.kind == "fact" and u.scope == "owner" and u.source == SRC for u in us)
    assert us[0].id == unit_id("owner", SRC, "fact", "I live in Lyon", 0)


def test_ids_are_stable_when_lines_move_and_count_duplicates():
    a = facts("# A\n- tea\n- coffee\n- tea\n")
    b = facts("- new first line\n\n# B\n- coffee\n- tea\n\n- tea\n")
    assert a[0].id != a[2].id  # identical text: occurrence 0 and 1
    ids_a = {u.text + str(i): u.id for i, u in enumerate(x for x in a if x.text == "tea")}
    ids_b = {u.text + str(i): u.id for i, u in enumerate(x for x in b if x.text == "tea")}
    assert ids_a == ids_b
    assert next(u.id for u in a if u.text == "coffee") == next(u.id for u in b if u.text == "coffee")
    assert facts("- tea\n", scope="people/x")[0].id != a[0].id


def test_continuation_lines_belong_to_their_bullet():
    md = (
        "- first line\n  second line\n    third, deeper\n- lazy\ncontinues here\n"
        "- after blank\n\n  still mine\n\nnot mine\n"
    )
    assert texts(md) == ["first line\nsecond line\nthird, deeper", "lazy\ncontinues here", "after blank\n\nstill mine"]
    assert notes(md) == [ParseNote(10, "paragraph")]  # "not mine": after a blank line, not indented


def test_nested_bullets_are_their_own_facts_under_the_heading_path():
    md = "# Family\n## Kids\n- Kids\n  - Mia, born 2017\n    - loves drawing\n  - Leo, born 2020\n- Cat: Pixel\n"
    us = facts(md)
    assert [u.text for u in us] == ["Kids", "Mia, born 2017", "loves drawing", "Leo, born 2020", "Cat: Pixel"]
    assert {u.section for u in us} == {"Family > Kids"}
    assert [u.extra.get("parent") for u in us] == [None, "Kids", "Mia, born 2017", "Kids", None]
    assert [u.line for u in us] == [3, 4, 5, 6, 7]


def test_a_paragraph_is_not_a_fact_and_is_named_in_a_note():
    """Issue 19.4: plain paragraph lines were facts. Only list items are; a paragraph (an intro, a note to
    yourself) stays in the file and is named, with its line, so the owner can make it an item."""
    md = "# Notes\nThis file is mine.\nKeep it tidy.\n- a real fact\n\nSecond paragraph.\n"
    assert texts(md) == ["a real fact"]
    assert notes(md) == [ParseNote(2, "paragraph"), ParseNote(6, "paragraph")]
    assert describe_notes(SRC, scan_memory(md, scope="owner", source=SRC).notes) == [
        f'{SRC} lines 2, 6 are each a paragraph, not a fact (only list items are facts): start it with "- " to '
        "have it recalled"
    ]


def test_setext_headings_are_headings():
    """Issue 19.4: `Title` over `====` was indexed as a fact. Both underlines make headings (=== level 1, ---
    level 2), of a paragraph of one or more lines; under an item or after a blank line they do not."""
    md = (
        "Family\n======\n- Lena lives in Porto\n"
        "\nKids and\n  pets\n  ---\n- Mia\n- Leo\n===\n"  # an underline right under an item continues it
        "\nWork\n-\n- Solaris\n* * *\n- after a break\n\nno heading\n\n---\n- last\n# Top\nSub\n---\n- deep\n"
    )
    us = facts(md)
    assert [(u.text, u.section) for u in us] == [
        ("Lena lives in Porto", "Family"),
        ("Mia", "Family > Kids and pets"),
        ("Leo\n===", "Family > Kids and pets"),
        ("Solaris", "Family > Work"),
        ("after a break", "Family > Work"),
        ("last", "Family > Work"),
        ("deep", "Top > Sub"),
    ]
    doc = scan_memory(md, scope="owner", source=SRC)
    assert [(h.start, h.index, h.level, h.text) for h in doc.headings] == [
        (0, 1, 1, "Family"),
        (4, 6, 2, "Kids and pets"),
        (11, 12, 2, "Work"),
        (21, 21, 1, "Top"),
        (22, 23, 2, "Sub"),
    ]
    assert [(n.line, n.kind) for n in doc.notes] == [(18, "paragraph")]  # "no heading": a blank line came between


def test_fenced_code_never_splits_and_is_not_parsed():
    md = (
        "# Setup\n"
        "- My backup script:\n"
        "  ```bash\n"
        "  # not a heading\n"
        "  - not a bullet\n"
        "\n"
        "    indented()\n"
        "  ```\n"
        "- next\n"
        "\n"
        "~~~\n"
        "# standalone\n"
        "- code\n"
        "~~~\n"
        "- last\n"
    )
    us = facts(md)
    assert [u.text for u in us] == [
        "My backup script:\n```bash\n# not a heading\n- not a bullet\n\n  indented()\n```",
        "next",
        "last",
    ]
    assert all(u.section == "Setup" for u in us)
    # a block no item holds is not a fact (issue 19.4: it was one, fences and all): named with its line
    assert notes(md) == [ParseNote(11, "code")]
    assert describe_notes(SRC, notes(md)) == [
        f"{SRC} line 11 is a code block outside a list item, not a fact: indent it under the item it belongs to"
    ]
    directly = "- run it with:\n```\nmake\n```\n"  # right under its item, not indented: still the item's
    assert texts(directly) == ["run it with:\n```\nmake\n```"] and notes(directly) == []


def test_unclosed_fence_runs_to_the_end():
    us = facts("- a\n```\n- b\n# c\n")
    assert [u.text for u in us] == ["a\n```\n- b\n# c"]
    md = "- a\n\n```\n- b\n# c\n"
    assert texts(md) == ["a"] and notes(md) == [ParseNote(3, "code", "unclosed")]
    assert "never closed" in describe_notes(SRC, notes(md))[1]


def test_html_comments_are_ignored():
    md = (
        "<!--\n- commented out\n# nor this\n-->\n"
        "# Real\n"
        "- visible <!-- inline note --> text\n"
        "- spans <!-- a comment\n- hidden\n--> shown\n"
        "<!-- one line -->\n"
        "- last\n"
    )
    us = facts(md)
    assert [u.text for u in us] == ["visible  text", "spans\nshown", "last"]
    assert us[0].section == "Real"


def test_dates_on_facts():
    us = facts(
        "- Promoted to senior engineer (2025-03-03)\n- [2024-12-24] Gave Lena a bike\n- Met Ana [2023-05-08]\n"
        "- Bad date (2023-13-45)\n- Date (2023-05-08) in the middle\n"
    )
    assert [u.timestamp for u in us] == [
        datetime(2025, 3, 3),
        datetime(2024, 12, 24),
        datetime(2023, 5, 8),
        None,
        None,
    ]
    assert us[0].text == "Promoted to senior engineer (2025-03-03)"  # kept as written
    # issue 19.4: an impossible date was silently left undated; now it is named, with its line
    md = "# A\n- Bad date (2023-13-45)\n- Leap (2024-02-29)\n- Not leap (2026-02-30)\n- [2025-02-29] leading\n"
    assert [u.timestamp for u in facts(md)] == [None, datetime(2024, 2, 29), None, None]
    assert notes(md) == [ParseNote(2, "date", "2023-13-45"), ParseNote(4, "date", "2026-02-30"),
                         ParseNote(5, "date", "2025-02-29")]  # fmt: skip
    assert describe_notes(SRC, notes(md))[1] == (
        f"{SRC} line 4: 2026-02-30 is not a date, so the fact is undated: write a real date (YYYY-MM-DD)"
    )


def test_crlf_tabs_bom_and_control_characters():
    md = "\ufeff# Home\r\n-\tWi-Fi is \x07called Keller\r\n\t- nested with tab\r\n\r\n# Two #\r\n* x\r\r\n"
    us = facts(md)
    assert [u.text for u in us] == ["Wi-Fi is \x07called Keller", "nested with tab", "x"]
    assert [u.section for u in us] == ["Home", "Home", "Two"]
    assert us[1].extra["parent"] == "Wi-Fi is \x07called Keller"


def test_headings_levels_breaks_and_oddities():
    md = "### Deep first\n- a\n# Top\n### Skips a level\n- b\n##\n- c\n---\n- d\n\n#not a heading\n####### seven\n"
    us = facts(md)
    assert [(u.text, u.section) for u in us] == [
        ("a", "Deep first"),
        ("b", "Top > Skips a level"),
        ("c", "Top"),
        ("d", "Top"),
    ]
    assert notes(md) == [ParseNote(11, "paragraph")]  # "#not a heading" and "####### seven"


def test_empty_and_blank_input():
    assert facts("") == [] and facts("\n\n   \n") == [] and facts("-\n*\n# Only heading\n") == []


def test_surrogate_escaped_bytes_become_replacement_characters():
    raw = b"- caf\xe9 au lait\n".decode("utf-8", "surrogateescape")
    (u,) = facts(raw)
    assert u.text == "caf\ufffd au lait"
    u.text.encode("utf-8")  # valid


def test_scan_reports_line_ranges():
    doc = scan_memory("# A\n- one\n  more\n\n- two\n", scope="owner", source=SRC)
    assert [(b.start, b.end, b.prefix) for b in doc.facts] == [(1, 2, "- "), (4, 4, "- ")]
    assert [(h.index, h.level, h.path) for h in doc.headings] == [(0, 1, "A")]


def test_large_file_and_long_lines_parse():
    block = "".join(f"## Section {i}\n- fact {i} about something (2024-01-02)\n  more text\n" for i in range(1000))
    big = block * (5_000_000 // len(block) + 1)
    assert len(big) >= 5_000_000
    assert len(facts(big)) == 1000 * (5_000_000 // len(block) + 1)
    assert texts("x" * 2_000_000) == [] and notes("x" * 2_000_000) == [ParseNote(1, "paragraph")]
    assert texts("- " + "x" * 2_000_000) == ["x" * 2_000_000]
    assert facts("<!--" * 100_000) == []


# ----- HISTORY.md ----------------------------------------------------------------------------------------
def test_history_entries_and_stamps():
    text = (
        "[2025-01-08 19:40] Planned the year.\n"
        "Second line.\n\n\n"
        "[2025-02-14] Birthday party\n"
        "[2025-03-03 17:05:09] Promotion\r\n\r\n"
        "[2025-13-01 10:00] not a date, an undated entry of its own\n"
    )
    hs = history(text)
    assert [(h.text, h.timestamp, h.line) for h in hs] == [
        ("Planned the year.\nSecond line.", datetime(2025, 1, 8, 19, 40), 1),
        ("Birthday party", datetime(2025, 2, 14), 5),
        ("Promotion", datetime(2025, 3, 3, 17, 5, 9), 6),
        ("[2025-13-01 10:00] not a date, an undated entry of its own", None, 8),
    ]
    assert all(h.kind == "history" and h.section is None for h in hs)


QA_HISTORY = (
    "[2026-11-20 10:00] Dinner with Lena.\n\n"
    "[2026-11-31 10:00] Call the plumber.\n\n"
    "[2026-11-25 24:30] Bought a bike.\n"
)
"""QA's HISTORY.md: two stamps that are no date or time (30 days in November; hour 24), each under the last entry."""


def history_notes(text: str) -> list[ParseNote]:
    return scan_history_doc(text, scope="owner", source="memory/HISTORY.md").notes


def test_a_stamp_that_is_no_date_starts_an_undated_entry_of_its_own_and_is_named():
    """QA: `[2026-11-31 10:00]` (and `[2026-11-25 24:30]`) read as no stamp, so the entry was glued to the one above
    it, silently, and forgetting that one deleted both. Now such a line starts its own entry, undated (the stamp kept
    in its text, as MEMORY.md keeps a fact's impossible date), with a warning naming the line and the fix."""
    hs = history(QA_HISTORY)
    assert [(h.text, h.timestamp, h.line) for h in hs] == [
        ("Dinner with Lena.", datetime(2026, 11, 20, 10, 0), 1),
        ("[2026-11-31 10:00] Call the plumber.", None, 3),
        ("[2026-11-25 24:30] Bought a bike.", None, 5),
    ]
    assert len({h.id for h in hs}) == 3
    assert history_notes(QA_HISTORY) == [ParseNote(3, "stamp", "[2026-11-31 10:00]"),
                                         ParseNote(5, "stamp", "[2026-11-25 24:30]")]  # fmt: skip
    assert describe_notes("memory/HISTORY.md", history_notes(QA_HISTORY)) == [
        "memory/HISTORY.md line 3: [2026-11-31 10:00] is not a real date and time, so the entry is undated (kept on "
        "its own): write a real one, [YYYY-MM-DD HH:MM]",
        "memory/HISTORY.md line 5: [2026-11-25 24:30] is not a real date and time, so the entry is undated (kept on "
        "its own): write a real one, [YYYY-MM-DD HH:MM]",
    ]
    assert history_notes("[2026-11-20 10:00] fine\n[2024-02-29] leap\n\\[2026-13-01] escaped\n") == []


@pytest.mark.parametrize(
    "stamp",
    ["[2026-13-01 10:00]", "[2026-00-10 10:00]", "[2026-11-00 10:00]", "[2026-02-29 10:00]", "[2026-11-25 25:00]",
     "[2026-11-25 10:60]", "[2026-11-25 10:00:60]", "[2026-02-30]", "[0000-01-01]", "[2026-11-31 10:00 #c7f3a9b21]"],
)  # fmt: skip
def test_every_stamp_shape_with_no_real_date_or_time_starts_its_own_entry(stamp):
    text = f"Prelude.\n{stamp} Broken.\nits second line\n\n[2026-11-20 10:00] Dinner.\n{stamp} Also broken.\n"
    hs = history(text)
    assert [(h.text, h.timestamp, h.line) for h in hs] == [
        ("Prelude.", None, 1),
        (f"{stamp} Broken.\nits second line", None, 2),
        ("Dinner.", datetime(2026, 11, 20, 10, 0), 5),
        (f"{stamp} Also broken.", None, 6),
    ]
    assert [(n.line, n.kind, n.detail) for n in history_notes(text)] == [(2, "stamp", stamp), (6, "stamp", stamp)]
    assert history(f"{stamp}\n")[0].text == stamp  # a stamp alone is still an entry
    assert key(history(render_history(hs))) == key(hs)  # rendered in place, not moved before the dated entries


def test_history_prelude_and_comments():
    text = (
        "<!--\n[2024-01-01 10:00] example in a comment\n-->\nSome notes before any entry.\n\n[2024-02-01 09:00] Real\n"
    )
    hs = history(text)
    assert [(h.text, h.timestamp) for h in hs] == [
        ("Some notes before any entry.", None),
        ("Real", datetime(2024, 2, 1, 9, 0)),
    ]
    assert history("<!-- only a comment -->\n\n") == []


def test_stamp_only_lines_need_column_zero():
    hs = history("[2024-02-01 09:00] a\n  [2024-02-02 09:00] indented is text\n")
    assert len(hs) == 1 and hs[0].text.endswith("indented is text")


def test_format_history_entry_escapes_stamp_lines():
    e = format_history_entry(datetime(2024, 5, 1, 8, 30), "Talked.\n[2024-01-01 10:00] quoted\n<!-- x -->\n")
    assert e == "[2024-05-01 08:30] Talked.\n\\[2024-01-01 10:00] quoted\n\\<!-- x -->"
    odd = format_history_entry(datetime(2024, 5, 1, 8, 30), "Talked.\n[2024-13-01 25:00] only a stamp's shape")
    assert odd == "[2024-05-01 08:30] Talked.\n\\[2024-13-01 25:00] only a stamp's shape"  # else a second entry
    assert len(history(odd + "\n")) == 1
    (h,) = history(e + "\n")
    assert h.timestamp == datetime(2024, 5, 1, 8, 30) and "quoted" in h.text
    assert format_history_entry(datetime(2024, 5, 1, 8, 30, 15), "x") == "[2024-05-01 08:30] x"
    assert format_history_entry(datetime(2024, 5, 1, 8, 30, 15), "x", seconds=True) == "[2024-05-01 08:30:15] x"


def test_render_memory_and_history_round_trip_examples():
    md = "# A\n- one\n  two\n## B\n- three (2024-01-01)\n\npara\n\n```\ncode\n```\n# C\n- four\n"
    us = facts(md)
    again = facts(render_memory(us))
    assert key(again) == key(us)
    hs = history("prelude\n\n[2024-01-01 10:00] a\nb\n\n[2024-01-02] c\n")
    assert key(history(render_history(hs))) == key(hs)


# ----- fuzz / property -----------------------------------------------------------------------------------
_PIECES = [
    *"-*+#`~ \t\n\r>_[]()0123456789.:<!-abcx",
    "<!--",
    "-->",
    "```",
    "~~~",
    "- ",
    "  ",
    "\t",
    "\n\n",
    "# ",
    "## ",
    "1. ",
    "[2023-05-08 10:00]",
    "[2023-05-08]",
    "[2026-11-31 10:00]",
    "[2026-02-30]",
    "(2023-05-08)",
    "\u2028",
    "===",
    "Title\n",
    "(2026-02-30)",
    "\x1c",
    "\x00",
    "\ufeff",
    "\r\n",
]
markdownish = st.lists(st.sampled_from(_PIECES), max_size=80).map("".join)
any_text = st.one_of(markdownish, st.text(), st.binary().map(lambda b: b.decode("utf-8", "surrogateescape")))
FUZZ = settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(any_text)
def test_memory_parse_never_raises_and_round_trips(text):
    us = facts(text)
    assert key(facts(render_memory(us))) == key(us)
    for u in us:
        u.text.encode("utf-8")
        assert u.text.strip()


@FUZZ
@given(any_text)
def test_history_parse_never_raises_and_round_trips(text):
    hs = history(text)
    assert key(history(render_history(hs))) == key(hs)


@FUZZ
@given(st.datetimes(min_value=datetime(1900, 1, 1)).map(lambda d: d.replace(microsecond=0)), st.text())
def test_a_formatted_entry_is_exactly_one_entry(ts, text):
    e = format_history_entry(ts, text)
    hs = history("[2020-01-01 00:00] before\n\n" + e + "\n")
    if text.strip():
        assert len(hs) == 2 and hs[1].timestamp == ts.replace(second=0)
