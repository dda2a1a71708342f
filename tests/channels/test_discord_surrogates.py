"""A Discord message and a display name holding a lone surrogate ("\\ud800": JSON lets a client send one) reach
the agent repaired (U+FFFD): the turn is answered and saved, not a traceback and an apology. discord.py's real
objects on the harness (tests/discord_harness.py), a real Agent and MemoryService, the scripted LLM over HTTP."""

from __future__ import annotations

import asyncio

import pytest

from memclaw.channels.discord._messages import chat_id_for
from memclaw.channels.discord.gateway import DiscordGateway
from tests.channels.test_discord_gateway import llm_server, rig_factory, workspace
from tests.discord_harness import DiscordWorld

__all__ = ["llm_server", "rig_factory", "workspace"]  # the fixtures, shared with test_discord_gateway

pytestmark = pytest.mark.slow


def test_a_lone_surrogate_in_a_message_and_a_name_is_repaired(rig_factory):
    eve = 4_000_000_000_000_777
    rig = rig_factory(allow_from=[str(eve)])
    rig.world.user("Eve \ud800", eve)
    rig.server.reply("Hello Eve.")

    async def body(w: DiscordWorld, gw: DiscordGateway):
        await (await gw.on_message(w.dm(eve, "hi \ud800 there")))

    asyncio.run(rig.run(body))
    assert rig.world.recorder.sent_texts() == ["Hello Eve."]
    sent = rig.llm_text()
    assert "hi \ufffd there" in sent and "Eve \ufffd" in sent and "\ud800" not in sent
    chat = chat_id_for(rig.world.dm_channel(eve), eve, is_dm=True)
    session = rig.agent.sessions.load("discord", chat)
    assert [m["content"] for m in session.messages if m["role"] == "user"] == ["hi \ufffd there"]
