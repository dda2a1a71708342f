"""`memclaw memory add / list / forget` and read-only recall through the console script's entry point (in-process,
real workspace, real model, embedded Chroma; see test_bad_input for the `cli` and `ws` fixtures)."""

from __future__ import annotations

import json
from datetime import date

from memclaw.markdown.memory_md import parse_memory
from tests.cli import test_bad_input
from tests.cli.test_bad_input import assert_error, user_files
from tests.markdown.test_markdown import QA_HISTORY

cli = test_bad_input.cli  # the fixtures: the console script's entry point in-process, an onboarded workspace
ws = test_bad_input.ws

DEMO_LIKE = """# Work
- I work at Solaris Energy

## Health
- I am allergic to penicillin
"""


def sections(path) -> list[tuple[str | None, str]]:
    return [(u.section, u.text) for u in parse_memory(path.read_text("utf-8"), scope="owner", source="m")]


def test_memory_add_files_a_fact_under_the_default_section_or_the_given_one(cli, ws):
    """Issue 13.3: without --section a fact goes under "Notes" (created once), not under the last heading."""
    mem = ws / "memory" / "MEMORY.md"
    mem.write_text(DEMO_LIKE, "utf-8")
    for args in (["My neighbour Omar has a dog"], ["Mia is my daughter", "--section", "Family"], ["The bins go out"]):
        r = cli("memory", "add", *args, "--json", "--date", "2026-11-25")
        assert r.code == 0, r.err
    assert json.loads(r.out)["text"] == "The bins go out (2026-11-25)"
    assert sections(mem) == [
        ("Work", "I work at Solaris Energy"),
        ("Work > Health", "I am allergic to penicillin"),
        ("Notes", "My neighbour Omar has a dog (2026-11-25)"),
        ("Notes", "The bins go out (2026-11-25)"),
        ("Family", "Mia is my daughter (2026-11-25)"),
    ]
    assert mem.read_text("utf-8").count("# Notes\n") == 1


def test_memory_add_marks_the_day_a_fact_was_learned(cli, ws):
    """Issue 22: every fact memclaw writes says when it was learned, where a person sees it: today, or --date;
    relative dates are read from that day; a fact that already ends in a date keeps it; a re-run on another day is
    "already remembered" (compared without the mark)."""
    mem = ws / "memory" / "MEMORY.md"
    before = date.today()
    r = cli("memory", "add", "Sister Lena lives in Porto", "--json")
    after = date.today()
    assert r.code == 0, r.err
    assert json.loads(r.out)["text"] in {f"Sister Lena lives in Porto ({d.isoformat()})" for d in (before, after)}
    r = cli("memory", "add", "Sister Lena lives in Porto", "--date", "2027-02-01", "--json")  # a re-run, later
    assert r.code == 0 and json.loads(r.out)["already_remembered"], r.err
    assert mem.read_text("utf-8").count("Sister Lena lives in Porto") == 1
    r = cli("memory", "add", "Maya's dentist appointment is tomorrow", "--date", "2026-11-25")
    assert r.code == 0 and r.out.startswith("remembered "), r.err
    assert "- Maya's dentist appointment is tomorrow (2026-11-26) (2026-11-25)\n" in mem.read_text("utf-8")
    r = cli("memory", "add", "Maya's dentist appointment is tomorrow", "--date", "2026-11-25")
    assert r.code == 0 and r.out.startswith("already remembered "), r.out
    r = cli("memory", "add", "Moved to Lyon (2019-09-01)", "--json")  # dated already: kept as it is
    assert json.loads(r.out)["text"] == "Moved to Lyon (2019-09-01)"
    for bad in ("2026-02-30", "25.11.2026", "tomorrow", "2026-11-25T10:00", ""):
        assert_error(cli("memory", "add", "Anything", "--date", bad), 2, "--date", "YYYY-MM-DD")
    assert "Anything" not in mem.read_text("utf-8")


def test_memory_add_into_an_unclosed_code_fence_is_one_line_and_writes_nothing(cli, ws, memclaw_home):
    """A file whose last fact holds an unclosed code fence: `memory add` for that section (the default one here),
    another one, or into a file without headings is the same one line, exit 3, never a traceback."""
    mem = ws / "memory" / "MEMORY.md"
    for text in ("# Notes\n- a\n  ```\n", "- a\n  ```\n"):
        mem.write_text(text, "utf-8")
        before = user_files(memclaw_home)
        for extra in ([], ["--section", "Other"]):
            assert_error(cli("memory", "add", "new fact", *extra), 3, str(mem), "unclosed code fence", "close it")
        assert user_files(memclaw_home) == before


def tree(root) -> dict[str, bytes | None]:
    """Every path under `root` (index included), with the bytes of the files outside the vector store."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() and "chroma" not in p.parts else None)
        for p in sorted(root.rglob("*"))
    }


def test_a_recall_for_an_unknown_sender_writes_nothing(cli, ws, memclaw_home):
    """Issue 13.5: `recall --sender discord:999` for a sender with no memory adds no folder, no index file and no
    row to `status`: reads write nothing."""
    assert cli("memory", "sync").code == 0
    before = tree(memclaw_home)
    for args in (
        ["recall", "where does my sister live", "--sender", "discord:999"],
        ["recall", "Porto", "--sender", "discord:999", "--json"],
        ["recall", "Porto", "--sender", "discord:999", "--mode", "bm25"],
        ["context", "where does my sister live", "--sender", "discord:999", "--json"],
    ):
        r = cli(*args)
        assert r.code == 0, r.err
        assert "lives in Porto" not in r.out  # the owner's memory stays the owner's
    assert tree(memclaw_home) == before
    scopes = json.loads(cli("status", "--json").out)["memory"]["scopes"]
    assert list(scopes) == ["owner"]


MEMORY = """# Family
- My sister Lena lives in Porto
- My brother Tom repairs bikes

# Work
- I work at Solaris Energy
"""
HISTORY = """[2026-03-02 18:10] Talked about the trip to Porto in April.

[2026-03-03 09:00] Planned the garden: tomatoes and basil.

[2026-03-04 20:15] Booked the ferry to the island.
"""


def listed(cli, *args: str) -> list[dict]:
    r = cli("memory", "list", "--json", *args)
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_memory_list_shows_every_memory_with_the_ids_recall_gives(cli, ws):
    (ws / "memory" / "MEMORY.md").write_text(MEMORY, "utf-8")
    (ws / "memory" / "HISTORY.md").write_text(HISTORY, "utf-8")
    rows = listed(cli)
    assert [(r["kind"], r["text"]) for r in rows] == [
        ("fact", "My sister Lena lives in Porto"),
        ("fact", "My brother Tom repairs bikes"),
        ("fact", "I work at Solaris Energy"),
        ("history", "Talked about the trip to Porto in April."),
        ("history", "Planned the garden: tomatoes and basil."),
        ("history", "Booked the ferry to the island."),
    ]
    assert rows[0]["section"] == "Family" and rows[0]["source"] == "memory/MEMORY.md:2"
    assert rows[3]["date"] == "2026-03-02T18:10"
    hit = json.loads(cli("recall", "who repairs bikes", "--json", "-k", "1").out)[0]
    assert hit["id"] == rows[1]["id"]
    assert [r["kind"] for r in listed(cli, "--kind", "history")] == ["history"] * 3
    assert listed(cli, "--sender", "discord:5") == []  # an outsider's scope: their memories only
    r = cli("memory", "list")
    assert r.code == 0 and "scope owner · 6" in r.out and all(row["id"] in r.out for row in rows)
    assert_error(cli("memory", "list", "--kind", "facts"), 2, "unknown memory kind", "fact, history or archive")


def test_a_fact_of_several_lines_is_joined_and_memory_add_says_so(cli, ws):
    """Issue 38 (papercuts): a multi-line `memory add` was flattened silently. A fact is one line (what MEMORY.md
    and every view show of it); the lines are joined, and one line on stderr says so."""
    r = cli("memory", "add", "Lena's address:\nRua das Flores 12\n\n  Porto", "--date", "2026-11-25", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["text"] == "Lena's address: Rua das Flores 12 Porto (2026-11-25)"
    assert r.err == "warning: a fact is one line: its 3 lines are joined with spaces\n", r.err
    r = cli("memory", "add", "  one line only  \n", "--date", "2026-11-25")
    assert r.code == 0 and r.err == "", r.err


def test_memory_list_shows_a_facts_section_and_date(cli, ws):
    """Issue 38 (papercuts): the "section / date" column never showed a fact's date. It shows the fact's date (the
    stamped one, or the day it was learned) beside its section, and the text leaves that date out (said once)."""
    (ws / "memory" / "MEMORY.md").write_text("# Family\n- Mia is 9 (2026-03-02)\n- Tom rides a bike\n", "utf-8")
    assert cli("memory", "add", "The bins go out", "--date", "2026-11-25").code == 0
    r = cli("memory", "list")
    assert r.code == 0, r.err
    rows = [" ".join(line.split()) for line in r.out.splitlines()]
    assert any(row.endswith("Family · 2026-03-02 Mia is 9") for row in rows), r.out
    assert any(row.endswith("Family Tom rides a bike") for row in rows), r.out
    assert any(row.endswith("Notes · 2026-11-25 The bins go out") for row in rows), r.out


def test_counts_agree_with_their_nouns(cli, ws):
    """Issue 38 (papercuts): "1 memories". Every count printed agrees with its noun."""
    from memclaw.util.text import counted

    assert [counted(n, "memory") for n in (0, 1, 2, 1204)] == ["0 memories", "1 memory", "2 memories", "1,204 memories"]
    assert (counted(1, "hit"), counted(3, "hit"), counted(2, "match"), counted(2, "day")) == (
        "1 hit", "3 hits", "2 matches", "2 days",
    )  # fmt: skip
    assert counted(3, "person", "people") == "3 people"
    from memclaw.agent.commands import memory_command
    from memclaw.config import Config
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    mem = MemoryService(Workspace(ws), Config(workspace=ws, recall={"k": 1}))
    try:
        out = memory_command(mem, "/recall", "Lena Porto", scope="owner", is_owner=True, markdown=True)
    finally:
        mem.close()
    assert out.ok and out.text.splitlines()[0].endswith(" · 1 hit"), out.text  # chat's /recall


def test_memory_forget_removes_the_bullet_or_entry_then_the_index(cli, ws, memclaw_home):
    """Issue 13.8: forget removes exactly the bullet or the entry from the Markdown, then from the index, and says
    what it forgot."""
    mem, hist = ws / "memory" / "MEMORY.md", ws / "memory" / "HISTORY.md"
    mem.write_text(MEMORY, "utf-8")
    hist.write_text(HISTORY, "utf-8")
    rows = {r["text"]: r["id"] for r in listed(cli)}
    tom, garden = rows["My brother Tom repairs bikes"], rows["Planned the garden: tomatoes and basil."]
    assert json.loads(cli("recall", "who repairs bikes", "--json", "-k", "1").out)[0]["id"] == tom  # indexed
    r = cli("memory", "forget", tom, garden)
    assert r.code == 0, r.err
    assert f"forgot {tom}" in r.out and "My brother Tom repairs bikes" in r.out and "tomatoes and basil" in r.out
    assert mem.read_text("utf-8") == MEMORY.replace("- My brother Tom repairs bikes\n", "")
    assert hist.read_text("utf-8") == HISTORY.replace(
        "[2026-03-03 09:00] Planned the garden: tomatoes and basil.\n\n", ""
    )
    hits = json.loads(cli("recall", "who repairs bikes tomatoes garden", "--json").out)
    assert tom not in {h["id"] for h in hits} and garden not in {h["id"] for h in hits}
    owner = json.loads(cli("memory", "stats", "--json").out)["scopes"]["owner"]
    assert (owner["facts"], owner["history"], owner["indexed"], owner["fresh"]) == (2, 2, 4, True)


def test_a_history_stamp_that_is_no_date_is_an_entry_of_its_own_said_at_sync_and_forgotten_alone(cli, ws):
    """QA: `[2026-11-31 10:00]` and `[2026-11-25 24:30]` were silently glued to the entry above them (one unit), and
    forgetting it emptied HISTORY.md. Now: three units (the two undated, their stamps kept in the text), a warning per
    line at the sync that reads the file, and forgetting the middle one leaves the other two byte for byte."""
    hist = ws / "memory" / "HISTORY.md"
    hist.write_text(QA_HISTORY, "utf-8")
    units = listed(cli, "--kind", "history")
    assert [(u["text"], u["date"], u["source"]) for u in units] == [
        ("Dinner with Lena.", "2026-11-20T10:00", "memory/HISTORY.md:1"),
        ("[2026-11-31 10:00] Call the plumber.", None, "memory/HISTORY.md:3"),
        ("[2026-11-25 24:30] Bought a bike.", None, "memory/HISTORY.md:5"),
    ]
    r = cli("memory", "sync")
    assert r.code == 0, r.err
    for line, stamp in ((3, "[2026-11-31 10:00]"), (5, "[2026-11-25 24:30]")):
        assert (f"memory/HISTORY.md line {line}: {stamp} is not a real date and time, so the entry is undated (kept "
                "on its own): write a real one, [YYYY-MM-DD HH:MM]") in r.err  # fmt: skip
    r = cli("memory", "sync")
    assert r.code == 0 and "not a real date" not in r.err, r.err  # said once, when the file changed
    dinner, plumber, bike = (u["id"] for u in units)
    r = cli("memory", "forget", plumber)
    assert r.code == 0 and f"forgot {plumber}" in r.out and "Call the plumber." in r.out, r.err
    assert hist.read_bytes() == b"[2026-11-20 10:00] Dinner with Lena.\n\n[2026-11-25 24:30] Bought a bike.\n"
    assert [u["id"] for u in listed(cli, "--kind", "history")] == [dinner, bike]
    hits = json.loads(cli("recall", "plumber bike dinner", "--json").out)
    assert plumber not in {h["id"] for h in hits} and {dinner, bike} <= {h["id"] for h in hits}


def test_memory_forget_an_unknown_id_changes_nothing(cli, ws, memclaw_home):
    (ws / "memory" / "MEMORY.md").write_text(MEMORY, "utf-8")
    known = listed(cli)[0]["id"]
    before = user_files(memclaw_home)
    assert_error(cli("memory", "forget", known, "f000000000000"), 2, "no memory with id 'f000000000000'", "memory list")
    # an outsider's scope cannot name the owner's memories
    assert_error(cli("memory", "forget", known, "--sender", "discord:5"), 2, f"no memory with id '{known}'")
    assert user_files(memclaw_home) == before
    assert listed(cli)[0]["id"] == known


def test_the_same_fact_added_by_processes_at_once_is_written_once_and_reported_as_in_the_file(cli, ws, memclaw_home):
    """`memory add` is one locked read-modify-write: four processes adding the same fact at once write it once; one
    says "remembered", the others "already remembered", all with the id and line the file gives it. Rounds for a new
    section (the full edit), the file's last one (the append's fast path) and one in the middle."""
    import os
    import subprocess
    import sys

    mem = ws / "memory" / "MEMORY.md"
    assert cli("memory", "sync").code == 0
    env = dict(os.environ, MEMCLAW_HOME=str(memclaw_home), COLUMNS="200")
    rounds = [("Same fact about pears", []), ("Pears again", []), ("Pears in the family", ["--section", "Family"])]
    for n, (text, extra) in enumerate(rounds * 2):
        fact = f"{text} {n}"
        args = ["memory", "add", fact, "--date", "2026-11-25", "--json", *extra]
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "memclaw.cli.main", *args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        outs = [(p.communicate(timeout=300), p.returncode) for p in procs]
        assert all(code == 0 for _, code in outs), outs
        said = [json.loads(out) for (out, _err), _code in outs]
        assert mem.read_text("utf-8").count(fact) == 1, (n, mem.read_text("utf-8"))
        assert sorted(r["already_remembered"] for r in said) == [False, True, True, True], said
        row = next(r for r in listed(cli) if r["text"] == f"{fact} (2026-11-25)")
        line = 1 + mem.read_text("utf-8").split("\n").index(f"- {fact} (2026-11-25)")
        assert {(r["id"], r["source"]) for r in said} == {(row["id"], f"memory/MEMORY.md:{line}")}, said


# ----- the archive (issue 22) -----------------------------------------------------------------------------------
def archive(ws) -> tuple:
    """Two conversations on 2026-11-25, one on 2026-11-26, as consolidation writes them."""
    from datetime import datetime

    from memclaw.workspace import Workspace
    from tests.archive_days import append_day, chunk

    w = Workspace(ws)
    lunch = chunk("c1111aaaa", datetime(2026, 11, 25, 12, 30), ("Maya", "Did Lena say which restaurant?"),
                  ("memclaw", "She said Taberna da Ribeira, on Rua dos Douradores."))  # fmt: skip
    cello = chunk("c2222bbbb", datetime(2026, 11, 25, 18, 0), ("Maya", "My cello teacher Mira moves to Porto."))
    ferry = chunk("c3333cccc", datetime(2026, 11, 26, 8, 15), ("Maya", "The ferry leaves at 7:40 tomorrow."),
                  ("memclaw", "I will remind you at 7."), ("Maya", "Thanks!"))  # fmt: skip
    return append_day(w, "owner", lunch, cello), append_day(w, "owner", ferry)


def test_memory_list_shows_one_row_per_conversation_of_the_archive(cli, ws):
    archive(ws)
    rows = listed(cli, "--kind", "archive")
    assert [(r["id"], r["date"], r["speakers"], r["turns"]) for r in rows] == [
        ("c1111aaaa", "2026-11-25T12:30", ["Maya", "memclaw"], 2),
        ("c2222bbbb", "2026-11-25T18:00", ["Maya"], 1),
        ("c3333cccc", "2026-11-26T08:15", ["Maya", "memclaw"], 3),
    ]
    assert rows[0]["text"].startswith("Did Lena say which restaurant? She said Taberna")
    assert rows[2]["source"] == "memory/archive/2026-11-26.md:3" and rows[2]["kind"] == "archive"
    assert [r["kind"] for r in listed(cli)][-3:] == ["archive"] * 3  # after the facts and the history
    r = cli("memory", "list")
    assert r.code == 0 and "c2222bbbb" in r.out and "3 turns" in r.out
    assert "Maya · 1 turn · My cello" in r.out and "1 turns" not in r.out  # issue 38: "1 memories"
    assert listed(cli, "--kind", "archive", "--sender", "discord:5") == []


def test_an_archived_turn_found_by_its_vector_alone_needs_the_archive_floor(cli, ws):
    """Issue 38 (papercuts): `/recall passport` listed archive excerpts about a restaurant and a ferry (cosine 0.15,
    no word in common). An archived turn that shares no word with the query needs recall.archive_min_similarity,
    0.2 by default; one that names the passport is still found, and so is a turn that means the query in other
    words."""
    from datetime import datetime

    from memclaw.workspace import Workspace
    from tests.archive_days import append_day, chunk

    archive(ws)
    trip = chunk("c4444dddd", datetime(2026, 11, 27, 9, 0), ("Maya", "Can you check the flight to Lisbon?"),
                 ("memclaw", "TAP 1234 leaves at 9:10."), ("Maya", "My passport expires in March."))  # fmt: skip
    append_day(Workspace(ws), "owner", trip)
    hits = json.loads(cli("recall", "passport", "--kind", "archive", "--json").out)
    assert [h["text"] for h in hits] == ["Maya: My passport expires in March."], hits
    hits = json.loads(cli("recall", "when do I take the boat", "--kind", "archive", "--json", "-k", "1").out)
    assert [h["text"] for h in hits] == ["Maya: The ferry leaves at 7:40 tomorrow."], hits


def test_memory_forget_removes_a_conversation_a_turn_or_a_day_of_the_archive(cli, ws):
    day25, day26 = archive(ws)
    text25 = day25.read_text("utf-8")
    assert json.loads(cli("recall", "cello teacher Mira", "--json", "--kind", "archive").out)[0]["id"]
    r = cli("memory", "forget", "c2222bbbb", "--json")
    assert r.code == 0, r.err
    [gone] = json.loads(r.out)
    assert (gone["id"], gone["kind"], gone["turns"]) == ("c2222bbbb", "archive", 1)
    assert day25.read_text("utf-8") == text25[: text25.index("## 18:00 #c2222bbbb")]  # every other byte kept
    hits = json.loads(cli("recall", "cello teacher Mira Porto", "--json", "--kind", "archive").out)
    assert not [h for h in hits if "cello" in h["text"]]
    # one turn, by the id recall gives it
    turn = next(h for h in json.loads(cli("recall", "Rua dos Douradores", "--json").out) if "Douradores" in h["text"])
    r = cli("memory", "forget", turn["id"])
    assert r.code == 0 and f"forgot {turn['id']}" in r.out and "Douradores" in r.out
    assert "Douradores" not in day25.read_text("utf-8") and "Did Lena say" in day25.read_text("utf-8")
    # a whole day
    r = cli("memory", "forget", "2026-11-26")
    assert r.code == 0 and "forgot 2026-11-26" in r.out and "3 turn(s)" in r.out
    assert not day26.exists()
    assert [row["id"] for row in listed(cli, "--kind", "archive")] == ["c1111aaaa"]
    owner = json.loads(cli("memory", "stats", "--json").out)["scopes"]["owner"]
    assert (owner["archive"], owner["fresh"]) == (1, True)


def test_forgetting_in_the_archive_with_a_bad_id_changes_nothing(cli, ws, memclaw_home):
    archive(ws)
    assert cli("memory", "sync").code == 0
    before = user_files(memclaw_home)
    for bad in ("c00000000", "2026-01-01", "2026-02-30", "c2222bbbb/../x", "../archive/2026-11-25"):
        assert_error(cli("memory", "forget", "c1111aaaa", "2026-11-26", bad), 2, f"no memory with id {bad!r}")
    assert_error(cli("memory", "forget", "c1111aaaa", "--sender", "discord:5"), 2, "no memory with id 'c1111aaaa'")
    assert user_files(memclaw_home) == before


def test_chat_forget_goes_through_the_same_code(cli, ws):
    from memclaw.agent.commands import memory_command
    from memclaw.config import Config
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    day25, _ = archive(ws)
    mem = MemoryService(Workspace(ws), Config(workspace=ws))
    try:
        out = memory_command(mem, "/forget", "c1111aaaa 2026-11-26", scope="owner", is_owner=True)
        assert out.ok and "c1111aaaa (archive)" in out.text and "2026-11-26 (archive)" in out.text
        assert "c1111aaaa" not in day25.read_text("utf-8")
        bad = memory_command(mem, "/forget", "c2222bbbb 2030-01-01", scope="owner", is_owner=True)
        assert not bad.ok and "no memory with id '2030-01-01'" in bad.text and "c2222bbbb" in day25.read_text("utf-8")
        refused = memory_command(mem, "/forget", "c2222bbbb", scope="people/discord:5", is_owner=False)
        assert not refused.ok and "c2222bbbb" in day25.read_text("utf-8")
    finally:
        mem.close()


def test_recall_shows_an_archive_hit_as_an_excerpt(cli, ws):
    archive(ws)
    [hit] = json.loads(cli("recall", "Rua dos Douradores", "--json", "-k", "1", "--kind", "archive").out)
    assert hit["kind"] == "archive" and hit["text"].startswith("memclaw: She said Taberna")
    assert [t["text"] for t in hit["excerpt"]] == [
        "Maya: Did Lena say which restaurant?",
        "memclaw: She said Taberna da Ribeira, on Rua dos Douradores.",
    ]  # (the chunk's other turns: none after it, the cello talk is another chunk)
    assert hit["excerpt"][0]["speaker"] == "Maya" and hit["excerpt"][0]["date"] == "2026-11-25T12:30"
    [cut] = json.loads(cli("recall", "Rua dos Douradores", "--json", "-k", "1", "--kind", "archive", "--tokens",
                           "512").out)  # fmt: skip
    assert cut["memory_section"]["kept"] and cut["memory_section"]["serves"] == [t["id"] for t in hit["excerpt"]]
    r = cli("recall", "Rua dos Douradores", "-k", "1", "--kind", "archive", "--tokens", "512")
    assert r.code == 0 and "excerpt" in r.out and "»memclaw: She said Taberna" in r.out


def test_recall_tokens_joins_two_excerpts_of_one_conversation_into_one_item(cli, ws):
    """Two matches far apart in one conversation are one item of the memory section (one date label, the turns in
    order, the turns between them left out as `…`); `--json` says which hit the second one joined."""
    from datetime import datetime

    from memclaw.workspace import Workspace
    from tests.archive_days import append_day, chunk

    filler = ["My cello lesson moved to Thursday.", "Ines lent me her drip hose.", "The tomatoes need mulch.",
              "Lena booked the dentist for Monday.", "I finished the pottery bowl."]  # fmt: skip
    said = [("Maya", "The ferry to Cacilhas leaves at 7:40 on weekdays.")]
    said += [("Maya", s) for s in filler] + [("Maya", "The last ferry back from Cacilhas is at 23:10.")]
    append_day(Workspace(ws), "owner", chunk("c4444dddd", datetime(2026, 11, 24, 9, 0), *said))
    args = ("recall", "ferry Cacilhas", "-k", "2", "--kind", "archive", "--tokens", "512")
    first, second = json.loads(cli(*args, "--json").out)
    assert {first["text"], second["text"]} == {f"Maya: {said[0][1]}", f"Maya: {said[-1][1]}"}
    one, other = first["memory_section"], second["memory_section"]
    assert one["kept"] and one["joined"] is None and other["kept"] and other["joined"] == first["id"]
    assert set(t["id"] for t in second["excerpt"]) <= set(one["serves"]) and len(one["serves"]) < len(said)
    out = cli(*args).out
    assert "joined #1" in out
