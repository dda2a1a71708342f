"""benchmarks/bench_lme_scale.py on the LongMemEval fixture: every haystack written into one memory through memclaw's
writer, and `--ranks` reading where each question's answer turn ranks (the real model, a real Chroma)."""

from __future__ import annotations

import runpy
from pathlib import Path

FIXTURE = Path(__file__).parents[1] / "fixtures" / "longmemeval_mini.json"
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_lme_scale.py"


def test_ranks_over_one_memory_of_every_haystack(tmp_path, embedder):
    mod = runpy.run_path(str(SCRIPT))
    qs = mod["questions"](FIXTURE)
    root = tmp_path / "workspace"
    info = mod["build"](root, qs, embedder)
    n_turns = sum(len(s.turns) for s in {s.session_id: s for q in qs for s in q.sessions}.values())
    assert info["units"] == n_turns  # each distinct session once, every turn a unit
    out = mod["ranks"](root, FIXTURE, 40)
    assert set(out["by_question"]) == {q.qid for q in qs}
    for qid, r in out["by_question"].items():
        # a memory of a few sessions: one signal at least finds an answer turn, the hybrid near the top
        assert r["bm25-raw"] is not None or r["vector-raw"] is not None, qid
        assert r["hybrid"] is not None and r["hybrid"] <= 10, (qid, r)
    # "What breed is my new dog?" shares no word with "I just adopted a border collie puppy": the vector's find
    assert out["by_question"]["q_single_1"]["bm25-raw"] is None and out["by_question"]["q_single_1"]["vector-raw"]
    found = out["found_within"]
    assert found["hybrid"]["10"] == 1.0 and set(found["bm25-raw"]) == {"10", "40"}  # depths up to --depth only
    shares = list(found["vector-raw"].values())
    assert shares == sorted(shares)  # found within 10 is found within 40
