"""LoCoMo loader and converter: date parsing, evidence normalisation, the Markdown written and the coverage map."""

from __future__ import annotations

import json
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


def test_write_conversation_all(tmp_path):
    conv, _ = parse_conversation(mini_conversation())
    root = tmp_path / "ws"
    entries = write_conversation(conv, root, "all")
    memory = (root / "memory" / "MEMORY.md").read_text()
    history = (root / "memory" / "HISTORY.md").read_text()
    assert "# Ana\n\n- Ana adopted a puppy called Miso. (2023-05-08)\n" in memory
    assert "- Ben takes pottery classes in Lyon. (2023-06-25)" in memory
    assert history == (
        "[2023-05-08 13:56] Ana told Ben about her new puppy Miso.\n\n"
        "[2023-06-25 10:05] Ben started pottery in Lyon; Miso learned to sit.\n"
    )
    # Coverage lives in a side file next to the workspace, never in the Markdown.
    side = json.loads(coverage_path(root).read_text())
    assert coverage_path(root).parent == tmp_path and "D1:1" not in memory + history
    by_text = {e["text"]: set(e["covers"]) for e in side["units"]}
    assert by_text["Ben likes dogs."] == {"D1:1", "D1:2"}
    assert by_text["Ana told Ben about her new puppy Miso."] == {"D1:1", "D1:2"}
    # A dangling evidence turn (D2:7) is covered by its session's entry only.
    assert by_text["Ben started pottery in Lyon; Miso learned to sit."] == {"D2:1", "D2:2", "D2:7"}
    assert len(entries) == 5


def test_write_conversation_facts_and_sessions(tmp_path):
    conv, _ = parse_conversation(mini_conversation())
    write_conversation(conv, tmp_path / "f", "facts")
    assert (tmp_path / "f" / "memory" / "HISTORY.md").read_text() == ""
    assert "Miso" in (tmp_path / "f" / "memory" / "MEMORY.md").read_text()
    entries = write_conversation(conv, tmp_path / "s", "sessions")
    history = (tmp_path / "s" / "memory" / "HISTORY.md").read_text()
    assert (tmp_path / "s" / "memory" / "MEMORY.md").read_text() == ""
    assert history.startswith(
        "[2023-05-08 13:56] Ana: I adopted a puppy called Miso!\nBen: Cute! [image: a photo of a small dog]\n\n"
    )
    assert "Ana: Miso learned to sit. So proud.\n" in history  # turns are one line each: no blank line inside
    assert [set(e.covers) for e in entries] == [{"D1:1", "D1:2"}, {"D2:1", "D2:2", "D2:7"}]
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
