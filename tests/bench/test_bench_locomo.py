"""LoCoMo loader and converter: date parsing, evidence normalisation, the Markdown written and the coverage map."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from memclaw.bench.locomo import (
    coverage_path,
    load_locomo,
    normalize_evidence,
    parse_conversation,
    parse_session_datetime,
    write_conversation,
)
from memclaw.errors import UsageError

DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo-dev.json"


def mini_conversation() -> dict:
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a puppy called Miso!"},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Cute!", "blip_caption": "a photo of a small dog"},
            ],
            "session_2_date_time": "10:05 am on 25 June, 2023",
            "session_2": [
                {"speaker": "Ana", "dia_id": "D2:1", "text": "Miso learned to sit.\n\nSo proud."},
                {"speaker": "Ben", "dia_id": "D2:2", "text": "I started pottery classes in Lyon."},
            ],
        },
        "observation": {
            "session_1_observation": {
                "Ana": [["Ana adopted a puppy called Miso.", "D1:1"]],
                "Ben": [["Ben likes dogs.", ["D1:2", "D1:1"]]],
            },
            "session_2_observation": {"Ben": [["Ben takes pottery classes in Lyon.", "D2:2"]]},
        },
        "session_summary": {
            "session_1_summary": "Ana told Ben about her new puppy Miso.",
            "session_2_summary": "Ben started pottery in Lyon;\nMiso learned to sit.",
        },
        "qa": [
            {"question": "What is the puppy called?", "answer": "Miso", "evidence": ["D1:1"], "category": 4},
            {
                "question": "When did Ben start pottery?",
                "answer": "June 2023",
                "evidence": ["D2:2; D1:2"],
                "category": 2,
            },
            {"question": "Unanswerable?", "adversarial_answer": "x", "evidence": ["D1:1"], "category": 5},
            {"question": "No evidence", "answer": "?", "evidence": [], "category": 1},
            {"question": "Broken", "answer": "?", "evidence": ["D:2:1", "D", "D2:7"], "category": 1},
        ],
    }


def test_parse_session_datetime():
    assert parse_session_datetime("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56)
    assert parse_session_datetime("12:09 am on 13 September, 2023") == datetime(2023, 9, 13, 0, 9)
    assert parse_session_datetime(" 9:00 AM on 1 January 2022 ") == datetime(2022, 1, 1, 9, 0)
    with pytest.raises(UsageError):
        parse_session_datetime("yesterday")


def test_normalize_evidence_repairs_and_reports():
    assert normalize_evidence(["D1:3"]) == (["D1:3"], [])
    ids, bad = normalize_evidence(["D8:6; D9:17", "D:11:26", "D", "D1:3", "d1:3"])
    assert ids == ["D8:6", "D9:17", "D11:26", "D1:3"]
    assert len(bad) == 4  # split, stray colon, bare D, lower-case
    assert any("'D'" in b and "dropped" in b for b in bad)


def test_parse_conversation_keeps_eligible_questions_only():
    conv, n_total = parse_conversation(mini_conversation())
    assert n_total == 5
    assert [q.qid for q in conv.questions] == ["conv-x#q0", "conv-x#q1", "conv-x#q4"]
    assert conv.questions[1].evidence == ("D2:2", "D1:2") and conv.questions[1].category == "2"
    assert conv.questions[2].evidence == ("D2:1", "D2:7")
    assert any("D2:7 is not a turn" in a for a in conv.anomalies)
    assert conv.observations[1].evidence == ("D1:2", "D1:1")
    assert conv.sessions[2].when == datetime(2023, 6, 25, 10, 5)


@pytest.fixture
def recorded(monkeypatch):
    """Every ConsolidationRecord the converter hands memclaw's writer (the real writer still writes it)."""
    from memclaw.service.facade import MemoryService

    seen: list[tuple[object, bool]] = []
    real = MemoryService.record_consolidation

    def spy(self, scope, record, **kw):
        seen.append((record, kw.get("sync", True)))
        return real(self, scope, record, **kw)

    monkeypatch.setattr(MemoryService, "record_consolidation", spy)
    return seen


def test_write_conversation_all_goes_through_the_writer(tmp_path, recorded):
    from memclaw.markdown.formats import fact_cid

    conv, _ = parse_conversation(mini_conversation())
    root = tmp_path / "ws"
    entries = write_conversation(conv, root, "all")
    # One consolidation per session, no sync (the benchmark syncs once); the converter gives the conversation's time
    # and the benchmark's words only: no date and no id in any text it hands over.
    records = [r for r, _sync in recorded]
    assert [sync for _r, sync in recorded] == [False, False]
    assert [r.when for r in records] == [datetime(2023, 5, 8, 13, 56), datetime(2023, 6, 25, 10, 5)]
    assert [op.text for op in records[0].fact_ops] == ["Ana adopted a puppy called Miso.", "Ben likes dogs."]
    assert records[1].history_entry == "Ben started pottery in Lyon; Miso learned to sit."
    assert all(r.turns == () for r in records)  # `all`: no archive
    said = " ".join(t for r in records for t in [r.history_entry, *(o.text for o in r.fact_ops)])
    assert not re.search(r"\d{4}-\d{2}-\d{2}|#c[0-9a-f]", said)
    c1, c2 = (r.cid for r in records)
    assert c1 != c2
    # Dates and links are memclaw's: learned-marks and stamps carrying the session's consolidation id.
    memory = (root / "memory" / "MEMORY.md").read_text()
    history = (root / "memory" / "HISTORY.md").read_text()
    assert f"- Ana adopted a puppy called Miso. (2023-05-08 #{c1})" in memory
    assert f"- Ben takes pottery classes in Lyon. (2023-06-25 #{c2})" in memory
    assert fact_cid(f"Ben likes dogs. (2023-05-08 #{c1})") == c1
    assert history == (
        f"[2023-05-08 13:56 #{c1}] Ana told Ben about her new puppy Miso.\n\n"
        f"[2023-06-25 10:05 #{c2}] Ben started pottery in Lyon; Miso learned to sit.\n"
    )
    assert not (root / "memory" / "archive").exists()
    # Coverage lives in a side file next to the workspace, never in the Markdown.
    side = json.loads(coverage_path(root).read_text())
    assert coverage_path(root).parent == tmp_path and "D1:1" not in memory + history
    facts = {e["text"]: set(e["covers"]) for e in side["units"] if e["kind"] == "fact"}
    assert facts["Ben likes dogs."] == {"D1:1", "D1:2"}
    hist = {e["cid"]: set(e["covers"]) for e in side["units"] if e["kind"] == "history"}
    assert hist[c1] == {"D1:1", "D1:2"}
    # A dangling evidence turn (D2:7) is covered by its session's entry only.
    assert hist[c2] == {"D2:1", "D2:2", "D2:7"}
    assert len(entries) == 5


def test_write_conversation_facts_sessions_and_full(tmp_path, recorded):
    from memclaw.bench.corpus import load_corpus

    conv, _ = parse_conversation(mini_conversation())
    write_conversation(conv, tmp_path / "f", "facts")
    assert not (tmp_path / "f" / "memory" / "HISTORY.md").exists()
    assert "Miso" in (tmp_path / "f" / "memory" / "MEMORY.md").read_text()
    # `sessions`: the raw sessions as archived turns (one chunk per session), nothing else.
    root = tmp_path / "s"
    entries = write_conversation(conv, root, "sessions")
    assert not (root / "memory" / "MEMORY.md").exists() and not (root / "memory" / "HISTORY.md").exists()
    cid = recorded[-2][0].cid
    day = (root / "memory" / "archive" / "2023-05-08.md").read_text()
    assert day.startswith(f"# 2023-05-08\n\n## 13:56 #{cid}\n- 13:56 **Ana**: I adopted a puppy called Miso!\n")
    assert "- 13:56 **Ben**: Cute! [image: a photo of a small dog]" in day
    assert "Miso learned to sit. So proud." in (root / "memory" / "archive" / "2023-06-25.md").read_text()
    # An archived turn covers its session in the count view, and is credited for itself only.
    assert [(e["covers"], e["credit"]) for e in entries[:2]] == [(["D1:1", "D1:2"], ["D1:1"]),
                                                                  (["D1:1", "D1:2"], ["D1:2"])]  # fmt: skip
    corpus = load_corpus(root, coverage_path(root))
    assert corpus.unmatched == [] and [u.kind for u in corpus.units] == ["archive"] * 4
    assert [sorted(corpus.credit[u.id]) for u in corpus.units] == [["D1:1"], ["D1:2"], ["D2:1"], ["D2:2"]]
    # `full`: facts + summaries + archive, the three records of a session sharing its consolidation id.
    root = tmp_path / "x"
    write_conversation(conv, root, "full")
    corpus = load_corpus(root, coverage_path(root))
    assert corpus.unmatched == []
    assert sorted({u.kind for u in corpus.units}) == ["archive", "fact", "history"]
    by_cid: dict[str, set[str]] = {}
    for u in corpus.units:
        by_cid.setdefault(u.extra["cid"], set()).add(u.kind)
    assert list(by_cid.values()) == [{"fact", "history", "archive"}] * 2
    with pytest.raises(UsageError):
        write_conversation(conv, tmp_path / "z", "nope")  # type: ignore[arg-type]


@pytest.mark.skipif(not DEV.exists(), reason="LoCoMo dev split not present")
def test_dev_split_counts():
    data = load_locomo(DEV)
    assert [c.sample_id for c in data.conversations] == ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43"]
    assert data.n_qa_total == 999
    assert data.n_eligible == 760
    assert data.n_by_category == {"1": 142, "2": 156, "3": 44, "4": 418}
    assert len(data.anomalies) == 4  # "D8:6; D9:17", "D", "D:11:26", dangling D10:19


def test_load_rejects_other_files(tmp_path):
    with pytest.raises(UsageError):
        load_locomo(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}')
    with pytest.raises(UsageError):
        load_locomo(bad)
