"""The first hour with the CLI (issue 13, points 9-14): --version, `-` for stdin, switches shown as switches,
shortened long text, and the smaller rough edges. In-process through the console script's entry point (`run`,
see tests/test_bad_input.py) with a real workspace, the real model and embedded Chroma; the LLM is litellm over
real HTTP to the scripted server."""

from __future__ import annotations

import io
import json
import re
import sys

import pytest
import typer
from rich.console import Console

from memclaw import __version__
from memclaw.cli.main import app
from tests import test_bad_input
from tests.llm_server import scripted_server
from tests.test_bad_input import assert_error

cli, ws = test_bad_input.cli, test_bad_input.ws  # the in-process console script and an onboarded workspace

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


def stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


# ----- 13.9 --version and `-` for stdin ---------------------------------------------------------------------------
def test_version(cli):
    r = cli("--version")
    assert (r.code, r.out, r.err) == (0, f"memclaw {__version__}\n", "")


def test_dash_reads_the_query_or_message_from_stdin(cli, ws, monkeypatch, llm_server):
    stdin(monkeypatch, b"Where does my sister live?\n")
    r = cli("recall", "-", "--json", "-k", "1")
    assert r.code == 0, r.err
    assert "Porto" in json.loads(r.out)[0]["text"]

    stdin(monkeypatch, "what is my café's name?\n".encode())
    r = cli("context", "-", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["messages"][-1]["content"] == "what is my café's name?"

    monkeypatch.setenv("MEMCLAW_AGENT__MAX_RETRIES", "0")
    llm_server.reply("In Porto.")
    stdin(monkeypatch, b"where does Lena live?\n")
    r = cli("agent", "-m", "-")
    assert (r.code, r.out) == (0, "In Porto.\n"), r.err
    assert llm_server.requests[0]["messages"][-1]["content"] == "where does Lena live?"

    stdin(monkeypatch, b"  \n")  # empty stdin is the empty-message usage error
    assert_error(cli("agent", "-m", "-"), 2, "empty message")


# ----- 13.10 switches shown as switches ---------------------------------------------------------------------------
def _commands(group: typer.core.TyperGroup, path: tuple[str, ...] = ()):
    yield path, group
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def test_every_switch_shows_as_a_switch_in_help(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    flags = 0
    for path, cmd in _commands(typer.main.get_command(app)):
        r = cli(*path, "--help")
        assert r.code == 0, (path, r.err)
        help_text = ANSI.sub("", r.out)
        for param in cmd.params:
            if getattr(param, "is_flag", False) or getattr(param, "count", False):
                flags += 1
                line = next(ln for ln in help_text.splitlines() if f" {param.opts[0]} " in ln)
                assert "<" not in line, (path, line)  # no `<bool>` / `<int>`: a switch takes no value
        assert "--help  " in help_text and "<bool>" not in help_text, path
    assert flags >= 15  # --json everywhere, --demo, --details, --defaults, --no-progress, -v, --version
    # a switch is used as a switch
    r = cli("config", "--defaults")
    assert r.code == 0 and json.loads(r.out)["agent"]["model"]


# ----- 13.12 long text shortened in every human view (JSON keeps it whole) -----------------------------------------
LONG_FACT = "My grandmother's lasagne recipe: " + " ".join(f"step {i}: stir the sauce gently" for i in range(125))


def test_a_long_query_and_a_long_fact_are_shortened_in_the_table_not_in_json(cli, ws, monkeypatch):
    assert len(LONG_FACT) > 3_500
    memory = ws / "memory" / "MEMORY.md"
    memory.write_text(memory.read_text("utf-8") + f"- {LONG_FACT}\n", "utf-8")
    query = "grandmother lasagne recipe " + "please " * 18_800
    assert len(query) > 131_000
    stdin(monkeypatch, query.encode())
    r = cli("recall", "-", "-k", "1")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    title = " ".join(" ".join(lines[:2]).split())  # the title, wrapped at 80 columns
    assert title.startswith("recall 'grandmother lasagne recipe please please")
    assert "(+131,5" in title and title.endswith("chars)' · scope owner · hybrid")  # how much it left out
    assert len(lines) < 25, r.out  # the query echoed as 1,212 lines and the fact filled 69 before
    flat = " ".join(r.out.split())
    assert "step 0: stir" in flat and "step 124" not in flat and "(+3," in flat
    r = cli("recall", "grandmother lasagne recipe", "-k", "1", "--json")
    assert json.loads(r.out)[0]["text"] == LONG_FACT
    stdin(monkeypatch, ("no such thing " * 10_000).encode())
    r = cli("recall", "-", "--mode", "bm25", "--kind", "history")
    assert r.code == 0 and len(r.out.splitlines()) <= 2 and "No memories" in r.out, r.out


def test_one_shortening_for_the_table_chat_and_discord():
    from memclaw.agent import recall_text
    from memclaw.discord_gateway import format_recall
    from memclaw.recall import RecallHit, RecallResult, Signal
    from memclaw.render import recall_table
    from memclaw.shorten import MEMORY_CHARS, shorten
    from memclaw.units import MemoryUnit

    unit = MemoryUnit("f1", "fact", "owner", "memory/MEMORY.md", 3, LONG_FACT)
    result = RecallResult("lasagne\n" * 50, "owner", "hybrid", [RecallHit(unit, 0.9, Signal(1, 2.0), Signal(1, 0.5))])
    short = shorten(LONG_FACT, MEMORY_CHARS)
    assert len(short) <= MEMORY_CHARS and short.endswith(" chars)") and short.startswith(LONG_FACT[:150])
    console = Console(width=100, record=True, color_system=None)
    console.print(recall_table(result, width=100))
    table = console.export_text()
    assert short in " ".join(table.split()) and len(table.splitlines()) < 15
    for view in (recall_text(result.query, "owner", result.hits), format_recall(result)):
        assert short in view and len(view.splitlines()) <= 3, view  # one line per hit, the query on one line
