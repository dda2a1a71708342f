"""The fusion lab: fusion rules replayed offline on the signals `fusion_dump.py` wrote, scored with memclaw's own
metrics and memory-section fill, split-half.

    .venv/bin/python benchmarks/lab/fusion_lab.py --dumps DUMPS [--rules hybrid,adaptive] [--check]

Halves: LongMemEval dev by question id within question type (sha1 order, alternating), LoCoMo dev by conversation
(A = conv-26, -30, -41; B = conv-42, -43). `--check` first replays today's rule through the product's own
functions and counts the questions where it differs from what memclaw's recall answered at dump time (it must be
none: the replay is the pipeline). Rules live in `fusion_rules.py`.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memclaw.bench import metrics as M  # noqa: E402
from memclaw.bench.budgeted import budgeted_view  # noqa: E402
from memclaw.context.memory_section import Candidate  # noqa: E402
from memclaw.markdown.formats import event_days  # noqa: E402
from memclaw.recall.dates import DateRange  # noqa: E402

LOCOMO_A = {"conv-26", "conv-30", "conv-41"}


@dataclass
class Unit:
    id: str
    kind: str
    ts: datetime | None
    key: str
    long: bool
    tokens: int
    named: str | None = None

    @property
    def timestamp(self) -> datetime | None:
        return self.ts

    @property
    def text(self) -> str:
        """A hash of the text as recall compares it (equal texts, equal keys), or the text itself where it can name a
        day the date lift reads (memclaw.recall.ranking.stamp_in)."""
        return self.named or self.key


@dataclass
class Corpus:
    name: str
    units: dict[str, Unit]
    links: dict[str, list[str]]
    cover: dict[str, frozenset[str]]
    vector_ids: list[str]
    items: dict[str, Candidate]
    dated: list[tuple[datetime, str]] = field(default_factory=list)
    named: list[tuple[datetime, datetime, str]] = field(default_factory=list)

    def dated_in(self, ranges: Sequence[DateRange], limit: int) -> list[str]:
        """As memclaw.index.scopes.Scope.dated_in: newest first, up to `limit` per range, then the units whose text
        names a day inside one; up to `limit`."""
        import bisect

        stamps = [t for t, _ in self.dated]
        ids = [i for _, i in self.dated]
        out: list[str] = []
        for r in ranges:
            lo, hi = bisect.bisect_left(stamps, r.start), bisect.bisect_left(stamps, r.end)
            out += reversed(ids[max(lo, hi - limit) : hi])
        out += [i for start, end, i in self.named if any(max(start, r.start) < min(end, r.end) for r in ranges)]
        return list(dict.fromkeys(out))[:limit]


@dataclass
class Signals:
    text: str
    bm25: list[tuple[str, float, int]]  # (id, score, distinct query terms matched), best first
    bm25_max: float
    n_terms: int
    sims: list[float]  # per vector of the corpus (Corpus.vector_ids)


@dataclass
class Query:
    qid: str
    group: str
    text: str
    now: datetime
    relevant: frozenset[str]
    ranges: list[DateRange]
    sig: Signals
    nodate: Signals | None
    real: list[str]
    corpus: Corpus
    half: str = ""


def _signals(d: dict) -> Signals:
    return Signals(d.get("text", ""), [tuple(x) for x in d["bm25"]], d["bm25_max"], d["n_terms"], d["sims"])


def load(path: Path, dataset: str) -> list[Query]:
    raw = json.loads(gzip.decompress(path.read_bytes()))
    out: list[Query] = []
    for c in raw["corpora"]:
        units = {
            u["id"]: Unit(u["id"], u["kind"], datetime.fromisoformat(u["ts"]) if u["ts"] else None, u["key"],
                          u["long"], u["tokens"], u.get("named"))
            for u in c["units"]
        }  # fmt: skip
        corpus = Corpus(
            c["name"],
            units,
            c["links"],
            {k: frozenset(v) for k, v in c["cover"].items()},
            c["vector_ids"],
            {i: Candidate(i, "", u.tokens) for i, u in units.items()},
        )
        corpus.dated = sorted((u.ts.replace(tzinfo=None), u.id) for u in units.values() if u.ts)
        corpus.named = sorted(
            ((a, b, u.id) for u in units.values() if u.named for a, b in event_days(u.named, u.kind, u.ts)),
            key=lambda x: x[0], reverse=True,
        )  # fmt: skip
        for q in c["questions"]:
            ranges = [DateRange(datetime.fromisoformat(a), datetime.fromisoformat(b), t) for a, b, t in q["ranges"]]
            qq = Query(
                q["qid"], q["group"], q["text"], datetime.fromisoformat(q["now"]), frozenset(q["relevant"]), ranges,
                _signals(q), _signals(q["nodate"]) if q.get("nodate") else None, q["real"], corpus,
            )  # fmt: skip
            if dataset == "locomo":
                qq.half = "A" if corpus.name in LOCOMO_A else "B"
            out.append(qq)
    if dataset == "lme":
        by_group: dict[str, list[Query]] = defaultdict(list)
        for q in out:
            by_group[q.group].append(q)
        for qs in by_group.values():
            qs.sort(key=lambda q: hashlib.sha1(q.qid.encode()).hexdigest())
            for i, q in enumerate(qs):
                q.half = "AB"[i % 2]
    return out


Ranked = list[tuple[str, tuple[str, ...]]]
Rule = Callable[[Query], Ranked]


def score(qs: Sequence[Query], rule: Rule, dataset: str) -> tuple[dict[str, dict], float]:
    """Per half ("A", "B", "all"): memclaw's summary of the rule's answers; and the mean ms per answer."""
    scores: dict[str, list] = {"A": [], "B": [], "all": []}
    t0 = time.perf_counter()
    for q in qs:
        ranked = rule(q)
        ids = [i for i, _c in ranked]
        view = budgeted_view(ranked, q.corpus.items)
        if dataset == "lme":
            s = M.score_lme(ids, q.corpus.cover, q.relevant, question_type=q.group, latency_ms=0.0, budgeted=view)
        else:
            s = M.score_question(ids, q.corpus.cover, q.relevant, category=q.group, latency_ms=0.0, budgeted=view)
        scores[q.half].append(s)
        scores["all"].append(s)
    ms = (time.perf_counter() - t0) * 1000 / max(1, len(qs))
    summ = M.summarize_lme if dataset == "lme" else M.summarize
    return {h: summ(v) for h, v in scores.items() if v}, ms


LME_KEYS = ("recall_any@5", "recall_all@5", "recall_any@10", "recall_all@10", "recall_all@1024t", "tokens@5")
LOCOMO_KEYS = ("recall@5", "recall@10", "recall@128t", "recall@256t", "recall@512t", "recall@1024t", "tokens@10")


def table(results: dict[str, dict[str, dict]], keys: Sequence[str], by: str | None = None) -> list[str]:
    """One row per rule: each key as `A / B`; `by` adds a block per group (question type or category)."""
    lines = ["| rule | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for name, res in results.items():
        cells = [f"{res.get('A', {}).get(k, 0):.3f} / {res.get('B', {}).get(k, 0):.3f} ({res['all'].get(k, 0):.3f})"
                 for k in keys]  # fmt: skip
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if by:
        groups = sorted({g for res in results.values() for g in res["all"][by]})
        for g in groups:
            lines += ["", f"**{g}** (n = {next(iter(results.values()))['all'][by][g]['n']})", ""]
            lines += ["| rule | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
            for name, res in results.items():
                cells = []
                for k in keys:
                    a, b, c = (res[h][by].get(g, {}).get(k, 0) for h in ("A", "B", "all"))
                    cells.append(f"{a:.3f} / {b:.3f} ({c:.3f})")
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    import fusion_rules as R

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dumps", type=Path, default=Path("DUMPS"))
    ap.add_argument("--rules", default="hybrid")
    ap.add_argument("--sets", default="lme,locomo-all,locomo-facts")
    ap.add_argument("--by", action="store_true", help="also per question type / category")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--check-rule", default="product", help="the rule --check replays (default: memclaw's own)")
    a = ap.parse_args()
    for name in a.sets.split(","):
        dataset = "lme" if name.startswith("lme") else "locomo"
        qs = load(a.dumps / f"{name}.json.gz", dataset)
        if a.check:
            bad = [q.qid for q in qs if [i for i, _ in R.rule(a.check_rule)(q)] != q.real]
            print(f"{name}: replay of today's rule differs from the pipeline on {len(bad)} of {len(qs)}: {bad[:5]}")
        results = {}
        for rule in a.rules.split(","):
            results[rule], ms = score(qs, R.rule(rule), dataset)
            print(f"  {name} {rule}: {ms:.2f} ms per query", file=sys.stderr)
        keys = LME_KEYS if dataset == "lme" else LOCOMO_KEYS
        print(f"\n### {name} ({len(qs)} questions; A / B)\n")
        print("\n".join(table(results, keys, ("by_question_type" if dataset == "lme" else "by_category") if a.by
                                else None)))  # fmt: skip


if __name__ == "__main__":
    main()
