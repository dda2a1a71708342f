"""A plain install has no matplotlib (the optional extra `plots`): a benchmark run still writes its results, and the
plots are skipped with one line on stderr, once per process (no other test runs without matplotlib)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from memclaw.bench.plots import budget_plot, recall_plot

RESULT = {
    "dataset": "locomo",
    "corpus": "all",
    "n_questions": 1,
    "budgets": [128, 256],
    "systems": {"hybrid": {"recall@1": 0.5, "recall@5": 1.0, "recall@128t": 0.5, "recall@256t": 1.0}},
}


def test_without_matplotlib_the_plots_are_skipped_with_one_line(monkeypatch, tmp_path: Path, capsys) -> None:
    # None in sys.modules makes `import matplotlib` raise ImportError, as on a plain install.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    out = tmp_path / "run"
    out.mkdir()
    budget_plot(json.loads(json.dumps(RESULT)), out / "budget.png")
    recall_plot(json.loads(json.dumps(RESULT)), out / "recall.png")
    err = capsys.readouterr().err
    assert err == "plots skipped: matplotlib is not installed (pip install 'memclaw[plots]')\n"
    assert list(out.iterdir()) == []


def test_with_matplotlib_the_plot_is_a_png(tmp_path: Path) -> None:
    budget_plot(json.loads(json.dumps(RESULT)), tmp_path / "budget.png")
    assert (tmp_path / "budget.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
