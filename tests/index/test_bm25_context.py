"""A short archived turn's BM25 score with the words of the turns beside it (memclaw.index.bm25_context): the
context scores are BM25 over the context documents they stand for, an answer is found by the words of the question
it answers, a turn that says the words itself stays first, and hand edits and appends are read. Real files, the real
model, a real embedded Chroma."""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime

import pytest

from memclaw.config import Config
from memclaw.index.bm25_context import with_context
from memclaw.index.passages import MAX_WORDS, context_rows_all
from memclaw.index.tokenizer import Tokenizer
from memclaw.index.unittable import UnitTable
from memclaw.markdown.archive import chunk_of
from memclaw.markdown.units import MemoryUnit
from tests.archive_days import MUSEUM, append_day, archive_service, chunk

DINNER = chunk(
    "c0123abcd",
    datetime(2026, 11, 25, 18, 30),
    ("Maya", "Shall we try Taberna da Ribeira on Friday?"),
    ("Sam", "Great, I will book it for Friday."),
    ("Maya", " ".join(["We could also walk along the river before dinner and see the lights"] * 5)),  # long
    ("Sam", "Sounds lovely."),
)
OTHER = chunk(
    "c5555eeee",
    datetime(2026, 11, 26, 9, 0),
    ("Melanie", "I signed up for a pottery class yesterday."),
    ("Melanie", "We went camping two weekends ago and it rained the whole time."),
)


def write(ws) -> None:
    append_day(ws, "owner", MUSEUM, DINNER)
    append_day(ws, "owner", OTHER)


@pytest.fixture
def svc(tmp_path, embedder):
    with archive_service(tmp_path, embedder, write, sync=True) as s:
        yield s


def contexts(svc):
    sc = svc.scopes.get("owner")
    return sc.turn_contexts(svc.config.agent.name)


def reference_scores(svc, query: str) -> dict[str, float]:
    """BM25 over each context document written out (the turn's tokens twice, its neighbours' once) in a collection
    where every other unit is its own document, with the index's k1 and b: what TurnContexts.search stands for."""
    sc = svc.scopes.get("owner")
    table, lex, tok = sc.state.units, sc.lexical, Tokenizer()
    docs: dict[str, list[str]] = {}
    for row, near in enumerate(zip(*context_rows_all(table), strict=True)):
        if max(near) >= 0:
            own = tok.tokenize(table.texts[row])
            docs[table.ids[row]] = own + own + [t for r in near if r >= 0 for t in tok.tokenize(table.texts[r])]
    collection = list(docs.values()) + [
        tok.tokenize(table.texts[r]) for r in range(len(table)) if table.ids[r] not in docs
    ]  # (no unit here is a fact: BM25 reads a unit's index text, its text)
    avgdl = sum(map(len, collection)) / len(collection)

    def idf(t: str) -> float:
        df = sum(t in d for d in collection)
        return math.log1p((len(collection) - df + 0.5) / (df + 0.5))

    out = {}
    for uid, doc in docs.items():
        tf = Counter(doc)
        s = sum(
            idf(t) * tf[t] * (lex.k1 + 1) / (tf[t] + lex.k1 * (1 - lex.b + lex.b * len(doc) / avgdl))
            for t in set(tok.tokenize(query))
            if tf[t]
        )
        if s > 0:
            out[uid] = s
    return out


@pytest.mark.parametrize("query", ["dinosaur exhibit kids", "Taberna da Ribeira Friday", "rained glad camping"])
def test_context_scores_are_bm25_over_the_context_documents(svc, query):
    sc = svc.scopes.get("owner")
    got = dict(contexts(svc).search(sc.lexical, Tokenizer().tokenize(query), 50))
    want = reference_scores(svc, query)
    assert got.keys() == want.keys() and len(got) >= 2
    for uid, s in want.items():
        assert got[uid] == pytest.approx(s, rel=1e-9)
    again = contexts(svc).search(sc.lexical, Tokenizer().tokenize(query), 50)  # (each term's scores kept)
    assert dict(again) == got
    # a long turn is in no context document: its words find no turn by context
    assert contexts(svc).search(sc.lexical, Tokenizer().tokenize("lovely river lights"), 50) == []


def plain_rule(table: UnitTable, row: int) -> tuple[int, int]:
    """The rule of memclaw.index.passages.context_rows_all, one row at a time as its docstring says it: a short
    archived turn is read with the turn before it and the turn after it in its chunk, each only if short (-1 where
    there is none); a long turn, a turn with no short neighbour and a unit that is no archived turn have none."""

    def chunk_at(r: int) -> tuple | None:
        return chunk_of(table.source_at(r), table.extra_at(r)) if 0 <= r < len(table) else None

    def short(r: int) -> bool:
        return len(table.texts[r].split()) <= MAX_WORDS

    if table.kind_of(table.ids[row]) != "archive" or chunk_at(row) is None or not short(row):
        return -1, -1
    before, after = (r if chunk_at(r) == chunk_at(row) and short(r) else -1 for r in (row - 1, row + 1))
    return before, after


def test_which_turns_have_a_context(svc):
    table = svc.scopes.get("owner").state.units
    before, after = context_rows_all(table)
    near = {table.texts[r]: (int(before[r]), int(after[r])) for r in table.rows_of("archive")}
    text_of = table.texts.__getitem__
    [walk] = [t for t in near if "walk along" in t]
    assert len(walk.split()) > MAX_WORDS and near[walk] == (-1, -1)  # a long turn: its passages carry their own context
    assert text_of(near["Sam: Great, I will book it for Friday."][0]).startswith("Maya: Shall we try")
    assert near["Sam: Great, I will book it for Friday."][1] == -1  # the long turn after it is left out
    assert near["Sam: Sounds lovely."] == (-1, -1)  # its only neighbour is long
    pottery, camping = (next(t for t in near if w in t) for w in ("pottery", "camping"))
    assert near[pottery] == (-1, table.texts.index(camping))  # another chunk's turns are no context
    museum_last, dinner_first = "Caroline: Glad to hear it.", "Maya: Shall we try Taberna da Ribeira on Friday?"
    assert table.texts.index(dinner_first) == table.texts.index(museum_last) + 1  # two chunks of one file, adjacent
    assert near[museum_last][1] == -1 and near[dinner_first][0] == -1
    assert text_of(near["Melanie: They were stoked! They keep asking to go back."][1]) == "Caroline: Glad to hear it."


def test_the_context_rows_are_the_rule_written_out(svc):
    """context_rows_all, for every row and for any rows asked (what a sync reads for the turns it embeds), is the
    rule applied row by row; with a unit that is no archived turn next to the last turn."""
    turns = svc.scopes.get("owner").state.units
    entry = MemoryUnit("h1", "history", "owner", "memory/HISTORY.md", 1, "Camping again soon.")
    table = UnitTable.concat([turns, UnitTable.from_units([entry])])
    want = [plain_rule(table, row) for row in range(len(table))]
    assert sum(max(w) >= 0 for w in want) >= 6 and want[-1] == (-1, -1)  # (the fixture has turns with a context)
    assert list(zip(*(a.tolist() for a in context_rows_all(table)), strict=True)) == want
    for rows in ([row] for row in range(len(table))):
        assert list(zip(*(a.tolist() for a in context_rows_all(table, rows)), strict=True)) == [want[rows[0]]]
    rows = [len(table) - 1, 3, 0, 3, len(table) - 2]  # out of order, repeated, the table's edges
    assert list(zip(*(a.tolist() for a in context_rows_all(table, rows)), strict=True)) == [want[r] for r in rows]
    assert [a.tolist() for a in context_rows_all(table, [])] == [[], []]


def test_an_answer_is_found_by_the_words_of_the_question_it_answers(svc):
    hits = svc.recall("dinosaur exhibit", kind="archive", mode="bm25", k=5)
    answer = next(h for h in hits if "stoked" in h.unit.text)
    assert answer.bm25.context and answer.to_json()["bm25"]["context"] is True
    asked = next(h for h in hits if "dinosaur" in h.unit.text)
    assert not asked.bm25.context  # it says the words itself: its own score is the better
    assert hits.index(asked) < hits.index(answer)


def test_weight_zero_turns_it_off(tmp_path, embedder):
    off = Config().model_copy(update={"recall": Config().recall.with_tuning(bm25_context_weight=0.0)})
    with archive_service(tmp_path, embedder, write, config=off, sync=True) as s:
        hits = s.recall("dinosaur exhibit", kind="archive", mode="bm25", k=5)
        assert hits and not [h for h in hits if "stoked" in h.unit.text or h.bm25.context]
        assert s.scopes.get("owner")._contexts is None  # noqa: SLF001  (never built)


def test_a_sync_builds_them_so_the_next_recall_does_not(svc):
    sc = svc.scopes.get("owner")
    built = sc._contexts  # noqa: SLF001
    assert built is not None and built[0] == svc.config.agent.name
    svc.recall("dinosaur exhibit", kind="archive", mode="bm25", k=5)
    assert svc.scopes.get("owner")._contexts is built  # noqa: SLF001  (the same, not built again)


def test_the_agents_words_lift_no_turn_of_the_owner(tmp_path, embedder):
    """The agent's turns are weighed down in recall; through the owner's reply beside them their words would come
    back at full weight, so they are in no context (and take none)."""
    said = chunk("c2222bbbb", datetime(2026, 11, 25, 14, 2), ("Maya", "Did Lena say which restaurant?"),
                 ("memclaw", "She said Taberna da Ribeira, on Rua dos Douradores."),
                 ("Maya", "Great, I will book it for Friday."))  # fmt: skip
    with archive_service(tmp_path, embedder, lambda ws: append_day(ws, "owner", said), sync=True) as s:
        hits = s.recall("Taberna da Ribeira", kind="archive", mode="bm25", k=5)
        assert hits[0].unit.text.startswith("memclaw: She said Taberna") and not hits[0].bm25.context
        assert not [h for h in hits if h.bm25.context]
        hits = s.recall("Taberna da Ribeira", kind="archive", k=5)  # hybrid: the agent's turn keeps 0.4 of its score
        assert hits[0].unit.text.startswith("memclaw: She said Taberna")
        assert not s.scopes.get("owner").turn_contexts("memclaw").has_context.any()  # (no neighbour but the agent)
        assert s.scopes.get("owner").turn_contexts("").has_context.all()  # (an agent of no name: every turn has)


def test_the_turn_that_names_it_stays_first(svc):
    hits = svc.recall("Taberna da Ribeira", kind="archive", mode="bm25", k=5)
    assert hits[0].unit.text == "Maya: Shall we try Taberna da Ribeira on Friday?" and not hits[0].bm25.context
    assert hits[1].unit.text == "Sam: Great, I will book it for Friday." and hits[1].bm25.context


def test_a_hand_edit_and_an_append_are_read(svc):
    path = svc.workspace.archive_file("owner", MUSEUM.when.date())
    path.write_text(path.read_text("utf-8").replace("dinosaur exhibit", "fossil hall"), "utf-8")
    svc.sync()
    stoked = [h for h in svc.recall("fossil hall", kind="archive", mode="bm25", k=5) if "stoked" in h.unit.text]
    assert stoked and stoked[0].bm25.context
    assert not [h for h in svc.recall("dinosaur", kind="archive", mode="bm25", k=5) if "stoked" in h.unit.text]
    hike = chunk("c9999aaaa", datetime(2026, 11, 26, 20, 0), ("Tom", "The glacier hike was tough."),
                 ("Ann", "Worth it though!"))  # fmt: skip
    append_day(svc.workspace, "owner", hike)
    svc.sync()
    worth = [h for h in svc.recall("glacier hike", kind="archive", mode="bm25", k=5) if "Worth it" in h.unit.text]
    assert worth and worth[0].bm25.context


def test_with_context_keeps_the_better_score_and_says_which_came_from_the_context():
    hits, by_ctx = with_context([("a", 3.0), ("b", 1.0)], [("a", 4.0), ("b", 2.0), ("c", 1.0)], 0.7, 2)
    assert hits == [("a", 3.0), ("b", pytest.approx(1.4))] and by_ctx == {"b"}
    assert with_context([("a", 1.0)], [], 0.7, 5) == ([("a", 1.0)], set())
    assert math.isclose(with_context([], [("c", 1.0)], 0.5, 5)[0][0][1], 0.5)


def test_recall_shows_a_score_from_the_context(svc):
    from rich.console import Console

    from memclaw.cli.tables import recall_table

    result = svc.recall_detailed("dinosaur exhibit", kind="archive", mode="bm25", k=5)
    console = Console(width=220, record=True)
    console.print(recall_table(result, ids=True))
    lines = console.export_text().splitlines()
    for h in result.hits[:2]:  # the turn that says it, then its answer, found by its context
        [line] = [ln for ln in lines if h.unit.id in ln]
        assert ("+context" in line) == ("stoked" in h.unit.text) == h.bm25.context


def test_kept_term_scores_stay_within_their_bound(svc, monkeypatch):
    import memclaw.index.bm25_context as bc

    sc = svc.scopes.get("owner")
    tok = Tokenizer().tokenize
    want = {q: contexts(svc).search(sc.lexical, tok(q), 50) for q in ("dinosaur kids", "Friday camping")}
    monkeypatch.setattr(bc, "KEPT_SCORES", 2)
    fresh = bc.TurnContexts(sc.state.units, sc.lexical, svc.config.agent.name)
    for _ in range(2):
        assert {q: fresh.search(sc.lexical, tok(q), 50) for q in want} == want
        assert len(fresh._terms) == 1  # noqa: SLF001  (the oldest terms were let go)


# ---- the contexts saved with the scope's state: a cold load reads them instead of building them


def same_contexts(a, b) -> bool:
    import numpy as np

    arrays = ("has_context", "lengths", "as_before", "as_after")
    return (a.n_slots, a.n_docs, a.avgdl) == (b.n_slots, b.n_docs, b.avgdl) and all(
        np.array_equal(getattr(a, k), getattr(b, k)) for k in arrays
    )


def cold(svc):
    """The owner's scope as a fresh process loads it from its state file."""
    svc.scopes.clear()
    return svc.scopes.get("owner")


def test_a_cold_load_reads_the_contexts_saved_with_the_state(svc, monkeypatch):
    import memclaw.index.bm25_context as bc

    agent = svc.config.agent.name
    warm = {q: svc.recall_detailed(q, kind="archive", mode="bm25", k=5) for q in ("dinosaur exhibit", "Friday")}
    sc = cold(svc)
    built = bc.TurnContexts(sc.state.units, sc.lexical, agent)
    assert sc.saved_contexts is not None

    def build(*_a, **_k):
        raise AssertionError("built, not read")

    monkeypatch.setattr(bc.TurnContexts, "__init__", build)
    assert same_contexts(sc.turn_contexts(agent), built)
    assert sc.saved_contexts is None  # read once, then let go
    for q, want in warm.items():
        got = svc.recall_detailed(q, kind="archive", mode="bm25", k=5)
        assert [(h.unit.id, h.score, h.bm25.context) for h in got.hits] == [
            (h.unit.id, h.score, h.bm25.context) for h in want.hits
        ]


def test_an_append_saves_the_contexts_of_the_new_state(svc, monkeypatch):
    import memclaw.index.bm25_context as bc

    more = chunk("c7777aaaa", datetime(2026, 11, 27, 20, 0), ("Maya", "The museum was closed."), ("Sam", "Oh no!"))
    append_day(svc.workspace, "owner", more)
    svc.sync()
    sc = cold(svc)
    built = bc.TurnContexts(sc.state.units, sc.lexical, svc.config.agent.name)
    assert built.has_context[sc.lexical.slot_of(next(u.id for u in sc.state.units.values() if "Oh no!" in u.text))]
    monkeypatch.setattr(bc.TurnContexts, "__init__", lambda *_a: pytest.fail("built, not read"))
    assert same_contexts(sc.turn_contexts(svc.config.agent.name), built)


def test_contexts_of_another_state_or_agent_are_not_used(svc):
    import sqlite3

    import memclaw.index.bm25_context as bc

    agent = svc.config.agent.name
    sc = cold(svc)
    digest, data = sc.saved_contexts
    assert bc.TurnContexts.from_bytes(data, bc.contexts_key(agent, digest), sc.lexical) is not None
    assert bc.TurnContexts.from_bytes(data, bc.contexts_key("Someone else", digest), sc.lexical) is None
    # the same documents in other slots: as many slots and documents, and not the ones they were built for
    from memclaw.index._bm25 import InvertedBM25

    tok = Tokenizer().tokenize
    shuffled = InvertedBM25()
    for u in reversed(list(sc.state.units.values())):
        shuffled.add(u.id, tok(u.text))
    assert (shuffled.n_slots, len(shuffled)) == (sc.lexical.n_slots, len(sc.lexical))
    assert bc.TurnContexts.from_bytes(data, bc.contexts_key(agent, digest), shuffled) is None
    # a save by a memclaw that knows no turn contexts rewrites the metadata and keeps the old contexts' row
    path = svc.scopes.layout.state_file("owner")
    with sqlite3.connect(path) as con:
        con.execute("UPDATE meta SET value = ? WHERE key = 'warned'", ('{"x.md": []}',))
    sc = cold(svc)
    digest2, data2 = sc.saved_contexts
    assert data2 == data and digest2 != digest
    assert bc.TurnContexts.from_bytes(data2, bc.contexts_key(agent, digest2), sc.lexical) is None
    built = bc.TurnContexts(sc.state.units, sc.lexical, agent)
    assert same_contexts(sc.turn_contexts(agent), built)


@pytest.mark.parametrize("damage", ["truncated", "slot out of range", "no header", "bad json"])
def test_damaged_saved_contexts_are_built_anew(svc, damage, caplog):
    import sqlite3
    import struct

    import numpy as np

    import memclaw.index.bm25_context as bc

    agent = svc.config.agent.name
    sc = cold(svc)
    digest, data = sc.saved_contexts
    (n_head,) = struct.unpack_from("<Q", data, 0)
    if damage == "truncated":
        bad = data[:-3]
    elif damage == "slot out of range":
        arr = np.frombuffer(data, "<i8", 1, 8 + n_head).copy()
        arr[0] = 10**6
        bad = data[: 8 + n_head] + arr.tobytes() + data[8 + n_head + 8 :]
    elif damage == "no header":
        bad = b"\x01"
    else:
        bad = struct.pack("<Q", 3) + b"{x]" + data[8 + n_head :]
    with pytest.raises(ValueError):
        bc.TurnContexts.from_bytes(bad, bc.contexts_key(agent, digest), sc.lexical)
    with sqlite3.connect(svc.scopes.layout.state_file("owner")) as con:
        con.execute("UPDATE snapshot SET data = ? WHERE name = 'contexts'", (bad,))
    sc = cold(svc)
    built = bc.TurnContexts(sc.state.units, sc.lexical, agent)
    with caplog.at_level("INFO", logger="memclaw.index.scopes"):
        assert same_contexts(sc.turn_contexts(agent), built)
    assert "saved BM25 turn contexts are unusable" in caplog.text
    assert svc.recall_detailed("dinosaur exhibit", kind="archive", mode="bm25", k=5).hits


def test_a_state_saved_without_contexts_has_none(svc):
    import memclaw.index._scope_state as scope_state

    path = svc.scopes.layout.state_file("owner")
    sc = cold(svc)
    scope_state.save(path, sc.state, sc.lexical.to_bytes)
    assert scope_state.load(path).contexts is None
