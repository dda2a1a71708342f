"""What the owner forgot does not come back through the agent's own short echo of it (memclaw.service.forgotten:
a turn restates a forgotten fact when it holds most of its content words or most of its distinctive names). The
agent over real HTTP against the scripted LLM server, real Markdown files, a real index; the README's promise:
forgotten, it is left out of recall and of the memory section, and a turn that only shares a common word stays."""

from __future__ import annotations

import asyncio
import json

import pytest

from memclaw.service.forgotten import REDACTED
from tests.agent.test_agent_memory import cli, consolidation_json, env, fact_id, llm_server
from tests.agent.test_archive_consolidation import archive, new, turns

__all__ = ["env", "llm_server"]  # the fixtures, shared with test_agent_memory

pytestmark = pytest.mark.slow

FACT = "The owner dog is named Biscuitron"
ECHO = "Got it, Biscuitron it is."
DOG_WALK = "I walked the dog along the river this morning"


def say(agent, text: str) -> None:
    r = asyncio.run(agent.handle(cli(text)))
    assert r.ok, r.text


def tell_the_dogs_name(agent, server) -> None:
    """The QA flow's first turn: the model calls `remember`, then echoes the name."""
    server.tool_call("remember", {"text": FACT})
    server.reply(ECHO)
    say(agent, "My dog is named Biscuitron")


def forget_the_fact(agent) -> None:
    r = asyncio.run(agent.handle(cli(f"/forget {fact_id(agent, 'Biscuitron')}")))
    assert r.ok, r.text


def recalled(agent, query: str) -> list[str]:
    """Every text recall serves for `query`: the hits and the turns of their excerpts."""
    hits = agent.memory.recall(query, k=50)
    return [h.unit.text for h in hits] + [t.text for h in hits for t in h.excerpt]


def prompt_of_last_request(server) -> str:
    """What the model read on the last request: every message but the owner's own last one."""
    return json.dumps(server.requests[-1]["messages"][:-1], ensure_ascii=False)


def test_the_qa_flow_the_echo_and_the_tool_call_leave_nothing_behind(env, llm_server):
    agent = env
    tell_the_dogs_name(agent, llm_server)
    forget_the_fact(agent)
    llm_server.reply("Nothing else for now.")
    say(agent, "what else")
    llm_server.reply(consolidation_json("Talked about various things.", []))
    new(agent)
    assert "Biscuitron" not in archive(agent)
    # the echo restates the forgotten name: removed; the remember call said nothing, so no turn stands for it
    assert turns(agent) == [("user", REDACTED), ("memclaw", REDACTED), ("user", "what else"),
                            ("memclaw", "Nothing else for now.")]  # fmt: skip
    assert not [t for t in recalled(agent, "Biscuitron") if "Biscuitron" in t]
    llm_server.reply("I don't know its name.")
    say(agent, "what is my dog called?")
    assert "Biscuitron" not in prompt_of_last_request(llm_server)


def test_forgotten_after_it_was_archived_the_echo_is_left_out_of_recall_and_the_prompt(env, llm_server):
    agent = env
    tell_the_dogs_name(agent, llm_server)
    llm_server.reply("Lovely, how far did you go?")
    say(agent, DOG_WALK)
    llm_server.reply(consolidation_json("The owner talked about the dog.", []))
    new(agent)
    assert ("memclaw", ECHO) in turns(agent)
    assert any(ECHO in t for t in recalled(agent, "Biscuitron"))
    forget_the_fact(agent)
    assert not [t for t in recalled(agent, "Biscuitron") if "Biscuitron" in t]
    assert ("memclaw", ECHO) in turns(agent)  # the archive keeps what was said; recall leaves it out
    # a turn that shares only a common word ("dog") with the forgotten fact is still there, as itself
    assert f"user: {DOG_WALK}" in [h.unit.text for h in agent.memory.recall("walked the dog by the river", k=10)]
    llm_server.reply("I don't know its name.")
    say(agent, "what is my dog called? we walked along the river")
    seen = prompt_of_last_request(llm_server)
    assert "Biscuitron" not in seen and DOG_WALK in seen


def test_a_name_the_scope_talks_about_often_is_a_topic_not_the_forgotten_fact(env, llm_server):
    """Forgetting "The owner dog is named Biscuitron" hides its restatements, not every turn that names the dog once
    the dog is a topic of many conversations."""
    agent = env
    tell_the_dogs_name(agent, llm_server)
    others = ["Biscuitron chewed my slippers again", "Took Biscuitron to the vet for his jabs"]
    for text in others:
        llm_server.reply("Noted.")
        say(agent, text)
    llm_server.reply(consolidation_json("The owner talked about the dog.", []))
    new(agent)
    forget_the_fact(agent)
    texts = recalled(agent, "Biscuitron vet slippers")
    assert "user: Took Biscuitron to the vet for his jabs" in texts
    assert "user: My dog is named Biscuitron" not in texts  # its own restatement still goes
