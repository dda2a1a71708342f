"""LongMemEval at scale: every dev haystack in one memory, as one user would hold a year of conversations, and each
question asked of all of it; by the vector store's search breadth (`ef_search`).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_lme_scale.py --cache LME.npz --workdir /tmp/lme-scale \\
        --breadths 100,200

The per-question benchmark (`memclaw bench longmemeval`, benchmarks/lab/excerpt_lab.py) gives each question its own
haystack of ~50 sessions, a few thousand vectors, where the approximate vector index is as good as exact. Here the
distinct sessions of all the dev questions' haystacks (9,385 sessions, 97k turns) are archived into one workspace
through memclaw's writer, in date order, and indexed once (document vectors from `--cache` when it holds them). Each
question is then recalled over the whole archive with its own date as now and its answer turns credited as in
the per-question benchmark (a served turn earns its session only when it is a `has_answer` turn of that question's
data): recall_any / recall_all within 128 / 256 / 512 / 1024 tokens of the memory section, and the warm recall
time. Chroma reads the breadth when it loads the collection's graph, so each breadth is queried by a fresh process
(`--child`). `--ranks`: instead, where each question's first answer turn ranks for BM25 alone and the vector alone
(`bm25-raw`, `vector-raw`, their first `--depth`) and for the hybrid (its first 120), at the store's breadth.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

BUDGETS = (128, 256, 512, 1024)
RANK_DEPTHS = (10, 40, 100, 200, 500, 1000)
HYBRID_DEPTH = 120


def questions(data: Path) -> list[Any]:
    from memclaw.bench.longmemeval import convert_question, load_longmemeval

    return [q for q in map(convert_question, load_longmemeval(data)) if q is not None]


def answer_turns(q: Any) -> set[str]:
    """The coverage items (`session|turn`) of the question's answer turns: the `has_answer` turns of its answer
    sessions."""
    return {f"{s.session_id}|{i}" for s in q.sessions if s.session_id in q.relevant
            for i, (_r, _t, a) in enumerate(s.turns) if a}  # fmt: skip


def query_config() -> Any:
    """The benchmark's configuration for querying the built store (no sync: the Markdown is not read again)."""
    from memclaw.bench.run_config import bench_config

    cfg = bench_config()
    return cfg.model_copy(update={"memory": cfg.memory.model_copy(update={"auto_sync": False})})


def build(root: Path, qs: list[Any], embedder: Any) -> dict[str, Any]:
    """The one workspace (written and synced once; kept for later runs)."""
    from memclaw.bench.locomo import coverage_path
    from memclaw.bench.record import BenchSession, bench_cid, write_sessions
    from memclaw.bench.run_config import BENCH_AGENT, bench_config
    from memclaw.markdown.archive import ArchivedTurn
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    info: dict[str, Any] = {}
    if not coverage_path(root).exists():
        first: dict[str, Any] = {}
        for q in qs:
            for s in q.sessions:
                first.setdefault(s.session_id, s)
        sessions, entries = [], []
        for s in sorted(first.values(), key=lambda s: (s.when, s.session_id)):
            b = BenchSession(s.session_id, s.when, cid=bench_cid("longmemeval-scale", s.session_id))
            b.turns = tuple(
                ArchivedTurn(BENCH_AGENT if role == "assistant" else role, text, s.when.time())
                for role, text, _a in s.turns
            )
            sessions.append(b)
            entries += [{"kind": "archive", "cid": b.cid, "turn": i, "covers": [f"{s.session_id}|{i}"]}
                        for i in range(len(s.turns))]  # fmt: skip
        t = time.perf_counter()
        write_sessions(root, sessions)
        info["write_s"] = round(time.perf_counter() - t, 1)
        coverage_path(root).write_text(json.dumps({"corpus": "archive", "units": entries}), "utf-8")
    svc = MemoryService(Workspace(root), bench_config(), embedder=embedder)
    t = time.perf_counter()
    svc.sync()
    info["sync_s"] = round(time.perf_counter() - t, 1)
    owner = svc.scopes.get("owner")
    info["units"] = len(owner.state.units) if owner else 0
    svc.close()
    return info


def child(root: Path, data: Path, as_of: bool = False) -> None:
    """Recall every question over the one workspace; print per-question any / all per budget and times (JSON)."""
    from memclaw.bench.corpus import load_corpus
    from memclaw.bench.locomo import coverage_path
    from memclaw.context.memory_section import fill_hits
    from memclaw.embedding.load import load_embedder
    from memclaw.llm.tokens import counter_for
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    cfg = query_config()
    count = counter_for(cfg.agent.model)
    cover = load_corpus(root, coverage_path(root)).cover
    svc = MemoryService(Workspace(root), cfg, embedder=load_embedder(cfg.embeddings))
    qs = questions(data)
    for q in qs[:5]:  # warm-up
        svc.recall_detailed(q.question, k=cfg.context.recall_k)
    out: dict[str, Any] = {}
    for q in qs:
        answer = answer_turns(q)
        relevant = set(q.relevant)
        now = q.question_date
        t = time.perf_counter()
        res = svc.recall_detailed(q.question, k=cfg.context.recall_k * (3 if as_of else 1), now=now)
        ms = (time.perf_counter() - t) * 1000
        if as_of and now is not None:  # the memory as it stood on the question's date (approximately: see --as-of)
            res.hits[:] = [h for h in res.hits if h.unit.timestamp is None or h.unit.timestamp <= now]
            del res.hits[cfg.context.recall_k :]
        rec: dict[str, Any] = {"type": q.question_type, "ms": ms, "any": [], "all": [], "tokens": []}
        for b in BUDGETS:
            f = fill_hits(res.hits, b, count)
            got = {item.split("|")[0] for i in f.kept for uid in f.served(i) for item in cover.get(uid, ())
                   if item in answer}  # fmt: skip
            hit = got & relevant
            rec["any"].append(float(bool(hit)))
            rec["all"].append(float(hit == relevant))
            rec["tokens"].append(f.used)
        out[q.qid] = rec
    svc.close()
    print(json.dumps(out))


def ranks(root: Path, data: Path, depth: int) -> dict[str, Any]:
    """Per question, the rank of the first answer turn (a `has_answer` turn of an answer session) in the first
    `depth` hits of `bm25-raw` and `vector-raw` and the first HYBRID_DEPTH of `hybrid` (None: not there), and the
    share of questions found within each of RANK_DEPTHS."""
    from memclaw.bench.corpus import load_corpus
    from memclaw.bench.locomo import coverage_path
    from memclaw.bench.systems import parse_systems, system_config
    from memclaw.embedding.load import load_embedder
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    base = query_config()
    cover = load_corpus(root, coverage_path(root)).cover
    main = MemoryService(Workspace(root), base, embedder=load_embedder(base.embeddings))
    systems = {s.name: MemoryService(Workspace(root), system_config(base, s), embedder=main.embedder, store=main.store)
               for s in parse_systems("bm25-raw,vector-raw,hybrid")}  # fmt: skip
    per_q: dict[str, Any] = {}
    for q in questions(data):
        answer = answer_turns(q)
        rec: dict[str, Any] = {"type": q.question_type}
        for name, svc in systems.items():
            n = HYBRID_DEPTH if name == "hybrid" else depth
            hits = svc.recall_detailed(q.question, k=n, now=q.question_date).hits
            rec[name] = next((i for i, h in enumerate(hits, 1) if set(cover.get(h.unit.id, ())) & answer), None)
        per_q[q.qid] = rec
    for svc in (*systems.values(), main):
        svc.close()
    found = {name: {str(d): round(sum(1 for r in per_q.values() if r[name] and r[name] <= d) / len(per_q), 3)
                    for d in RANK_DEPTHS if d <= (HYBRID_DEPTH if name == "hybrid" else depth)}
             for name in systems}  # fmt: skip
    return {"depth": depth, "hybrid_depth": HYBRID_DEPTH, "found_within": found, "by_question": per_q}


def summary(per_q: dict[str, Any]) -> dict[str, Any]:
    def mean(xs: list[float]) -> float:
        return round(statistics.fmean(xs), 4) if xs else 0.0

    by_type: dict[str, list[Any]] = defaultdict(list)
    for r in per_q.values():
        by_type[r["type"]].append(r)
    ms = sorted(r["ms"] for r in per_q.values())
    from memclaw.bench.metrics import percentile

    return {
        "n": len(per_q),
        "any": [mean([r["any"][i] for r in per_q.values()]) for i in range(len(BUDGETS))],
        "all": [mean([r["all"][i] for r in per_q.values()]) for i in range(len(BUDGETS))],
        "tokens": [round(statistics.fmean(r["tokens"][i] for r in per_q.values())) for i in range(len(BUDGETS))],
        "recall_ms_p50": round(percentile(ms, 50), 1),
        "recall_ms_p95": round(percentile(ms, 95), 1),
        "by_type": {t: {"n": len(rs), "any": [mean([r["any"][i] for r in rs]) for i in range(len(BUDGETS))],
                        "all": [mean([r["all"][i] for r in rs]) for i in range(len(BUDGETS))]}
                    for t, rs in sorted(by_type.items())},
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("../shared/data/longmemeval/lme-s-dev.json.gz"))
    ap.add_argument("--cache", type=Path)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--breadths", default="100,200")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "lme-scale")
    ap.add_argument(
        "--as-of",
        action="store_true",
        help="leave out of each question's hits the sessions dated after its date (a store could not hold them yet); "
        "they still count in BM25's statistics and the fusion's scale, so this approximates a store as of that date",
    )
    ap.add_argument("--ranks", action="store_true", help="where the answer turns rank (see above), on the built store")
    ap.add_argument("--depth", type=int, default=1000, help="--ranks: how far down each single signal is read")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.data, a.as_of)
    if a.cache is None or a.workdir is None:
        ap.error("--cache and --workdir are required")
    if a.ranks:
        from memclaw.bench.machine import machine_info, revision

        doc = {**ranks(a.workdir / "workspace", a.data, a.depth), "machine": machine_info(), "revision": revision(),
               "date": time.strftime("%Y-%m-%dT%H:%M%z")}  # fmt: skip
        a.out.with_name(a.out.name + "-ranks").with_suffix(".json").write_text(json.dumps(doc, indent=1))
        print(json.dumps(doc["found_within"]))
        return None
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_ann import set_breadth

    from memclaw.bench.embedcache import CachedEmbedder
    from memclaw.bench.machine import machine_info, revision
    from memclaw.bench.run_config import bench_config
    from memclaw.embedding.load import load_embedder

    root = a.workdir / "workspace"
    embedder = CachedEmbedder(load_embedder(bench_config().embeddings), a.cache)
    info = build(root, questions(a.data), embedder)
    embedder.save()
    print(json.dumps(info), flush=True)
    runs: dict[str, Any] = {}
    for ef in (int(b) for b in a.breadths.split(",")):
        set_breadth(root / ".memclaw-index" / "chroma", ef)
        res = subprocess.run(
            [sys.executable, __file__, "--data", str(a.data), "--child", str(root), *(["--as-of"] if a.as_of else [])],
            capture_output=True, text=True, check=True, env={**os.environ},
        )  # fmt: skip
        per_q = json.loads(res.stdout.strip().splitlines()[-1])
        runs[str(ef)] = {"summary": summary(per_q), "by_question": per_q}
        print(ef, json.dumps(runs[str(ef)]["summary"]), flush=True)
    doc = {"build": info, "runs": runs, "as_of": a.as_of, "machine": machine_info(), "revision": revision(),
           "date": time.strftime("%Y-%m-%dT%H:%M%z")}  # fmt: skip
    a.out.with_suffix(".json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
