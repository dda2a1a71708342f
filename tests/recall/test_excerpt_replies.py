"""The agent's replies in an excerpt: beside the matched turn a long one is shown as said, not what (`memclaw: …`),
and is not served, so the owner's words fill the memory section; a reply that matches is served as itself. Real archive
files, the real model, a real embedded Chroma and BM25; the agent is whoever `agent.name` says."""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace

import pytest
from pydantic import ValidationError
from rich.console import Console

from memclaw.cli.context_cmd import memory_section_table
from memclaw.config import Config
from memclaw.context.memory_section import candidates, fill, fill_hits
from memclaw.index.unittable import UnitTable
from memclaw.markdown.units import MemoryUnit
from memclaw.recall.archive import ExcerptBuilder, agent_turns, elided
from memclaw.recall.results import RecallHit
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace
from tests.archive_days import append_day, chunk

REPLY = (
    "That sounds like a lovely plan for the garden. Tomatoes like steady watering, deep rather than often, "
    "about an inch a week, more in a dry spell; mulch keeps the soil moist and the roots cool. "
) * 2
OWNER = [
    "I just planted twelve tomato saplings in the raised bed today.",
    "The soil moisture app says the bed is drying out fast this week.",
    "How often should I water the tomato plants during this dry spell?",
    "I also put down straw mulch around the saplings this morning.",
    "My neighbour Ines lent me her drip hose for the tomatoes.",
]  # fmt: skip


def _service(root, embedder, agent: str, **recall) -> MemoryService:
    ws = Workspace(root)
    ws.memory_root.mkdir(parents=True, exist_ok=True)
    said: list[tuple[str, str]] = []
    for s in OWNER:
        said += [("Maya", s), (agent, REPLY)]
    append_day(ws, "owner", chunk("c1111aaaa", datetime(2026, 11, 20, 9, 0), *said))
    cfg = Config(workspace=ws.root, agent={"name": agent})
    cfg.recall = cfg.recall.with_tuning(**recall)
    svc = MemoryService(ws, cfg, embedder=embedder)
    svc.sync()
    return svc


def _hit(svc: MemoryService) -> RecallHit:
    return next(h for h in svc.recall_detailed(OWNER[2], k=5).hits if h.unit.text == f"Maya: {OWNER[2]}")


def _words(s: str) -> int:
    return len(s.split())


@pytest.mark.parametrize("agent", ["memclaw", "Jarvis"])
def test_an_excerpt_shows_the_owners_words_and_elides_the_agents_long_replies(tmp_path, embedder, agent):
    """By default (before 1, after 2) the owner's question comes with the agent's long replies around it as
    `agent: …` and the owner's next turn; the section serves the owner's two turns only. A reply of at most
    `excerpt_agent_words` words is shown as any turn; None shows every reply as any turn."""
    svc = _service(tmp_path / "ws", embedder, agent)
    try:
        hit = _hit(svc)
        texts = [t.text for t in hit.excerpt]
        assert texts == [f"{agent}: …", f"Maya: {OWNER[2]}", f"{agent}: …", f"Maya: {OWNER[3]}"]
        section = fill_hits([hit], 1024, _words)
        assert section.kept == [0]
        by_id = {t.id: t.text for t in hit.excerpt}
        assert [by_id[i] for i in section.served(0)] == [f"Maya: {OWNER[2]}", f"Maya: {OWNER[3]}"]
        assert f"{agent}: … / Maya: {OWNER[2]} / {agent}: … / Maya: {OWNER[3]}" in section.candidates[0].item
        console = Console(record=True, width=400)
        console.print(memory_section_table(SimpleNamespace(memory_fill=section)))  # type: ignore[arg-type]
        assert "excerpt of 2 turns: " in console.export_text()  # `memclaw context`: the turns whose words it holds
    finally:
        svc.close()
    for name, words in (("long", 400), ("all", None)):
        shown = _service(tmp_path / name, embedder, agent, excerpt_agent_words=words)
        try:
            texts = [t.text for t in _hit(shown).excerpt]
            assert [t.split(": ", 1)[0] for t in texts] == [agent, "Maya", agent, "Maya"]
            assert texts[0].startswith(f"{agent}: … ") and _words(texts[0]) == 42  # a long one: its 40 words near it
            assert texts[2].endswith(" …") and _words(texts[2]) == 42
        finally:
            shown.close()


def _unit(n: int, speaker: str) -> MemoryUnit:
    return MemoryUnit(id=f"a{n}", kind="archive", text=f"{speaker}: turn {n} said at length", line=3 + n,
                      source="memory/archive/2026-11-20.md", scope="owner", timestamp=datetime(2026, 11, 20, 9),
                      extra={"cid": "c1111aaaa", "turn": str(n), "speaker": speaker, "chunk_line": "1"})  # fmt: skip


def test_only_the_agents_replies_beside_the_match_are_elided():
    """The matched turn is served as itself even when it is the agent's; a turn of anyone else is never elided; a
    reply of at most `agent_words` words is shown whole."""
    table = UnitTable.from_units([_unit(0, "Maya"), _unit(1, "memclaw"), _unit(2, "Lena"), _unit(3, "memclaw")])
    short = ExcerptBuilder(table, {}, str.split, (1, 1), 5, said_by_agent=agent_turns(table, "memclaw"), agent_words=5)
    assert [t.text for t in short.excerpt(table["a2"])][0] == "memclaw: turn 1 said at length"  # 5 words
    hits = ExcerptBuilder(table, {}, str.split, (1, 1), 5, said_by_agent=agent_turns(table, "memclaw"), agent_words=4)
    assert [t.text for t in hits.excerpt(table["a2"])] == ["memclaw: …", "Lena: turn 2 said at length", "memclaw: …"]
    assert [t.text for t in hits.excerpt(table["a1"])] == [
        "Maya: turn 0 said at length", "memclaw: turn 1 said at length", "Lena: turn 2 said at length"]  # fmt: skip
    assert all("elided" not in t.extra for t in hits.excerpt(table["a1"]))
    nobody = ExcerptBuilder(table, {}, str.split, (1, 1), 5, said_by_agent=agent_turns(table, " "), agent_words=0)
    assert [t.text for t in nobody.excerpt(table["a2"])][0] == "memclaw: turn 1 said at length"  # no agent named


def test_an_elided_reply_that_matches_on_its_own_is_still_served():
    """A reply elided beside an owner's turn is not in the section: when it ranks on its own it is served whole, and
    the excerpt it was elided from still holds the owner's words only once."""
    owner, reply = _unit(0, "Maya"), _unit(1, "memclaw")
    cands = candidates([owner, reply], _words, windows={owner.id: (owner, elided(reply)), reply.id: (reply,)})
    section = fill(cands, 1000, _words, join=False)
    assert section.kept == [0, 1] and section.served(0) == ("a0",) and section.served(1) == ("a1",)
    assert section.candidates[0].item.endswith("Maya: turn 0 said at length / memclaw: …")
    assert section.candidates[1].item.endswith("memclaw: turn 1 said at length")
    section = fill(cands, 1000, _words)  # (by default it joins the item of its conversation: shown there whole)
    assert section.kept == [0] and section.joined == {1: 0} and section.served(0) == ("a0", "a1")
    assert section.candidates[0].item.endswith("Maya: turn 0 said at length / memclaw: turn 1 said at length")


@pytest.mark.parametrize("bad", [{"excerpt_agent_words": -1}, {"excerpt_agent_words": "few"},
                                 {"excerpt_agent_words": 1000}])  # fmt: skip
def test_bad_excerpt_settings_fail_loudly(bad):
    with pytest.raises(ValidationError, match="excerpt_agent_words"):
        Config().recall.with_tuning(**bad)
