"""Excerpt lab (issue 22): recall-config variants side by side on the archive corpora, within a memory budget.

The corpora are the benchmark's own (`memclaw bench locomo --corpus sessions|full|all`, `memclaw bench longmemeval
--corpus archive`): written by its converters through memclaw's consolidation writer, scored with the same credit
(memclaw.bench.corpus: an excerpt earns the turns inside it; a fact its evidence turns; a summary every turn of its
session; LongMemEval: a session when a served excerpt holds one of its `has_answer` turns). What the lab adds is
variants: recall-config overrides (`--variants name=key:value,key:value;...`, `fill_*` keys for the fill) recalled
from one index build per corpus with `MemoryService.recall_detailed`, the section filled with
`memclaw.context.memory_section.fill_hits` at 128 / 256 / 512 / 1024 tokens. Corpora: `locomo-sessions`,
`locomo-full`, `locomo-all`, `locomo-facts`, `lme`. `--reach` (LoCoMo) also reports the evidence within reach of the
ranking whatever the fill: in the matched turns of the top K hits and in their windows of +-3 turns, with their cost.

    PYTHONPATH=. .venv/bin/python benchmarks/lab/excerpt_lab.py locomo-sessions \
        --data ../shared/data/locomo/locomo-dev.json --cache /tmp/emb.npz --workdir /tmp/lab \
        --variants 'w01=excerpt_before:0,excerpt_after:1'
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

BUDGETS = (128, 256, 512, 1024)
HALF_A = {"conv-26", "conv-30", "conv-41"}
"""LoCoMo dev's split-half check: tuned on one half, scored on the other (B: conv-42, conv-43)."""


def write_locomo(conv, root: Path, corpus: str) -> dict[str, frozenset[str]]:
    """One conversation as a workspace, written by the benchmark's converter (through memclaw's writer); what each
    unit earns when served (memclaw.bench.corpus: `credit`)."""
    from memclaw.bench.corpus import load_corpus
    from memclaw.bench.locomo import coverage_path, write_conversation

    write_conversation(conv, root, corpus.removeprefix("locomo-"))
    return load_corpus(root, coverage_path(root)).credit


def write_lme(raw: dict[str, Any], root: Path) -> tuple[dict[str, frozenset[str]], set[str]] | None:
    from memclaw.bench.corpus import load_corpus
    from memclaw.bench.locomo import coverage_path
    from memclaw.bench.longmemeval import convert_question, write_question

    q = convert_question(raw)
    if q is None:
        return None
    write_question(q, root, "archive")
    return load_corpus(root, coverage_path(root)).credit, set(q.relevant)


# ----- running ---------------------------------------------------------------------------------------------------
def split_fill(variants: dict[str, dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The recall overrides of each variant, and its `fill_*` options (memclaw.context.memory_section.fill's)."""
    recall = {n: {k: v for k, v in o.items() if not k.startswith("fill_")} for n, o in variants.items()}
    fill = {n: {k[5:]: v for k, v in o.items() if k.startswith("fill_")} for n, o in variants.items()}
    return recall, fill


def services(root: Path, variants: dict[str, dict[str, Any]], embedder) -> tuple[Any, dict[str, Any]]:
    from memclaw.bench.run_config import bench_config
    from memclaw.bench.systems import SystemSpec, system_config
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    base = bench_config()
    ws = Workspace(root)
    main = MemoryService(ws, base, embedder=embedder)
    main.sync()
    out = {
        name: MemoryService(
            ws, system_config(base, SystemSpec(name, "memclaw", name, over)), embedder=embedder, store=main.store
        )  # fmt: skip
        for name, over in variants.items()
    }
    return main, out


def served_covers(svc, query: str, cover, now, count, fill_opts) -> dict[int, tuple[set[str], int]]:
    from memclaw.context.memory_section import fill_hits

    res = svc.recall_detailed(query, k=svc.config.context.recall_k, now=now)
    out = {}
    for b in BUDGETS:
        f = fill_hits(res.hits, b, count, **fill_opts)  # (fill_* options of a variant, when fill_hits has any)
        got: set[str] = set()
        for i in f.kept:
            for uid in f.served(i):
                got |= cover.get(uid, frozenset())
        out[b] = (got, f.used)
    return out


REACH_K = (10, 20, 40)
REACH = {"excerpt_before": 3, "excerpt_after": 3, "excerpt_wide": 200}
"""`--reach`: every hit recalled with a window of 3 turns before and after (a wider one than any variant serves)."""


def reach(svc, query: str, cover, now, count) -> dict[str, tuple[set[str], int]]:
    """What the ranking puts within reach, whatever the fill: the evidence in the matched turns of the top K hits, and
    in their windows of +-3 turns, with what serving all of it would cost (each hit its own item)."""
    from memclaw.context.memory_section import candidates

    hits = svc.recall_detailed(query, k=max(REACH_K), now=now).hits
    alone = candidates([h.unit for h in hits], count)
    wide = candidates([h.unit for h in hits], count, windows={h.unit.id: h.excerpt for h in hits})
    out = {}
    for k in REACH_K:
        for name, cands in (("matched", alone), ("window3", wide)):
            got: set[str] = set()
            for c in cands[:k]:
                for uid in c.serves:
                    got |= cover.get(uid, frozenset())
            out[f"{name}@{k}"] = (got, sum(c.tokens for c in cands[:k]))
    return out


def run_locomo(args, variants, embedder, count) -> dict[str, Any]:
    from memclaw.bench.locomo import load_locomo

    data = load_locomo(Path(args.data))
    variants, fill_opts = split_fill(variants)
    scores: dict[str, dict[int, list[float]]] = {v: defaultdict(list) for v in variants}
    used: dict[str, dict[int, list[int]]] = {v: defaultdict(list) for v in variants}
    by_conv: dict[str, dict[str, dict[int, list[float]]]] = {
        v: defaultdict(lambda: defaultdict(list)) for v in variants
    }
    by_cat: dict[str, dict[str, dict[int, list[float]]]] = {v: defaultdict(lambda: defaultdict(list)) for v in variants}
    reached: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for conv in data.conversations:
        root = Path(args.workdir) / f"{args.corpus}-{conv.sample_id}"
        shutil.rmtree(root, ignore_errors=True)
        cover = write_locomo(conv, root, args.corpus)
        main, svcs = services(root, variants | ({"_reach": REACH} if args.reach else {}), embedder)
        reach_svc = svcs.pop("_reach", None)
        for q in conv.questions:
            ev = set(q.evidence)
            if reach_svc is not None:
                for key, (got, n) in reach(reach_svc, q.question, cover, conv.last_date, count).items():
                    half = "A" if conv.sample_id in HALF_A else "B"
                    for part in (half, "all"):
                        reached[part][key].append(len(ev & got) / len(ev))
                        reached[part][f"tok {key}"].append(n)
            for name, svc in svcs.items():
                for b, (got, n) in served_covers(
                    svc, q.question, cover, conv.last_date, count, fill_opts[name]
                ).items():
                    scores[name][b].append(len(ev & got) / len(ev))
                    by_conv[name][conv.sample_id][b].append(len(ev & got) / len(ev))
                    by_cat[name][q.category][b].append(len(ev & got) / len(ev))
                    used[name][b].append(n)
        for s in [main, reach_svc, *svcs.values()]:
            if s is not None:
                s.close()
        print(f"{conv.sample_id}: {len(conv.questions)} questions", file=sys.stderr, flush=True)
    return {v: {f"R@{b}t": mean(scores[v][b]) for b in BUDGETS} | {f"used@{b}t": mean(used[v][b]) for b in BUDGETS}
            | {"n": len(scores[v][BUDGETS[0]])}
            | {"by_conversation": {c: [mean(x[b]) for b in BUDGETS] for c, x in sorted(by_conv[v].items())},
               "by_category": {c: [mean(x[b]) for b in BUDGETS] for c, x in sorted(by_cat[v].items())},
               "by_conversation_n": {c: len(x[BUDGETS[0]]) for c, x in sorted(by_conv[v].items())},
               "per_question": {str(b): scores[v][b] for b in BUDGETS}}
            for v in variants} | ({"reach": {p: {k: mean(x) for k, x in r.items()} for p, r in sorted(reached.items())}}
                                  if reached else {})  # fmt: skip


def run_lme(args, variants, embedder, count) -> dict[str, Any]:
    from memclaw.bench.longmemeval import load_longmemeval, parse_lme_date

    raw = load_longmemeval(Path(args.data))
    variants, fill_opts = split_fill(variants)
    raw = raw[: args.limit] if args.limit else raw
    any_: dict[str, dict[int, list[float]]] = {v: defaultdict(list) for v in variants}
    all_: dict[str, dict[int, list[float]]] = {v: defaultdict(list) for v in variants}
    by_type: dict[str, dict[str, list[float]]] = {v: defaultdict(list) for v in variants}
    by_q: dict[str, dict[str, dict[str, Any]]] = {v: {} for v in variants}  # the split-half check reads it
    t0 = time.time()
    for n, rq in enumerate(raw, 1):
        root = Path(args.workdir) / f"lme-{rq['question_id']}"
        shutil.rmtree(root, ignore_errors=True)
        made = write_lme(rq, root)
        if made is None:
            continue
        cover, relevant = made
        main, svcs = services(root, variants, embedder)
        now = parse_lme_date(rq["question_date"]) if rq.get("question_date") else None
        qid, qtype = str(rq["question_id"]), str(rq.get("question_type"))
        for name, svc in svcs.items():
            rec = by_q[name][qid] = {"type": qtype, "any": [], "all": [], "tokens": []}
            for b, (got, used) in served_covers(svc, str(rq["question"]), cover, now, count, fill_opts[name]).items():
                hit = got & relevant
                rec["any"].append(float(bool(hit)))
                rec["all"].append(float(hit == relevant))
                rec["tokens"].append(used)
                any_[name][b].append(float(bool(hit)))
                all_[name][b].append(float(hit == relevant))
                if b == 1024:
                    by_type[name][qtype].append(float(hit == relevant))
        for s in [main, *svcs.values()]:
            s.close()
        shutil.rmtree(root, ignore_errors=True)
        print(f"{n}/{len(raw)} {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    return {
        v: {f"any@{b}t": mean(any_[v][b]) for b in BUDGETS} | {f"all@{b}t": mean(all_[v][b]) for b in BUDGETS}
        | {"n": len(any_[v][BUDGETS[0]]), "all@1024t_by_type": {t: mean(x) for t, x in sorted(by_type[v].items())},
           "by_question": by_q[v]}
        for v in variants
    }  # fmt: skip


def mean(xs) -> float:
    return round(sum(xs) / len(xs), 4) if xs else 0.0


def parse_variants(spec: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {"default": {}}
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        name, _, kvs = part.partition("=")
        over = {}
        for kv in filter(None, kvs.split(",")):
            k, _, v = kv.partition(":")
            over[k] = json.loads(v)
        out[name] = over
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", choices=["locomo-sessions", "locomo-full", "locomo-all", "locomo-facts", "lme"])
    ap.add_argument("--data", required=True)
    ap.add_argument("--cache", help="embedding cache (memclaw.bench.embedcache)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--variants", default="")
    ap.add_argument("--out")
    ap.add_argument("--reach", action="store_true", help="also report what the ranking puts within reach (LoCoMo)")
    args = ap.parse_args()
    from memclaw.bench.run_config import bench_config
    from memclaw.embedding.load import load_embedder
    from memclaw.llm.tokens import counter_for

    base = bench_config()
    embedder = load_embedder(base.embeddings)
    if args.cache:
        from memclaw.bench.embedcache import CachedEmbedder

        embedder = CachedEmbedder(embedder, Path(args.cache))
    count = counter_for(base.agent.model)
    variants = parse_variants(args.variants)
    t0 = time.time()
    res = (run_lme if args.corpus == "lme" else run_locomo)(args, variants, embedder, count)
    if hasattr(embedder, "save"):
        embedder.save()
    # bench_archive_perf is a benchmark one folder up.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench_archive_perf import revision

    from memclaw.bench.machine import machine_info, sha256_file

    report = {"corpus": args.corpus, "data": args.data, "data_sha256": sha256_file(Path(args.data)),
              "limit": args.limit, "variants": variants, "results": res, "seconds": round(time.time() - t0),
              "date": datetime.now().astimezone().isoformat(timespec="minutes"), "machine": machine_info(),
              "revision": revision()}  # fmt: skip
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n", "utf-8")


if __name__ == "__main__":
    main()
