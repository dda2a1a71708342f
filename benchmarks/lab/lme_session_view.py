"""The session-level count view of a finished LongMemEval `archive` run, from its rankings and its kept workspaces.

`memclaw bench longmemeval` reports `sessions_any/all@k` (sessions ranked by their best turn,
`memclaw.bench.metrics.items_in_order`) since 2026-11-27; a run made before that holds only the turn view. This
recomputes the session view for such a run, with the same scoring function, from `longmemeval-rankings.json.gz`
(`--rankings`) and the workspaces the run kept (`--workdir`, each `lme-archive-<qid>` with its side file): a
ranked turn id is mapped to its session by the same parser the run scored with.

    PYTHONPATH=. .venv/bin/python benchmarks/lab/lme_session_view.py \
        --data ../shared/data/longmemeval/lme-s-dev.json.gz --workdir /tmp/wd-lme \
        --rankings benchmarks/results/longmemeval-dev-archive/longmemeval-rankings.json.gz \
        --out benchmarks/results/longmemeval-dev-archive/sessions.json
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

from memclaw.bench import metrics as M
from memclaw.bench.corpus import load_corpus
from memclaw.bench.longmemeval import SESSION_KEYS, iter_questions, load_longmemeval


def session_view(data: Path, workdir: Path, rankings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """{system: summarize_lme over the run's questions} with the session keys (and the turn keys, to check them
    against the run's own figures)."""
    questions = {q.qid: q for q in iter_questions(load_longmemeval(data)) if q is not None}
    scores: dict[str, list[M.LMEScore]] = {}
    for qid, per_system in rankings.items():
        q = questions[qid]
        root = workdir / f"lme-archive-{qid}"
        corpus = load_corpus(root / "ws", root / "ws.coverage.json")
        for name, rec in per_system.items():
            s = M.score_lme(rec["ranked"], corpus.cover, q.relevant, question_type=q.question_type, latency_ms=0.0)
            scores.setdefault(name, []).append(s)
    return {name: M.summarize_lme(s) for name, s in scores.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--rankings", type=Path, required=True)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    view = session_view(a.data, a.workdir, json.loads(gzip.decompress(a.rankings.read_bytes())))
    keys = ("recall_any@5", "recall_all@5", *SESSION_KEYS)
    print("| system | type | n | " + " | ".join(keys) + " |")
    print("|---|---|---|" + "---|" * len(keys))
    for name, s in view.items():
        for t, m in [("all", s), *sorted(s["by_question_type"].items())]:
            print(f"| {name} | {t} | {m['n']} | " + " | ".join(f"{m[k]:.3f}" for k in keys) + " |")
    if a.out:
        a.out.write_text(json.dumps({"rankings": str(a.rankings), "systems": view}, indent=2) + "\n", "utf-8")


if __name__ == "__main__":
    main()
