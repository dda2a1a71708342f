"""The agent's own words in the archive: its replies rank with a share of their score, so that what the owner said
comes first. Real archive files, the real model, a real embedded Chroma and BM25; the speaker is the agent's
configured name, as consolidation archives it."""

from __future__ import annotations

from datetime import datetime

import pytest
from pydantic import ValidationError

from memclaw.config import Config
from memclaw.context.recall_view import recall_rows
from memclaw.index.unittable import UnitTable
from memclaw.markdown.units import MemoryUnit
from memclaw.recall.archive import agent_turns, asks_what_agent_said, weigh_agent_turns
from memclaw.recall.fusion import Fused
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace
from tests.archive_days import append_day, chunk

ASKED = "What is the name of my sister's bakery?"
OWNER_SAID = "My sister Lena finally opened her bakery last week, it is called Brotzeit, on Elm Street."


def _chunks(agent: str):
    """The owner states the answer once; the agent's replies restate the topic, in the query's words, at length."""
    return [
        chunk("c1111aaaa", datetime(2026, 11, 20, 9, 0), ("Maya", OWNER_SAID),
              (agent, "How wonderful that your sister opened her bakery! The name of a bakery matters so much: "
                      "a sister's bakery with a good name draws people in. What does your sister's bakery sell?")),
        chunk("c2222bbbb", datetime(2026, 11, 22, 18, 0), ("Maya", "Can you suggest a birthday cake for Tom?"),
              (agent, "For Tom's birthday, a bakery cake is a safe choice; ask your sister's bakery, or any bakery "
                      "near you, for the name of their best cake.")),
    ]  # fmt: skip


def _service(root, embedder, agent: str, **recall) -> MemoryService:
    ws = Workspace(root)
    ws.memory_root.mkdir(parents=True, exist_ok=True)
    for c in _chunks(agent):
        append_day(ws, "owner", c)
    cfg = Config(workspace=ws.root, agent={"name": agent})
    cfg.recall = cfg.recall.with_tuning(**recall)
    svc = MemoryService(ws, cfg, embedder=embedder)
    svc.sync()
    return svc


def _first(svc: MemoryService) -> str:
    return svc.recall_detailed(ASKED, k=5).hits[0].unit.text


@pytest.mark.parametrize("agent", ["memclaw", "Jarvis"])
def test_what_the_owner_said_comes_before_the_agents_restatement(tmp_path, embedder, agent):
    """Without the weight the agent's long reply, which repeats the question's words, ranks first; with it, the
    owner's turn that holds the answer does. The agent is whoever `agent.name` says (a renamed agent too)."""
    plain = _service(tmp_path / "plain", embedder, agent, agent_turn_weight=1.0)
    try:
        assert _first(plain).startswith(f"{agent}: ")  # the failure the weight is for
    finally:
        plain.close()
    svc = _service(tmp_path / "ws", embedder, agent)
    try:
        res = svc.recall_detailed(ASKED, k=5)
        assert res.hits[0].unit.text == f"Maya: {OWNER_SAID}"
        replies = [h for h in res.hits if h.unit.extra.get("speaker") == agent]
        assert replies and all(h.boosts["agent"] < 0 for h in replies)
        assert not any("agent" in h.boosts for h in res.hits if h.unit.extra.get("speaker") != agent)
        rows = recall_rows(res)
        assert any("-agent" in r.boosts for r in rows) and not any("+agent" in r.boosts for r in rows)
    finally:
        svc.close()


def test_a_turn_is_the_agents_only_by_its_speaker_in_the_archive():
    def unit(uid: str, kind: str, speaker: str | None) -> MemoryUnit:
        extra = {"cid": "c1111aaaa", "turn": "0", "speaker": speaker} if speaker is not None else {}
        return MemoryUnit(id=uid, kind=kind, text="x", source="memory/archive/2026-11-20.md", line=3, scope="owner",
                          timestamp=datetime(2026, 11, 20, 9), extra=extra)  # fmt: skip

    table = UnitTable.from_units([
        unit("a1", "archive", "memclaw"), unit("a2", "archive", " MemClaw "), unit("a3", "archive", "Maya"),
        unit("a4", "archive", "memclaw the second"), unit("f1", "fact", None),
    ])  # fmt: skip
    said = agent_turns(table, "memclaw")
    assert [said(u) for u in ("a1", "a2", "a3", "a4", "f1", "missing")] == [True, True, False, False, False, False]
    assert not any(agent_turns(table, "  ")(u) for u in ("a1", "a2", "a3"))  # no name, no agent's turn
    # a name the archive cannot carry as is ("*" and ":" delimit a turn line) matches as the writer wrote it
    from memclaw.markdown.archive import clean_speaker

    odd = "Dr:  Who*"
    written = UnitTable.from_units([unit("a5", "archive", clean_speaker(odd)), unit("a6", "archive", "?")])
    assert agent_turns(written, odd)("a5") and not agent_turns(written, odd)("a6")


def test_the_weight_scales_only_the_agents_turns_and_reorders():
    hits = [Fused("a1", 1.0), Fused("u1", 0.8), Fused("a2", 0.5)]
    out = weigh_agent_turns(hits, lambda uid: uid.startswith("a"), weight=0.6)
    assert [(h.id, round(h.score, 6)) for h in out] == [("u1", 0.8), ("a1", 0.6), ("a2", 0.3)]
    assert out[1].boosts == {"agent": pytest.approx(-0.4)} and out[0].boosts == {}
    same = [Fused("a1", 1.0), Fused("u1", 0.8)]
    assert weigh_agent_turns(same, lambda uid: True, weight=1.0) is same  # 1: as any turn


@pytest.mark.parametrize("bad", [-0.1, 1.5, "half"])
def test_a_bad_weight_fails_loudly(bad):
    with pytest.raises(ValidationError, match="agent_turn_weight"):
        Config().recall.with_tuning(agent_turn_weight=bad)


TRIP = [
    chunk("c3333cccc", datetime(2026, 11, 10, 20, 0),
          ("Maya", "We fly to Lisbon in May and I want a good restaurant in Lisbon for our last night there."),
          ("memclaw", "For your last night I recommend Taberna das Flores, a small restaurant in Lisbon: no "
                      "bookings after seven, and the best bacalhau in town.")),
    chunk("c4444dddd", datetime(2026, 11, 12, 9, 0),
          ("Maya", "My sister says the restaurant near the castle beats every Lisbon restaurant for a last night."),
          ("memclaw", "Noted.")),
    chunk("c5555eeee", datetime(2026, 11, 14, 9, 0),
          ("Maya", "Our last night in Lisbon: the restaurant should be near the hotel in Alfama."),
          ("memclaw", "Good idea.")),
]  # fmt: skip
RECOMMENDED = "Which restaurant in Lisbon did you recommend for our last night?"


@pytest.mark.parametrize(
    ("query", "asked"),
    [
        ("Which restaurant did you recommend in Lisbon?", True),
        ("what did you say about my visa", True),
        ("You told me to dilute tea tree oil; what ratio was it?", True),
        ("Remind me of your suggestion for the trip", True),
        ("In our last chat, what was the book called?", True),
        ("Can you recommend a restaurant in Lisbon?", False),
        ("What did I say about my visa?", False),
        ("What is the name of my sister's bakery?", False),
        ("Did you know I moved to Berlin?", False),
    ],
)
def test_a_question_about_what_the_agent_said_is_read_as_one(query, asked):
    assert asks_what_agent_said(query) is asked


def test_asked_what_it_said_the_agents_own_turns_rank_with_their_own_weight(tmp_path, embedder):
    """A question about the agent's words: its turns keep `agent_asked_weight` of their score, not
    `agent_turn_weight`, and recall says so; any other question weighs them as before."""
    ws = Workspace(tmp_path / "ws")
    ws.memory_root.mkdir(parents=True, exist_ok=True)
    append_day(ws, "owner", *TRIP)
    reply = "memclaw: For your last night I recommend Taberna das Flores"
    cfg = Config(workspace=ws.root)
    ranks = {}
    for weight in (cfg.recall.tuning.agent_turn_weight, 1.0):
        cfg.recall = Config().recall.with_tuning(agent_asked_weight=weight)
        svc = MemoryService(ws, cfg, embedder=embedder)
        try:
            res = svc.recall_detailed(RECOMMENDED, k=6)
            texts = [h.unit.text for h in res.hits]
            ranks[weight] = next(n for n, t in enumerate(texts) if t.startswith(reply))
            agent_boosts = [h.boosts.get("agent") for h in res.hits if h.unit.extra.get("speaker") == "memclaw"]
            if weight == 1.0:
                assert res.agent_asked == 1.0 and agent_boosts and not any(agent_boosts)
                # any other question still weighs the agent's turns down
                other = svc.recall_detailed("Lisbon restaurant last night near the hotel", k=6)
                assert other.agent_asked is None
                assert all(h.boosts["agent"] < 0 for h in other.hits if h.unit.extra.get("speaker") == "memclaw")
            else:
                assert res.agent_asked is None and all(b is not None and b < 0 for b in agent_boosts)
        finally:
            svc.close()
    # the reply that holds the answer, below the owner's turns in the question's words, comes first
    assert ranks[1.0] == 0 < ranks[cfg.recall.tuning.agent_turn_weight], ranks
