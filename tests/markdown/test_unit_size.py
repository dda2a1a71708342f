"""One size limit per memory unit (issue 18.4): huge facts and history entries never hang a command.

A 5 MB fact used to make `recall` and `memory add` embed ~17,000 passages (over 300 s, silent); a 3.2 MB history
entry the same. Now a unit longer than MAX_UNIT_CHARS, written by hand, is read, indexed and recalled up to the
limit, with one warning naming its file and line, and the file is never changed; new text over the limit is refused
before anything is written. The CLI runs in a child process, as the user runs it. These use memclaw's
deterministic "hash-test" embedder (a real Embedder of the package): what is under test is how much text reaches
it, not the model; the number of vectors stored for the big units is checked.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memclaw.bench.corpus import parse_units
from memclaw.bench.locomo import load_locomo, write_conversation
from memclaw.bench.longmemeval import convert_question, load_longmemeval
from memclaw.index.passages import unit_vectors
from memclaw.index.scopes import index_text
from memclaw.markdown.files import read_units
from memclaw.markdown.incremental import parse_appended, parse_file
from memclaw.markdown.unit_size import MAX_SECTION_CHARS, MAX_UNIT_CHARS, cut
from memclaw.util.progress import stderr_progress

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
WORDS = ["the", "bike", "garden", "weather", "Lyon", "sister", "Porto", "groceries", "Monday", "hiking", "Anna"]


def _text(n_chars: int, seed: int = 0) -> str:
    out, i = [], seed
    size = 0
    while size < n_chars:
        w = WORDS[i % len(WORDS)] + str(i % 97)
        out.append(w)
        size += len(w) + 1
        i += 7
    return " ".join(out)[:n_chars]


def _memclaw(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEMCLAW_HOME": str(home), "COLUMNS": "400", "MEMCLAW_EMBEDDINGS__MODEL": "hash-test"}
    return subprocess.run(
        [sys.executable, "-m", "memclaw.cli.main", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_cut_keeps_short_text_and_cuts_at_a_word():
    assert cut("short") == "short"
    long = _text(MAX_UNIT_CHARS + 5000)
    c = cut(long)
    assert len(c) <= MAX_UNIT_CHARS and long.startswith(c) and long[len(c)] == " "


def test_the_parsers_cut_a_huge_unit_but_keep_its_id(caplog):
    """Ids are those of the whole text (what `memory forget` and the file writers find it by); only the text the
    index and recall see is cut. The append fast path cuts the same way."""
    big = _text(MAX_UNIT_CHARS * 3)
    data = f"# Notes\n- small fact\n- {big}\n".encode()
    units, mark = parse_file(data, kind="fact", scope="owner", source="memory/MEMORY.md")
    assert [len(u.text) <= MAX_UNIT_CHARS for u in units] == [True, True]
    from memclaw.markdown.memory_md import parse_memory

    whole = parse_memory(data.decode(), scope="owner", source="memory/MEMORY.md")
    assert [u.id for u in units] == [u.id for u in whole]
    more = data + f"- {big} again\n".encode()
    appended = parse_appended(more, mark, kind="fact", scope="owner", source="memory/MEMORY.md", known={units[0].id})
    assert appended is not None
    [tail] = appended[0]
    assert len(tail.text) <= MAX_UNIT_CHARS
    full, _ = parse_file(more, kind="fact", scope="owner", source="memory/MEMORY.md")
    assert full[-1] == tail
    warned = [r.getMessage() for r in caplog.records if "longer than a memory may be" in r.getMessage()]
    assert any("memory/MEMORY.md line 3" in w for w in warned) and any("line 4" in w for w in warned)


def test_a_huge_hand_written_fact_and_history_entry_are_indexed_up_to_the_limit(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    assert _memclaw(home, "onboard").returncode == 0
    mem = home / "workspace" / "memory"
    fact = "My sister Lena lives in Porto and " + _text(5_000_000, 1)  # 5 MB, one line
    entry = "Talked about the garden and " + "\n".join(_text(80, i) for i in range(40_000))  # 3.2 MB, many lines
    memory_md = f"# Family\n- I live in Lyon\n- {fact}\n".encode()
    history_md = f"[2026-03-02 18:10] {entry}\n\n[2026-03-03 09:00] Bought a green bike.\n".encode()
    (mem / "MEMORY.md").write_bytes(memory_md)
    (mem / "HISTORY.md").write_bytes(history_md)

    r = _memclaw(home, "recall", "where does Lena live", "--json", "-k", "3")
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(warnings) == 2, r.stderr
    assert "memory/MEMORY.md line 3" in warnings[0] and f"{MAX_UNIT_CHARS:,}" in warnings[0]
    assert "memory/HISTORY.md line 1" in warnings[1] and "the file is unchanged" in warnings[1]
    hits = json.loads(r.stdout)
    big = next(h for h in hits if h["text"].startswith("My sister Lena"))
    assert len(big["text"]) <= MAX_UNIT_CHARS
    assert (mem / "MEMORY.md").read_bytes() == memory_md and (mem / "HISTORY.md").read_bytes() == history_md

    # What was embedded: the passages of the cut texts, not of 8 MB.
    from memclaw.config import Config, EmbeddingsConfig
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    cfg = Config(workspace=home / "workspace")
    cfg.embeddings = EmbeddingsConfig(model="hash-test")
    svc = MemoryService(Workspace(home / "workspace"), cfg)
    stored = svc.store.texts("owner")
    svc.close()
    want = {}
    for name, kind in (("MEMORY.md", "fact"), ("HISTORY.md", "history")):
        for u in read_units(mem / name, scope="owner", kind=kind, source=f"memory/{name}"):
            want.update(unit_vectors(u.id, index_text(u)))
    assert stored == want
    assert sum(len(t) for t in stored.values()) < 5 * MAX_UNIT_CHARS  # not 8 MB

    # The next commands say nothing more (nothing changed) and `memory add` works beside the big fact.
    r = _memclaw(home, "memory", "add", "My bike is green", "--date", "2026-11-26")
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
    # `memory forget` finds the big fact by its id and removes it from the file, every other byte kept.
    r = _memclaw(home, "memory", "forget", big["id"], "--json")
    assert r.returncode == 0, r.stderr
    assert (
        mem / "MEMORY.md"
    ).read_bytes() == b"# Family\n- I live in Lyon\n\n# Notes\n\n- My bike is green (2026-11-26)\n"


def test_the_warning_names_what_is_too_long(tmp_path):
    """Each kind by its name: an archived turn was called "a history entry of 2,700,045 characters"."""
    home = tmp_path / "home"
    home.mkdir()
    assert _memclaw(home, "onboard").returncode == 0
    mem = home / "workspace" / "memory"
    big = _text(MAX_UNIT_CHARS + 500, 3)
    (mem / "MEMORY.md").write_text(f"# Family\n- {big}\n", "utf-8")
    (mem / "HISTORY.md").write_text(f"[2026-03-02 18:10] {big}\n", "utf-8")
    (mem / "archive").mkdir(exist_ok=True)
    day = f"# 2026-11-25\n\n## 14:02 #c7f3a9b21\n- 14:02 **Maya**: {big}\n- 14:03 **memclaw**: Noted.\n"
    (mem / "archive" / "2026-11-25.md").write_text(day, "utf-8")
    r = _memclaw(home, "recall", "garden", "--json")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "longer than a memory may be" in ln]
    assert len(lines) == 3, r.stderr
    assert any(re.search(r"memory/MEMORY\.md line 2: a fact of 100,5\d\d characters", ln) for ln in lines)
    assert any(re.search(r"memory/HISTORY\.md line 1: a history entry of 100,5\d\d characters", ln) for ln in lines)
    assert any(re.search(r"2026-11-25\.md line 4: an archived turn of 100,5\d\d characters", ln) for ln in lines)


def test_new_text_over_the_limit_is_refused_and_under_it_accepted(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    assert _memclaw(home, "onboard").returncode == 0
    before = (home / "workspace" / "memory" / "MEMORY.md").read_bytes()
    r = _memclaw(home, "memory", "add", "x" * (MAX_UNIT_CHARS + 1))
    assert r.returncode == 2 and r.stderr.startswith("Error: fact too long") and "at most 100,000" in r.stderr
    assert (home / "workspace" / "memory" / "MEMORY.md").read_bytes() == before
    r = _memclaw(home, "memory", "add", "A long note: " + _text(10_000))  # over the old 4,000, under the limit
    assert r.returncode == 0, r.stderr


def test_a_section_over_its_limit_is_refused_and_at_it_accepted(tmp_path):
    """`memory add --section` has the one section limit the `remember` tool and consolidation have
    (MAX_SECTION_CHARS, on the heading path as written: whitespace normalised)."""
    home = tmp_path / "home"
    home.mkdir()
    assert _memclaw(home, "onboard").returncode == 0
    memory_md = home / "workspace" / "memory" / "MEMORY.md"
    before = memory_md.read_bytes()
    for section in ("S" * (MAX_SECTION_CHARS + 1), "Work > " + "S" * (MAX_SECTION_CHARS - 6), "x " * 5000):
        r = _memclaw(home, "memory", "add", "Keeps a blue teapot", "--section", section)
        assert r.returncode == 2 and r.stderr.startswith("Error: section too long"), r.stderr
        assert f"at most {MAX_SECTION_CHARS}" in r.stderr and len(r.stderr.splitlines()) == 1
    assert memory_md.read_bytes() == before
    at_limit = "Work  >  " + "S" * (MAX_SECTION_CHARS - 7) + "  "
    r = _memclaw(home, "memory", "add", "Keeps a blue teapot", "--section", at_limit)
    assert r.returncode == 0, r.stderr
    assert f"\n## {'S' * (MAX_SECTION_CHARS - 7)}\n" in memory_md.read_text()


@pytest.mark.skipif(not DATA.is_dir(), reason="benchmark data not present")
def test_no_benchmark_unit_is_cut(tmp_path):
    """The limit sits above every unit the benchmarks index, so their recall is the same as without it."""
    longest = 0
    for name in ("lme-s-dev.json.gz", "lme-s-dev100.json.gz"):
        path = DATA / "longmemeval" / name
        if path.exists():
            for raw in load_longmemeval(path):
                q = convert_question(raw)
                if q is not None:
                    longest = max(longest, *(len(s.text) for s in q.sessions))
                    longest = max(longest, *(len(f"{r}: {t}") for s in q.sessions for r, t, _a in s.turns))
    locomo = DATA / "locomo" / "locomo-dev.json"
    if locomo.exists():
        data = load_locomo(locomo)
        for i, conv in enumerate(data.conversations):
            root = tmp_path / f"{i}-full"
            write_conversation(conv, root, "full")  # facts, summaries and archived turns
            longest = max(longest, *(len(u.text) for u in parse_units(root)), 0)
    assert 0 < longest < MAX_UNIT_CHARS // 2, longest


def test_progress_shows_after_a_second_with_its_rate():
    """Plain lines on a pipe: nothing for work done within a second, then the count, the rate and the time left,
    and a summary line."""
    now = [0.0]
    out = io.StringIO()
    with stderr_progress(1000, "embedding 900 memories", stream=out, clock=lambda: now[0]) as advance:
        now[0] = 0.5
        advance(100)
        assert out.getvalue() == ""
        now[0] = 2.0
        advance(300)
        now[0] = 5.0
        advance(100)  # within LINE_EVERY_S of the last line: nothing new
        now[0] = 20.0
        advance(500)
    lines = out.getvalue().splitlines()
    assert lines[0] == "embedding 900 memories: 400/1,000 vectors, 200/s, about 3 s left"
    assert lines[-1] == "embedding 900 memories: 1,000 vectors in 20 s (50/s)"
    assert len(lines) == 2
    quick = io.StringIO()
    with stderr_progress(10, "embedding 10 memories", stream=quick, clock=lambda: 0.0) as advance:
        advance(10)
    assert quick.getvalue() == ""


def test_a_long_step_that_cannot_be_counted_says_what_it_does():
    """Parsing a 30 MB file is one step: after a second it says what it is doing, then how long it took; a quick
    step says nothing."""
    out = io.StringIO()
    with stderr_progress(0, "reading memory/MEMORY.md (30 MB)", stream=out):
        time.sleep(2.5)
    lines = out.getvalue().splitlines()
    assert lines[0] == "reading memory/MEMORY.md (30 MB)..." and len(lines) == 2
    assert re.fullmatch(r"reading memory/MEMORY\.md \(30 MB\): done in [23] s", lines[1]), lines
    quick = io.StringIO()
    with stderr_progress(0, "reading memory/MEMORY.md (1 MB)", stream=quick):
        pass
    time.sleep(1.2)
    assert quick.getvalue() == ""
