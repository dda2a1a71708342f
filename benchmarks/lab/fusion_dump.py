"""The fusion lab's signal dump: memclaw's own per-query signals on the development sets, written once, so that
fusion rules can be replayed offline (benchmarks/lab/fusion_lab.py).

    .venv/bin/python benchmarks/lab/fusion_dump.py lme --out DUMPS/lme.json.gz \
        --embed-cache DUMPS/lme-dev.npz
    .venv/bin/python benchmarks/lab/fusion_dump.py locomo --corpus all --out DUMPS/locomo-all.json.gz

Each corpus (a LongMemEval question's haystack, a LoCoMo conversation) is written by memclaw's own bench
converter, parsed and synced by `MemoryService` onto an exact vector store (`fusion_exact.ExactStore`: cosine over
every vector, reproducible), and every question of it is asked. Dumped per corpus: the units (id, kind, stamp, a
key of the text that recall dedupes on, whether the unit is long, what it costs in the memory section), the
session links, the evidence each unit covers; per question: every positive BM25 hit of the query's tokens with
the number of distinct query terms it matched and the query's BM25 upper bound, the cosine of every stored vector,
the date ranges the query names, the same signals for the query without its date words, and what memclaw's
recall answered (its top 40), so that a replay of today's rule can be checked against the real pipeline.
No data is written into the repository: `--out` is a scratch file.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fusion_exact import ExactStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LME = ROOT.parent / "shared" / "data" / "longmemeval" / "lme-s-dev.json.gz"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
K_REAL = 40


def text_key(text: str) -> str:
    """What recall dedupes hits on (one hit per text), hashed."""
    return hashlib.sha1(" ".join(text.lower().split()).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def strip_dates(query: str, ranges) -> str:
    """The query without the words that named its dates."""
    for r in ranges:
        query = query.replace(r.text, " ", 1)
    return " ".join(query.split())


class Dumper:
    def __init__(self, embedder) -> None:
        from memclaw.bench.run_config import bench_config
        from memclaw.llm.tokens import counter_for

        self.cfg = bench_config()
        self.embedder = embedder
        self.count = counter_for(self.cfg.agent.model)

    def corpus(self, root: Path, write, questions, now_of) -> dict:
        """`write(root)` writes the workspace and its side file; `questions`: (qid, group, text, relevant)."""
        from memclaw.bench.corpus import load_corpus
        from memclaw.bench.locomo import coverage_path
        from memclaw.context.memory_section import candidates
        from memclaw.index.passages import is_long
        from memclaw.markdown.formats import NAMED_DAY_KINDS
        from memclaw.service.facade import MemoryService
        from memclaw.workspace import Workspace

        (root / "memory").mkdir(parents=True, exist_ok=True)
        first = MemoryService(Workspace(root), self.cfg, embedder=self.embedder)
        first.sync()  # an empty index with its manifest; then the exact store holds every vector
        first.close()
        write(root)
        corpus = load_corpus(root, coverage_path(root))
        store = ExactStore()
        svc = MemoryService(Workspace(root), self.cfg, embedder=self.embedder, store=store)
        svc.sync()
        assert svc.store is store and store.count("owner") >= len(corpus.units)
        sc = svc.scopes.get("owner")
        units = sc.state.units
        items = {c.id: c for c in candidates(corpus.units, self.count)}
        vids, _m = store.matrix("owner")
        out = {
            "units": [
                {
                    "id": u.id,
                    "kind": u.kind,
                    "ts": u.timestamp.isoformat() if u.timestamp else None,
                    "key": text_key(u.text),
                    "long": is_long(u.text),
                    "tokens": items[u.id].tokens,
                    # the text the date lift reads days from (ranking.stamp_in), where it can name one
                    "named": u.text if u.kind in NAMED_DAY_KINDS else None,
                }
                for u in (units[i] for i in units.ids)
            ],
            "links": {k: list(v) for k, v in sc.state.links.items()},
            "cover": {k: sorted(v) for k, v in corpus.cover.items()},
            "vector_ids": vids,
            "questions": [],
        }
        toks = {i: set(svc.tokenizer.tokenize(units[i].text)) for i in units.ids}
        for qid, group, text, relevant in questions:
            now = now_of(qid)
            out["questions"].append(self.question(svc, store, sc, toks, qid, group, text, relevant, now))
        svc.close()
        return out

    def signals(self, svc, store, sc, toks, text: str) -> dict:
        from memclaw.embedding.load import encode_query

        tokens = svc.tokenizer.tokenize(text)
        qset = set(tokens)
        bm = list(sc.lexical.search(tokens, len(sc.state.units))) if tokens else []
        qv = encode_query(self.embedder, text)
        _ids, sims = store.similarities("owner", qv)
        return {
            "bm25": [[i, s, len(qset & toks[i])] for i, s in bm],
            "bm25_max": sc.lexical.max_score(tokens) if tokens else 0.0,
            "n_terms": len(qset),
            "sims": [float(x) for x in sims],
        }

    def question(self, svc, store, sc, toks, qid, group, text, relevant, now) -> dict:
        from memclaw.recall.dates import find_date_ranges

        ranges = find_date_ranges(text, now)
        q = {"qid": qid, "group": group, "text": text, "now": now.isoformat(), "relevant": sorted(relevant)}
        q["ranges"] = [[r.start.isoformat(), r.end.isoformat(), r.text] for r in ranges]
        q.update(self.signals(svc, store, sc, toks, text))
        bare = strip_dates(text, ranges) if ranges else ""
        if bare and svc.tokenizer.tokenize(bare):
            q["nodate"] = {"text": bare, **self.signals(svc, store, sc, toks, bare)}
        res = svc.recall_detailed(text, k=K_REAL, now=now)
        q["real"] = [h.unit.id for h in res.hits]
        return q


def dump_lme(d: Dumper, limit: int | None) -> list[dict]:
    from memclaw.bench.longmemeval import convert_question, load_longmemeval, write_question

    raw = load_longmemeval(LME)
    out = []
    t0 = time.time()
    for n, rq in enumerate(raw[:limit] if limit else raw, 1):
        q = convert_question(rq)
        if q is None:
            continue
        with tempfile.TemporaryDirectory(prefix="fusion-dump-") as tmp:
            c = d.corpus(
                Path(tmp) / "ws",
                lambda root, q=q: write_question(q, root, "history"),  # (the official key: issue 21's lab)
                [(q.qid, q.question_type, q.question, q.relevant)],
                lambda _qid, q=q: q.question_date or datetime.now(),
            )
        c["name"] = q.qid
        out.append(c)
        print(f"{n} {q.qid} {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
        if hasattr(d.embedder, "save") and n % 10 == 0:
            d.embedder.save()
    return out


def dump_locomo(d: Dumper, corpus: str) -> list[dict]:
    from memclaw.bench.locomo import load_locomo, write_conversation

    out = []
    for conv in load_locomo(LOCOMO).conversations:
        now = conv.last_date.replace(hour=23, minute=59)
        with tempfile.TemporaryDirectory(prefix="fusion-dump-") as tmp:
            c = d.corpus(
                Path(tmp) / "ws",
                lambda root, conv=conv: write_conversation(conv, root, corpus),
                [(q.qid, q.category, q.question, q.evidence) for q in conv.questions],
                lambda _qid, now=now: now,
            )
        c["name"] = conv.sample_id
        out.append(c)
        print(conv.sample_id, file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", choices=["lme", "locomo"])
    ap.add_argument("--corpus", default="all", choices=["all", "facts"])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--embed-cache", type=Path)
    ap.add_argument("--limit", type=int)
    a = ap.parse_args()
    from memclaw.bench.run_config import bench_config
    from memclaw.embedding.load import load_embedder

    embedder = load_embedder(bench_config().embeddings)
    if a.embed_cache:
        from memclaw.bench.embedcache import CachedEmbedder

        embedder = CachedEmbedder(embedder, a.embed_cache)
    d = Dumper(embedder)
    try:
        corpora = dump_lme(d, a.limit) if a.dataset == "lme" else dump_locomo(d, a.corpus)
    finally:
        if a.embed_cache:
            embedder.save()
    meta = {"dataset": a.dataset, "corpus": a.corpus, "date": datetime.now().isoformat(timespec="seconds")}
    a.out.write_bytes(gzip.compress(json.dumps({**meta, "corpora": corpora}).encode("utf-8"), mtime=0))
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
