"""The ContextBuilder over a real MemoryService (real Markdown, real Chroma, BM25), and `memclaw context`."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pytest

from memclaw.cli.sender_opt import resolve_sender
from memclaw.config import Config, EmbeddingsConfig
from memclaw.context.builder import build_messages
from memclaw.context.senders import Sender
from memclaw.errors import UsageError
from memclaw.util.redact import redact_data
from tests.context.test_context_support import OWNER_ADDRESS, all_text, make_workspace

NOW = datetime(2026, 2, 1, 10, 0, tzinfo=UTC)


# ----- CLI helpers (no workspace needed) ---------------------------------------------------------------------
def test_resolve_sender():
    c = Config(owners={"discord": ["123"]})
    assert resolve_sender(c, None, "cli") == Sender.cli()
    s = resolve_sender(c, "discord:555", "cli")
    assert (s.channel, s.sender_id) == ("discord", "555")
    s = resolve_sender(c, None, "discord")
    assert (s.channel, s.sender_id) == ("discord", "123")
    with pytest.raises(UsageError, match="no owner configured for channel 'slack'"):
        resolve_sender(c, None, "slack")


def test_redact_replaces_configured_secrets_everywhere():
    data = {"messages": [{"content": "key sk-live-abc123 and token xyz.987"}], "n": 1}
    out = redact_data(data, ["sk-live-abc123", "xyz.987"])
    assert json.dumps(out).count("***") == 2 and "sk-live" not in json.dumps(out)


# ----- over a real MemoryService -----------------------------------------------------------------------------
@pytest.fixture
def memory(tmp_path):
    ws_mod = pytest.importorskip("memclaw.workspace", reason="memclaw.workspace not written yet")
    from memclaw.embedding.load import load_embedder
    from memclaw.service.facade import MemoryService

    root = make_workspace(tmp_path / "ws")
    cfg = Config(owners={"discord": ["42"]})
    svc = MemoryService(ws_mod.Workspace(root), cfg, embedder=load_embedder(EmbeddingsConfig(model="hash-test")))
    svc.add_fact(f"Maya lives at {OWNER_ADDRESS}", section="Home", learned=date(2026, 11, 20))
    svc.add_fact("Maya's sister Lena lives in Porto", section="People", learned=date(2026, 11, 20))
    svc.add_fact("Tom ordered a blue bicycle bell", scope="people/discord:77", section="Orders")
    yield svc, cfg
    svc.close()


def test_owner_context_recalls_owner_memories_from_the_real_service(memory):
    svc, cfg = memory
    b = build_messages(
        config=cfg,
        workspace=svc.workspace,
        message="where does Lena live?",
        sender=Sender("discord", "42", "Maya", "dm"),
        recall=svc.recall,
        now=NOW,
    )
    system = b.messages[0]["content"]
    block = system[system.index("<recalled-memories>") : system.index("</recalled-memories>")]
    assert "\n- (2026-11-20, People) Maya's sister Lena lives in Porto\n" in block  # when it was learned
    assert all(h.unit.scope == "owner" for h in b.hits) and b.hits


def test_outsider_context_over_the_real_service_has_only_their_memories(memory):
    svc, cfg = memory
    b = build_messages(
        config=cfg,
        workspace=svc.workspace,
        message="where does Maya live? and my bicycle bell order?",
        sender=Sender("discord", "77", "Tom", "dm"),
        recall=svc.recall,
        now=NOW,
    )
    context = all_text(b.messages[:-1])
    assert OWNER_ADDRESS not in context and "Lena" not in context
    assert "Tom ordered a blue bicycle bell" in context


def test_print_context_table_and_json_never_show_secrets(tmp_path, capsys):
    from memclaw.cli.context_cmd import print_context

    root = make_workspace(tmp_path / "ws")
    (root / "TOOLS.md").write_text("# Tools\n\nThe API key is sk-test-SECRET-1234, never share it.\n")
    c = Config()
    c.agent.api_key = "sk-test-SECRET-1234"
    built = build_messages(config=c, workspace=root, message="hello", sender=Sender.cli(), now=NOW)
    print_context(built, ["sk-test-SECRET-1234"], json_out=True)
    out = capsys.readouterr().out
    data = json.loads(out)
    assert {"messages", "report", "budget", "total_tokens"} <= set(data)
    assert [r["section"] for r in data["report"]][:3] == ["identity", "runtime", "message"]
    assert "sk-test-SECRET" not in out and "***" in out
    print_context(built, ["sk-test-SECRET-1234"], json_out=False)
    out = capsys.readouterr().out
    assert "sk-test-SECRET" not in out
    for col in ("section", "priority", "allotted", "used", "dropped", "identity", "TOOLS.md"):
        assert col in out
