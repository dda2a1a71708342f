"""Recall over the archive (issue 22): links by consolidation id, lifts between the turns, facts and summary of one
consolidation, the excerpt window of an archive hit. Real files, the real model, a real embedded Chroma."""

from __future__ import annotations

from datetime import datetime

import pytest

from memclaw.config import Config
from memclaw.context.memory_section import fill_hits
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace
from tests.archive_days import archive_service, chunk, consolidation

SAME_DAY = [
    (
        chunk("c1111aaaa", datetime(2026, 11, 25, 9, 0), ("Maya", "Did Lena say which restaurant?"),
              ("memclaw", "She said Taberna da Ribeira, on Rua dos Douradores."), ("Maya", "Lovely, thanks.")),
        "Maya asked which restaurant Lena had recommended in Lisbon; it was Taberna da Ribeira.",
        ["Lena recommended Taberna da Ribeira in Lisbon"],
    ),
    (
        chunk("c2222bbbb", datetime(2026, 11, 25, 13, 0), ("Maya", "My cello teacher Mira is moving to Porto."),
              ("memclaw", "Will you keep taking lessons online?"), ("Maya", "Yes, on Sundays.")),
        "Maya's cello teacher Mira moves to Porto; lessons continue online on Sundays.",
        ["Maya takes cello lessons with Mira"],
    ),
    (
        chunk("c3333cccc", datetime(2026, 11, 25, 19, 0), ("Maya", "The basil on the balcony died again."),
              ("memclaw", "Maybe it needs more sun, or less water?")),
        "Maya's balcony basil died; talked about sun and watering.",
        ["Maya grows basil on her balcony"],
    ),
]  # fmt: skip


def same_day(ws: Workspace) -> None:
    for c, summary, facts in SAME_DAY:
        consolidation(ws, "owner", c, summary, facts)


@pytest.fixture
def svc(tmp_path, embedder):
    with archive_service(tmp_path, embedder, same_day, sync=True) as s:
        yield s


def by_text(svc: MemoryService, kind: str, start: str):
    return next(u for u in svc.parse_scope("owner") if u.kind == kind and u.text.startswith(start))


def test_several_consolidations_on_one_day_no_longer_lift_each_others_summaries(svc):
    """The gap docs/decisions/0002-the-memory-budget.md names: by day, every fact of the day linked to every summary of
    the day, so a
    fact lifted the summaries of unrelated conversations (and could be skipped as 'covered' by one). By id, a fact
    links to its own consolidation's summary only."""
    links = svc.scopes.get("owner").state.links
    for c, summary, facts in SAME_DAY:
        fact, entry = by_text(svc, "fact", facts[0]), by_text(svc, "history", summary)
        assert fact.extra["cid"] == entry.extra["cid"] == c.cid
        assert links[fact.id] == [entry.id]
    # (keyword recall: only what names the restaurant or Lena is a candidate, so any other lift would be a link's)
    res = svc.recall_detailed("Which restaurant did Lena recommend?", k=10, mode="bm25")
    lifted = {h.unit.id for h in res.hits if h.unit.kind == "history" and {"link", "cid"} & set(h.boosts)}
    assert lifted == {by_text(svc, "history", SAME_DAY[0][1]).id}
    fact = next(h for h in res.hits if h.unit.kind == "fact" and "Taberna" in h.unit.text)
    assert fact.covered_by == (by_text(svc, "history", SAME_DAY[0][1]).id,)


def test_a_fact_without_an_id_keeps_the_link_by_day(svc):
    mem = svc.workspace.memory_file()
    mem.write_text(mem.read_text("utf-8") + "- Maya bought a new teapot (2026-11-25)\n", "utf-8")
    svc.sync()
    links = svc.scopes.get("owner").state.links
    teapot = by_text(svc, "fact", "Maya bought a new teapot")
    assert sorted(links[teapot.id]) == sorted(by_text(svc, "history", s).id for _c, s, _f in SAME_DAY)


def test_a_turn_lifts_its_own_summary_and_nothing_else(svc):
    # a turn alone matches: its summary is lifted by its id, no other summary is
    res = svc.recall_detailed("Rua dos Douradores", k=10, mode="bm25")
    top = res.hits[0]
    assert top.unit.kind == "archive" and "Douradores" in top.unit.text
    own = by_text(svc, "history", SAME_DAY[0][1]).id
    entries = {h.unit.id: h for h in res.hits if h.unit.kind == "history"}
    assert "cid" in entries[own].boosts
    assert not [h for i, h in entries.items() if i != own and "cid" in h.boosts]
    # a fact matches: no turn is lifted by it (measured: such lifts put turns above better facts and summaries)
    res = svc.recall_detailed("Mira cello teacher", k=20, mode="bm25")
    assert [h for h in res.hits if h.unit.kind == "fact" and "Mira" in h.unit.text]
    assert not [h for h in res.hits if h.unit.kind == "archive" and "cid" in h.boosts]
    assert all(h.bm25.rank or h.vector.rank for h in res.hits if h.unit.kind == "archive")


def test_an_archive_hit_carries_the_window_of_its_chunk_only(tmp_path, embedder):
    cfg = Config()
    cfg.recall = cfg.recall.with_tuning(excerpt_before=2, excerpt_after=2)
    with archive_service(tmp_path, embedder, same_day, config=cfg) as s:
        hits = s.recall("My cello teacher Mira is moving to Porto", kind="archive", k=3)
        first = hits[0]
        assert first.unit.extra == {**first.unit.extra, "cid": "c2222bbbb", "turn": "0"}
        assert [t.text for t in first.excerpt] == [f"{t.speaker}: {t.text}" for t in SAME_DAY[1][0].turns]
        assert {t.extra["cid"] for h in hits for t in h.excerpt} == {h.unit.extra["cid"] for h in hits}
        assert all(h.unit in h.excerpt for h in hits)


def test_only_the_best_archive_hits_get_a_wide_window(svc):
    svc.config.recall = svc.config.recall.with_tuning(excerpt_before=1, excerpt_after=1, excerpt_wide=1)
    hits = svc.recall("cello teacher Mira lessons Porto Sundays", kind="archive", k=5)
    assert len(hits) >= 2
    assert len(hits[0].excerpt) > 1 and hits[0].unit in hits[0].excerpt
    assert all(h.excerpt == (h.unit,) for h in hits[1:])  # the rest: the matched turn alone


def test_the_summary_that_says_the_same_covers_the_turn(svc):
    said = chunk(
        "c4444dddd",
        datetime(2026, 11, 26, 10, 0),
        ("Maya", "Henrik recommended the Alfama jazz bar."),
        ("memclaw", "Noted: the Alfama jazz bar, recommended by Henrik."),
        ("Maya", "Its owner plays the oud"),
    )
    consolidation(svc.workspace, "owner", said, "Henrik recommended the Alfama jazz bar in Lisbon.", [])
    svc.sync()
    res = svc.recall_detailed("Which bar did Henrik recommend?", k=20)
    own = by_text(svc, "history", "Henrik recommended").id
    turns = {h.unit.text: h for h in res.hits if h.unit.kind == "archive"}
    assert turns["Maya: Henrik recommended the Alfama jazz bar."].covered_by == (own,)
    assert turns["memclaw: Noted: the Alfama jazz bar, recommended by Henrik."].covered_by == (own,)
    assert all(not h.covered_by for t, h in turns.items() if "Henrik" not in t)  # (other words, or another id)
    f = fill_hits(res.hits, 4000, lambda t: len(t.split()))
    rank = {h.unit.id: n for n, h in enumerate(res.hits)}
    after = [h for h in turns.values() if h.covered_by and rank[own] < rank[h.unit.id]]
    assert after  # (the summary, lifted by its turns, comes before one of them at least)
    for h in after:  # the summary is in before it: not served twice
        assert any(s.id == h.unit.id and s.reason.startswith(("covered by", "in the excerpt")) for s in f.skipped)
    served = [u for i in f.kept for u in f.served(i)]
    assert len(served) == len(set(served))  # no turn served twice


def test_a_long_turn_is_served_as_the_passage_that_matched(svc):
    """A long turn (several passages) is cut in its excerpt: the matched one to the passage that matched, its
    neighbours to their words nearest to it, each cut marked with …"""
    filler = " ".join(f"Sentence {i} is about the weather, the tides and the ferry timetable." for i in range(8))
    long_answer = f"{filler} The spare key of the boat shed is hidden under the blue flowerpot. {filler}"
    said = chunk("c5555eeee", datetime(2026, 11, 27, 10, 0), ("Maya", f"Before you answer: {filler}"),
                 ("memclaw", long_answer), ("Maya", f"{filler} Thanks, noted."))  # fmt: skip
    consolidation(svc.workspace, "owner", said, "Talked about the boat shed.", [])
    svc.config.recall = svc.config.recall.with_tuning(excerpt_before=1, excerpt_after=1, excerpt_wide=5)
    hit = next(h for h in svc.recall("where is the spare key of the boat shed hidden", kind="archive", k=5)
               if h.unit.extra["cid"] == "c5555eeee")  # fmt: skip
    assert hit.unit.text == f"memclaw: {long_answer}"  # the hit itself keeps its whole text
    before, matched, after = hit.excerpt
    assert "blue flowerpot" in matched.text and matched.text.startswith("memclaw: …") and matched.text.endswith("…")
    assert len(matched.text.split()) < 70 < len(hit.unit.text.split())
    assert before.text.startswith("Maya: … ") and len(before.text.split()) == 1 + 1 + 40
    assert after.text.startswith("Maya: ") and after.text.endswith(" …") and len(after.text.split()) == 1 + 40 + 1
    chunk_turns = [t.id for t in svc.parse_scope("owner") if t.kind == "archive" and t.extra["cid"] == "c5555eeee"]
    assert [t.id for t in hit.excerpt] == chunk_turns
