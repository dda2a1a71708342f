"""The first hour with the CLI (issue 13, points 9-14): --version, `-` for stdin, switches shown as switches,
shortened long text, and the smaller rough edges. In-process through the console script's entry point (`run`,
see tests/cli/test_bad_input.py) with a real workspace, the real model and embedded Chroma; the LLM is litellm over
real HTTP to the scripted server."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest
import typer
from rich.console import Console

from memclaw import __version__
from memclaw.cli.main import app
from tests.cli import test_bad_input
from tests.cli.test_bad_input import assert_error
from tests.llm_server import scripted_server

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
    # how much it left out, of the query as recall reads it: cut at recall.max_query_chars (2,000) first
    assert "(+1,9" in title and title.endswith("chars)' · scope owner · hybrid")
    assert len(lines) < 25, r.out  # the query echoed as 1,212 lines and the fact filled 69 before
    flat = " ".join(r.out.split())
    assert "step 0: stir" in flat and "step 124" not in flat and "(+3," in flat
    r = cli("recall", "grandmother lasagne recipe", "-k", "1", "--json")
    assert json.loads(r.out)[0]["text"] == LONG_FACT
    stdin(monkeypatch, ("no such thing " * 10_000).encode())
    r = cli("recall", "-", "--mode", "bm25", "--kind", "history")
    assert r.code == 0 and len(r.out.splitlines()) <= 2 and "No memories" in r.out, r.out


def test_one_shortening_for_the_table_chat_and_discord():
    from memclaw.cli.tables import recall_table
    from memclaw.context.recall_view import recall_text
    from memclaw.markdown.units import MemoryUnit
    from memclaw.recall.results import RecallHit, RecallResult, Signal
    from memclaw.util.text import MEMORY_CHARS, shorten

    unit = MemoryUnit("f1", "fact", "owner", "memory/MEMORY.md", 3, LONG_FACT)
    result = RecallResult(
        "lasagne\n" * 50,
        "owner",
        "hybrid",
        [RecallHit(unit=unit, score=0.9, bm25=Signal(1, 2.0), vector=Signal(1, 0.5))],
    )
    short = shorten(LONG_FACT, MEMORY_CHARS)
    assert len(short) <= MEMORY_CHARS and short.endswith(" chars)") and short.startswith(LONG_FACT[:150])
    console = Console(width=100, record=True, color_system=None)
    console.print(recall_table(result, width=100))
    table = console.export_text()
    assert short in " ".join(table.split()) and len(table.splitlines()) < 15
    for view in (recall_text(result), recall_text(result, markdown=True, limit=2000)):
        assert short in view and len(view.splitlines()) <= 3, view  # one line per hit, the query on one line


# ----- 13.14 the smaller ones -----------------------------------------------------------------------------------
def test_onboard_with_a_broken_config_fails_and_creates_nothing(cli, memclaw_home):
    (memclaw_home / "config.toml").write_text("[agent\nmodel = 'x'\n", "utf-8")
    r = cli("onboard")
    assert_error(r, 2, "config.toml", "fix the syntax")
    assert "Workspace ready" not in r.out and not (memclaw_home / "workspace").exists()


def test_the_readme_demo_example_finds_what_the_readme_says(cli, tmp_path):
    from memclaw.workspace import build_demo_workspace

    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text("utf-8").split())
    m = re.search(r'memclaw recall "([^"]+)" -w ~/\.memclaw/demo` \(the first hit: "([^"]+)"\)', readme)
    assert m, "the README's demo example"
    build_demo_workspace(tmp_path / "demo")
    r = cli("recall", m.group(1), "-w", str(tmp_path / "demo"), "--json", "-k", "1")
    assert r.code == 0, r.err
    assert json.loads(r.out)[0]["text"] == m.group(2)


def test_the_config_template_shows_the_real_defaults_and_token_variable():
    import tomllib

    from memclaw.cli.gateway_cmd import TOKEN_ENV
    from memclaw.config import Config, dump_config
    from memclaw.workspace import config_template

    defaults = dump_config(Config.model_construct())
    text = config_template()
    section: dict = defaults
    checked = 0
    for line in text.splitlines():
        head = re.fullmatch(r"#? ?\[([\w.]+)\]", line)
        if head:
            section = defaults
            for part in head.group(1).split("."):
                section = section[part]
            continue
        m = re.fullmatch(r"# (\w+) = (.+?)(?:\s+# (.*))?", line)
        if not m:
            continue
        key, value, comment = m.groups()
        if key == "workspace":
            continue
        if "default:" in (comment or "") or (comment or "").startswith("e.g."):  # an example; the default in words
            assert key in section or section == {}, (key, line)
            continue
        checked += 1
        assert tomllib.loads(f"v = {value}")["v"] == section[key], (line, section[key])
    assert checked >= 10
    assert "# temperature = 0.7 " in text and "default: unset" in text  # `config --defaults` says null
    assert TOKEN_ENV in text and "MEMCLAW_CHANNELS__DISCORD__TOKEN" not in text  # the variable `status` names


def test_bench_help_says_where_to_get_the_data(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    for cmd, needles in (
        ("locomo", ["https://github.com/snap-research/LoCoMo", "data/locomo10.json"]),
        ("longmemeval", ["https://github.com/xiaowu0162/LongMemEval", "longmemeval_s_cleaned.json"]),
    ):
        r = cli("bench", cmd, "--help")
        flat = " ".join(ANSI.sub("", r.out).split())
        assert r.code == 0 and all(n in flat for n in needles), flat


def test_recall_says_when_fewer_than_k_passed_the_relevance_floor(cli, ws):
    r = cli("recall", "Lyon", "-k", "3", "--json", "--mode", "bm25")
    n = len(json.loads(r.out))
    assert 0 < n < 3  # the workspace holds 3 memories; the others do not match "Lyon"
    r = cli("recall", "Lyon", "-k", "3", "--mode", "bm25")
    flat = " ".join(r.out.split())
    assert f"{n} of the 3 asked for: the other memories in scope owner fell below the relevance floor" in flat
    r = cli("recall", "Lyon", "-k", str(n), "--mode", "bm25")
    assert "relevance floor" not in r.out  # all that was asked for


def test_an_unreachable_chroma_is_said_once_and_the_title_says_bm25_only(cli, ws):
    import os
    import subprocess

    assert cli("memory", "sync").code == 0
    env = dict(os.environ, MEMCLAW_MEMORY__CHROMA_URL="http://127.0.0.1:9", COLUMNS="200")  # nothing listens there
    p = subprocess.run(  # the console script: stderr exactly as a terminal shows it (log lines included)
        [sys.executable, "-m", "memclaw.cli.main", "recall", "where does my sister live", "-w", str(ws)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("is unreachable") == 1 and "fell back to BM25 only" in p.stderr, p.stderr
    assert "· bm25-only" in p.stdout.splitlines()[0] and "Porto" in p.stdout


def test_the_demo_hint_names_the_memclaw_that_was_run(tmp_path, monkeypatch):
    import os
    import subprocess

    script = Path(sys.executable).parent / "memclaw"  # the console script of this environment
    assert script.exists()
    env = dict(os.environ, PATH="/usr/bin:/bin")  # .venv/bin is not on PATH
    env.pop("COLUMNS", None)  # not a terminal: 80 columns, and the path is longer (issue 38: it wrapped)
    p = subprocess.run(
        [str(script), "demo", "-w", str(tmp_path / "demo"), "what am I allergic to"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    assert len(f"Try: {script} recall --workspace {tmp_path}") > 80
    assert p.stdout.rstrip().splitlines()[-1] == f'Try: {script} recall "your question" --workspace {tmp_path / "demo"}'
    assert f"Demo workspace: {tmp_path / 'demo'} (" in p.stdout


def test_invoked_as(tmp_path, monkeypatch):
    from memclaw.cli.common import invoked_as

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "memclaw"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(script), "demo"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert invoked_as() == str(script)  # not on PATH: the path that was run
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert invoked_as() == "memclaw"  # PATH finds this very script
    monkeypatch.setattr(sys, "argv", [str(Path(__file__).parents[2] / "memclaw" / "cli" / "main.py")])
    assert invoked_as() == f"{sys.executable} -m memclaw.cli.main"
