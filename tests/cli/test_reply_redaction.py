"""Issue 39.4: a reply holding a configured secret's value is printed with *** in its place (`agent -m`, `chat`), as
memclaw's log lines already are. The console script in a subprocess, litellm over real HTTP to the scripted
server."""

from __future__ import annotations

import pytest

from tests.cli.test_agent_cli import memclaw
from tests.llm_server import scripted_server

pytestmark = pytest.mark.slow

DISCORD = "MTE3NDc0.discord-bot-token.Zk9"
EMBED_KEY = "emb-provider-key-55aa77"


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


@pytest.fixture
def root(memclaw_home):
    from memclaw.workspace import onboard

    onboard(memclaw_home)
    (memclaw_home / "config.toml").write_text(
        f'[channels.discord]\ntoken = "{DISCORD}"\n\n[embeddings]\napi_key = "{EMBED_KEY}"\n', "utf-8"
    )
    return memclaw_home / "workspace"


def leaky(which: str) -> str:
    return f"Here it is ({which}): {DISCORD} and {EMBED_KEY} and sk-test-not-a-real-key."


def test_agent_one_shot_masks_secrets_in_the_reply(root, llm_server):
    llm_server.reply(leaky("one shot"))
    p = memclaw("agent", "-m", "what is my bot token?", "-w", str(root))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "Here it is (one shot): *** and *** and ***."
    stored = "".join(f.read_text("utf-8") for f in (root / "sessions").glob("*.jsonl"))
    assert "Here it is (one shot): *** and ***" in stored
    for s in (DISCORD, EMBED_KEY, "sk-test-not-a-real-key"):
        assert s not in p.stdout + p.stderr + stored


def test_chat_masks_secrets_in_the_reply(root, llm_server):
    llm_server.reply(leaky("chat"))
    p = memclaw("chat", "-w", str(root), stdin="what is my bot token?\nexit\n", NO_COLOR="1")
    assert p.returncode == 0, p.stderr
    assert "Here it is (chat): *** and *** and ***." in p.stdout
    for s in (DISCORD, EMBED_KEY, "sk-test-not-a-real-key"):
        assert s not in p.stdout + p.stderr
