"""Bad input through the CLI (issue 7): each gets a clear message, a non-zero exit, and nothing lost.

The console script's entry point (`memclaw.cli.main.run`, where errors become one line and an exit code) runs
in-process with a real workspace under the per-test MEMCLAW_HOME, the real bundled model and embedded Chroma.
What a terminal would show on stderr is what `run` writes there plus the WARNING records it logs (the CLI's
logging handler writes those to stderr too). A few cases also run the real console script in a subprocess.

Covered elsewhere: parsing odd Markdown at unit level (test_markdown, test_memfiles), broken SKILL.md files
(test_skills), binary Discord attachments (test_discord_gateway), sender ids in paths (test_workspace).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from memclaw.cli.main import run
from memclaw.workspace import INDEX_DIRNAME

MEMORY = """# About me
- I live in Lyon
- My sister Lena lives in Porto
"""
HISTORY = "[2026-03-02 18:10] Talked about the trip to Porto in April.\n"


@dataclass
class Result:
    code: int
    out: str
    err: str  # stderr as a terminal would show it: echoed lines, then WARNING+ log records


@pytest.fixture
def cli(monkeypatch, capsys, caplog):
    def invoke(*args: str) -> Result:
        capsys.readouterr()
        caplog.clear()
        monkeypatch.setattr(sys, "argv", ["memclaw", *args])
        code = 0
        try:
            run()  # an exception escaping here is a traceback for the user: the test fails on it
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out, err = capsys.readouterr()
        logs = "".join(
            f"{r.levelname} {r.name}: {r.getMessage()}\n" for r in caplog.records if r.levelno >= logging.WARNING
        )
        return Result(code, out, err + logs)

    return invoke


@pytest.fixture
def ws(cli, memclaw_home) -> Path:
    """An onboarded workspace with a few memories (the config file is $MEMCLAW_HOME/config.toml)."""
    assert cli("onboard").code == 0
    root = memclaw_home / "workspace"
    (root / "memory" / "MEMORY.md").write_text(MEMORY, "utf-8")
    (root / "memory" / "HISTORY.md").write_text(HISTORY, "utf-8")
    return root


def user_files(home: Path) -> dict[str, bytes]:
    """Every file the user owns under MEMCLAW_HOME (config, workspace), not the derived index or lock files."""
    out = {}
    for p in sorted(home.rglob("*")):
        rel = p.relative_to(home)
        if INDEX_DIRNAME in rel.parts or p.name.startswith(".") or not p.is_file():
            continue
        out[str(rel)] = p.read_bytes()
    return out


def assert_error(r: Result, code: int, *needles: str) -> str:
    """Exit `code`, nothing on stdout, and stderr exactly one line `Error: ...` holding every needle."""
    assert "Traceback" not in r.err + r.out
    assert r.code == code, (r.code, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert lines[0].startswith("Error: "), lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert r.out == ""
    return lines[0]


# ----- malformed config ----------------------------------------------------------------------------------------
BAD_CONFIGS = {
    "bad-toml": ("config.toml", b"[recall\nk = 3\n", ["config.toml", "not valid TOML", "line 1", "fix the syntax"]),
    "bad-json": (
        "config.json",
        b'{"recall": {"k": 3,}}',
        ["config.json", "not valid JSON", "line 1", "fix the syntax"],
    ),
    "wrong-type": ("config.toml", b'[recall]\nk = "many"\n', ["config.toml", "'recall.k'", "integer", "fix the value"]),
    "wrong-type-json": ("config.json", b'{"agent": {"max_retries": [1]}}', ["'agent.max_retries'", "fix the value"]),
    "unknown-key": ("config.toml", b'[agent]\nmodle = "x"\n', ["config.toml", "'agent.modle'", "unknown key"]),
    "unknown-section": ("config.toml", b"[memroy]\nauto_sync = false\n", ["'memroy'", "unknown key"]),
    "not-a-table": ("config.json", b"[1, 2]", ["config.json", "table/object at the top level"]),
    "not-utf8": ("config.toml", b'[agent]\nname = "caf\xe9"\n', ["config.toml", "not UTF-8", "re-save it as UTF-8"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_malformed_config_is_one_line_exit_2_and_nothing_is_written(cli, ws, memclaw_home, case):
    name, data, needles = BAD_CONFIGS[case]
    (memclaw_home / "config.toml").unlink()
    (memclaw_home / name).write_bytes(data)
    before = user_files(memclaw_home)
    for args in (["status"], ["recall", "Porto"], ["memory", "add", "My bike is green"], ["context", "hi"]):
        assert_error(cli(*args), 2, *needles)
    assert user_files(memclaw_home) == before  # the fact was not written, the config not "repaired"


def test_unknown_key_message_points_to_a_command_that_exists(cli, ws, memclaw_home):
    (memclaw_home / "config.toml").write_text('[agent]\nmodle = "x"\n')
    line = assert_error(cli("status"), 2, "memclaw config --defaults")
    assert "agent.modle" in line
    r = cli("config", "--defaults")
    assert r.code == 0 and "model" in json.loads(r.out)["agent"] and "modle" not in r.out


def test_two_config_files_are_refused_not_one_silently_ignored(cli, ws, memclaw_home):
    (memclaw_home / "config.json").write_text('{"recall": {"k": 3}}')
    before = user_files(memclaw_home)
    for args in (["status"], ["recall", "Porto"], ["memory", "add", "My bike is green"]):
        assert_error(cli(*args), 2, "config.toml", "config.json", "merge them into one")
    assert user_files(memclaw_home) == before


def test_config_that_is_a_folder(cli, ws, memclaw_home):
    (memclaw_home / "config.toml").unlink()
    (memclaw_home / "config.toml").mkdir()
    assert_error(cli("status"), 2, "config.toml", "is a directory", "remove it")


@pytest.mark.parametrize(
    ("env", "value", "needles"),
    [
        ("MEMCLAW_RECALL__K", "abc", ["environment variable MEMCLAW_RECALL__K", "'recall.k'", "fix or unset it"]),
        ("MEMCLAW_AGENT__MODLE", "x", ["environment variable MEMCLAW_AGENT__MODLE", "unknown key", "unset"]),
        ("MEMCLAW_RECALL", '{"k": "x"}', ["environment variable MEMCLAW_RECALL", "'recall.k'", "fix or unset"]),
        ("MEMCLAW_RECALL", "k=3", ["environment variable MEMCLAW_RECALL", "not valid JSON", "MEMCLAW_RECALL__<KEY>"]),
        ("MEMCLAW_OWNERS", "discord:1", ["environment variable MEMCLAW_OWNERS", "not valid JSON", "unset"]),
    ],
)
def test_bad_environment_override_names_the_variable(cli, ws, memclaw_home, monkeypatch, env, value, needles):
    monkeypatch.setenv(env, value)
    before = user_files(memclaw_home)
    assert_error(cli("status"), 2, *needles)
    assert_error(cli("memory", "add", "My bike is green"), 2, *needles)
    assert user_files(memclaw_home) == before


def test_env_override_beats_a_good_file_and_is_blamed_not_the_file(cli, ws, memclaw_home, monkeypatch):
    (memclaw_home / "config.toml").write_text("[recall]\nk = 5\n")
    monkeypatch.setenv("MEMCLAW_RECALL__K", "0")
    line = assert_error(cli("recall", "Porto"), 2, "MEMCLAW_RECALL__K")
    assert "config.toml" not in line


# ----- unreadable workspace --------------------------------------------------------------------------------------
def test_missing_or_wrong_workspace(cli, ws, tmp_path, memclaw_home):
    before = user_files(memclaw_home)
    assert_error(cli("recall", "Porto", "-w", str(tmp_path / "nope")), 2, "no workspace at", "memclaw onboard")
    (tmp_path / "afile").write_text("x")
    assert_error(cli("memory", "add", "x", "-w", str(tmp_path / "afile")), 2, "afile")
    bare = tmp_path / "bare"
    bare.mkdir()
    assert_error(cli("memory", "sync", "-w", str(bare)), 2, "no memory/ inside", "memclaw onboard")
    assert user_files(memclaw_home) == before
    assert not (bare / "memory").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads anything: permissions cannot be tested")
def test_workspace_without_read_permission(cli, ws):  # pragma: no cover - CI runs as a normal user
    ws.chmod(0)
    try:
        assert_error(cli("recall", "Porto"), 2, str(ws), "permission")
    finally:
        ws.chmod(0o755)


@pytest.mark.parametrize("how", ["folder", "symlink-loop"])
def test_unreadable_memory_file_is_exit_3_naming_file_and_fix(cli, ws, memclaw_home, how):
    mem = ws / "memory" / "MEMORY.md"
    mem.unlink()
    if how == "folder":
        mem.mkdir()
        fix = "it is a folder"
    else:
        (ws / "memory" / "loop").symlink_to("loop")
        mem.symlink_to(ws / "memory" / "loop")
        fix = "is a symlink"  # refused as a link before the loop is even looked at (memclaw.util.safepath)
    before = user_files(memclaw_home)
    for args in (["recall", "Porto"], ["memory", "sync"], ["memory", "add", "x"]):
        assert_error(cli(*args), 3, str(mem), fix)
    assert user_files(memclaw_home) == before


# ----- odd MEMORY.md -----------------------------------------------------------------------------------------
ODD = (
    b"# People\n"
    b"- Lena\n"
    b"  - Lena's husband Tiago repairs violins\n"  # nested: a fact of its own
    b"    continuation of the nested item\n"
    b"<!-- a comment with - a fake bullet -->\n"
    b"\n"
    b"```\n"  # a code block no item holds: not a fact (a warning names it), never items or headings
    b"- inside code\n"
    b"# not a heading\n"
    b"```\n"
    b"- caf\xe9 au lait with oat milk, every morning\n"  # Latin-1, not UTF-8
    b"1. numbered item about the blue kayak\n"
    b"\t- tab-indented item about the garden shed\n"
    b"Setext heading\n===\n"
    b"- \x07\x1b control characters in a fact about the alarm code\n"
)


def test_odd_markdown_is_recalled_and_every_byte_survives(cli, ws, memclaw_home):
    mem = ws / "memory" / "MEMORY.md"
    mem.write_bytes(ODD)
    r = cli("recall", "who repairs violins", "--json")
    assert r.code == 0, r.err
    hits = json.loads(r.out)
    assert hits[0]["text"] == "Lena's husband Tiago repairs violins\ncontinuation of the nested item"
    r = cli("recall", "milk in the morning", "--json", "-k", "1")
    assert json.loads(r.out)[0]["text"] == "caf\ufffd au lait with oat milk, every morning"
    r = cli("recall", "inside code heading fake bullet", "--json", "--mode", "bm25")
    texts = [h["text"] for h in json.loads(r.out)]
    assert r.code == 0 and not any("inside code" in t or "fake bullet" in t for t in texts)  # the block: no fact
    assert mem.read_bytes() == ODD  # recall and sync never write the Markdown
    r = cli("memory", "add", "My kayak is blue", "--date", "2026-11-26")
    assert r.code == 0, r.err
    # foreign bytes, control characters, comments, code: all kept; the fact goes under the default section
    assert mem.read_bytes() == ODD + b"\n# Notes\n\n- My kayak is blue (2026-11-26)\n"
    r = cli("memory", "stats", "--json")
    assert json.loads(r.out)["scopes"]["owner"]["facts"] == 7


MARKDOWN_NOT_FACTS = """# Long-term memory
This file holds what I want remembered.

Family
======
- Lena lives in Porto (2026-02-30)

```
git push --force
```

Work
----
- I work at Solaris Energy
"""


def test_what_is_not_a_fact_is_said_once_naming_the_file_and_line(cli, ws):
    """Issue 19.4: a setext heading was a fact, a code block one fact with its fences, a paragraph a fact, an
    impossible date silently none. Now: headings are headings, the rest is said once (when the file changed),
    each with its line and what to do."""
    mem = ws / "memory" / "MEMORY.md"
    mem.write_text(MARKDOWN_NOT_FACTS, "utf-8")
    r = cli("recall", "where does Lena live")
    assert r.code == 0, r.err
    src = "memory/MEMORY.md"
    assert f'{src} line 2 is a paragraph, not a fact (only list items are facts): start it with "- "' in r.err
    assert f"{src} line 8 is a code block outside a list item, not a fact: indent it under the item" in r.err
    assert f"{src} line 6: 2026-02-30 is not a date, so the fact is undated: write a real date (YYYY-MM-DD)" in r.err
    units = json.loads(cli("memory", "list", "--json").out)
    assert [(u["text"], u["section"], u["date"]) for u in units if u["kind"] == "fact"] == [
        ("Lena lives in Porto (2026-02-30)", "Family", None),  # `===`: level 1, as `#`
        ("I work at Solaris Energy", "Family > Work", None),
    ]
    r = cli("recall", "where do I work")
    assert r.code == 0 and "not a fact" not in r.err and "not a date" not in r.err, r.err  # said once
    assert cli("memory", "add", "Mia is 9", "--section", "Family", "--date", "2026-11-26").code == 0
    text = mem.read_text("utf-8")
    assert text == MARKDOWN_NOT_FACTS.replace(
        "(2026-02-30)\n", "(2026-02-30)\n- Mia is 9 (2026-11-26)\n"
    )  # every other byte


def test_a_note_is_said_once_not_on_every_add_or_forget(cli, ws):
    """Issue 38 (papercuts): the paragraph, code-block and bad-date notes were said again on every `memory add` and
    `forget` (each rewrites the file). A note is said once; a new one is said when it appears, and a note whose line
    is fixed and broken again is said again."""

    def said(r: Result, what: str) -> int:  # the notes logged (the command also prints each: counted once)
        return sum(what in line for line in r.err.splitlines() if line.startswith("WARNING memclaw.index"))

    mem = ws / "memory" / "MEMORY.md"
    mem.write_text(MARKDOWN_NOT_FACTS, "utf-8")
    r = cli("memory", "add", "Mia is 9", "--section", "Family", "--date", "2026-11-26")
    assert r.code == 0 and said(r, "not a fact") == 2 and said(r, "not a date") == 1, r.err
    r = cli("memory", "add", "Tom is 11", "--section", "Work", "--date", "2026-11-26")
    assert r.code == 0, r.err
    assert "not a fact" not in r.err and "not a date" not in r.err, r.err
    uid = json.loads(cli("memory", "add", "Ana is 4", "--section", "Family", "--json").out)["id"]
    r = cli("memory", "forget", uid)
    assert r.code == 0 and "not a" not in r.err, r.err
    mem.write_text(mem.read_text("utf-8") + "\nA new stray paragraph.\n", "utf-8")
    r = cli("memory", "add", "Leo is 2", "--section", "Family", "--date", "2026-11-26")
    assert r.code == 0, r.err
    assert said(r, "not a fact") == 1 and "line 2 " not in r.err and "not a date" not in r.err, r.err
    new_line = mem.read_text("utf-8").split("\n").index("A new stray paragraph.") + 1
    assert f"line {new_line} is a paragraph, not a fact" in r.err, r.err
    mem.write_text(mem.read_text("utf-8").replace("(2026-02-30)", "(2026-02-28)"), "utf-8")
    assert "not a date" not in cli("memory", "sync").err
    mem.write_text(mem.read_text("utf-8").replace("(2026-02-28)", "(2026-02-30)"), "utf-8")
    assert said(cli("memory", "sync"), "not a date") == 1


def test_a_memclaw_warning_in_chat_is_a_note_not_a_log_line():
    """Issue 38 (papercuts): in `memclaw chat` a warning showed as `WARNING memclaw.index.sync: ...` between the
    replies. Through the chat's log handler it reads `warning: ...`; other libraries' records keep their form."""
    import io

    from rich.console import Console

    from memclaw.cli.common import log_through
    from memclaw.runtime import VisibleFormatter

    root = logging.getLogger()
    plain = logging.StreamHandler(io.StringIO())
    plain.setFormatter(VisibleFormatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(plain)
    buf = io.StringIO()
    try:
        log_through(Console(file=buf, markup=False, emoji=False, highlight=False, width=200))
        logging.getLogger("memclaw.index.sync").warning("%s", "memory/MEMORY.md line 2 is a paragraph")
        logging.getLogger("chromadb.telemetry").warning("telemetry is off")
    finally:
        for h in [h for h in root.handlers if h is plain or type(h).__name__ == "_ConsoleLogHandler"]:
            root.removeHandler(h)
    assert buf.getvalue().splitlines() == [
        "warning: memory/MEMORY.md line 2 is a paragraph",
        "WARNING chromadb.telemetry: telemetry is off",
    ]


def test_a_usage_error_is_one_line_naming_the_option_and_its_range(cli, memclaw_home):
    """Issue 38 (papercuts): `--k 0` printed click's usage block (usage, hint, blank line, error). Every usage error
    is one line on stderr, exit 2, naming the option, the range it takes and where the help is."""
    assert_error(cli("recall", "boat", "--k", "0"), 2, "'--k'", "(--k takes from 1 to 200)", "memclaw recall --help")
    assert_error(cli("recall", "boat", "-k", "201"), 2, "'--k'", "from 1 to 200")
    assert_error(cli("recall", "boat", "--tokens", "-1"), 2, "'--tokens'", "(--tokens takes at least 0)")
    assert_error(cli("recall", "boat", "--kk", "3"), 2, "No such option: --kk", "memclaw recall --help")
    assert_error(cli("recall"), 2, "Missing argument", "memclaw recall --help")
    assert_error(cli("memory", "lst"), 2, "No such command 'lst'", "memclaw memory --help")


def test_a_5mb_memory_file(cli, ws, memclaw_home):
    mem = ws / "memory" / "MEMORY.md"
    line = b"- fact number %06d about the weekly groceries, the bike, the garden and the weather\n"
    n = 5_000_000 // len(line % 0) + 1
    big = b"# Big\n" + b"".join(line % i for i in range(n))
    assert len(big) > 5_000_000
    mem.write_bytes(big)
    r = cli("memory", "stats", "--json")  # parses the whole file; embedding 60k facts is not this test's business
    assert r.code == 0, r.err
    assert json.loads(r.out)["scopes"]["owner"]["facts"] == n
    # A 5 MB file that is mostly a pasted log inside a comment: an edit keeps every byte, the fact is indexed.
    pasted = b"- I live in Lyon\n<!--\n" + b"log line with - dashes and [2024-01-01] stamps\n" * 110_000 + b"-->\n"
    mem.write_bytes(pasted)
    r = cli("memory", "add", "My bike is green", "--date", "2026-11-26")
    assert r.code == 0, r.err
    assert mem.read_bytes() == pasted + b"\n# Notes\n\n- My bike is green (2026-11-26)\n"
    assert json.loads(cli("recall", "what colour is my bike", "--json", "-k", "1").out)[0]["text"] == (
        "My bike is green (2026-11-26)"
    )


NOT_TEXT = {
    "png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 40,
    "utf-16": "# About me\n- I live in Lyon\n".encode("utf-16"),
    "nul-in-text": b"# About me\n- I live in Lyon\x00\n",
    "random-no-nul": bytes((i * 167 + 13) % 255 + 1 for i in range(4000)),  # mojibake without a NUL
    "cp1251": "# Обо мне\n- Я живу в Лионе, моя сестра живёт в Порту\n".encode("cp1251"),
}


@pytest.mark.parametrize("name", ["MEMORY.md", "HISTORY.md"])
@pytest.mark.parametrize("kind", sorted(NOT_TEXT))
def test_a_memory_file_that_is_not_text_is_refused_and_never_written(cli, ws, memclaw_home, name, kind):
    """A binary or mojibake MEMORY.md / HISTORY.md (e.g. an attachment saved to the wrong path): exit 3 naming
    the file and the fix, nothing indexed from it, and its bytes untouched by recall, sync and `memory add`."""
    path = ws / "memory" / name
    path.write_bytes(NOT_TEXT[kind])
    before = user_files(memclaw_home)
    for args in (["recall", "where does my sister live"], ["memory", "sync"], ["memory", "add", "My kayak is blue"]):
        assert_error(cli(*args), 3, str(path), "not UTF-8 text", "re-save it as UTF-8")
    assert user_files(memclaw_home) == before


def test_a_history_that_is_not_text_is_never_appended_to(tmp_path):
    from memclaw.errors import MemoryFileError
    from memclaw.markdown.history_file import append_history

    path = tmp_path / "HISTORY.md"
    path.write_bytes(NOT_TEXT["png"])
    with pytest.raises(MemoryFileError, match="not UTF-8 text"):
        append_history(path, datetime(2026, 3, 2, 18, 10), "Talked about Porto")
    assert path.read_bytes() == NOT_TEXT["png"]


# ----- messages and queries --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["recall", ""], ["empty query", 'memclaw recall "']),
        (["recall", "  \t "], ["empty query"]),
        (["context", ""], ["empty message", 'memclaw context "']),
        (["context", "   "], ["empty message"]),
        (["memory", "add", " "], ["empty fact"]),
        (["agent", "-m", ""], ["empty message", 'memclaw agent -m "']),
    ],
)
def test_empty_input_is_a_usage_error(cli, ws, memclaw_home, args, needles):
    before = user_files(memclaw_home)
    assert_error(cli(*args), 2, *needles)
    assert user_files(memclaw_home) == before


def test_query_of_only_stop_words_is_an_empty_query(cli, ws):
    """Issue 19.14: "the and of" brought back an arbitrary memory at cosine 0.15. It names nothing to search for,
    as an empty query does: the same message and exit code, in every mode; auto-recall recalls nothing for it,
    without a warning."""
    empty = assert_error(cli("recall", ""), 2, "empty query")
    for args in (["--json"], ["--mode", "bm25"], ["--mode", "vector"], []):
        assert assert_error(cli("recall", "the of and to", *args), 2) == empty
    assert assert_error(cli("recall", "The AND... of?!"), 2) == empty
    r = cli("recall", "the sister", "--json")  # one word that is not a stop word is enough
    assert r.code == 0 and "Porto" in json.loads(r.out)[0]["text"], r.err
    r = cli("context", "and the, of it", "--json")
    assert r.code == 0 and r.err == "", r.err
    data = json.loads(r.out)
    assert data["warnings"] == [] and data["memories"] == [], data


def test_a_1mb_query_and_a_long_message(cli, ws, memclaw_home):
    before = user_files(memclaw_home)
    message = "Where does my sister live? " + "blah " * 200_000
    assert len(message) > 1_000_000
    r = cli("recall", message, "--json", "-k", "3")
    assert r.code == 0, r.err
    assert "Porto" in json.loads(r.out)[0]["text"]
    # `memclaw context` with a 1 MB message works too, but takes ~25 s here (and 100 kB ~15 s: the budget's
    # token counting through litellm), so the suite keeps it to 20 kB. See the report of issue 7.
    message = message[:20_000]
    r = cli("context", message, "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["messages"][-1]["content"].startswith("Where does my sister live?")
    assert user_files(memclaw_home) == before


def test_a_1mb_fact_is_refused_before_anything_is_written(cli, ws, memclaw_home):
    before = user_files(memclaw_home)
    assert_error(cli("memory", "add", "word " * 200_000), 2, "fact too long", "save long text as a file")
    assert user_files(memclaw_home) == before


def test_undecodable_bytes_in_arguments(cli, ws):
    """A Latin-1 argument (e.g. `memclaw memory add "$(cat notes-latin1.txt)"`): Python hands it over with lone
    surrogates; it is stored and recalled with U+FFFD, never a traceback or a false "could not be read back"."""
    latin1 = b"caf\xe9 with Jos\xe9".decode("utf-8", "surrogateescape")
    r = cli("memory", "add", latin1, "--date", "2026-11-26")
    assert r.code == 0, r.err
    assert "- caf\ufffd with Jos\ufffd (2026-11-26)\n" in (ws / "memory" / "MEMORY.md").read_text("utf-8")
    r = cli("recall", latin1, "--json", "-k", "1")
    assert r.code == 0, r.err
    assert json.loads(r.out)[0]["text"] == "caf\ufffd with Jos\ufffd (2026-11-26)"
    r = cli("context", latin1, "--json")
    assert r.code == 0, r.err


def test_a_fact_with_a_comment_opener_is_added(cli, ws):
    r = cli("memory", "add", "use <!-- in HTML for comments")
    assert r.code == 0, r.err  # the opener is defused so the fact cannot vanish, and it reads back
    assert "use <\\!-- in HTML" in (ws / "memory" / "MEMORY.md").read_text()


# ----- ids with path separators --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sender", "dirname"),
    [
        ("discord:../../etc", "discord%3A..%2F..%2Fetc"),
        ("discord:1/../2", "discord%3A1%2F..%2F2"),
        ("../..:etc", "%2E.%2F..%3Aetc"),  # a "channel" that is a path: still one folder, its dot escaped
        ("/abs:path", "%2Fabs%3Apath"),
    ],
)
def test_sender_ids_with_path_separators_stay_in_people(cli, ws, memclaw_home, tmp_path, sender, dirname):
    outside = {p for p in tmp_path.rglob("*") if INDEX_DIRNAME not in p.parts}
    r = cli("memory", "add", "I ordered a blue teapot", "--sender", sender, "--date", "2026-11-26")
    assert r.code == 0, r.err
    created = {p for p in tmp_path.rglob("*") if INDEX_DIRNAME not in p.parts and p.name[0] != "."} - outside
    people = ws / "memory" / "people"
    assert created == {people, people / dirname, people / dirname / "MEMORY.md"} - outside
    r = cli("recall", "teapot", "--sender", sender, "--json")
    assert [h["text"] for h in json.loads(r.out)] == ["I ordered a blue teapot (2026-11-26)"]
    assert all("teapot" not in h["text"] for h in json.loads(cli("recall", "teapot", "--json").out))
    assert json.loads(cli("memory", "stats", "--json").out)["scopes"][f"people/{sender}"]["facts"] == 1


def test_context_for_a_sender_with_path_separators(cli, ws):
    r = cli("context", "where do I live", "--sender", "discord:1/../2", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert not data["is_owner"] and data["scope"] == "people/discord:1/../2"
    assert "Lyon" not in json.dumps(data)


@pytest.mark.parametrize("sender", ["../../etc", "/abs/path", "bob", "cli:bob", ":1234"])
def test_a_sender_without_an_outside_channel_is_refused_by_every_command(cli, ws, memclaw_home, sender):
    """The terminal is always the owner and an outsider is named with their channel: an id without one is refused
    alike by every command that takes --sender (memclaw.cli.sender_opt), nothing written."""
    before = user_files(memclaw_home)
    for args in (
        ["memory", "add", "I ordered a blue teapot", "--sender", sender],
        ["memory", "list", "--sender", sender],
        ["memory", "forget", "f0123456789a", "--sender", sender],
        ["recall", "teapot", "--sender", sender],
        ["context", "teapot", "--sender", sender],
    ):
        assert_error(cli(*args), 2, repr(sender), "discord:1234" if sender == ":1234" else "--sender discord:<id>")
    assert user_files(memclaw_home) == before


def test_context_sender_without_channel_is_not_the_owner(cli, ws, memclaw_home):
    """`--sender ../../etc` used to be read as channel "cli", which is always the owner: the preview of an
    outsider showed the owner's profile and memories."""
    line = assert_error(cli("context", "where do I live", "--sender", "../../etc"), 2, "'../../etc'", "discord:")
    assert "Lyon" not in line
    assert_error(cli("context", "hi", "--channel", "cli", "--sender", "bob"), 2, "--sender discord:<id>")
    r = cli("context", "where do I live", "--sender", "owner", "--json")
    assert r.code == 0 and json.loads(r.out)["is_owner"]


@pytest.mark.parametrize("sender", ["", "   ", "a\tb", "x" * 201, "line\nbreak"])
def test_invalid_sender_ids(cli, ws, memclaw_home, sender):
    before = user_files(memclaw_home)
    assert_error(cli("memory", "add", "x", "--sender", sender), 2, "invalid sender id", "printable characters")
    assert_error(cli("recall", "x", "--sender", sender), 2, "invalid sender id")
    assert user_files(memclaw_home) == before


# ----- the real console script ---------------------------------------------------------------------------------
MEMCLAW = Path(sys.executable).with_name("memclaw")


@pytest.mark.parametrize(
    ("env", "config", "needles"),
    [
        ({}, b"[recall\n", ["config.toml", "not valid TOML"]),
        ({"MEMCLAW_RECALL": "k=3"}, b"", ["MEMCLAW_RECALL", "not valid JSON"]),
    ],
)
def test_console_script_prints_one_line_and_no_traceback(memclaw_home, env, config, needles):
    (memclaw_home / "config.toml").write_bytes(config)
    proc = subprocess.run(
        [str(MEMCLAW), "memory", "add", "x"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_error(Result(proc.returncode, proc.stdout, proc.stderr), 2, *needles)


# ----- odd paths in the index folder (issue 18.5) --------------------------------------------------------------
def _replace_with_folder(p: Path) -> None:
    if p.is_dir():
        shutil.rmtree(p)
    else:
        p.unlink(missing_ok=True)
    p.mkdir()
    (p / "something-of-the-users").write_text("x")


def _replace_with_file(p: Path) -> None:
    if p.is_dir():
        shutil.rmtree(p)
    else:
        p.unlink()
    p.write_text("not memclaw's\n")


def _one_scope(index: Path) -> Path:
    [d] = [p for p in (index / "scopes").iterdir() if p.is_dir()]
    return d


ODD_INDEX_PATHS = {  # case -> (what to do to the synced index, the path the message must name)
    "state file is a folder": (lambda ix: _replace_with_folder(_one_scope(ix) / "state.sqlite3"), "state.sqlite3"),
    "DIRTY is a folder": (lambda ix: _replace_with_folder(_one_scope(ix) / "DIRTY"), "DIRTY"),
    "scope folder is a file": (lambda ix: _replace_with_file(_one_scope(ix)), "scopes/"),
    "scopes is a file": (lambda ix: _replace_with_file(ix / "scopes"), ".memclaw-index/scopes"),
    "chroma is a file": (lambda ix: _replace_with_file(ix / "chroma"), ".memclaw-index/chroma"),
    "manifest is a folder": (lambda ix: _replace_with_folder(ix / "manifest.json"), "manifest.json"),
    "sync.lock is a folder": (lambda ix: _replace_with_folder(ix / "sync.lock"), "sync.lock"),
    "index folder is a file": (lambda ix: _replace_with_file(ix), ".memclaw-index"),
}


@pytest.mark.parametrize("case", sorted(ODD_INDEX_PATHS))
def test_an_odd_path_in_the_index_is_one_line_exit_3(cli, ws, memclaw_home, case):
    """A folder where memclaw keeps a file of its index, or a file where it keeps a folder: every command says so in
    one line naming the path and the fix (move it away; never "delete": it is not memclaw's), exit 3, writes
    nothing (no fact, no temp file) and leaves the odd path as it found it."""
    assert cli("memory", "sync").code == 0
    index = ws / INDEX_DIRNAME
    damage, named = ODD_INDEX_PATHS[case]
    damage(index)
    before = user_files(memclaw_home)
    snapshot = sorted(str(p.relative_to(index)) for p in index.rglob("*")) if index.is_dir() else []
    for args in (["recall", "where does my sister live"], ["memory", "add", "My bike is green"], ["memory", "sync"]):
        line = assert_error(cli(*args), 3, named, "move it out of the way")
        assert "delete" not in line.lower() and "Errno" not in line, line
    assert user_files(memclaw_home) == before
    after = sorted(str(p.relative_to(index)) for p in index.rglob("*")) if index.is_dir() else []
    assert after == snapshot  # nothing made, nothing removed, no temp file left
    if index.is_dir():
        assert not list(index.rglob("*.tmp"))


def test_an_index_dir_that_is_a_file_memclaw_did_not_make(cli, ws, memclaw_home, tmp_path, monkeypatch):
    """`memory.index_dir = "/etc/passwd"`: one line naming the setting; never the advice to delete it."""
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0:root:/root:/bin/bash\n")
    monkeypatch.setenv("MEMCLAW_MEMORY__INDEX_DIR", str(target))
    for args in (["recall", "Porto"], ["memory", "add", "My bike is green"], ["memory", "sync"], ["status"]):
        line = assert_error(cli(*args), 3, str(target), "memory.index_dir")
        assert "delete" not in line.lower(), line
    assert target.read_text() == "root:x:0:0:root:/root:/bin/bash\n"


def test_deleting_the_index_is_advised_only_for_memclaws_own_folder(tmp_path):
    """The permission advice names deleting the index folder only when it holds memclaw's manifest."""
    from memclaw.errors import rebuild_hint
    from memclaw.permission_errors import from_permission_error

    theirs = tmp_path / "theirs" / INDEX_DIRNAME
    theirs.mkdir(parents=True)
    ours = tmp_path / "ours" / INDEX_DIRNAME
    ours.mkdir(parents=True)
    (ours / "manifest.json").write_text("{}")
    assert rebuild_hint(theirs) == "" and str(ours) in rebuild_hint(ours)
    err = from_permission_error(PermissionError(13, "Permission denied", str(theirs / "scopes")))
    assert "delete" not in str(err) and "fix its permissions" in str(err)
    err = from_permission_error(PermissionError(13, "Permission denied", str(ours / "scopes")))
    assert f"delete {ours}" in str(err)
