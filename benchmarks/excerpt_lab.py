"""Excerpt lab (issue 22): recall within a memory budget when raw conversation is memory, through the archive.

Builds archive corpora from the benchmark data the way memclaw's archive holds a conversation (one chunk per
session in the day file of its date, one bullet per turn; memclaw.markdown.archive), syncs them with memclaw,
recalls every question with `MemoryService.recall_detailed` and fills the memory section with
`memclaw.context.memory_section.fill_hits` at 128 / 256 / 512 / 1024 tokens, crediting **only the turns each kept
item serves** (an excerpt: the turns inside it; a fact: its evidence turns; a summary: every turn of its session).

Corpora:
* `locomo-sessions`: LoCoMo's raw sessions as archived turns (no facts, no summaries);
* `locomo-full`: LoCoMo's facts (learned-marks with the session's consolidation id), summaries (HISTORY entries
  stamped with it) and the archive: what memclaw holds after consolidating those conversations;
* `locomo-all`: today's `all` corpus (facts dated by hand, summaries, no ids, no archive), for reference;
* `lme`: LongMemEval sessions as archived turns (user and assistant), one workspace per question; a session is
  credited when a served excerpt holds one of its `has_answer` turns.

Variants are recall-config overrides (`--variants name=key:value,key:value;...`). This is a lab: the product's
benchmarks (`memclaw bench`) gain archive corpora once the converters write through memclaw's writer.

    PYTHONPATH=. .venv/bin/python benchmarks/excerpt_lab.py locomo-sessions \
        --data ../shared/data/locomo/locomo-dev.json --cache /tmp/emb.npz --workdir /tmp/lab \
        --variants 'w01=excerpt_before:0,excerpt_after:1'
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from memclaw.markdown.archive import ArchiveChunk, ArchiveDay, ArchivedTurn, consolidation_id, parse_day, render_day
from memclaw.markdown.formats import fact_mark, format_history_entry

BUDGETS = (128, 256, 512, 1024)


def cid_of(*parts: str) -> str:
    return consolidation_id(hashlib.sha1("\x00".join(parts).encode()).hexdigest())


def write_archive(mem: Path, chunks: list[tuple[ArchiveChunk, list[str]]]) -> dict[tuple[str, int], str]:
    """Day files of these chunks (by their dates, in order); (cid, turn) -> the turn's key in the data."""
    days: dict[Any, list[ArchiveChunk]] = defaultdict(list)
    keys: dict[tuple[str, int], str] = {}
    for chunk, turn_keys in chunks:
        days[chunk.when.date()].append(chunk)
        for i, k in enumerate(turn_keys):
            keys[(chunk.cid, i)] = k
    (mem / "archive").mkdir(parents=True, exist_ok=True)
    for day, cs in days.items():
        text = render_day(ArchiveDay(day, cs))
        assert len(parse_day(text).chunks) == len(cs)
        (mem / "archive" / f"{day.isoformat()}.md").write_text(text, "utf-8")
    return keys


# ----- LoCoMo --------------------------------------------------------------------------------------------------
def write_locomo(conv, root: Path, corpus: str) -> dict[str, Any]:
    """One conversation as a workspace; returns what each unit covers, keyed as the lab matches units."""
    mem = root / "memory"
    mem.mkdir(parents=True, exist_ok=True)
    cids = {n: cid_of(conv.sample_id, str(n)) for n in conv.sessions}
    cover: dict[str, Any] = {"fact": {}, "history": {}, "archive": {}}
    session_turns = {n: [t.dia_id for t in s.turns] for n, s in conv.sessions.items()}
    facts, history = [], []
    if corpus in ("locomo-full", "locomo-all"):
        for speaker in dict.fromkeys([*conv.speakers, *(o.speaker for o in conv.observations)]):
            obs = sorted((o for o in conv.observations if o.speaker == speaker), key=lambda o: o.session)
            if not obs:
                continue
            facts += [f"# {speaker}", ""]
            for o in obs:
                when = conv.sessions[o.session].when
                mark = fact_mark(when.date(), cids[o.session] if corpus == "locomo-full" else None)
                facts.append(f"- {o.text}{mark}")
                cover["fact"].setdefault(o.text, set()).update(o.evidence)
            facts.append("")
        for n in sorted(conv.sessions):
            if n in conv.summaries:
                cid = cids[n] if corpus == "locomo-full" else None
                history.append(format_history_entry(conv.sessions[n].when, conv.summaries[n], cid=cid))
                cover["history"][conv.summaries[n]] = set(session_turns[n])
    (mem / "MEMORY.md").write_text("\n".join(facts), "utf-8")
    (mem / "HISTORY.md").write_text("\n\n".join(history) + "\n", "utf-8")
    if corpus in ("locomo-full", "locomo-sessions"):
        chunks = []
        for n in sorted(conv.sessions):
            s = conv.sessions[n]
            turns = [ArchivedTurn(t.speaker, t.line().split(": ", 1)[1], s.when.time()) for t in s.turns]
            chunks.append((ArchiveChunk(cids[n], s.when, tuple(turns)), [t.dia_id for t in s.turns]))
        cover["archive"] = {f"{c}:{i}": {k} for (c, i), k in write_archive(mem, chunks).items()}
    return cover


def unit_cover(u, cover: dict[str, Any]) -> set[str]:
    if u.kind == "archive":
        return cover["archive"].get(f"{u.extra['cid']}:{u.extra['turn']}", set())
    if u.kind == "fact":
        from memclaw.markdown.formats import split_trailing_date

        return cover["fact"].get(split_trailing_date(u.text)[0], set())
    return cover["history"].get(u.text, set())


# ----- LongMemEval ---------------------------------------------------------------------------------------------
def write_lme(raw: dict[str, Any], root: Path) -> tuple[dict[str, Any], set[str]] | None:
    from memclaw.bench.longmemeval import parse_lme_date

    qid = str(raw["question_id"])
    if qid.endswith("_abs"):
        return None
    relevant = set()
    chunks = []
    for sid, date, turns in zip(raw["haystack_session_ids"], raw["haystack_dates"], raw["haystack_sessions"],
                                strict=True):  # fmt: skip
        when = parse_lme_date(date)
        if any(t.get("has_answer") and t.get("role") == "user" for t in turns):
            relevant.add(str(sid))
        said = [(t, " ".join(str(t.get("content", "")).split())) for t in turns]
        said = [(t, s) for t, s in said if s]
        arch = tuple(ArchivedTurn(t["role"], s, when.time()) for t, s in said)
        keys = [f"{sid}|{'A' if t.get('has_answer') else '-'}" for t, _s in said]
        if arch:
            chunks.append((ArchiveChunk(cid_of(qid, str(sid)), when, arch), keys))
    if not relevant:
        return None
    mem = root / "memory"
    mem.mkdir(parents=True, exist_ok=True)
    keys = write_archive(mem, chunks)
    cover = {"fact": {}, "history": {}, "archive": {f"{c}:{i}": {k} for (c, i), k in keys.items()}}
    return cover, relevant


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
    units = {h.unit.id: h.unit for h in res.hits}
    for h in res.hits:
        units.update({t.id: t for t in h.excerpt})
    out = {}
    for b in BUDGETS:
        f = fill_hits(res.hits, b, count, **fill_opts)  # (fill_* options of a variant, when fill_hits has any)
        got: set[str] = set()
        for i in f.kept:
            for uid in f.served(i):
                got |= unit_cover(units[uid], cover)
        out[b] = (got, f.used)
    return out


def run_locomo(args, variants, embedder, count) -> dict[str, Any]:
    from memclaw.bench.locomo import load_locomo

    data = load_locomo(Path(args.data))
    variants, fill_opts = split_fill(variants)
    scores: dict[str, dict[int, list[float]]] = {v: defaultdict(list) for v in variants}
    used: dict[str, dict[int, list[int]]] = {v: defaultdict(list) for v in variants}
    for conv in data.conversations:
        root = Path(args.workdir) / f"{args.corpus}-{conv.sample_id}"
        shutil.rmtree(root, ignore_errors=True)
        cover = write_locomo(conv, root, args.corpus)
        main, svcs = services(root, variants, embedder)
        for q in conv.questions:
            ev = set(q.evidence)
            for name, svc in svcs.items():
                for b, (got, n) in served_covers(
                    svc, q.question, cover, conv.last_date, count, fill_opts[name]
                ).items():
                    scores[name][b].append(len(ev & got) / len(ev))
                    used[name][b].append(n)
        for s in [main, *svcs.values()]:
            s.close()
        print(f"{conv.sample_id}: {len(conv.questions)} questions", file=sys.stderr, flush=True)
    return {v: {f"R@{b}t": mean(scores[v][b]) for b in BUDGETS} | {f"used@{b}t": mean(used[v][b]) for b in BUDGETS}
            | {"n": len(scores[v][BUDGETS[0]])} for v in variants}  # fmt: skip


def run_lme(args, variants, embedder, count) -> dict[str, Any]:
    from memclaw.bench.longmemeval import load_longmemeval, parse_lme_date

    raw = load_longmemeval(Path(args.data))
    variants, fill_opts = split_fill(variants)
    raw = raw[: args.limit] if args.limit else raw
    any_: dict[str, dict[int, list[float]]] = {v: defaultdict(list) for v in variants}
    all_: dict[str, dict[int, list[float]]] = {v: defaultdict(list) for v in variants}
    by_type: dict[str, dict[str, list[float]]] = {v: defaultdict(list) for v in variants}
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
        for name, svc in svcs.items():
            for b, (got, _n) in served_covers(svc, str(rq["question"]), cover, now, count, fill_opts[name]).items():
                hit = {k.split("|")[0] for k in got if k.endswith("|A")} & relevant
                any_[name][b].append(float(bool(hit)))
                all_[name][b].append(float(hit == relevant))
                if b == 1024:
                    by_type[name][str(rq.get("question_type"))].append(float(hit == relevant))
        for s in [main, *svcs.values()]:
            s.close()
        shutil.rmtree(root, ignore_errors=True)
        print(f"{n}/{len(raw)} {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    return {
        v: {f"any@{b}t": mean(any_[v][b]) for b in BUDGETS} | {f"all@{b}t": mean(all_[v][b]) for b in BUDGETS}
        | {"n": len(any_[v][BUDGETS[0]]), "all@1024t_by_type": {t: mean(x) for t, x in sorted(by_type[v].items())}}
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
    ap.add_argument("corpus", choices=["locomo-sessions", "locomo-full", "locomo-all", "lme"])
    ap.add_argument("--data", required=True)
    ap.add_argument("--cache", help="embedding cache (memclaw.bench.embedcache)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--variants", default="")
    ap.add_argument("--out")
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
