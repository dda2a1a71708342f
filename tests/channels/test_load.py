"""Issue 7's load test, bounded: 50 outside senders x 3 messages (the benchmark, benchmarks/bench_load.py, runs
the full 50 x 20) through memclaw's real Discord handler with real discord.py objects, the real Agent and memory
(bundled model, embedded Chroma, files) and litellm over HTTP to the scripted LLM server on 127.0.0.1.

Zero lost, duplicated or misrouted replies; per-channel (and per-session) order kept; no prompt or reply for one
sender ever holds another sender's or the owner's secret, while each sender's own secret is recalled every time.
The scenario and its checks live in tests/discord_load.py. No timing is asserted."""

from __future__ import annotations

import asyncio

import pytest

from tests.discord_load import LoadRun
from tests.llm_server import scripted_server

SENDERS = 50
MESSAGES = 3  # per sender; 150 turns keep this under a minute on a busy 2-core machine (the benchmark runs 20)


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


def test_50_senders_no_lost_misrouted_or_leaked_replies_and_order_kept(tmp_path, llm_server, embedder):
    run = LoadRun.create(tmp_path / "ws", llm_server, senders=SENDERS, messages=MESSAGES, embedder=embedder)
    dms = sum(s.guild_id is None for s in run.senders)
    assert dms and dms < SENDERS  # both DMs and shared guild channels are exercised
    asyncio.run(run.drive())
    violations = run.check()
    assert violations == [], "\n".join(violations[:20])
    assert len(run.delivered) == SENDERS * MESSAGES == len(run.world.recorder.sent()) == len(llm_server.requests)
    # sanity of the checker itself: replies name their sender, message and that sender's own secret only
    first = run.delivered[0]
    reply = run.world.recorder.sent(first.channel_id)[0].json["content"]
    assert reply == f"ack {first.sender.tag} m000 saw {first.sender.secret}"
    # every sender's memory is in its own scope folder, nothing was written to the owner's
    assert all(run.memory.workspace.memory_file(s.scope).read_text().count(s.secret) == 1 for s in run.senders)
    assert run.owner_secret in run.memory.workspace.memory_file("owner").read_text()
