"""The LoCoMo run loop: every system over every converted conversation through memclaw's real path.

Per corpus (one LoCoMo conversation, or one LongMemEval question): the converter writes a real workspace in a
temp dir, a MemoryService (real model, real Chroma under the temp dir, real BM25) syncs it ONCE, and every
memclaw system recalls from that same index with its own recall overrides. Latency is measured per query
around the system's call (for memclaw systems: `recall_detailed`, query embedding included).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memclaw.bench import metrics as M
from memclaw.bench.machine import sha256_file
from memclaw.bench.prepared import prepare_corpus
from memclaw.bench.progress import Progress
from memclaw.bench.rankings import ranking_record
from memclaw.bench.record import DiskUse
from memclaw.bench.report import run_provenance
from memclaw.bench.run_config import K_MAX, bench_config, fill_k, load_embedder_once
from memclaw.bench.signal_view import run_paired
from memclaw.bench.systems import SystemSpec
from memclaw.bench.workspaces import bench_workspace

if TYPE_CHECKING:
    from memclaw.bench.locomo import LocomoData
    from memclaw.config import Config
    from memclaw.embedding.base import Embedder


def run_locomo(
    data: LocomoData,
    specs: Sequence[SystemSpec],
    *,
    corpus: str = "all",
    limit_conversations: int | None = None,
    limit_questions: int | None = None,
    progress: bool = True,
    embedder: Embedder | None = None,
    base: Config | None = None,
    details: bool = False,
    rankings: bool = False,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Run `specs` over the LoCoMo conversations (one workspace each) and return the results dict
    (the issue's JSON shape plus provenance keys). `limit_questions` caps the questions per run, in file order.
    `details` adds `questions`: per question and system, the ranked units (id, kind, text head) and scores.
    `rankings` adds `rankings`: per question and system, every ranked id and what each budget kept. `workdir`
    keeps each conversation's workspace and index there and reuses them on a later run (see bench_workspace)."""
    from memclaw.bench.locomo import coverage_path, write_conversation

    base = base or bench_config()
    convs = data.conversations[:limit_conversations] if limit_conversations else list(data.conversations)
    budget = limit_questions
    plan: list[tuple[Any, list[Any]]] = []
    for c in convs:
        qs = c.questions if budget is None else c.questions[: max(0, budget)]
        if budget is not None:
            budget -= len(qs)
        if qs:
            plan.append((c, qs))
    n_q = sum(len(qs) for _c, qs in plan)
    embedder = embedder or load_embedder_once(base, specs)
    scores: dict[str, list[M.QuestionScore]] = {s.name: [] for s in specs}
    per_question: list[dict[str, Any]] = []
    ranked_by_q: dict[str, dict[str, Any]] = {}
    unit_counts = {"fact": 0, "history": 0, "archive": 0}
    unmatched = 0
    disk = DiskUse()
    index_s = 0.0
    started = time.time()
    with Progress(progress) as prog:
        advance = prog.task(f"LoCoMo {corpus}", n_q * len(specs))
        for conv, qs in plan:
            advance(0, description=f"LoCoMo {corpus}: indexing {conv.sample_id}")
            with bench_workspace("memclaw-locomo-", workdir, f"locomo-{corpus}-{conv.sample_id}") as (root, reused):
                if not reused:
                    write_conversation(conv, root, corpus)  # type: ignore[arg-type]
                prep = prepare_corpus(
                    root, coverage_path(root), specs, base, embedder, now=conv.last_date.replace(hour=23, minute=59)
                )
                try:
                    index_s += prep.index_seconds
                    disk.add(root, prep)
                    unmatched += len(prep.corpus.unmatched)
                    for u in prep.corpus.units:
                        unit_counts[u.kind] += 1
                    cover = prep.corpus.cover
                    advance(0, description=f"LoCoMo {corpus}: {conv.sample_id}")
                    by_id = prep.corpus.by_id
                    for q in qs:
                        relevant = M.relevant_units(cover, q.evidence)
                        row: dict[str, Any] = {"qid": q.qid, "category": q.category, "question": q.question,
                                               "evidence": list(q.evidence), "systems": {}}  # fmt: skip
                        for spec in specs:
                            ranked, view, ms = prep.run(spec.name, q.question, fill_k(base))
                            sc = M.score_question(
                                ranked,
                                cover,
                                q.evidence,
                                category=q.category,
                                latency_ms=ms,
                                relevant=relevant,
                                budgeted=view,
                                credit=prep.corpus.credit,
                            )
                            scores[spec.name].append(sc)
                            if rankings:
                                ranked_by_q.setdefault(f"{conv.sample_id}/{q.qid}", {})[spec.name] = ranking_record(
                                    ranked, view
                                )
                            if details:
                                row["systems"][spec.name] = {
                                    "recall@5": sc.recall[5],
                                    "recall@10": sc.recall[10],
                                    "budget": {f"recall@{b}t": round(r, 4) for b, r in sc.budget.items()},
                                    "rr": round(sc.rr, 4),
                                    "top": [
                                        _unit_brief(by_id.get(u), cover.get(u, frozenset()), q.evidence)
                                        for u in ranked[:10]
                                    ],  # fmt: skip
                                }
                            advance()
                        if details:
                            per_question.append(row)
                finally:
                    prep.close()
    return {
        "dataset": "locomo",
        "data_file": str(data.path),
        "data_sha256": sha256_file(data.path),
        "corpus": corpus,
        "n_questions": n_q,
        "n_conversations": len(plan),
        "n_qa_total": data.n_qa_total,
        "n_eligible": data.n_eligible,
        "questions_by_category": dict(sorted(_count(q.category for _c, qs in plan for q in qs).items())),
        "categories": {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"},
        "units": unit_counts,
        "units_without_coverage": unmatched,
        "disk": disk.report(),
        "evidence_anomalies": data.anomalies,
        "k_max": K_MAX,
        "k_ranked": fill_k(base),
        **run_provenance(base, index_s, started),
        "systems": {s.name: {**M.summarize(scores[s.name]), "description": s.description} for s in specs},
        "paired": run_paired(scores, group=lambda sc: sc.category, values=M.question_values),
        **({"questions": per_question} if details else {}),
        **({"rankings": ranked_by_q} if rankings else {}),
    }


def _unit_brief(u: Any, cover: frozenset[str], evidence: Sequence[str]) -> dict[str, Any]:
    if u is None:
        return {"id": None}
    return {
        "id": u.id,
        "kind": u.kind,
        "relevant": bool(cover & set(evidence)),
        "text": u.text[:100],
    }


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return out
