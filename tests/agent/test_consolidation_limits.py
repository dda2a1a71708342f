"""Consolidation keeps the limits `memory add` and `remember` keep (memclaw.markdown.unit_size): a fact or history
entry over the size limit of a memory, or a section over the length limit of a heading path, is refused where the
model's answer is validated (memclaw.agent._consolidation_output), the way any other unusable answer is: the model is
asked once more with the reason, and if it answers the same the consolidation fails, nothing is written and the
session is kept whole.

A consolidation reply adding a 150,000-character fact used to write it to MEMORY.md and embed 340 vectors for it,
and every later command warned about it. Through the real agent over real HTTP (a scripted OpenAI-compatible
server), the real MemoryService and Markdown files; the deterministic "hash-test" embedder (what is checked is how
much reaches the index, not the model).
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import date

import pytest

from memclaw.agent.loop import Agent
from memclaw.agent.sessions import CONSOLIDATION_PROGRESS, SessionStore
from memclaw.config import Config, EmbeddingsConfig
from memclaw.llm.client import LLMClient
from memclaw.markdown.files import lock_path
from memclaw.markdown.formats import fact_mark
from memclaw.markdown.unit_size import MAX_SECTION_CHARS, MAX_UNIT_CHARS
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace
from tests.agent.recording import RecordingAgent
from tests.agent.test_agent_memory import cli, consolidation_json, memory_files, talk
from tests.llm_server import scripted_server

MEMORY = "# About me\n- I live in Lyon\n"
HISTORY = "[2026-03-02 18:10] Talked about the garden.\n"
MARK_CHARS = len(fact_mark(date.today(), "c" + "0" * 8))  # " (YYYY-MM-DD #c12345678)"


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


@pytest.fixture
def agent(tmp_path):
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text(MEMORY, "utf-8")
    (root / "memory" / "HISTORY.md").write_text(HISTORY, "utf-8")
    cfg = Config(workspace=root)
    cfg.embeddings = EmbeddingsConfig(model="hash-test")
    cfg.agent.model = "openai/gpt-4o-mini"
    cfg.agent.max_retries = 0  # one HTTP request per model call
    cfg.agent.memory_window = 6
    mem = MemoryService(Workspace(root), cfg)
    a = RecordingAgent(
        cfg, Workspace(root), mem, llm=LLMClient(cfg, backoff_base_s=0.01), background_consolidation=False
    )
    yield a
    mem.close()


def words(n_chars: int) -> str:
    """A fact of exactly `n_chars` characters, with no word memclaw reads as a relative date."""
    text = "Huge fact " + " ".join(["word"] * (n_chars // 5 + 1))
    return text[:n_chars].rstrip() + "x" * (n_chars - len(text[:n_chars].rstrip()))


def consolidate_with(agent: Agent, server, *replies: str) -> None:
    """Three turns (at the window), then a fourth whose consolidation the model answers with `replies`."""
    talk(agent, server, ["one", "two", "three"])
    server.reply("ok: four")
    for r in replies:
        server.reply(r)
    assert asyncio.run(agent.handle(cli("four"))).ok
    assert server.pending() == 0


def retry_prompt(server) -> str:
    """What memclaw sent back to the model after its first answer (the last user message of the last request)."""
    return server.requests[-1]["messages"][-1]["content"]


def assert_kept_whole(agent: Agent, before: dict[str, bytes], vectors: int) -> None:
    assert memory_files(agent.root) == before  # no fact, no history entry, no archive chunk
    assert agent.memory.store.count("owner") == vectors
    s = SessionStore(agent.root / "sessions").load("cli", "cli")
    assert len(s.messages) == 8 and s.last_consolidated == 0 and not s.meta.get(CONSOLIDATION_PROGRESS)


def test_a_fact_over_the_limit_is_refused_and_the_session_kept(agent, llm_server):
    huge = consolidation_json("H", [{"op": "add", "text": words(150_036), "section": "Big"}])
    agent.memory.sync()
    before, vectors = memory_files(agent.root), agent.memory.store.count("owner")
    consolidate_with(agent, llm_server, huge, huge)
    report = agent.last_consolidation
    assert not report.ok and "fact too long (150,0" in report.error and f"at most {MAX_UNIT_CHARS:,}" in report.error
    assert "fact too long (150,0" in retry_prompt(llm_server)  # the retry told the model why
    assert_kept_whole(agent, before, vectors)
    # a model that then writes a short fact is consolidated as usual
    llm_server.reply("ok: five")
    llm_server.reply(consolidation_json("Counted to five.", [{"op": "add", "text": "Counts well", "section": "Big"}]))
    assert asyncio.run(agent.handle(cli("five"))).ok and agent.last_consolidation.ok
    assert "- Counts well (" in (agent.root / "memory" / "MEMORY.md").read_text()


def test_a_history_entry_over_the_limit_is_asked_for_again(agent, llm_server, caplog):
    huge = consolidation_json(words(MAX_UNIT_CHARS + 1), [])
    consolidate_with(agent, llm_server, huge, consolidation_json("Counted from one to four.", []))
    assert agent.last_consolidation.ok, agent.last_consolidation.error
    assert f"history entry too long ({MAX_UNIT_CHARS + 1:,} characters" in retry_prompt(llm_server)
    history = (agent.root / "memory" / "HISTORY.md").read_text()
    assert "Counted from one to four." in history and "Huge fact" not in history
    assert not [r for r in caplog.records if "longer than a memory may be" in r.getMessage()]


def test_the_limit_is_that_of_the_fact_as_written_with_its_mark(agent, llm_server, caplog):
    """The learned-mark ` (YYYY-MM-DD #cid)` is part of the fact as written and read back: a fact that fits only
    without it is refused (it would be cut at every read, with a warning); one that fits with it is kept whole."""
    caplog.set_level(logging.WARNING)
    over = consolidation_json("H", [{"op": "add", "text": words(MAX_UNIT_CHARS - MARK_CHARS + 1)}])
    fits = consolidation_json("H", [{"op": "add", "text": words(MAX_UNIT_CHARS - MARK_CHARS)}])
    consolidate_with(agent, llm_server, over, fits)
    assert agent.last_consolidation.ok, agent.last_consolidation.error
    assert f"fact too long ({MAX_UNIT_CHARS + 1:,} characters" in retry_prompt(llm_server)
    [line] = [ln for ln in (agent.root / "memory" / "MEMORY.md").read_text().splitlines() if "Huge fact" in ln]
    assert len(line.removeprefix("- ")) == MAX_UNIT_CHARS
    agent.memory.recall("huge fact word", k=3)
    assert not [r for r in caplog.records if "longer than a memory may be" in r.getMessage()]


@pytest.mark.parametrize(
    "section",
    [
        "S" * (MAX_SECTION_CHARS + 1),
        " > ".join(["Work"] * 41),  # 41 short headings, a path of 242 characters
        "Big " * 1250,  # 5,000 characters typed, 4,999 once its whitespace is normalised
    ],
)
def test_a_section_over_the_limit_is_refused(agent, llm_server, section):
    bad = consolidation_json("H", [{"op": "add", "text": "Keeps a blue teapot", "section": section}])
    agent.memory.sync()
    before, vectors = memory_files(agent.root), agent.memory.store.count("owner")
    consolidate_with(agent, llm_server, bad, bad)
    report = agent.last_consolidation
    assert not report.ok and "section too long" in report.error and f"at most {MAX_SECTION_CHARS}" in report.error
    assert "section too long" in retry_prompt(llm_server)
    assert_kept_whole(agent, before, vectors)


def test_a_section_at_the_limit_is_kept(agent, llm_server):
    section = "S" * (MAX_SECTION_CHARS - len("Work > ")) + "  "  # the path is "Work > SSS...": 200 characters
    ok = consolidation_json("H", [{"op": "add", "text": "Keeps a blue teapot", "section": f"Work >  {section}"}])
    consolidate_with(agent, llm_server, ok)
    assert agent.last_consolidation.ok, agent.last_consolidation.error
    text = (agent.root / "memory" / "MEMORY.md").read_text()
    assert f"## {section.strip()}\n" in text and "- Keeps a blue teapot (" in text


def test_the_remember_tool_refuses_a_long_section(agent, llm_server):
    before = memory_files(agent.root)
    llm_server.tool_call("remember", {"text": "Keeps a blue teapot", "section": "S" * 5000})
    llm_server.reply("I could not save that.")
    r = asyncio.run(agent.handle(cli("remember my teapot")))
    assert r.ok and [t.ok for t in r.record.tools] == [False]
    result = next(m["content"] for m in llm_server.requests[-1]["messages"] if m["role"] == "tool")
    assert "section too long (5,000 characters" in result and f"at most {MAX_SECTION_CHARS}" in result
    assert memory_files(agent.root) == before
    llm_server.tool_call("remember", {"text": "Keeps a blue teapot", "section": "S" * MAX_SECTION_CHARS})
    llm_server.reply("Saved.")
    r = asyncio.run(agent.handle(cli("remember my teapot")))
    assert [t.ok for t in r.record.tools] == [True]
    assert f"# {'S' * MAX_SECTION_CHARS}\n" in (agent.root / "memory" / "MEMORY.md").read_text()


def test_an_answer_kept_over_the_limit_is_asked_for_again(agent, llm_server):
    """An answer kept in the session by an earlier attempt (an older memclaw validated less) and not yet written is
    validated again when the chunk is finished: one over the limit is asked for again, never written, and the
    consolidation does not crash."""
    memory_md = agent.workspace.memory_file("owner")
    lock_path(memory_md).mkdir()  # the facts step fails: the answer stays kept, unwritten
    consolidate_with(agent, llm_server, consolidation_json("Counted.", [{"op": "add", "text": "Counts to four"}]))
    assert not agent.last_consolidation.ok
    store = SessionStore(agent.root / "sessions")
    s = store.load("cli", "cli")
    progress = s.meta[CONSOLIDATION_PROGRESS]
    assert progress["done"] == ["owner#archive"]
    progress["answers"]["owner"]["facts"][0]["text"] = words(150_036)  # as an older memclaw kept it
    store.set_meta(s, **{CONSOLIDATION_PROGRESS: progress})
    lock_path(memory_md).rmdir()

    llm_server.reply("ok: five")
    llm_server.reply(consolidation_json("Counted to four.", [{"op": "add", "text": "Counts to four"}]))
    assert asyncio.run(agent.handle(cli("five"))).ok
    assert agent.last_consolidation.ok, agent.last_consolidation.error
    assert llm_server.pending() == 0
    text = memory_md.read_text()
    assert "Huge fact" not in text and "- Counts to four (" in text
    assert json.loads(json.dumps(store.load("cli", "cli").meta.get(CONSOLIDATION_PROGRESS) or {})) == {}
