"""`memclaw bench locomo --corpus full` and `bench longmemeval --corpus archive|history` through the real CLI entry
point (grep systems: the converters and the scoring run, no model to load)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from memclaw.cli.main import run
from tests.bench.test_bench_locomo import mini_conversation

FIXTURE = Path(__file__).parents[1] / "fixtures" / "longmemeval_mini.json"


def invoke(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["memclaw", *args])
    code = 0
    try:
        run()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out + err


def test_the_cli_runs_the_archive_corpora(tmp_path, monkeypatch, capsys):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([mini_conversation()]), "utf-8")
    out = tmp_path / "full"
    code, text = invoke(monkeypatch, capsys, "bench", "locomo", "--data", str(data), "--corpus", "full", "--systems",
                        "grep-ranked", "--out", str(out), "--no-progress")  # fmt: skip
    assert code == 0, text
    res = json.loads((out / "locomo.json").read_text())
    assert res["corpus"] == "full" and res["units"] == {"fact": 3, "history": 2, "archive": 4}
    assert res["units_without_coverage"] == 0 and res["disk"]["archived_turns"] == 4
    assert "4 archived turns" in (out / "locomo.md").read_text()
    code, text = invoke(monkeypatch, capsys, "bench", "locomo", "--data", str(data), "--corpus", "nope")
    assert code == 2 and "unknown corpus 'nope': use one of all, facts, sessions, full" in " ".join(text.split())
    for corpus, units in (("archive", "archived turns"), ("history", "HISTORY.md entry per session")):
        code, text = invoke(monkeypatch, capsys, "bench", "longmemeval", "--data", str(FIXTURE), "--corpus", corpus,
                            "--systems", "grep-ranked", "--out", str(tmp_path / corpus), "--no-progress")  # fmt: skip
        assert code == 0, text
        res = json.loads((tmp_path / corpus / "longmemeval.json").read_text())
        assert res["corpus"] == corpus and res["n_questions"] == 3
        assert units in (tmp_path / corpus / "longmemeval.md").read_text()
