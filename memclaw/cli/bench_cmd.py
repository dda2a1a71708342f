"""`memclaw bench ...`: plain functions the typer app in memclaw.cli.main wires to commands.

Each prints a summary table on stdout, writes its result files and returns the results dict.
Heavy libraries are imported only when a command runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memclaw.errors import UsageError

LOCOMO_KEYS = ["recall@1", "recall@3", "recall@5", "recall@10", "recall@20", "mrr", "ndcg@10", "p50_ms", "p95_ms"]
LME_KEYS = ["recall_any@5", "recall_all@5", "recall_all@10", "ndcg_any@10", "p50_ms", "p95_ms"]


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise UsageError(f"{name} must be at least 1 (got {value})")


def _embedder(base: Any, embed_cache: Path | None) -> Any:
    """The bench's embedder for `base`: None (the runner loads it) unless a cache file is given. The cache is
    saved when the process exits, whatever the run's outcome."""
    if embed_cache is None:
        return None
    import atexit

    from memclaw.bench.embedcache import CachedEmbedder
    from memclaw.embedding.load import load_embedder

    cached = CachedEmbedder(load_embedder(base.embeddings), Path(embed_cache))
    atexit.register(cached.save)
    return cached


@dataclass(frozen=True)
class RunOptions:
    """How a recall benchmark runs, whatever its data: progress, embedding model(s), the document-vector cache, the
    rankings file, a kept work folder (the options `bench locomo` and `bench longmemeval` share)."""

    progress: bool = True
    embeddings: str | None = None
    embed_cache: Path | None = None
    rankings: bool = False
    workdir: Path | None = None


@dataclass(frozen=True)
class OneMemory:
    """`--one-memory` and the options only it reads: `--raw`, `--sessions N`, LoCoMo's `--filler FILE`."""

    wanted: bool = False
    raw: bool = False
    sessions: int | None = None
    filler: Path | None = None
    questions: int | None = None

    @property
    def protocol(self) -> str:
        return "raw" if self.raw else "default"


def check_one_memory(one: OneMemory) -> None:
    """Options that only --one-memory reads are a usage error without it."""
    flags = (("--raw", one.raw), ("--sessions", one.sessions is not None), ("--filler", one.filler is not None),
             ("--questions", one.questions is not None))  # fmt: skip
    given = [n for n, v in flags if v]
    if given and not one.wanted:
        raise UsageError(f"{', '.join(given)} only apply with --one-memory: add --one-memory or drop them")


def _one_memory_common(one: OneMemory, run: RunOptions) -> None:
    _positive("--sessions", one.sessions)
    if run.rankings:
        raise UsageError("--rankings is not written by --one-memory: drop one of them")


def locomo(
    data: Path,
    systems: str | None = None,
    corpus: str = "all",
    out: Path | None = None,
    limit_conversations: int | None = None,
    limit_questions: int | None = None,
    details: bool = False,
    run: RunOptions | None = None,
) -> dict[str, Any]:
    """`memclaw bench locomo --data PATH [--systems a,b] [--corpus all|facts|sessions|full] [--out DIR]
    [--limit-conversations N] [--limit-questions N] [--details] [--rankings] [--embeddings MODEL[,MODEL]]`: writes
    DIR/locomo.json, DIR/locomo.md, DIR/locomo-recall.png (and DIR/locomo-details.json with --details: every
    question's top 10 per system; DIR/locomo-rankings.json.gz with --rankings: every ranked id and what each budget
    kept). Several models: one run each, side by side ("<system> · <model>")."""
    from memclaw.bench.locomo import CORPORA, load_locomo
    from memclaw.bench.locomo_report import write_locomo_results
    from memclaw.bench.models import run_per_model
    from memclaw.bench.report import print_summary
    from memclaw.bench.run_config import bench_config
    from memclaw.bench.runner import run_locomo
    from memclaw.bench.systems import parse_systems

    run = run or RunOptions()
    if corpus not in CORPORA:
        raise UsageError(f"unknown corpus {corpus!r}: use one of {', '.join(CORPORA)}")
    _positive("--limit-conversations", limit_conversations)
    _positive("--limit-questions", limit_questions)
    specs = parse_systems(systems)
    ds = load_locomo(Path(data))
    res = run_per_model(
        run.embeddings,
        bench_config(),
        lambda base: run_locomo(
            ds,
            specs,
            corpus=corpus,
            limit_conversations=limit_conversations,
            limit_questions=limit_questions,
            details=details,
            rankings=run.rankings,
            workdir=run.workdir,
            progress=run.progress,
            base=base,
            embedder=_embedder(base, run.embed_cache),
        ),
    )
    out = Path(out) if out else Path("bench-results") / ("locomo" if corpus == "all" else f"locomo-{corpus}")
    paths = write_locomo_results(res, out)
    print_summary(res, LOCOMO_KEYS)
    print("wrote " + ", ".join(str(p) for p in paths))
    return res


def longmemeval(
    data: Path,
    limit: int | None = None,
    systems: str | None = None,
    out: Path | None = None,
    run: RunOptions | None = None,
    corpus: str = "archive",
    answers: str = "user",
) -> dict[str, Any]:
    """`memclaw bench longmemeval --data PATH [--corpus archive|history] [--answers user|all] [--limit N]
    [--systems a,b] [--out DIR] [--rankings] [--embeddings MODEL[,MODEL]]`: writes DIR/longmemeval.json,
    DIR/longmemeval.md, DIR/longmemeval-recall.png (and DIR/longmemeval-rankings.json.gz with --rankings)."""
    from memclaw.bench.longmemeval import (
        CORPORA,
        check_answers,
        questions_title,
        run_longmemeval,
        skipped_line,
        write_longmemeval_results,
    )
    from memclaw.bench.models import run_per_model
    from memclaw.bench.report import print_summary
    from memclaw.bench.run_config import bench_config
    from memclaw.bench.systems import parse_systems

    run = run or RunOptions()
    if corpus not in CORPORA:
        raise UsageError(f"unknown corpus {corpus!r}: use one of {', '.join(CORPORA)}")
    check_answers(answers, corpus)
    _positive("--limit", limit)
    specs = parse_systems(systems)
    res = run_per_model(
        run.embeddings,
        bench_config(),
        lambda base: run_longmemeval(
            Path(data),
            specs,
            limit=limit,
            progress=run.progress,
            base=base,
            embedder=_embedder(base, run.embed_cache),
            rankings=run.rankings,
            workdir=run.workdir,
            corpus=corpus,
            answers=answers,
        ),
    )
    out = Path(out) if out else Path("bench-results") / "longmemeval"
    paths = write_longmemeval_results(res, out)
    print_summary(res, LME_KEYS, questions=questions_title(res))
    if (skipped := skipped_line(res)) is not None:
        print(skipped)
    print("wrote " + ", ".join(str(p) for p in paths))
    return res


def longmemeval_one_memory(
    data: Path,
    limit: int | None,
    systems: str | None,
    out: Path | None,
    run: RunOptions,
    one: OneMemory,
    *,
    corpus: str = "archive",
    answers: str = "user",
) -> dict[str, Any]:
    """`memclaw bench longmemeval --one-memory [--raw] [--sessions N]`: every session in one workspace
    (memclaw.bench.one_memory); writes DIR/longmemeval.json and .md as the per-question run does."""
    from memclaw.bench.longmemeval import questions_title, skipped_line, write_longmemeval_results
    from memclaw.bench.models import run_per_model
    from memclaw.bench.one_memory import SYSTEMS, run_lme_one_memory
    from memclaw.bench.report import print_summary
    from memclaw.bench.run_config import bench_config
    from memclaw.bench.systems import parse_systems

    _one_memory_common(one, run)
    if one.filler is not None:
        raise UsageError("--filler is LoCoMo's: LongMemEval's own sessions are the filler; drop --filler")
    if corpus != "archive":
        raise UsageError("--one-memory writes the archive corpus: drop --corpus")
    if answers != "user":
        raise UsageError("--answers all is for the per-question run: drop it with --one-memory")
    _positive("--limit", limit)
    _positive("--questions", one.questions)
    specs = parse_systems(systems or SYSTEMS)
    res = run_per_model(
        run.embeddings,
        bench_config(),
        lambda base: run_lme_one_memory(
            Path(data),
            specs,
            protocol=one.protocol,
            sessions=one.sessions,
            limit=limit,
            questions=one.questions,
            progress=run.progress,
            base=base,
            embedder=_embedder(base, run.embed_cache),
            workdir=run.workdir,
        ),  # fmt: skip
    )
    out = Path(out) if out else Path("bench-results") / f"longmemeval-one-memory-{one.protocol}"
    paths = write_longmemeval_results(res, out)
    print_summary(res, LME_KEYS, questions=questions_title(res))
    if (skipped := skipped_line(res)) is not None:
        print(skipped)
    print("wrote " + ", ".join(str(p) for p in paths))
    return res


def locomo_one_memory(
    data: Path, systems: str | None, out: Path | None, run: RunOptions, one: OneMemory, *, corpus_given: bool = False
) -> dict[str, Any]:
    """`memclaw bench locomo --one-memory --filler LME_FILE [--raw] [--sessions N]`: the conversations among the
    LongMemEval filler in one workspace (memclaw.bench.one_memory); writes DIR/locomo.json and .md."""
    from memclaw.bench.locomo import load_locomo
    from memclaw.bench.locomo_report import write_locomo_results
    from memclaw.bench.models import run_per_model
    from memclaw.bench.one_memory import SYSTEMS, run_locomo_one_memory
    from memclaw.bench.report import print_summary
    from memclaw.bench.run_config import bench_config
    from memclaw.bench.systems import parse_systems

    _one_memory_common(one, run)
    if one.filler is None:
        raise UsageError("--one-memory needs --filler: pass the LongMemEval file whose sessions surround LoCoMo's")
    if corpus_given:
        raise UsageError("--one-memory writes the full corpus (facts, summaries, archive): drop --corpus")
    specs = parse_systems(systems or SYSTEMS)
    ds = load_locomo(Path(data))
    res = run_per_model(
        run.embeddings,
        bench_config(),
        lambda base: run_locomo_one_memory(
            ds,
            one.filler,
            specs,
            protocol=one.protocol,
            sessions=one.sessions,
            progress=run.progress,
            base=base,
            embedder=_embedder(base, run.embed_cache),
            workdir=run.workdir,
        ),  # fmt: skip
    )
    out = Path(out) if out else Path("bench-results") / f"locomo-one-memory-{one.protocol}"
    paths = write_locomo_results(res, out)
    print_summary(res, LOCOMO_KEYS)
    print("wrote " + ", ".join(str(p) for p in paths))
    return res


def perf(
    sizes: str = "1000,10000,100000",
    out: Path | None = None,
    progress: bool = True,
    chroma_url: str | None = None,
) -> dict[str, Any]:
    """`memclaw bench perf [--sizes 1000,10000,100000] [--out DIR] [--chroma-url URL]`: prints the table, writes
    DIR/perf.json, DIR/perf.md and DIR/perf.png."""
    from memclaw.bench.perf import parse_sizes, run_perf
    from memclaw.bench.perf_report import print_perf, write_perf_results

    res = run_perf(parse_sizes(sizes), progress=progress, chroma_url=chroma_url)
    out = Path(out) if out else Path("bench-results")
    paths = write_perf_results(res, out)
    print_perf(res)
    print("wrote " + ", ".join(str(p) for p in paths))
    return res
