"""LongMemEval loader and converter (pure): the official retrieval protocol on the fixture."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from memclaw.bench.locomo import coverage_path
from memclaw.bench.longmemeval import convert_question, load_longmemeval, parse_lme_date, write_question
from memclaw.errors import UsageError

FIXTURE = Path(__file__).parents[1] / "fixtures" / "longmemeval_mini.json"


def test_parse_lme_date():
    assert parse_lme_date("2023/05/20 (Sat) 02:21") == datetime(2023, 5, 20, 2, 21)
    assert parse_lme_date("2023/05/20") == datetime(2023, 5, 20)
    with pytest.raises(UsageError):
        parse_lme_date("someday")


def test_protocol_skips_abstention_and_questions_without_user_evidence():
    raw = load_longmemeval(FIXTURE)
    converted = [convert_question(q) for q in raw]
    assert [q.qid if q else None for q in converted] == ["q_single_1", "q_multi_1", "q_temporal_1", None, None]
    multi = converted[1]
    assert multi.relevant == {"ans_m1", "ans_m2"}
    assert [s.session_id for s in multi.sessions] == ["f4", "ans_m1", "f5", "ans_m2", "f1"]
    # Only the user's turns, one line each.
    assert multi.sessions[1].text == "I finished my first marathon in Boston today, 4 hours 10 minutes!"
    sleep = next(s for s in converted[0].sessions if s.session_id == "f3")
    assert sleep.text == "What are some tips to sleep better? I keep waking up at 4am."
    assert "Mash the bananas" not in converted[0].sessions[0].text


def test_answers_all_counts_the_assistants_has_answer_turns():
    raw = load_longmemeval(FIXTURE)
    converted = [convert_question(q, answers="all") for q in raw]
    assert [q.qid if q else None for q in converted] == [
        "q_single_1", "q_multi_1", "q_temporal_1", None, "q_assistant_only",
    ]  # fmt: skip
    # the user's has_answer turns still count; the assistant's are added, and only where marked
    assert converted[1].relevant == convert_question(raw[1]).relevant
    only = converted[4]
    assert only.relevant == {only.sessions[0].session_id} and len(only.sessions) == 2


def test_write_question_history_and_side_file(tmp_path):
    q = convert_question(load_longmemeval(FIXTURE)[0])
    root = tmp_path / "ws"
    write_question(q, root, "history")
    history = (root / "memory" / "HISTORY.md").read_text()
    blocks = history.strip().split("\n\n")
    assert len(blocks) == 4
    assert blocks[1] == "[2023-05-03 18:40] I just adopted a border collie puppy named Pixel, any training tips?"
    side = json.loads(coverage_path(root).read_text())
    assert [u["covers"] for u in side["units"]] == [["f1"], ["ans_dog"], ["f2"], ["f3"]]
    assert "ans_dog" not in history


def test_write_question_archive_goes_through_the_writer(tmp_path):
    from memclaw.bench.corpus import load_corpus

    q = convert_question(load_longmemeval(FIXTURE)[0])
    root = tmp_path / "ws"
    write_question(q, root)  # the default: the archive
    mem = root / "memory"
    assert not (mem / "HISTORY.md").exists() and not (mem / "MEMORY.md").exists()
    day = (mem / "archive" / "2023-05-03.md").read_text()
    # Every turn with text, user and assistant, verbatim (whitespace folded) under the chunk of its consolidation.
    assert "## 18:40 #c" in day and "- 18:40 **user**: I just adopted a border collie puppy named Pixel" in day
    assert "- 18:40 **assistant**: Congrats!" in day
    assert "ans_dog" not in day
    corpus = load_corpus(root, coverage_path(root))
    # The AI's turns are the agent's own, as memclaw archives them (under the bench config's `agent.name`): recall
    # weighs them with `recall.agent_turn_weight`.
    from memclaw.bench.run_config import bench_config
    from memclaw.index.unittable import UnitTable
    from memclaw.recall.archive import agent_turns

    said = agent_turns(UnitTable.from_units(corpus.units), bench_config().agent.name)
    assert {u.extra["speaker"] for u in corpus.units if said(u.id)} == {"assistant"}
    assert {u.extra["speaker"] for u in corpus.units if not said(u.id)} == {"user"}
    assert corpus.unmatched == [] and len(corpus.units) == 8
    # The count view: a turn counts for its session; the budgeted view: only the has_answer turn earns it.
    assert [sorted(corpus.cover[u.id]) for u in corpus.units if u.timestamp.day == 3] == [["ans_dog"], ["ans_dog"]]
    assert sorted(sorted(c) for c in corpus.credit.values()) == [[]] * 7 + [["ans_dog"]]
    with pytest.raises(UsageError):
        write_question(q, tmp_path / "z", "nope")


def test_rejects_other_files(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps([{"question_id": "a"}]))
    with pytest.raises(UsageError):
        load_longmemeval(bad)


def test_reads_json_gz_as_the_json_it_holds(tmp_path):
    import gzip

    plain = load_longmemeval(FIXTURE)
    gz = tmp_path / "lme.json.gz"
    gz.write_bytes(gzip.compress(FIXTURE.read_bytes()))
    assert load_longmemeval(gz) == plain
    odd_name = tmp_path / "lme-copy.json"  # gzip by its magic bytes, whatever the name
    odd_name.write_bytes(gz.read_bytes())
    assert load_longmemeval(odd_name) == plain
    torn = tmp_path / "torn.json.gz"
    torn.write_bytes(gz.read_bytes()[:40])
    with pytest.raises(UsageError, match=r"cannot read LongMemEval file .*torn\.json\.gz"):
        load_longmemeval(torn)
