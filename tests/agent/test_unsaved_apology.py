"""A turn whose message could not be saved does not claim "Nothing was lost" (issue 39, item 5: out of file
handles, every sender read that while their message was gone). The agent over real HTTP, real session files."""

from __future__ import annotations

import asyncio

import pytest

from memclaw.agent.loop import Agent
from memclaw.agent.sessions import SessionStore
from memclaw.agent.turn import InboundMessage, apology
from memclaw.config import Config
from tests.llm_server import scripted_server


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


def test_a_message_that_could_not_be_saved_is_not_said_to_be_kept(tmp_path, llm_server):
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    cfg = Config(workspace=root, agent={"model": "openai/gpt-4o-mini", "max_retries": 0})
    agent = Agent(cfg, root)
    # the session's file cannot be written: a folder stands where it goes
    SessionStore(root / "sessions").path_for("discord", "dm-2002").mkdir(parents=True)
    llm_server.reply("never asked")
    reply = asyncio.run(agent.handle(InboundMessage("discord", "dm-2002", "2002", "Mallory", "hello")))
    assert not reply.ok and reply.record.unsaved
    assert reply.text == apology(unsaved=True)
    assert "Nothing was lost" not in reply.text and "send it again" in reply.text
    assert llm_server.requests == []


def test_a_failure_after_the_message_was_saved_says_it_was_kept(tmp_path, llm_server, monkeypatch):
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    cfg = Config(workspace=root, agent={"model": "openai/gpt-4o-mini", "max_retries": 0})
    agent = Agent(cfg, root)

    def broken(**kw):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr("memclaw.agent.loop.build_messages", broken)
    reply = asyncio.run(agent.handle(InboundMessage("discord", "dm-2002", "2002", "Mallory", "hello")))
    assert not reply.ok and not reply.record.unsaved and reply.text == apology()
    assert SessionStore(root / "sessions").load("discord", "dm-2002").messages[-1]["content"] == "hello"
