"""Where hybrid loses in one memory: every asked question's answer-turn ranks in the fused order, and its scores.

    python benchmarks/lab/one_memory_ranks.py --workdir W --embed-cache C.npz --out RUN.json \
        [--pool 30] [--questions 120] [--protocol default|raw] [--systems hybrid]

The store is `memclaw bench longmemeval --one-memory`'s (memclaw.bench.one_memory), with one change that makes it
affordable on a shared 2-core machine: the filler is every distinct haystack session of the file's first `--pool`
questions (the sessions a per-question archive run has already embedded, so an embedding cache holds them), plus
the answer sessions of the `--questions` asked (a seeded sample of the whole file). The protocol, the scoring and
the systems are the product's. A later run with the same workdir queries the same index, so two settings of a
ranking value (`--variant candidates=400`: a user key or a tuning value of the preset) differ by the ranking alone.

Each question's row: id, type, the split half (`halves`), the ranks of its
answer turns (credited `has_answer` turns) in a list of `--rank-k` ranked units, and the budget recalls of the
product's scoring, which ranks `fill_k` units as the bench does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = next((p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()), ROOT.parent)
LME = DATA / "longmemeval" / "lme-s-dev.json.gz"


def halves(rows: list[dict]) -> None:
    """Each row's split half, chosen before any result was seen, as the fusion lab chooses them
    (benchmarks/lab/fusion_lab.py): within a question type, by the sha1 of the question id, alternating."""
    by_type: dict[str, list[dict]] = {}
    for r in rows:
        by_type.setdefault(r["type"], []).append(r)
    for group in by_type.values():
        group.sort(key=lambda r: hashlib.sha1(r["qid"].encode()).hexdigest())
        for i, r in enumerate(group):
            r["half"] = "AB"[i % 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=LME)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--embed-cache", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--pool", type=int, default=30, help="filler: the haystacks of the file's first N questions")
    ap.add_argument("--questions", type=int, default=120, help="a seeded sample of N questions asked")
    ap.add_argument("--protocol", default="default")
    ap.add_argument("--systems", default="hybrid")
    ap.add_argument("--variant", action="append", default=[], help="recall settings key=value,...: one run each")
    ap.add_argument("--skip-base", action="store_true", help="with --variant: no run of the default settings")
    ap.add_argument("--rank-k", type=int, default=300, help="units ranked for the rank table (0: the scored list)")
    a = ap.parse_args()

    import memclaw.bench.one_memory as OM
    from memclaw.bench import metrics as M
    from memclaw.bench.embedcache import CachedEmbedder
    from memclaw.bench.longmemeval import haystack, load_longmemeval
    from memclaw.bench.run_config import bench_config
    from memclaw.bench.systems import parse_systems
    from memclaw.config.presets import TUNING_KEYS
    from memclaw.embedding.load import load_embedder

    raw = load_longmemeval(a.data)
    pool = {s.session_id for rq in raw[: a.pool] for s in haystack(rq)[0]}
    plain_filler = OM.lme_filler

    def filler(raw_, cap=None, seed=OM.SEED, asked=None):
        f = plain_filler(raw_, None, seed, asked)
        answers = {sid for q, ids in f.answers_of.items() if asked is None or q in asked for sid in ids}
        f.sessions = [s for s in f.sessions if s.session_id in pool or s.session_id in answers]
        return f

    OM.lme_filler = filler
    rows: list[dict] = []
    current: dict = {}
    plain_ask = OM.OneMemory.ask

    def ask(self, spec, query, k, *, now, as_of, exclude):
        # The rank table's longer list first, then the bench's own call, whose list is scored
        asked = as_of is not None or bool(exclude) or now is not None
        if asked and a.rank_k > k:
            long, _ = plain_ask(self, spec, query, a.rank_k, now=now, as_of=as_of, exclude=exclude)
            current["long"] = [r[0] for r in long]
        got = plain_ask(self, spec, query, k, now=now, as_of=as_of, exclude=exclude)
        if asked and a.rank_k <= k:
            current["long"] = [r[0] for r in got[0]]
        return got

    OM.OneMemory.ask = ask
    import memclaw.bench.longmemeval as L

    convert = L.convert_question
    order: list = []

    def convert_q(rq):
        q = convert(rq)
        if q is not None:
            order.append(q)
        return q

    L.convert_question = convert_q
    plain_score = M.score_lme

    def score(ranked, cover, answer_sessions, **kw):
        s = plain_score(ranked, cover, answer_sessions, **kw)
        q = order[len(rows)]
        credit = kw.get("credit") or cover
        ans = frozenset(answer_sessions)
        ranks = [i + 1 for i, u in enumerate(current.get("long", ())) if credit.get(u, frozenset()) & ans]
        sess = {}
        for i, u in enumerate(current.get("long", ())):
            for sid in credit.get(u, frozenset()) & ans:
                sess.setdefault(sid, i + 1)
        rows.append({
            "qid": q.qid, "type": q.question_type, "n_answer_sessions": len(ans),
            "answer_turn_ranks": ranks, "first_rank_per_session": sess,
            "any": {str(b): v for b, v in s.budget_any.items()}, "all": {str(b): v for b, v in s.budget_all.items()},
            "ms": round(s.latency_ms, 1),
        })  # fmt: skip
        return s

    M.score_lme = score
    emb = None
    specs = parse_systems(a.systems)
    if len(specs) != 1:
        sys.exit("one system per run: the rank table follows one ranked list per question")
    for name, overrides in [("", {}), *map(variant, a.variant)]:
        plain_base = bench_config()
        keys = {k: v for k, v in overrides.items() if k not in TUNING_KEYS}
        recall = type(plain_base.recall).model_validate({**plain_base.recall.model_dump(), **keys})
        recall = recall.with_tuning(**{k: v for k, v in overrides.items() if k in TUNING_KEYS})
        base = plain_base.model_copy(update={"recall": recall})
        emb = emb or CachedEmbedder(load_embedder(base.embeddings), a.embed_cache)
        if name == "" and a.variant and a.skip_base:
            continue
        rows.clear()
        order.clear()
        t = time.time()
        res = OM.run_lme_one_memory(
            a.data, specs, protocol=a.protocol, questions=a.questions, embedder=emb, base=base, workdir=a.workdir,
            progress=False, cold=False,
        )  # fmt: skip
        emb.save()
        halves(rows)
        out = {
            "seconds": round(time.time() - t, 1),
            "recall": overrides,
            "n_sessions": res["n_sessions"],
            "cost": res["one_memory"]["cost"],
            "systems": {
                k: {m: v for m, v in s.items() if "@" in m and m.endswith("t")} for k, s in res["systems"].items()
            },  # fmt: skip
            "rows": rows,
        }
        path = a.out if not name else a.out.with_name(f"{a.out.stem}-{name}{a.out.suffix}")
        path.write_text(json.dumps(out, indent=1))
        print(path, json.dumps({k: v for k, v in out.items() if k != "rows"}), file=sys.stderr)


def variant(spec: str) -> tuple[str, dict[str, object]]:
    """`key=value,key=value` -> (a file-name tag, the recall settings it overrides)."""
    pairs = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in spec.split(","))}
    return "-".join(f"{k}{v}" for k, v in pairs.items()), pairs


if __name__ == "__main__":
    main()
