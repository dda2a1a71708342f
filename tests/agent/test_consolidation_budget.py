"""Consolidation stays within `agent.consolidation_tokens` whatever the size of MEMORY.md (issue 41.3).

The prompt used to list every fact of the scope: ~270k tokens at 10,000 facts, past most models' window. It now
lists every fact when all fit, else the facts the conversation's turns recall. Through the real agent, litellm over
real HTTP against the scripted server, real Markdown and real Chroma.

The 10,000-fact memory is written at once and synced once per module with the "hash-test" embedder: the bundled
model took 465 s to embed it on this 2-core machine, and what is checked is which facts reach the prompt. The fact
the conversation changes is found by its words (the turns' BM25), which no embedder changes.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest

from memclaw.agent.sessions import SessionStore
from memclaw.config import Config, EmbeddingsConfig
from memclaw.llm.client import LLMClient
from memclaw.llm.tokens import count_messages
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace
from tests.agent.many_facts import write_memory
from tests.agent.recording import RecordingAgent
from tests.agent.test_agent_memory import cli, consolidation_json, memory_files, talk
from tests.llm_server import scripted_server

pytestmark = pytest.mark.slow

FILLER = 10_000
OWN = {
    "About me": ["Lives in Lisbon, in a flat near the cathedral", "Allergic to penicillin"],
    "Work": ["Works at Solaris Energy as a battery engineer"],
}
MODEL = "openai/gpt-4o-mini"
TURNS = ["I moved from Lisbon to Porto last month", "The new flat is near the river", "Work is the same as before"]


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


def config(root: Path) -> Config:
    cfg = Config(workspace=root)
    cfg.embeddings = EmbeddingsConfig(model="hash-test")
    cfg.agent.model = MODEL
    cfg.agent.max_retries = 0
    cfg.agent.memory_window = 6
    return cfg


@pytest.fixture(scope="module")
def big_memory(tmp_path_factory) -> Path:
    """A workspace whose MEMORY.md holds the facts of OWN and 10,000 others, synced once."""
    base = tmp_path_factory.mktemp("big")
    root = base / "ws"
    write_memory(root, FILLER, OWN)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMCLAW_HOME", str(base / "home"))
        mem = MemoryService(Workspace(root), config(root))
        mem.sync()
        mem.close()
    return root


def agent_at(root: Path, embedder=None, **agent_settings: int) -> RecordingAgent:
    cfg = config(root)
    if embedder is not None:
        cfg.embeddings = EmbeddingsConfig()
    for key, value in agent_settings.items():
        setattr(cfg.agent, key, value)
    mem = MemoryService(Workspace(root), cfg, embedder=embedder)
    return RecordingAgent(
        cfg, Workspace(root), mem, llm=LLMClient(cfg, backoff_base_s=0.01), background_consolidation=False
    )


def fact_id(agent: RecordingAgent, needle: str) -> str:
    return next(f.id for f in agent.memory.facts("owner") if needle in f.text)


def test_at_10000_facts_the_prompt_holds_the_fact_the_conversation_changes_within_the_budget(
    big_memory, tmp_path, llm_server
):
    root = tmp_path / "ws"
    shutil.copytree(big_memory, root)
    agent = agent_at(root)
    try:
        lisbon, penicillin = fact_id(agent, "Lives in Lisbon"), fact_id(agent, "penicillin")
        assert len(agent.memory.facts("owner")) == FILLER + 3
        talk(agent, llm_server, TURNS)
        # the model first deletes a fact it was not shown: refused, and asked again
        update = {"op": "update", "id": lisbon, "text": "Lives in Porto, in a flat near the river"}
        llm_server.reply("ok: Porto tips")
        llm_server.reply(consolidation_json("Moved to Porto.", [update, {"op": "delete", "id": penicillin}]))
        llm_server.reply(consolidation_json("Ana moved from Lisbon to Porto in 2026.", [update]))
        assert asyncio.run(agent.handle(cli("Any tips for Porto restaurants?"))).ok
        first = next(r["messages"] for r in llm_server.requests if "Turn it into" in r["messages"][-1]["content"])
        prompt = first[-1]["content"]
        tokens = count_messages(first, MODEL)
        assert tokens <= agent.config.agent.consolidation_tokens
        assert f"[{lisbon}]" in prompt and "I moved from Lisbon to Porto" in prompt
        # a fact the conversation never touches is not listed
        assert f"[{penicillin}]" not in prompt and "penicillin" not in prompt
        assert f"Memory holds {FILLER + 3} facts" in prompt
        assert llm_server.pending() == 0
        report = agent.last_consolidation
        assert report.ok, report.error
        retry = llm_server.requests[-1]["messages"][-1]["content"]
        assert f"unknown fact id(s) {penicillin}" in retry

        md = (root / "memory" / "MEMORY.md").read_text("utf-8")
        assert "- Lives in Porto, in a flat near the river (" in md and "Lives in Lisbon" not in md
        assert "- Allergic to penicillin (2026-01-05)" in md
        assert len(agent.memory.facts("owner")) == FILLER + 3
    finally:
        agent.memory.close()


def test_with_the_bundled_model_a_partial_prompt_holds_the_fact_the_conversation_changes(
    tmp_path, llm_server, embedder
):
    """The same at 300 facts and a budget of 3,000 tokens, with the bundled model's vectors in the hybrid recall."""
    root = tmp_path / "ws"
    write_memory(root, 300, OWN)
    agent = agent_at(root, embedder, consolidation_tokens=3_000)
    try:
        agent.memory.sync()
        lisbon, penicillin = fact_id(agent, "Lives in Lisbon"), fact_id(agent, "penicillin")
        talk(agent, llm_server, TURNS)
        update = {"op": "update", "id": lisbon, "text": "Lives in Porto, in a flat near the river"}
        llm_server.reply("ok: Porto tips")
        llm_server.reply(consolidation_json("Ana moved from Lisbon to Porto in 2026.", [update]))
        assert asyncio.run(agent.handle(cli("Any tips for Porto restaurants?"))).ok
        report = agent.last_consolidation
        assert report.ok, report.error
        messages = llm_server.requests[-1]["messages"]
        prompt = messages[-1]["content"]
        assert count_messages(messages, MODEL) <= 3_000
        assert f"[{lisbon}]" in prompt and f"[{penicillin}]" not in prompt and "Memory holds 303 facts" in prompt
        assert "- Lives in Porto, in a flat near the river (" in (root / "memory" / "MEMORY.md").read_text("utf-8")
    finally:
        agent.memory.close()


def test_a_small_memory_is_shown_whole(tmp_path, llm_server):
    root = tmp_path / "ws"
    write_memory(root, 20, OWN)
    agent = agent_at(root)
    try:
        talk(agent, llm_server, TURNS)
        llm_server.reply("ok")
        llm_server.reply(consolidation_json("Moved to Porto.", []))
        assert asyncio.run(agent.handle(cli("Any tips?"))).ok and agent.last_consolidation.ok
        prompt = llm_server.requests[-1]["messages"][-1]["content"]
        assert all(f"[{f.id}]" in prompt for f in agent.memory.facts("owner"))
        assert "Memory holds" not in prompt
    finally:
        agent.memory.close()


def test_a_conversation_over_the_budget_warns_once_and_keeps_the_session(tmp_path, llm_server, caplog):
    root = tmp_path / "ws"
    write_memory(root, 20, OWN)
    agent = agent_at(root, consolidation_tokens=1_000)
    caplog.set_level(logging.INFO, logger="memclaw.agent.consolidate")
    try:
        agent.memory.sync()
        before = memory_files(root)
        long_turns = [f"Story part {i}: " + " ".join(f"word{i}x{j}" for j in range(150)) for i in range(3)]
        talk(agent, llm_server, [*long_turns, "and then?", "and after that?", "the end"])
        # three consolidations tried, each over the budget: no model call for any of them
        assert len(llm_server.requests) == 6
        warned = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.endswith("consolidate")]
        assert len(warned) == 1, [r.getMessage() for r in warned]
        assert "kept, not consolidated" in warned[0].getMessage()
        assert "agent.consolidation_tokens (1,000)" in warned[0].getMessage()
        assert not agent.last_consolidation.ok
        assert memory_files(root) == before
        session = SessionStore(root / "sessions").load("cli", "cli")
        assert len(session.messages) == 12 and session.last_consolidated == 0

        # with room, the same session is consolidated: nothing was lost
        agent.config.agent.consolidation_tokens = 16_000
        llm_server.reply("ok")
        llm_server.reply(consolidation_json("Told a story in three parts.", []))
        assert asyncio.run(agent.handle(cli("thanks"))).ok
        assert agent.last_consolidation.ok, agent.last_consolidation.error
        assert "Story part 0" in llm_server.requests[-1]["messages"][-1]["content"]
        assert "Told a story in three parts." in (root / "memory" / "HISTORY.md").read_text("utf-8")
    finally:
        agent.memory.close()


def test_a_chunk_over_the_budget_is_consolidated_a_part_at_a_time(tmp_path, llm_server, caplog):
    """Each turn fits the budget, three do not: the first part is consolidated, the rest at the next turns."""
    root = tmp_path / "ws"
    write_memory(root, 20, OWN)
    agent = agent_at(root, consolidation_tokens=2_500)
    caplog.set_level(logging.WARNING, logger="memclaw.agent.consolidate")
    try:
        long_turns = [f"Story part {i}: " + " ".join(f"word{i}x{j}" for j in range(150)) for i in range(3)]
        talk(agent, llm_server, long_turns)
        llm_server.reply("ok")
        llm_server.reply(consolidation_json("Told the first part of a story.", []))
        assert asyncio.run(agent.handle(cli("and then?"))).ok
        report = agent.last_consolidation
        assert report.ok and report.consolidated == 2, report.error
        messages = llm_server.requests[-1]["messages"]
        assert count_messages(messages, MODEL) <= 2_500
        assert "Story part 0" in messages[-1]["content"] and "Story part 1" not in messages[-1]["content"]
        assert not caplog.records
        session = SessionStore(root / "sessions").load("cli", "cli")
        assert session.last_consolidated == 0 and session.messages[0]["content"].startswith("Story part 1")
    finally:
        agent.memory.close()
