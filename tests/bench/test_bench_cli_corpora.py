"""`memclaw bench locomo --corpus full` and `bench longmemeval --corpus archive|history` through the real CLI entry
point (grep systems: the converters and the scoring run, no model to load)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.test_bench_locomo import mini_conversation
from tests.cli.test_bad_input import cli as memclaw_cli  # noqa: F401  (the fixture: memclaw's entry point in-process)

FIXTURE = Path(__file__).parents[1] / "fixtures" / "longmemeval_mini.json"


def test_the_cli_runs_the_archive_corpora(tmp_path, memclaw_cli):  # noqa: F811  (the imported fixture)
    cli = memclaw_cli
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([mini_conversation()]), "utf-8")
    out = tmp_path / "full"
    r = cli("bench", "locomo", "--data", str(data), "--corpus", "full", "--systems",
                        "grep-ranked", "--out", str(out), "--no-progress")  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((out / "locomo.json").read_text())
    assert res["corpus"] == "full" and res["units"] == {"fact": 3, "history": 2, "archive": 4}
    assert res["units_without_coverage"] == 0 and res["disk"]["archived_turns"] == 4
    assert "4 archived turns" in (out / "locomo.md").read_text()
    r = cli("bench", "locomo", "--data", str(data), "--corpus", "nope")
    assert r.code == 2 and "unknown corpus 'nope': use one of all, facts, sessions, full" in " ".join(r.err.split())
    for corpus, units in (("archive", "archived turns"), ("history", "HISTORY.md entry per session")):
        r = cli("bench", "longmemeval", "--data", str(FIXTURE), "--corpus", corpus,
                            "--systems", "grep-ranked", "--out", str(tmp_path / corpus), "--no-progress")  # fmt: skip
        assert r.code == 0, r.err
        res = json.loads((tmp_path / corpus / "longmemeval.json").read_text())
        assert res["corpus"] == corpus and res["n_questions"] == 3
        assert units in (tmp_path / corpus / "longmemeval.md").read_text()


def test_longmemeval_is_titled_by_the_questions_asked_and_says_why_some_were_skipped(tmp_path, memclaw_cli):  # noqa: F811
    """Issue 38.10: 5 questions were titled "3 questions", and why 2 were skipped was only in the .md."""
    r = memclaw_cli("bench", "longmemeval", "--data", str(FIXTURE), "--systems", "grep-ranked",
                    "--out", str(tmp_path), "--no-progress")  # fmt: skip
    assert r.code == 0, r.err
    out = " ".join(r.out.split())
    assert "5 questions asked, 3 scored" in out, r.out
    assert "skipped 2 of 5 questions, as the protocol does: 1 abstention" in out, r.out
    assert "1 no user turn marked has_answer" in out, r.out
    assert "— 3 questions" not in out


@pytest.mark.slow
def test_bench_perf_prints_its_table_and_writes_the_png_its_help_promises(tmp_path, memclaw_cli):  # noqa: F811
    """Issue 38.10: `bench perf --sizes 300 --out D` printed only "wrote ...", and no PNG."""
    r = memclaw_cli("bench", "perf", "--sizes", "10", "--out", str(tmp_path), "--no-progress")
    assert r.code == 0, r.err
    out = " ".join(r.out.split())
    assert "memories" in out and "warm recall p50 ms" in out and "cold CLI recall s" in out, r.out
    assert (tmp_path / "perf.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {tmp_path / 'perf.json'}, {tmp_path / 'perf.md'}, {tmp_path / 'perf.png'}" in r.out


def test_answers_all_scores_what_the_assistant_said(tmp_path, memclaw_cli):  # noqa: F811
    """`--answers all`: a session is relevant by the assistant's has_answer turns too, so the fixture's
    single-session-assistant question is scored; the official key (the default) skips it."""
    out = tmp_path / "all"
    r = memclaw_cli("bench", "longmemeval", "--data", str(FIXTURE), "--answers", "all", "--systems", "grep-ranked",
                    "--out", str(out), "--no-progress")  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((out / "longmemeval.json").read_text())
    assert res["answers"] == "all" and res["n_questions"] == 4
    assert res["skipped"] == {"abstention": 1, "no_has_answer": 0}
    assert "single-session-assistant" in res["systems"]["grep-ranked"]["by_question_type"]
    assert "answers `all`" in (out / "longmemeval.md").read_text()
    r = memclaw_cli("bench", "longmemeval", "--data", str(FIXTURE), "--answers", "all", "--corpus", "history",
                    "--out", str(tmp_path / "h"), "--no-progress")  # fmt: skip
    assert r.code == 2 and "--answers all needs the archive corpus" in " ".join(r.err.split())
    assert not (tmp_path / "h").exists()
    r = memclaw_cli("bench", "longmemeval", "--data", str(FIXTURE), "--answers", "all", "--one-memory",
                    "--out", str(tmp_path / "one"), "--no-progress")  # fmt: skip
    assert r.code == 2 and "--answers all is for the per-question run" in " ".join(r.err.split())
    assert not (tmp_path / "one").exists()
    r = memclaw_cli("bench", "longmemeval", "--data", str(FIXTURE), "--answers", "some", "--no-progress")
    assert r.code == 2 and "unknown --answers 'some': use one of user, all" in " ".join(r.err.split())
