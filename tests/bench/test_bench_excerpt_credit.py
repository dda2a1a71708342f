"""The budgeted view credits an archive excerpt only for the turns inside it (a real workspace written through
memclaw's writer, real Chroma, the bundled model); the count view keeps crediting a ranked turn's session."""

from __future__ import annotations

from memclaw.bench import metrics as M
from memclaw.bench.locomo import coverage_path, parse_conversation, write_conversation
from memclaw.bench.prepared import prepare_corpus
from memclaw.bench.run_config import bench_config
from memclaw.bench.systems import parse_systems
from memclaw.context.memory_section import fill_hits

FILLER = [
    "My sister keeps sending me photos of her cat sleeping on the radiator, it is honestly the funniest thing.",
    "We spent most of Saturday repainting the hallway a pale green, which took far longer than we planned.",
    "The train to the coast was delayed by forty minutes, so I finished the whole novel before we arrived.",
    "I have started running in the mornings again, slowly, three times a week along the canal path.",
    "Our neighbour lent us a ladder and a box of tools, so the shelves in the study are finally up.",
    "The football match on Sunday ended in a draw after a penalty in the very last minute of the game.",
]
QUESTION = "What was the name of the restaurant where Lena had dinner?"
ANSWER_TURN = "Lena had dinner at a small restaurant called Taberna da Ribeira, near the river in the old town."
FAR_TURN = "Anyway, shall we plan a weekend away in October when the prices drop and the crowds are gone?"


def conversation() -> dict:
    texts = [FILLER[0], ANSWER_TURN, *FILLER[1:5], FILLER[5], FAR_TURN]
    turns = [{"speaker": "Maya" if i % 2 else "Jon", "dia_id": f"D1:{i + 1}", "text": t} for i, t in enumerate(texts)]
    return {
        "sample_id": "conv-e",
        "conversation": {
            "speaker_a": "Jon",
            "speaker_b": "Maya",
            "session_1_date_time": "7:10 pm on 3 March, 2024",
            "session_1": turns,
        },  # fmt: skip
        "qa": [{"question": QUESTION, "answer": "Taberna da Ribeira", "evidence": ["D1:2", "D1:9"], "category": 4}],
    }


def test_an_excerpt_earns_only_the_turns_inside_it(tmp_path, embedder):
    conv, _ = parse_conversation(conversation())
    root = tmp_path / "ws"
    write_conversation(conv, root, "sessions")
    prep = prepare_corpus(root, coverage_path(root), parse_systems("hybrid"), bench_config(), embedder)
    try:
        corpus = prep.corpus
        dia = {u.id: next(iter(corpus.credit[u.id])) for u in corpus.units}
        ranked, view, _ms = prep.run("hybrid", QUESTION, 20)
        assert dia[ranked[0]] == "D1:2"
        q = conv.questions[0]
        score = M.score_question(ranked, corpus.cover, q.evidence, category="4", latency_ms=0.0, budgeted=view,
                                 credit=corpus.credit)  # fmt: skip
        # Count view, session level: the top turn stands for its whole session.
        assert score.recall[1] == 1.0
        # Budgeted view: what a section of 128 tokens serves is the window around the match (consecutive turns of
        # the chunk, the match inside; another excerpt of the chunk may join it after a gap), and it earns those
        # turns' dia_ids only, not the far turn's.
        served = [dia[i] for i in view.kept[128]]
        assert "D1:2" in served and "D1:9" not in served
        positions = {int(d.split(":")[1]) for d in served}
        lo, hi = 2, 2
        while lo - 1 in positions:
            lo -= 1
        while hi + 1 in positions:
            hi += 1
        assert hi - lo >= 1  # a window around the match, not the matched turn alone
        assert score.budget[128] == 0.5
        # ... exactly what the prompt's memory section serves for the same recall (fill_hits, excerpts cut to fit).
        hits = prep.services[-1].recall_detailed(QUESTION, k=20).hits
        for b in M.BUDGETS:
            f = fill_hits(hits, b, prep.count)
            assert view.kept[b] == [uid for i in f.kept for uid in f.served(i)]
            earned = {d for i in view.kept[b] for d in corpus.credit[i]}
            assert score.budget[b] == len(earned & set(q.evidence)) / 2
            assert view.tokens[f"@{b}t"] <= b
    finally:
        prep.close()
