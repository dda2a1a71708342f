"""Issue 38.5 = issue 39.2: no secret is written to memory. Every text memclaw saves (`memory add`, the `remember`
tool, a consolidation's facts and history entry) is masked as the archive is: the configured keys and token by
value, other secrets by their shape or by what names them. It is saved masked with one warning line, never
refused. Checked in the files, in the index (`recall --json` through the console script) and in what is printed,
for the owner and for an outsider."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memclaw.agent.loop import Agent
from memclaw.agent.turn import InboundMessage
from memclaw.config import load_config
from memclaw.llm.client import LLMClient
from tests.llm_server import scripted_server

pytestmark = pytest.mark.slow

API_KEY = "cfg-agent-key-7Hq2LmZpX4"
DISCORD = "MTE3NDc0.discord-bot-token.Zk9"
SHAPED = "sk-proj-abcdefghijklmnopqrstuvwx1234"
SECRETS = [API_KEY, DISCORD, SHAPED, "hunter2"]
OUTSIDER = "discord:2002"


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


@pytest.fixture
def home(memclaw_home) -> Path:
    """MEMCLAW_HOME with a workspace and a config.toml holding the agent's key and the Discord token."""
    from memclaw.workspace import onboard

    onboard(memclaw_home)
    (memclaw_home / "config.toml").write_text(
        f'[agent]\napi_key = "{API_KEY}"\nmemory_window = 6\n\n[channels.discord]\ntoken = "{DISCORD}"\n', "utf-8"
    )
    return memclaw_home


def memclaw(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MEMCLAW_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", COLUMNS="200")
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return subprocess.run(
        [sys.executable, "-m", "memclaw.cli.main", *args], env=env, capture_output=True, text=True, timeout=300
    )


def memory_bytes(home: Path) -> str:
    """Every memory file of every scope (facts, history, archive), as text."""
    mem = home / "workspace" / "memory"
    return "".join(p.read_text("utf-8") for p in sorted(mem.rglob("*.md")))


def index_bytes(home: Path) -> bytes:
    """Every file of the derived index (Chroma's SQLite, BM25, the unit table)."""
    ix = home / "workspace" / ".memclaw-index"
    return b"".join(p.read_bytes() for p in sorted(ix.rglob("*")) if p.is_file())


def assert_no_secret(*texts: str | bytes) -> None:
    for text in texts:
        for s in SECRETS:
            assert (s.encode() if isinstance(text, bytes) else s) not in text, (s, text[:2000])


def recall_everything(home: Path, sender: str | None) -> str:
    """`recall --json` for what the secrets were said about, through the console script: the index's texts."""
    out = ""
    for query in ("password key token", "OpenAI key Discord bot", "what is my password"):
        args = ["recall", query, "--json", "--k", "20"] + (["--sender", sender] if sender else [])
        p = memclaw(home, *args)
        assert p.returncode == 0, p.stderr
        out += p.stdout + p.stderr
    return out


@pytest.mark.parametrize("sender", [None, OUTSIDER])
def test_memory_add_saves_secrets_masked_and_says_so(home, sender):
    said = f"my password is hunter2 and my key is {SHAPED}; the bot token is {DISCORD} and the agent key {API_KEY}"
    args = ["memory", "add", said] + (["--sender", sender] if sender else [])
    p = memclaw(home, *args)
    assert p.returncode == 0, p.stderr
    assert "masked 4 secrets before saving (***)" in p.stderr
    assert_no_secret(p.stdout, p.stderr, memory_bytes(home), index_bytes(home))
    assert "my password is *** and my key is ***" in memory_bytes(home)
    listed = memclaw(home, "memory", "list", "--json", *(["--sender", sender] if sender else []))
    assert listed.returncode == 0 and "my password is ***" in listed.stdout
    out = recall_everything(home, sender)
    assert "my password is ***" in out
    assert_no_secret(out, listed.stdout, index_bytes(home))


def make_agent(home: Path, embedder) -> Agent:
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    cfg = load_config()
    cfg.agent.model = "openai/gpt-4o-mini"
    cfg.agent.max_retries = 0
    cfg.owners = {"discord": ["1001"]}
    ws = Workspace(home / "workspace")
    mem = MemoryService(ws, cfg, embedder=embedder)
    llm = LLMClient(cfg, backoff_base_s=0.01, max_backoff_s=0.02)
    return Agent(cfg, ws, mem, llm=llm, background_consolidation=False)


def owner(text: str) -> InboundMessage:
    return InboundMessage.cli(text)


def outsider(text: str) -> InboundMessage:
    return InboundMessage("discord", "dm-2002", "2002", "Mallory", text)


@pytest.mark.parametrize("who", ["owner", "outsider"])
def test_remember_tool_saves_secrets_masked(home, llm_server, embedder, who):
    msg, sender = (owner, None) if who == "owner" else (outsider, OUTSIDER)
    agent = make_agent(home, embedder)
    llm_server.tool_call("remember", {"text": f"My key is {SHAPED} and the agent key is {API_KEY}"})
    llm_server.tool_call("remember", {"text": f"The bot token is {DISCORD}; my password is hunter2"})
    llm_server.reply("Saved.")
    r = asyncio.run(agent.handle(msg("remember my key and password")))
    assert r.ok, r.text
    results = [m["content"] for m in llm_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(results) == 2 and all(x.startswith("Remembered [") for x in results), results
    assert_no_secret(*results, memory_bytes(home), index_bytes(home))
    agent.memory.close()
    out = recall_everything(home, sender)
    assert "My key is ***" in out
    assert_no_secret(out)


@pytest.mark.parametrize("who", ["owner", "outsider"])
def test_consolidation_saves_secrets_masked(home, llm_server, embedder, who, caplog):
    """A consolidation answer holding the configured key, the Discord token and shaped secrets: the facts and the
    history entry are saved with *** in their place (and the chat it read is archived masked)."""
    msg, sender = (owner, None) if who == "owner" else (outsider, OUTSIDER)
    agent = make_agent(home, embedder)
    said = f"my password is hunter2 and my key is {SHAPED}"

    async def chat():
        for text in ["hi", said]:
            llm_server.reply(f"ok: {text}")
            assert (await agent.handle(msg(text))).ok

    asyncio.run(chat())
    answer = {
        "history_entry": f"Set up the bot with token {DISCORD} and key {API_KEY}; {said}.",
        "facts": [
            {"op": "add", "text": f"The OpenAI key is {API_KEY}"},
            {"op": "add", "text": f"Discord bot token: {DISCORD}"},
            {"op": "add", "text": said},
            {"op": "add", "text": "Lives in Lyon"},
        ],
    }
    llm_server.reply(json.dumps(answer))
    caplog.set_level("WARNING", logger="memclaw")
    r = asyncio.run(agent.handle(msg("/new")))
    assert r.ok, r.text
    files = memory_bytes(home)
    assert "Lives in Lyon" in files and "Set up the bot with token ***" in files and "my password is ***" in files
    assert any("before saving (***)" in rec.getMessage() for rec in caplog.records)
    assert_no_secret(files, index_bytes(home), r.text)
    agent.memory.close()
    out = recall_everything(home, sender)
    assert "The OpenAI key is ***" in out
    assert_no_secret(out)


def test_owners_file_tools_write_memory_files_masked(home, llm_server, embedder):
    """The owner's model writing MEMORY.md or HISTORY.md with its file tools: the text it adds is masked too;
    a file outside memory/ is the owner's own and written as given."""
    agent = make_agent(home, embedder)
    ws = home / "workspace"
    memory_md = f"# Notes\n- My key is {SHAPED}\n- The bot token is {DISCORD}\n"
    llm_server.tool_call("write_file", {"path": "memory/MEMORY.md", "content": memory_md})
    added = "# Notes\n- wifi password: hunter2\n"
    llm_server.tool_call("edit_file", {"path": "memory/MEMORY.md", "old_text": "# Notes\n", "new_text": added})
    llm_server.tool_call("write_file", {"path": "notes/todo.md", "content": f"rotate {API_KEY}\n"})
    llm_server.reply("Done.")
    assert asyncio.run(agent.handle(owner("write my keys down"))).ok
    results = [m["content"] for m in llm_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("Wrote ") and results[1].startswith("Edited "), results
    want = "# Notes\n- wifi password: ***\n- My key is ***\n- The bot token is ***\n"
    assert (ws / "memory" / "MEMORY.md").read_text() == want
    assert (ws / "notes" / "todo.md").read_text() == f"rotate {API_KEY}\n"
    agent.memory.close()
    out = recall_everything(home, None)
    assert "My key is ***" in out
    assert_no_secret(memory_bytes(home), index_bytes(home), out)
