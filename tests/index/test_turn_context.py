"""A short archived turn is embedded with the turns beside it (memclaw.index.passages.turn_context,
memclaw.index._vector_writer.blend): what the context is, that the vector Chroma holds is the blend of the turn's and
its context's, that an answer is found by what it answers, and that a hand edit re-embeds the turns whose context it
changes. Real files, the real model, a real embedded Chroma."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from memclaw.index._vector_writer import CONTEXT_WEIGHT, blend
from memclaw.index.passages import CONTEXT_WORDS, MAX_WORDS, turn_context
from tests.archive_days import MUSEUM, append_day, archive_service, chunk

OTHER = chunk(
    "c0123abcd",
    datetime(2026, 11, 25, 18, 30),
    ("Melanie", "I signed up for a pottery class yesterday."),
    ("Melanie", "We went camping two weekends ago and it rained the whole time."),
)


@pytest.fixture
def svc(tmp_path, embedder):
    with archive_service(tmp_path, embedder) as s:
        yield s


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_the_context_is_the_end_of_the_turn_before_the_turn_and_the_start_of_the_one_after():
    before = " ".join(f"b{i}" for i in range(CONTEXT_WORDS + 5))
    after = " ".join(f"a{i}" for i in range(CONTEXT_WORDS + 5))
    ctx = turn_context(before, "Maya: yes, Friday!", after)
    assert ctx is not None
    head, mid, tail = ctx.split(" / ")
    assert head.split() == before.split()[-CONTEXT_WORDS:] and mid == "Maya: yes, Friday!"
    assert tail.split() == after.split()[:CONTEXT_WORDS]
    assert turn_context(None, "Maya: yes", "memclaw: noted") == "Maya: yes / memclaw: noted"
    assert turn_context("Maya: and?", "memclaw: noted", None) == "Maya: and? / memclaw: noted"
    assert turn_context(None, "Maya: alone", None) is None  # a turn alone is its own context
    long = " ".join(["word"] * (MAX_WORDS + 1))
    assert turn_context("Maya: hi", long, "Maya: bye") is None  # a long turn's passages carry their own
    assert turn_context(long, "Maya: thanks!", "Maya: bye") == "Maya: thanks! / Maya: bye"  # a long reply is left out
    assert turn_context(long, "Maya: thanks!", None) is None


def test_blend_is_the_unit_length_weighted_sum_of_both_unit_vectors_and_leaves_other_rows_alone():
    v = np.array([[3.0, 0.0], [0.0, 2.0], [1.0, 1.0]], dtype=np.float32)
    c = np.array([[0.0, 5.0]], dtype=np.float32)
    out = blend(v, [0], c)
    assert np.allclose(out[0], unit(np.array([1.0, CONTEXT_WEIGHT])))
    assert np.allclose(out[1:], v[1:]) and np.allclose(v[0], [3.0, 0.0])  # (the input is not changed)


def test_chroma_holds_the_blend_and_an_answer_is_found_by_what_it_answers(svc, embedder):
    append_day(svc.workspace, "owner", MUSEUM, OTHER)
    svc.sync()
    query = "How did Melanie's kids like the dinosaur exhibit?"
    hits = svc.recall(query, kind="archive", mode="vector", k=5)
    texts = [h.unit.text for h in hits]
    answer = next(h for h in hits if h.unit.text.startswith("Melanie: They were stoked"))
    q, own, ctx = (unit(v) for v in embedder.encode([query, answer.unit.text, turn_context(
        MUSEUM.turns[0].speaker + ": " + MUSEUM.turns[0].text, answer.unit.text,
        MUSEUM.turns[2].speaker + ": " + MUSEUM.turns[2].text)]))  # fmt: skip
    assert answer.vector.score == pytest.approx(
        float(q @ unit(own + CONTEXT_WEIGHT * ctx)), abs=1e-4
    )  # what Chroma holds
    assert answer.vector.score > float(q @ own) + 0.1  # the question it answers lifts it
    assert texts.index(answer.unit.text) < min(texts.index(t) for t in texts if "pottery" in t or "camping" in t)
    [alone] = [h for h in svc.recall("pottery class", kind="archive", mode="vector", k=5) if "pottery" in h.unit.text]
    assert alone.unit.text == "Melanie: I signed up for a pottery class yesterday."


def test_a_hand_edit_re_embeds_the_turn_and_the_turns_beside_it_only(svc):
    path = append_day(svc.workspace, "owner", MUSEUM, OTHER)
    svc.sync()
    path.write_text(path.read_text("utf-8").replace("dinosaur exhibit", "fossil hall"), "utf-8")
    [report] = svc.sync()
    assert (report.added, report.updated, report.removed) == (0, 2, 0)  # the first turn and the answer after it
    hit = svc.recall("How did the kids like the fossil hall?", kind="archive", mode="vector", k=1)[0]
    assert "fossil hall" in hit.unit.text
    path.write_text(path.read_text("utf-8").replace("Glad to hear it.", "Glad to hear it, truly."), "utf-8")
    [report] = svc.sync()
    assert report.updated == 2  # the last turn of the chunk, and the one before it; not the other chunk's
