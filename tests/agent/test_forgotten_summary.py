"""Issue 38.1 in chat: a history entry that consolidation wrote before the owner forgot the fact it restates does not
bring it back. The agent over real HTTP against the scripted LLM server, real Markdown files, a real index:
remember -> consolidation -> /forget -> the next turn's prompt, and the memory_search tool's answer, as the server
received them."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.agent.test_agent_memory import cli, consolidation_json, env, fact_id, llm_server
from tests.agent.test_archive_consolidation import new

__all__ = ["env", "llm_server"]  # the fixtures, shared with test_agent_memory

pytestmark = pytest.mark.slow

FACT = "My passport expires on 3 March 2031"
SUMMARY = "The owner planned the Lisbon trip with Ana. The owner's passport expires on 3 March 2031."


def say(agent, text: str):
    r = asyncio.run(agent.handle(cli(text)))
    assert r.ok, r.text
    return r


def history_id(agent) -> str:
    return next(u.id for u in agent.memory.list_units(kind="history") if "Lisbon" in u.text)


def test_remember_consolidate_forget_the_next_turn_holds_no_restatement(env, llm_server):
    agent = env
    llm_server.tool_call("remember", {"text": FACT})
    llm_server.reply("Noted, 3 March 2031.")
    say(agent, "My passport expires on 3 March 2031, and I am planning Lisbon with Ana")
    llm_server.reply(consolidation_json(SUMMARY, []))
    new(agent)
    entry = history_id(agent)
    assert SUMMARY in agent.workspace.history_file("owner").read_text("utf-8")
    forgot = say(agent, f"/forget {fact_id(agent, 'passport')}")

    llm_server.tool_call("memory_search", {"query": "passport expiry date"})
    llm_server.reply("I don't know when it expires.")
    say(agent, "when does my passport expire? and who was I going to Lisbon with?")
    first, second = llm_server.requests[-2:]
    for request in (first, second):
        seen = json.dumps(request["messages"][:-1] if request is first else request["messages"], ensure_ascii=False)
        assert "2031" not in seen
    # the rest of the entry stays useful, in the memory section and in the tool's answer
    assert "The owner planned the Lisbon trip with Ana. [forgotten]" in json.dumps(first["messages"])
    tool_answer = next(m["content"] for m in second["messages"] if m.get("role") == "tool")
    assert "2031" not in tool_answer
    # the /forget reply named the entry, and the command that forgets it too
    assert f"Also mentioned in 1 history entry: {entry}" in forgot.text
    assert f"forget it too with /forget {entry}" in forgot.text
