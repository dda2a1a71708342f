"""Memory files on disk: bytes preserved, atomic and locked edits, all-or-nothing op lists, true history appends."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memclaw.errors import MemoryFileError
from memclaw.markdown._syntax import bullet_first_line
from memclaw.markdown.fact_ops import DEFAULT_SECTION, FactOp, append_fact, apply_fact_ops
from memclaw.markdown.files import file_signature, lock_path, read_units
from memclaw.markdown.history_file import append_history, delete_history_entries
from memclaw.markdown.incremental import parse_file
from memclaw.markdown.memory_md import parse_memory
from tests.markdown.test_markdown import QA_HISTORY

SRC = "memory/MEMORY.md"


def facts(path: Path, scope: str = "owner"):
    return read_units(path, scope=scope, kind="fact", source=SRC)


def by_text(path: Path) -> dict[str, str]:
    return {u.text: u.id for u in facts(path)}


def write(tmp_path: Path, text: str | bytes, name: str = "MEMORY.md") -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


# ----- reading -------------------------------------------------------------------------------------------
def test_read_units_kinds_and_missing_file(tmp_path):
    p = write(tmp_path, "# A\n- one\n")
    (u,) = facts(p)
    assert (u.text, u.section, u.source, u.line) == ("one", "A", SRC, 2)
    h = write(tmp_path, "[2024-01-01 10:00] hi\n", "HISTORY.md")
    (e,) = read_units(h, scope="owner", kind="history", source="memory/HISTORY.md")
    assert e.timestamp == datetime(2024, 1, 1, 10, 0)
    assert facts(tmp_path / "missing.md") == []
    with pytest.raises(MemoryFileError, match="unknown memory kind"):
        read_units(p, scope="owner", kind="other", source=SRC)
    with pytest.raises(MemoryFileError, match="cannot read memory file"):
        facts(tmp_path)  # a directory


def test_non_utf8_bytes_are_indexed_as_replacement_and_preserved_by_updates(tmp_path):
    raw = b"# Caf\xe9\n- I like caf\xe9 cr\xe8me\n- Latin-1 \xff\xfe line\n- plain\n"
    p = write(tmp_path, raw)
    us = facts(p)
    assert [u.text for u in us] == ["I like caf\ufffd cr\ufffdme", "Latin-1 \ufffd line", "plain"]
    assert us[0].section == "Caf\ufffd"
    apply_fact_ops(p, "owner", SRC, [FactOp("update", id=us[2].id, text="plain, edited")])
    assert p.read_bytes() == raw.replace(b"- plain\n", b"- plain, edited\n")
    apply_fact_ops(p, "owner", SRC, [FactOp("delete", id=us[0].id)])
    assert p.read_bytes() == b"# Caf\xe9\n- Latin-1 \xff\xfe line\n- plain, edited\n"


def test_file_signature_changes_on_every_write(tmp_path):
    p = tmp_path / "MEMORY.md"
    assert file_signature(p) is None
    append_fact(p, "one")
    s1 = file_signature(p)
    append_fact(p, "two")
    s2 = file_signature(p)
    h = tmp_path / "HISTORY.md"
    append_history(h, datetime(2024, 1, 1), "a")
    s3 = file_signature(h)
    append_history(h, datetime(2024, 1, 2), "b")
    assert len({s1, s2}) == 2 and s3 != file_signature(h)
    assert s1 is not None and len(s1) == 3


# ----- append_fact ---------------------------------------------------------------------------------------
def test_append_fact_into_a_missing_file_and_a_file_without_newline(tmp_path):
    p = tmp_path / "sub" / "MEMORY.md"
    append_fact(p, "first fact")
    append_fact(p, "  second\nfact  with\tspaces ")
    assert p.read_text() == "# Notes\n\n- first fact\n- second fact with spaces\n"
    q = write(tmp_path, "# A\n- a", "NO_NEWLINE.md")
    append_fact(q, "b", section="A")
    assert q.read_text() == "# A\n- a\n- b\n"


def test_a_fact_without_section_goes_under_the_default_section_not_the_last_heading(tmp_path):
    """Issue 13.3: a fact about a neighbour must not be filed under "Work > Health" because that heading is last."""
    p = write(tmp_path, "# Work\n- I work at Solaris\n\n## Health\n- allergic to penicillin\n")
    append_fact(p, "My neighbour Omar has a dog")
    append_fact(p, "The bakery closes at 18:00")
    append_fact(p, "Mia is my daughter", section="Family")
    append_fact(p, "The bins go out on Tuesday")
    assert [(u.text, u.section) for u in facts(p)] == [
        ("I work at Solaris", "Work"),
        ("allergic to penicillin", "Work > Health"),
        ("My neighbour Omar has a dog", DEFAULT_SECTION),
        ("The bakery closes at 18:00", DEFAULT_SECTION),
        ("The bins go out on Tuesday", DEFAULT_SECTION),
        ("Mia is my daughter", "Family"),
    ]
    assert p.read_text().count(f"# {DEFAULT_SECTION}\n") == 1  # created once
    ops = [FactOp("add", text="added by an op without section")]
    assert apply_fact_ops(p, "owner", SRC, ops).added[0].section == DEFAULT_SECTION


def test_append_fact_under_existing_section(tmp_path):
    p = write(tmp_path, "# Family\n- Lena is my sister\n  (she lives in Porto)\n\n# Work\n- I work at Solaris\n")
    append_fact(p, "Mia is my daughter", section="Family")
    assert p.read_text() == (
        "# Family\n- Lena is my sister\n  (she lives in Porto)\n- Mia is my daughter\n\n# Work\n- I work at Solaris\n"
    )
    append_fact(p, "Empty section fact", section="Work")
    assert [(u.text, u.section) for u in facts(p)][-1] == ("Empty section fact", "Work")


def test_append_fact_creates_sections(tmp_path):
    p = write(tmp_path, "# Work\n- I work at Solaris\n\n# Health\n- allergic to penicillin\n")
    append_fact(p, "Tandem launches in September", section="Work > Projects")
    append_fact(p, "Pixel is a grey cat", section=" Home  >  Pets ")
    us = facts(p)
    assert [(u.text, u.section) for u in us] == [
        ("I work at Solaris", "Work"),
        ("Tandem launches in September", "Work > Projects"),
        ("allergic to penicillin", "Health"),
        ("Pixel is a grey cat", "Home > Pets"),
    ]
    assert "## Projects" in p.read_text() and "# Home\n## Pets" in p.read_text()


def test_append_fact_keeps_crlf_and_defuses_comment_openers(tmp_path):
    p = write(tmp_path, b"# A\r\n- a\r\n")
    append_fact(p, "b <!-- not a comment", section="A")
    append_fact(p, "c", section="B")
    data = p.read_bytes()
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert [u.text for u in facts(p)] == ["a", "b <\\!-- not a comment", "c"]


def test_append_fact_refuses_to_write_into_an_open_comment(tmp_path):
    before = b"- a\n<!-- never closed\n"
    p = write(tmp_path, before)
    with pytest.raises(MemoryFileError, match="unclosed HTML comment"):
        append_fact(p, "lost?")
    assert p.read_bytes() == before


@pytest.mark.parametrize(
    "before",
    [
        b"# Notes\n- a\n  ```\n",  # the fence is the last fact's, and that fact the last of its section
        b"# Notes\n- a\n  ```\n  code",  # the same without a final newline
        b"# Notes\n- a\n- b\n  ```\n\n# Later\n- c\n",  # the fence hides the heading after it too
        b"- a\n  ```\n",  # no heading: a new # Notes at the end
    ],
)
def test_append_fact_refuses_to_write_into_an_unclosed_fence_of_its_section(tmp_path, before):
    p = write(tmp_path, before)
    for section in (None, "Other"):
        with pytest.raises(MemoryFileError, match=r"ends inside an unclosed code fence \(```\): close it"):
            append_fact(p, "new fact", section=section)
        with pytest.raises(MemoryFileError, match="unclosed code fence"):
            apply_fact_ops(p, "owner", SRC, [FactOp("add", text="new fact", section=section)])
    assert p.read_bytes() == before


def test_append_fact_rejects_empty_text(tmp_path):
    p = write(tmp_path, "- a\n")
    with pytest.raises(MemoryFileError, match="empty fact"):
        append_fact(p, " \n\t")
    assert p.read_text() == "- a\n"


# ----- apply_fact_ops ------------------------------------------------------------------------------------
ODD = (
    "# Me\n"
    "  * I live in Lyon\n"
    "    since 2019\n"
    "3. I have a cat\n"
    "   - The cat is called Pixel\n"
    "     and is grey\n"
    "- Keep me\n"
    "\n"
    "```\n- not a fact\n```\n"
)


def test_update_keeps_indentation_and_marker_and_drops_old_continuation(tmp_path):
    p = write(tmp_path, ODD)
    ids = by_text(p)
    r = apply_fact_ops(
        p,
        "owner",
        SRC,
        [
            FactOp("update", id=ids["I live in Lyon\nsince 2019"], text="I live in Grenoble"),
            FactOp("update", id=ids["I have a cat"], text="I have two cats"),
        ],
    )
    assert p.read_text() == ODD.replace("  * I live in Lyon\n    since 2019\n", "  * I live in Grenoble\n").replace(
        "3. I have a cat\n", "3. I have two cats\n"
    )
    assert set(r.updated) == {ids["I live in Lyon\nsince 2019"], ids["I have a cat"]}
    assert r.updated[ids["I have a cat"]].text == "I have two cats" and r.changed


def test_delete_removes_only_the_item_and_its_continuation(tmp_path):
    p = write(tmp_path, ODD)
    ids = by_text(p)
    r = apply_fact_ops(p, "owner", SRC, [FactOp("delete", id=ids["The cat is called Pixel\nand is grey"])])
    assert p.read_text() == ODD.replace("   - The cat is called Pixel\n     and is grey\n", "")
    assert r.deleted == [ids["The cat is called Pixel\nand is grey"]]
    apply_fact_ops(p, "owner", SRC, [FactOp("delete", id=by_text(p)["I have a cat"])])
    assert "3. I have a cat" not in p.read_text() and "- Keep me" in p.read_text()


def test_parent_delete_keeps_nested_children(tmp_path):
    p = write(tmp_path, "- Kids\n  - Mia\n  - Leo\n")
    apply_fact_ops(p, "owner", SRC, [FactOp("delete", id=by_text(p)["Kids"])])
    assert [u.text for u in facts(p)] == ["Mia", "Leo"]


def test_mixed_ops_apply_in_one_write(tmp_path):
    p = write(tmp_path, "# A\n- one\n- two\n- three\n")
    ids = by_text(p)
    inode = os.stat(p).st_ino
    r = apply_fact_ops(
        p,
        "owner",
        SRC,
        [
            FactOp("delete", id=ids["one"]),
            FactOp("update", id=ids["three"], text="THREE"),
            FactOp("add", text="four", section="A"),
            FactOp("add", text="five", section="B"),
        ],
    )
    assert [(u.text, u.section) for u in facts(p)] == [("two", "A"), ("THREE", "A"), ("four", "A"), ("five", "B")]
    assert [u.text for u in r.added] == ["four", "five"] and len(r.facts) == 4
    assert os.stat(p).st_ino != inode  # replaced atomically, not rewritten in place
    leftovers = [x.name for x in tmp_path.iterdir() if x.name.endswith(".tmp")]
    assert leftovers == []
    assert lock_path(p).name == ".MEMORY.md.lock"


@pytest.mark.parametrize(
    "ops, message",
    [
        ([FactOp("delete", id="f000000000000")], "unknown fact id"),
        ([FactOp("update", id=None, text="x")], "unknown fact id"),
        ([FactOp("update", id="ID", text="   ")], "empty fact text"),
        ([FactOp("add", text="ok"), FactOp("delete", id="ID"), FactOp("update", id="ID", text="y")], "twice"),
        ([FactOp("add", text="fine"), FactOp("delete", id="nope")], "unknown fact id 'nope'"),
        ([FactOp("rename", id="ID")], "unknown fact op"),  # type: ignore[arg-type]
    ],
)
def test_a_failing_op_list_leaves_the_file_byte_identical(tmp_path, ops, message):
    before = b"# A\r\n- one \xff\n- two\n"
    p = write(tmp_path, before)
    real = facts(p)[0].id
    ops = [FactOp(o.op, real if o.id == "ID" else o.id, o.text, o.section) for o in ops]
    sig = file_signature(p)
    with pytest.raises(MemoryFileError, match=message):
        apply_fact_ops(p, "owner", SRC, ops)
    assert p.read_bytes() == before and file_signature(p) == sig


def test_ids_come_from_the_scope_and_source(tmp_path):
    p = write(tmp_path, "- one\n")
    other_scope = read_units(p, scope="people/x", kind="fact", source=SRC)[0].id
    with pytest.raises(MemoryFileError, match="unknown fact id"):
        apply_fact_ops(p, "owner", SRC, [FactOp("delete", id=other_scope)])
    apply_fact_ops(p, "people/x", SRC, [FactOp("delete", id=other_scope)])
    assert facts(p) == []


def test_comments_next_to_edited_facts_survive(tmp_path):
    p = write(tmp_path, "- a <!-- why: told me in May -->\n- b <!-- multi\nline -->\n- c\n")
    ids = by_text(p)
    apply_fact_ops(p, "owner", SRC, [FactOp("update", id=ids["a"], text="A"), FactOp("delete", id=ids["b"])])
    assert p.read_text() == "- A <!-- why: told me in May -->\n<!-- multi\nline -->\n- c\n"
    assert [u.text for u in facts(p)] == ["A", "c"]


def test_edits_in_a_5mb_file_preserve_every_other_byte(tmp_path):
    body = "".join(
        f"## S{i}\n- fact number {i} \u00e9\xe8 (2024-01-01)\n  continued with a longer line of words\n"
        for i in range(60_000)
    )
    raw = body.encode("utf-8") + b"- bad \xff byte\n"
    assert len(raw) > 5_000_000
    p = write(tmp_path, raw)
    us = facts(p)
    assert len(us) == 60_001
    target = us[30_000]
    apply_fact_ops(p, "owner", SRC, [FactOp("update", id=target.id, text="edited")])
    old_line = "- fact number 30000 \u00e9\xe8 (2024-01-01)\n  continued with a longer line of words\n".encode()
    assert p.read_bytes() == raw.replace(old_line, b"- edited\n")


# ----- read-only files -----------------------------------------------------------------------------------
def test_no_writer_touches_a_read_only_memory_file(tmp_path):
    """A memory file made read-only is never written, whoever runs memclaw (root included: its mode decides): an
    add (the fast append and the full edit), a delete, a history append or delete. One MemoryFileError naming the
    file, that it is read-only and the chmod that allows the write; bytes, inode and mode unchanged."""
    mem = write(tmp_path, "# Notes\n- a\n")
    hist = write(tmp_path, "[2026-03-02 18:10] Talked about Porto.\n", "HISTORY.md")
    mark = parse_file(mem.read_bytes(), kind="fact", scope="owner", source=SRC)[1]  # the append's fast path
    fact = facts(mem)[0].id
    entry = read_units(hist, scope="owner", kind="history", source=SRC)[0].id
    writes = [
        (mem, lambda: append_fact(mem, "b", mark=mark)),
        (mem, lambda: append_fact(mem, "c", section="Other")),
        (mem, lambda: apply_fact_ops(mem, "owner", SRC, [FactOp("delete", id=fact)])),
        (hist, lambda: append_history(hist, datetime(2026, 3, 3, 9, 0), "Planned the garden.")),
        (hist, lambda: delete_history_entries(hist, "owner", SRC, [entry])),
    ]
    for path, edit in writes:
        path.chmod(0o444)
        before = path.read_bytes(), path.stat().st_ino
        with pytest.raises(MemoryFileError) as caught:
            edit()
        said = str(caught.value)
        assert str(path) in said and "read-only" in said and f"chmod u+w {path}" in said, said
        assert (path.read_bytes(), path.stat().st_ino) == before and path.stat().st_mode & 0o777 == 0o444
        path.chmod(0o644)
        edit()  # writable again: the same edit goes through
        assert path.read_bytes() != before[0]


# ----- concurrency ---------------------------------------------------------------------------------------
def _writer(path: str, who: str, n: int) -> None:
    for i in range(n):
        append_fact(Path(path), f"{who} fact {i}", section=f"Writer {who}" if i % 2 else None)


def test_two_processes_appending_keep_every_fact(tmp_path):
    p = tmp_path / "MEMORY.md"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(p), w, 100)) for w in ("a", "b")]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join(120)
        assert pr.exitcode == 0
    got = Counter(u.text for u in facts(p))
    assert got == Counter(f"{w} fact {i}" for w in "ab" for i in range(100))


def _add_once(path: str, n: int) -> None:
    p = Path(path)
    for i in range(n):
        fact = f"shared fact {i}"
        append_fact(p, fact, known=lambda fact=fact: next((u for u in facts(p) if u.text == fact), None))


def test_processes_adding_the_same_facts_with_a_check_write_each_once(tmp_path):
    """`known` is asked under the lock on the file as the other writers left it: four processes adding the same
    facts at once write each of them once."""
    p = write(tmp_path, "- seed\n")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_add_once, args=(str(p), 40)) for _ in range(4)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join(120)
        assert pr.exitcode == 0
    assert Counter(u.text for u in facts(p)) == Counter(["seed", *(f"shared fact {i}" for i in range(40))])
    before = p.read_bytes()
    there = facts(p)[1]
    assert append_fact(p, "shared fact 0", known=lambda: there) is there and p.read_bytes() == before


def test_threads_appending_and_editing_keep_every_fact(tmp_path):
    p = write(tmp_path, "- seed\n")
    errors: list[BaseException] = []

    def run(who: str) -> None:
        try:
            _writer(str(p), who, 30)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(w,)) for w in "xyz"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(facts(p)) == 91


# ----- history -------------------------------------------------------------------------------------------
def test_append_history_is_a_true_append_with_blank_lines(tmp_path):
    h = tmp_path / "HISTORY.md"
    append_history(h, datetime(2024, 3, 2, 18, 10), "Talked about Porto.")
    first = h.read_bytes()
    inode = os.stat(h).st_ino
    append_history(h, datetime(2024, 3, 3, 9, 0), "Line one\n[2024-01-01 10:00] looks like a stamp\nline three")
    data = h.read_bytes()
    assert data.startswith(first) and os.stat(h).st_ino == inode
    assert data.decode() == (
        "[2024-03-02 18:10] Talked about Porto.\n\n"
        "[2024-03-03 09:00] Line one\n\\[2024-01-01 10:00] looks like a stamp\nline three\n"
    )
    hs = read_units(h, scope="owner", kind="history", source="memory/HISTORY.md")
    assert [x.timestamp for x in hs] == [datetime(2024, 3, 2, 18, 10), datetime(2024, 3, 3, 9, 0)]


@pytest.mark.parametrize(
    "before, sep",
    [(b"[2024-01-01 10:00] a", b"\n\n"), (b"[2024-01-01 10:00] a\n", b"\n"), (b"[2024-01-01 10:00] a\n\n", b"")],
)
def test_append_history_separation(tmp_path, before, sep):
    h = write(tmp_path, before, "HISTORY.md")
    append_history(h, datetime(2024, 1, 2, 11, 0), "b")
    assert h.read_bytes() == before + sep + b"[2024-01-02 11:00] b\n"


def test_append_history_writes_minutes(tmp_path):
    h = tmp_path / "HISTORY.md"
    append_history(h, datetime(2024, 1, 2, 11, 0, 59, 123), "x")
    assert h.read_text() == "[2024-01-02 11:00] x\n"


def test_append_history_keeps_crlf_and_foreign_bytes(tmp_path):
    before = b"[2024-01-01 10:00] caf\xe9\r\n"
    h = write(tmp_path, before, "HISTORY.md")
    append_history(h, datetime(2024, 1, 2, 11, 0), "two\nlines")
    assert h.read_bytes() == before + b"\r\n[2024-01-02 11:00] two\r\nlines\r\n"
    with pytest.raises(MemoryFileError, match="empty history entry"):
        append_history(h, datetime(2024, 1, 3), "  ")


@pytest.mark.parametrize(
    ("before", "forget", "after"),
    [
        ("[2024-01-01 10:00] a\n\n[2024-01-02 10:00] b\n\n[2024-01-03 10:00] c\n", "b",
         "[2024-01-01 10:00] a\n\n[2024-01-03 10:00] c\n"),
        ("[2024-01-01 10:00] a\n\n[2024-01-02 10:00] b\nsecond line\n", "b\nsecond line", "[2024-01-01 10:00] a\n\n"),
        ("prelude\n<!-- note -->\n[2024-01-01 10:00] a\r\n\r\n[2024-01-02 10:00] caf\xe9", "a",
         "prelude\n<!-- note -->\n[2024-01-02 10:00] caf\xe9"),
    ],
)  # fmt: skip
def test_delete_history_entries_removes_the_entry_and_its_separator_only(tmp_path, before, forget, after):
    h = write(tmp_path, before.encode("latin-1"), "HISTORY.md")
    units = read_units(h, scope="owner", kind="history", source=SRC)
    target = next(u for u in units if u.text == forget)
    gone = delete_history_entries(h, "owner", SRC, [target.id])
    assert [u.id for u in gone] == [target.id]
    assert h.read_bytes() == after.encode("latin-1")
    with pytest.raises(MemoryFileError, match="unknown history id"):
        delete_history_entries(h, "owner", SRC, [target.id])
    assert h.read_bytes() == after.encode("latin-1")


NORMAL_HISTORY = (
    "Notes I keep above the entries.\n"
    "<!-- [2026-01-01 10:00] an example in a comment -->\n\n"
    "[2026-11-20 10:00] Dinner with Lena.\n\n"
    "[2026-11-21] Ran 10 km.\nFelt good.\n\n\n"
    "[2026-11-22 08:15:30] Dentist appointment moved.\r\n\r\n"
    "[2026-11-25 14:02 #c7f3a9b21] Talked about the museum trip.\n\\[2026-01-02 10:00] quoted stamp\n\n"
    "[2026-11-26 09:00] Dinner with Lena.\n\n"
    "[2024-02-29 23:59] Leap day.\n"
)


def test_the_ids_of_a_normal_history_file_are_those_it_had_before_bad_stamps_were_entries(tmp_path):
    """Ids hash the entry's text and occurrence: reading stamps that are no date as entries of their own changes
    nothing for a file without one (the ids below are what memclaw gave this file before that change)."""
    h = write(tmp_path, NORMAL_HISTORY, "HISTORY.md")
    units = read_units(h, scope="owner", kind="history", source="memory/HISTORY.md")
    assert [(u.id, u.line, u.timestamp) for u in units] == [
        ("h79a989bab97", 1, None),
        ("haceadab0f06", 4, datetime(2026, 11, 20, 10, 0)),
        ("h63e215dd744", 6, datetime(2026, 11, 21)),
        ("hec310a3f699", 10, datetime(2026, 11, 22, 8, 15, 30)),
        ("hda9daf6be42", 12, datetime(2026, 11, 25, 14, 2)),
        ("h33acf544bda", 15, datetime(2026, 11, 26, 9, 0)),
        ("h79034751902", 17, datetime(2024, 2, 29, 23, 59)),
    ]


@pytest.mark.parametrize(
    ("forget", "after"),
    [
        ("[2026-11-31 10:00] Call the plumber.",
         "[2026-11-20 10:00] Dinner with Lena.\n\n[2026-11-25 24:30] Bought a bike.\n"),
        ("Dinner with Lena.", "[2026-11-31 10:00] Call the plumber.\n\n[2026-11-25 24:30] Bought a bike.\n"),
        ("[2026-11-25 24:30] Bought a bike.",
         "[2026-11-20 10:00] Dinner with Lena.\n\n[2026-11-31 10:00] Call the plumber.\n\n"),
    ],
)  # fmt: skip
def test_forgetting_next_to_a_stamp_that_is_no_date_removes_exactly_that_entry(tmp_path, forget, after):
    """QA: the entry under `[2026-11-31 10:00]` was part of the one above it, and forgetting that one emptied the
    file. Each is its own entry now: forgetting one removes its bytes and its separator, nothing else."""
    h = write(tmp_path, QA_HISTORY, "HISTORY.md")
    units = read_units(h, scope="owner", kind="history", source=SRC)
    assert len(units) == 3
    target = next(u for u in units if u.text == forget)
    assert [u.id for u in delete_history_entries(h, "owner", SRC, [target.id])] == [target.id]
    assert h.read_bytes() == after.encode()
    left = read_units(h, scope="owner", kind="history", source=SRC)
    assert {u.id for u in left} == {u.id for u in units} - {target.id}


# ----- property: random op sequences keep the file equal to a simple model --------------------------------
_words = st.text(alphabet="abcdefgh <>-#`*[]()0123456789\n", min_size=1, max_size=20)


SEEDS = [
    "# Start\n- seed fact\n<!-- a note -->\n\n```\n- code, not a fact\n```\n",
    # setext headings, paragraphs (not facts) right under headings, a lone block, an item between a paragraph and
    # a break (its deletion must not make a setext heading)
    "Start\n=====\nAn intro, not a fact.\n- seed fact\n\n~~~\nnot a fact\n~~~\nS\n-\nnotes, not facts\n\n"
    "Para\n- between\n---\nWork\n----\n- job\n",
]
SECTIONS = [None, "S", "Start", "Work", "Start > Sub", "New"]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(SEEDS),
    st.lists(st.tuples(st.sampled_from(["add", "update", "delete"]), _words, st.integers(0, 50)), max_size=12),
)
def test_random_op_sequences_match_a_model(tmp_path_factory, seed, steps):
    """Any sequence of edits leaves exactly the facts a simple model expects, each under its section, and every
    line that is not a fact (paragraphs, blocks, headings of both kinds) where it was."""
    p = tmp_path_factory.mktemp("ops") / "MEMORY.md"
    p.write_text(seed)
    model = Counter(u.text for u in facts(p))
    not_facts = [ln for ln in seed.splitlines() if "not a fact" in ln or "=====" in ln or ln == "----"]
    for op, text, pick in steps:
        current = facts(p)
        norm = " ".join(text.split())
        if op == "add" or not current:
            section = SECTIONS[pick % len(SECTIONS)]
            try:
                apply_fact_ops(p, "owner", SRC, [FactOp("add", text=text, section=section)])
            except MemoryFileError:
                assert not norm
                continue
            model[parse_memory(bullet_first_line(norm), scope="o", source="s")[0].text] += 1
            continue
        target = current[pick % len(current)]
        if op == "delete":
            apply_fact_ops(p, "owner", SRC, [FactOp("delete", id=target.id)])
            model[target.text] -= 1
        else:
            try:
                apply_fact_ops(p, "owner", SRC, [FactOp("update", id=target.id, text=text)])
            except MemoryFileError:
                assert not norm
                continue
            model[target.text] -= 1
            model[parse_memory(bullet_first_line(norm), scope="o", source="s")[0].text] += 1
    assert Counter(u.text for u in facts(p)) == +model
    lines = p.read_text().splitlines()
    assert all(ln in lines for ln in not_facts), p.read_text()


SETEXT = (
    "Family\n======\nIntro about my family.\n\n- Lena lives in Porto\n\n"
    "Work\n====\nJust notes.\n\n```\nnot a fact\n```\n"
    "Misc\n====\nTitle\n- between\n---\n- last\n"
)


def test_edits_around_setext_headings_paragraphs_and_blocks_keep_every_other_byte(tmp_path):
    """Issue 19.4: adds land under setext headings (after the underline, before a later heading's text line), never
    glue a paragraph or a block onto the new item, and a delete never turns a paragraph and a break into a
    heading. Every other byte is kept."""
    p = write(tmp_path, SETEXT)
    apply_fact_ops(p, "owner", SRC, [FactOp("add", text="Mia is 9", section="Family")])
    assert p.read_text() == SETEXT.replace("- Lena lives in Porto\n", "- Lena lives in Porto\n- Mia is 9\n")
    p.write_text(SETEXT)
    apply_fact_ops(p, "owner", SRC, [FactOp("add", text="Solaris", section="Work > Jobs")])
    assert p.read_text() == SETEXT.replace("```\nMisc\n", "```\n\n## Jobs\n\n- Solaris\n\nMisc\n")  # before "Misc"
    p.write_text(SETEXT)
    apply_fact_ops(p, "owner", SRC, [FactOp("add", text="Tandem", section="Work")])
    assert p.read_text() == SETEXT.replace("Work\n====\n", "Work\n====\n- Tandem\n\n")  # not "Tandem Just notes."
    p.write_text(SETEXT)
    apply_fact_ops(p, "owner", SRC, [FactOp("add", text="Leo is 5", section="Family > Kids")])
    assert p.read_text() == SETEXT.replace("\nWork\n====\n", "\n## Kids\n\n- Leo is 5\n\nWork\n====\n")
    p.write_text(SETEXT)
    apply_fact_ops(p, "owner", SRC, [FactOp("delete", id=by_text(p)["between"])])
    assert p.read_text() == SETEXT.replace("Title\n- between\n---\n", "Title\n\n---\n")  # no "Title" heading
    assert [(u.text, u.section) for u in facts(p)] == [
        ("Lena lives in Porto", "Family"),
        ("last", "Misc"),
    ]


@pytest.mark.parametrize("order", [0, 1, 2, 3, 4, 5])
def test_adds_for_a_new_top_section_and_a_new_subsection_in_one_edit_each_land_under_their_heading(tmp_path, order):
    """Found by the SIGKILL test: a file ending in `# Work`, one edit adding a fact under Notes (a new top heading
    at the end) and one under Work > Projects (a new subheading at the end too): the subheading went below
    `# Notes` and the edit was refused. Whatever the order of the adds, each lands under its own heading."""
    import itertools

    path = tmp_path / "MEMORY.md"
    path.write_text("# About me\n- I live in Lyon\n\n# Work\n- I work at Solaris\n", "utf-8")
    adds = [("Keeps a teapot", None), ("Runs the battery project", "Work > Projects"), ("Knows Henrik", "Work")]
    ops = [FactOp("add", text=t, section=s) for t, s in list(itertools.permutations(adds))[order]]
    solaris = next(u for u in read_units(path, scope="owner", kind="fact", source="MEMORY.md") if "Solaris" in u.text)
    result = apply_fact_ops(path, "owner", "MEMORY.md", [*ops, FactOp("delete", id=solaris.id)])
    got = {(u.text, u.section) for u in result.facts}
    assert got == {
        ("I live in Lyon", "About me"),
        ("Keeps a teapot", DEFAULT_SECTION),
        ("Runs the battery project", "Work > Projects"),
        ("Knows Henrik", "Work"),
    }
