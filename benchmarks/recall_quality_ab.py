"""Recall quality of two checkouts, question by question, in one run on an exact vector store.

    python benchmarks/recall_quality_ab.py --baseline /path/to/old-checkout [--current .] [--out FILE.md]

Each checkout runs in its own process (PYTHONPATH=checkout, PYTHONHASHSEED=0) and runs `memclaw bench`'s own LoCoMo
dev (`--corpus all`) and LongMemEval dev (`--corpus history`) runners for the `hybrid` system only. Every
MemoryService the runners open gets the exact, brute-force store of benchmarks/lab/fusion_exact.py: Chroma's HNSW
graph is not reproducible between builds, so only an exact store makes two runs differ by the code alone. Document
vectors come from one embedding cache (`--embed-cache`): the first process fills it, the second reads it.

A configuration change is measured the same way: `--baseline . --current . --current-env
MEMCLAW_RECALL__ARCHIVE_MIN_SIMILARITY=0.2` runs one checkout twice, the second with that environment override.
A tuning value of the ranking preset (memclaw.config.presets) is no config key; the benchmarks read it from
MEMCLAW_BENCH_TUNING: `--current-env 'MEMCLAW_BENCH_TUNING={"rrf_k": 30, "date_weight": 0.3}'`.
`--locomo-corpus full --lme-corpus archive` measures with the archive in memory.
A change of model gives other vectors: `--current-cache FILE` gives the current side a cache of its own, e.g.
`--current-env MEMCLAW_EMBEDDINGS__MODEL=all-MiniLM-L6-v2-int8 --current-cache int8.npz`.

The report gives the memory-section recall at 128/256/512/1024 tokens (LoCoMo: evidence recall; LongMemEval:
recall_any and recall_all), the questions each side wins and loses at each budget, and the exact two-sided sign
test of the split (memclaw.bench.paired.sign_test).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = next((p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()), ROOT.parent)
LOCOMO = DATA / "locomo" / "locomo-dev.json"
LME = DATA / "longmemeval" / "lme-s-dev.json.gz"
BUDGETS = (128, 256, 512, 1024)


@dataclass(frozen=True)
class Questions:
    """Which questions both sides answer, and over which corpora: the parent's options, passed on to each child."""

    limit: int | None
    lme: int | None
    pick: str | None
    locomo_corpus: str
    lme_corpus: str
    answers: str = "user"

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> Questions:
        return cls(a.limit, a.lme, a.lme_pick, a.locomo_corpus, a.lme_corpus, a.lme_answers)

    def argv(self) -> list[str]:
        """The child's command-line options for these questions."""
        out = (["--limit", str(self.limit)] if self.limit else []) + (["--lme", str(self.lme)] if self.lme else [])
        out += ["--lme-pick", self.pick] if self.pick else []
        out += ["--locomo-corpus", self.locomo_corpus, "--lme-corpus", self.lme_corpus]
        return out + (["--lme-answers", self.answers] if self.answers != "user" else [])


def child(out: Path, cache: Path, qs: Questions) -> None:
    """Runs inside one checkout: both runners with an exact store, every question's budget recalls to `out`."""
    sys.path.insert(0, str(Path(__file__).parent / "lab"))
    import atexit

    from fusion_exact import ExactStore

    import memclaw.service.facade as facade
    from memclaw.bench import metrics as M
    from memclaw.bench.embedcache import CachedEmbedder
    from memclaw.bench.locomo import load_locomo
    from memclaw.bench.longmemeval import run_longmemeval
    from memclaw.bench.run_config import bench_config
    from memclaw.bench.runner import run_locomo
    from memclaw.bench.systems import parse_systems
    from memclaw.embedding.load import load_embedder

    plain = facade.MemoryService

    class Exact(plain):  # type: ignore[misc, valid-type]
        def __init__(self, *a, store=None, **kw) -> None:
            super().__init__(*a, store=store if store is not None else ExactStore(), **kw)

    facade.MemoryService = Exact
    rows: dict[str, list] = {"locomo": [], "lme": []}
    score_q, score_lme = M.score_question, M.score_lme

    def rec_q(*a, **kw):
        s = score_q(*a, **kw)
        rows["locomo"].append({"c": s.category, "b": {str(b): s.budget[b] for b in BUDGETS}})
        return s

    def rec_lme(*a, **kw):
        s = score_lme(*a, **kw)
        rows["lme"].append({"c": s.question_type, "any": {str(b): s.budget_any[b] for b in BUDGETS},
                            "all": {str(b): s.budget_all[b] for b in BUDGETS}})  # fmt: skip
        return s

    M.score_question, M.score_lme = rec_q, rec_lme
    base = bench_config()
    emb = CachedEmbedder(load_embedder(base.embeddings), cache)
    atexit.register(emb.save)
    specs = parse_systems("hybrid")
    t0 = time.perf_counter()
    if not qs.pick:  # a pick of LongMemEval questions is a run of its own
        run_locomo(
            load_locomo(LOCOMO),
            specs,
            corpus=qs.locomo_corpus,
            progress=False,
            base=base,
            embedder=emb,
            limit_questions=qs.limit,
        )
    t1 = time.perf_counter()
    data = LME
    if qs.pick:  # only these questions (0-based positions in the file), e.g. those whose question names a date
        import gzip

        raw = json.loads(gzip.decompress(LME.read_bytes()))
        data = out.parent / "lme-picked.json"
        data.write_text(json.dumps([raw[int(i)] for i in qs.pick.split(",")]), "utf-8")
    run_longmemeval(data, specs, limit=qs.lme or qs.limit, progress=False, base=base, embedder=emb,
                    corpus=qs.lme_corpus, **({"answers": qs.answers} if qs.answers != "user" else {}))  # fmt: skip
    rows["seconds"] = [round(t1 - t0, 1), round(time.perf_counter() - t1, 1)]  # type: ignore[assignment]
    emb.save()
    out.write_text(json.dumps(rows), "utf-8")


def _run(checkout: Path, out: Path, cache: Path, qs: Questions, *, extra_env: dict[str, str]) -> None:
    env = dict(os.environ, PYTHONPATH=str(checkout), PYTHONHASHSEED="0", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               LITELLM_LOCAL_MODEL_COST_MAP="True", MEMCLAW_HOME=str(out.parent / f"home-{out.stem}"))  # fmt: skip
    env.update(extra_env)
    cmd = [sys.executable, __file__, "--child", str(out), "--cache", str(cache), *qs.argv()]
    subprocess.run(cmd, env=env, check=True, cwd=checkout)


def _commit(checkout: Path) -> str:
    p = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "memclaw"], capture_output=True,
                           text=True).stdout.strip()  # fmt: skip
    if not p.stdout.strip():
        return f"{checkout} (not a git checkout)"
    return p.stdout.strip() + (" + uncommitted changes" if dirty else "")


def _compare(old: list[dict], new: list[dict], key: str, label: str) -> list[str]:
    from memclaw.bench.paired import sign_test

    assert len(old) == len(new), (len(old), len(new))
    lines: list[str] = []
    if not old:
        return lines
    for b in BUDGETS:
        a = [r[key][str(b)] for r in old]
        c = [r[key][str(b)] for r in new]
        won = sum(y > x for x, y in zip(a, c, strict=True))
        lost = sum(y < x for x, y in zip(a, c, strict=True))
        lines.append(f"| {label} | {b} | {sum(a) / len(a):.4f} | {sum(c) / len(c):.4f} | {won} | {lost} | "
                     f"{sign_test(won, lost):.3g} |")  # fmt: skip
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--current", type=Path, default=ROOT)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "recall-quality-ab.md")
    ap.add_argument("--cache", type=Path, help="the embedding cache file (default: a temporary one)")
    ap.add_argument("--current-cache", type=Path, help="the current side's own cache, for another model")
    ap.add_argument("--limit", type=int, help="first N questions of each set (a smoke run)")
    ap.add_argument("--lme", type=int, help="first N LongMemEval questions only (their haystacks are long to embed)")
    ap.add_argument("--lme-pick", help="only these LongMemEval questions: 0-based positions in the file, a,b,c")
    ap.add_argument("--locomo-corpus", default="all", help="LoCoMo corpus: all, facts, sessions or full")
    ap.add_argument("--lme-corpus", default="history", help="LongMemEval corpus: history or archive")
    ap.add_argument("--lme-answers", default="user",
                    help="LongMemEval: whose has_answer turns count: user (official) or all")  # fmt: skip
    ap.add_argument("--current-env", action="append", default=[], metavar="KEY=VALUE",
                    help="an environment override for the current side only (repeatable)")  # fmt: skip
    ap.add_argument("--rows", type=Path, help="keep both sides' per-question rows in this folder (old.json, new.json)")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.cache, Questions.from_args(a))
        return 0
    if a.baseline is None:
        ap.error("--baseline is required")
    with tempfile.TemporaryDirectory() as tmp:
        cache = a.cache or Path(tmp) / "embed-cache.npz"
        old, new = Path(tmp) / "old.json", Path(tmp) / "new.json"
        qs = Questions.from_args(a)
        extra = dict(kv.split("=", 1) for kv in a.current_env)
        _run(a.baseline.resolve(), old, cache, qs, extra_env={})
        _run(a.current.resolve(), new, a.current_cache or cache, qs, extra_env=extra)
        ra, rb = json.loads(old.read_text()), json.loads(new.read_text())
        if a.rows:
            a.rows.mkdir(parents=True, exist_ok=True)
            (a.rows / "old.json").write_text(old.read_text(), "utf-8")
            (a.rows / "new.json").write_text(new.read_text(), "utf-8")
    head = "| set | tokens | before | after | questions won | lost | sign test p |"
    lines = [
        "# Recall quality before and after a change, question by question (exact vector store)",
        "",
        f"- date: {datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; machine: {os.cpu_count()} CPUs, Python "
        f"{sys.version.split()[0]}",
        f"- baseline: {_commit(a.baseline)}; current: {_commit(a.current)}"
        + (f" with {', '.join(a.current_env)}" if a.current_env else ""),
        f"- data: {LOCOMO.name} ({len(rb['locomo'])} questions, corpus {a.locomo_corpus}), "
        f"{LME.name} ({len(rb['lme'])} questions "
        f"scored, corpus {a.lme_corpus}"
        + (f", answers {a.lme_answers}" if a.lme_answers != "user" else "")
        + "); system `hybrid`; run seconds (LoCoMo, LongMemEval) before "
        f"{ra['seconds']}, after {rb['seconds']}",
        "- method: `benchmarks/recall_quality_ab.py` (docstring). Recall of what a memory section of that many "
        "tokens keeps; won / lost: questions whose recall went up / down; p: exact two-sided sign test",
        "",
        head,
        "|---|---|---|---|---|---|---|",
        *_compare(ra["locomo"], rb["locomo"], "b", "LoCoMo dev"),
        *_compare(ra["lme"], rb["lme"], "any", "LongMemEval dev recall_any"),
        *_compare(ra["lme"], rb["lme"], "all", "LongMemEval dev recall_all"),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    a.out.write_text(text, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
