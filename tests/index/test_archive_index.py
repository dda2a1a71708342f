"""The archive in the index (issue 22): day files are units of kind `archive` (one per turn), in Chroma and BM25 per
scope, incremental (an append parses only the appended chunk; a new day is a new file), rebuildable from the
Markdown, hand edits re-embed the edited turn and the turns beside it only (tests/index/test_turn_context.py),
deleted chunks and days leave both stores. Real files, the real model, a real embedded Chroma."""

from __future__ import annotations

import shutil
from datetime import datetime

import pytest

from memclaw.config import Config
from memclaw.index.passages import is_long, unit_of, unit_vectors
from memclaw.index.scopes import index_text
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace
from tests.archive_days import DAY, append_day, archive_service, chunk
from tests.service.test_memory_service import count_full_parses

RESTAURANT = chunk(
    "c7f3a9b21",
    datetime(2026, 11, 25, 14, 2),
    ("Maya", "Did Lena say which restaurant?"),
    ("memclaw", "She said Taberna da Ribeira, on Rua dos Douradores."),
    ("Maya", "Great, I will book it for Friday."),
)
CELLO = chunk(
    "c0123abcd",
    datetime(2026, 11, 25, 18, 30),
    ("Maya", "My cello teacher Mira is moving to Porto."),
    ("memclaw", "Will you keep taking lessons with her online?"),
)
ABOUT_ME = "# About me\n- I live in Lyon\n"


@pytest.fixture
def svc(tmp_path, embedder):
    with archive_service(tmp_path, embedder, lambda ws: ws.memory_file().write_text(ABOUT_ME, "utf-8")) as s:
        yield s


def stored(svc: MemoryService, scope: str = "owner") -> dict[str, str]:
    return svc.store.texts(scope)


def want_vectors(svc: MemoryService, scope: str = "owner") -> dict[str, str]:
    out: dict[str, str] = {}
    for u in svc.parse_scope(scope):
        out.update(unit_vectors(u.id, index_text(u)))
    return out


def test_turns_are_indexed_and_recalled_by_kind(svc):
    append_day(svc.workspace, "owner", RESTAURANT)
    svc.sync()
    turns = [u for u in svc.parse_scope("owner") if u.kind == "archive"]
    assert [u.text for u in turns] == [f"{t.speaker}: {t.text}" for t in RESTAURANT.turns]
    assert stored(svc) == want_vectors(svc)
    sc = svc.scopes.get("owner")
    assert {u.id for u in turns} <= set(sc.state.units) and {u.id for u in turns} <= sc.lexical.ids()
    hits = svc.recall("Taberna da Ribeira", kind="archive")
    assert hits and all(h.unit.kind == "archive" for h in hits)
    assert hits[0].unit.text.startswith("memclaw: She said Taberna")
    assert svc.stats()["scopes"]["owner"]["archive"] == 3


def test_an_appended_chunk_and_a_new_day_parse_only_what_is_new(svc, monkeypatch):
    append_day(svc.workspace, "owner", RESTAURANT)
    svc.sync()
    calls = count_full_parses(monkeypatch)
    append_day(svc.workspace, "owner", CELLO)
    [report] = svc.sync()
    assert calls == [] and (report.added, report.updated, report.removed) == (2, 0, 0)
    nextday = chunk("c5555aaaa", datetime(2026, 11, 26, 9, 0), ("Maya", "Booked Taberna da Ribeira for Friday."))
    append_day(svc.workspace, "owner", nextday)
    [report] = svc.sync()
    assert calls == ["memory/archive/2026-11-26.md"] and report.added == 1  # only the new file is read
    table = svc.scopes.get("owner").state.units
    assert [u.text for u in table.units()] == [u.text for u in svc.parse_scope("owner")]
    assert stored(svc) == want_vectors(svc)


def test_a_hand_edited_turn_re_embeds_that_turn_and_the_turns_beside_it_only(svc):
    path = append_day(svc.workspace, "owner", RESTAURANT, CELLO)
    svc.sync()
    before = stored(svc)
    path.write_text(path.read_text("utf-8").replace("Taberna da Ribeira", "Taberna do Mar"), "utf-8")
    [report] = svc.sync()
    assert (report.added, report.updated, report.removed) == (0, 3, 0)  # its neighbours are embedded with it
    after = stored(svc)
    assert set(after) == set(before)
    assert [k for k in after if after[k] != before[k]] == [svc.recall("Taberna do Mar", kind="archive")[0].unit.id]


def test_a_long_turn_has_passages_and_a_head_vector(svc):
    long = " ".join(f"Sentence {i} about the garden, the basil and the tomatoes on the balcony." for i in range(12))
    append_day(svc.workspace, "owner", chunk("c1111bbbb", datetime(2026, 11, 25, 9, 0), ("Maya", long)))
    svc.sync()
    [turn] = [u for u in svc.parse_scope("owner") if u.kind == "archive"]
    assert is_long(turn.text)
    ids = [k for k in stored(svc) if unit_of(k) == turn.id]
    assert len(ids) == len(unit_vectors(turn.id, turn.text)) > 2


def test_deleted_chunks_and_days_leave_both_stores(svc):
    path = append_day(svc.workspace, "owner", RESTAURANT, CELLO)
    other = append_day(svc.workspace, "owner", chunk("c5555aaaa", datetime(2026, 11, 26, 9, 0), ("Maya", "Hi")))
    svc.sync()
    text = path.read_text("utf-8")
    path.write_text(text[: text.index("## 18:30")], "utf-8")  # the cello chunk removed by hand
    other.unlink()
    [report] = svc.sync()
    assert report.removed == 3
    assert stored(svc) == want_vectors(svc)
    assert svc.scopes.get("owner").lexical.ids() == {u.id for u in svc.parse_scope("owner")}
    assert not [h for h in svc.recall("cello teacher Mira", kind="archive") if "cello" in h.unit.text]


@pytest.mark.parametrize("how", ["reindex", "deleted index folder"])
def test_the_archive_is_rebuilt_from_the_markdown(svc, how):
    append_day(svc.workspace, "owner", RESTAURANT, CELLO)
    svc.sync()
    ids = set(stored(svc))
    if how == "reindex":
        svc.sync(full=True)
        assert set(stored(svc)) == ids
        return
    svc.close()
    from memclaw.store.clients import release_embedded

    release_embedded(svc.layout.chroma_dir)
    shutil.rmtree(svc.layout.root)
    fresh = MemoryService(svc.workspace, svc.config, embedder=svc.embedder)
    try:
        assert fresh.recall("which restaurant did Lena say", kind="archive")
        assert set(fresh.store.texts("owner")) == ids
    finally:
        fresh.close()


def test_day_files_are_listed_by_name_only(svc):
    d = svc.workspace.archive_dir("owner")
    append_day(svc.workspace, "owner", RESTAURANT)
    (d / "notes.md").write_text("- 14:00 **Maya**: not an archive file\n", "utf-8")
    (d / "2026-11-25.md.bak").write_text("junk", "utf-8")
    svc.sync()
    assert {u.source for u in svc.parse_scope("owner") if u.kind == "archive"} == {f"memory/archive/{DAY}.md"}


def test_recall_sees_an_in_place_edit_of_an_old_day_at_once(svc):
    """Recall checks the archive's folder through a watch (memclaw.util.dirwatch) instead of every day file: an edit
    in place (same size, the folder untouched) of an old day is still seen by the very next recall."""
    old = append_day(svc.workspace, "owner", RESTAURANT)
    append_day(svc.workspace, "owner", chunk("c5555aaaa", datetime(2026, 11, 26, 9, 0), ("Maya", "Hi")))
    assert svc.recall("Taberna da Ribeira", kind="archive")[0].unit.text.endswith("Rua dos Douradores.")
    before = svc.recall("Taberna", kind="archive")  # (quiet folder: the check is one read)
    with open(old, "r+b") as f:  # the same number of bytes, written in place
        data = f.read()
        f.seek(0)
        f.write(data.replace(b"Douradores", b"Fanqueiros"))
    after = svc.recall("Taberna da Ribeira Fanqueiros", kind="archive")
    assert before and after[0].unit.text.endswith("Rua dos Fanqueiros.")
    assert svc.is_fresh("owner")


def test_a_facts_consolidation_id_is_a_link_not_words(svc):
    """The learned-mark's `#c...` links a fact to its consolidation; the index reads the fact without it."""
    from memclaw.markdown.formats import without_cid

    assert without_cid("I live in Lyon (2026-11-25 #c7f3a9b21)") == "I live in Lyon (2026-11-25)"
    assert without_cid("I live in Lyon (2026-11-25)") == "I live in Lyon (2026-11-25)"
    assert without_cid("Ask about #c7f3a9b21 later") == "Ask about #c7f3a9b21 later"
    svc.workspace.memory_file().write_text("# About me\n- I live in Lyon (2026-11-25 #c7f3a9b21)\n", "utf-8")
    svc.sync()
    (fact,) = svc.parse_scope("owner")
    assert fact.extra["cid"] == "c7f3a9b21" and fact.text.endswith("#c7f3a9b21)")
    assert set(stored(svc).values()) == {"I live in Lyon (2026-11-25)"}
    assert svc.recall_detailed("c7f3a9b21", mode="bm25").hits == []
    assert [h.unit.id for h in svc.recall_detailed("Lyon", mode="bm25").hits] == [fact.id]


GARDEN = " ".join(f"Sentence {i} about the garden, the basil and the tomatoes on the balcony." for i in range(12))


def _head_only(name: str = "memclaw") -> Config:
    cfg = Config()
    memory = cfg.memory.model_copy(update={"agent_reply_vectors": "head"})
    return cfg.model_copy(update={"memory": memory, "agent": cfg.agent.model_copy(update={"name": name})})


def test_the_agents_long_replies_can_be_embedded_as_their_head_alone(tmp_path, embedder):
    """memory.agent_reply_vectors = "head": a long reply of the agent is one vector, its whole text; the owner's long
    turn keeps its passages and head; the reply is still found by its meaning."""
    day = chunk(
        "c2222cccc", datetime(2026, 11, 25, 9, 0), ("Maya", GARDEN), ("memclaw", GARDEN.replace("garden", "yard"))
    )
    with archive_service(tmp_path, embedder, config=_head_only()) as svc:
        append_day(svc.workspace, "owner", day)
        svc.sync()
        mine, agents = [u for u in svc.parse_scope("owner") if u.kind == "archive"]
        assert is_long(mine.text) and is_long(agents.text)
        vectors = stored(svc)
        assert [v for k, v in vectors.items() if unit_of(k) == agents.id] == [agents.text]
        assert len([k for k in vectors if unit_of(k) == mine.id]) == len(unit_vectors(mine.id, mine.text)) > 2
        by_vector = {h.unit.id for h in svc.recall("tomatoes in the yard", kind="archive") if h.vector.rank}
        assert agents.id in by_vector


def test_changing_how_the_agents_replies_are_embedded_rebuilds_the_index(tmp_path, embedder):
    day = chunk("c3333dddd", datetime(2026, 11, 25, 9, 0), ("memclaw", GARDEN))
    with archive_service(tmp_path, embedder, config=_head_only()) as svc:
        append_day(svc.workspace, "owner", day)
        svc.sync()
        [reply] = [u for u in svc.parse_scope("owner") if u.kind == "archive"]
        assert len([k for k in stored(svc) if unit_of(k) == reply.id]) == 1
    ws = Workspace(tmp_path / "ws")
    svc = MemoryService(ws, Config().model_copy(update={"workspace": ws.root}), embedder=embedder)
    try:
        svc.sync()
        assert stored(svc) == want_vectors(svc)
        assert len([k for k in stored(svc) if unit_of(k) == reply.id]) > 2
    finally:
        svc.close()
