"""`memclaw bench ...`: the benchmark commands (their options and help); the work is in memclaw.cli.bench_cmd."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

bench_app = typer.Typer(help="Recall-quality and performance benchmarks.", no_args_is_help=True)

DataOpt = Annotated[Path, typer.Option("--data", help="The dataset file (JSON, upstream format).")]
SystemsOpt = Annotated[
    str | None, typer.Option("--systems", help="Comma-separated systems, or 'all' (default: the standard set).")
]
OutOpt = Annotated[Path | None, typer.Option("--out", help="Directory for the JSON, Markdown and PNG results.")]
QuietOpt = Annotated[bool, typer.Option("--no-progress", help="No progress bar.")]
EmbeddingsOpt = Annotated[
    str | None,
    typer.Option(
        "--embeddings",
        help="Embedding model(s) to run with, comma-separated to compare side by side "
        "(e.g. all-MiniLM-L6-v2,openai/text-embedding-3-small); default: embeddings.model.",
    ),
]
EmbedCacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--embed-cache",
        help="Keep the model's text vectors in this file, so a later run embeds only texts it has not seen "
        "(a bench tool; memclaw's index never reads it).",
    ),
]
WorkdirOpt = Annotated[
    Path | None,
    typer.Option(
        "--workdir",
        help="Keep each converted workspace and its index in this folder and reuse them on a later run: two "
        "versions of memclaw then query the same index (an HNSW build is not reproducible).",
    ),
]
OneMemoryOpt = Annotated[
    bool,
    typer.Option(
        "--one-memory",
        help="Put every session in one workspace and ask each question of all of it, with the store as of the end of "
        "the question's day and other questions' answer sessions masked (see --raw).",
    ),
]
RawOpt = Annotated[
    bool, typer.Option("--raw", help="With --one-memory: no date filter and no mask, every unit a candidate.")
]
SessionsOpt = Annotated[
    int | None,
    typer.Option(
        "--sessions",
        help="With --one-memory: keep every answer session and a seeded sample of the LongMemEval filler, N in all.",
    ),
]
RankingsOpt = Annotated[
    bool,
    typer.Option(
        "--rankings",
        help="Also write every question's ranked ids and what each token budget kept (*-rankings.json.gz), "
        "for an exact comparison of two runs with benchmarks/bench_diff.py.",
    ),
]


@bench_app.command("locomo")
def bench_locomo(
    data: DataOpt,
    systems: SystemsOpt = None,
    corpus: Annotated[
        str,
        typer.Option(
            "--corpus",
            help="all (facts + summaries) | facts | sessions (raw sessions, archived) | full (facts + summaries + "
            "archive)",
        ),
    ] = "all",
    out: OutOpt = None,
    limit_conversations: Annotated[int | None, typer.Option("--limit-conversations", help="First N only.")] = None,
    limit_questions: Annotated[int | None, typer.Option("--limit-questions", help="First N per conversation.")] = None,
    details: Annotated[bool, typer.Option("--details", help="Also write every question's top 10.")] = False,
    no_progress: QuietOpt = False,
    embeddings: EmbeddingsOpt = None,
    embed_cache: EmbedCacheOpt = None,
    rankings: RankingsOpt = False,
    workdir: WorkdirOpt = None,
    one_memory: OneMemoryOpt = False,
    filler: Annotated[
        Path | None,
        typer.Option(
            "--filler", help="With --one-memory: the LongMemEval file whose sessions surround the conversations."
        ),
    ] = None,
    raw: RawOpt = False,
    sessions: SessionsOpt = None,
) -> None:
    """LoCoMo recall quality: memclaw vs grep, BM25, vector and hybrid variants, through the real path.

    Data: data/locomo10.json from https://github.com/snap-research/LoCoMo (pass it with --data)."""
    from memclaw.cli import bench_cmd

    one = bench_cmd.OneMemory(one_memory, raw, sessions, filler)
    if one.wanted:
        bench_cmd.locomo_one_memory(
            data,
            systems,
            out,
            bench_cmd.RunOptions(not no_progress, embeddings, embed_cache, rankings, workdir),
            one,
            corpus_given=corpus != "all",
        )
        return
    bench_cmd.check_one_memory(one)
    bench_cmd.locomo(
        data,
        systems,
        corpus,
        out,
        limit_conversations,
        limit_questions,
        details,
        bench_cmd.RunOptions(not no_progress, embeddings, embed_cache, rankings, workdir),
    )


@bench_app.command("longmemeval")
def bench_longmemeval(
    data: DataOpt,
    limit: Annotated[int | None, typer.Option("--limit", help="First N questions of the file.")] = None,
    systems: SystemsOpt = None,
    no_progress: QuietOpt = False,
    out: OutOpt = None,
    embeddings: EmbeddingsOpt = None,
    embed_cache: EmbedCacheOpt = None,
    rankings: RankingsOpt = False,
    workdir: WorkdirOpt = None,
    corpus: Annotated[
        str,
        typer.Option(
            "--corpus",
            help="archive (each session's turns, user and assistant, archived through memclaw's writer) | history "
            "(the official key: one HISTORY entry per session of its user turns)",
        ),
    ] = "archive",
    answers: Annotated[
        str,
        typer.Option(
            "--answers",
            help="user (the official key: a session counts by its user turns marked has_answer) | all (the "
            "assistant's turns too, so questions about what the assistant said are scored; archive corpus only)",
        ),
    ] = "user",
    one_memory: OneMemoryOpt = False,
    raw: RawOpt = False,
    sessions: SessionsOpt = None,
    questions: Annotated[
        int | None,
        typer.Option(
            "--questions",
            help="With --one-memory: ask a seeded sample of N questions; the store keeps their answer sessions.",
        ),
    ] = None,
) -> None:
    """LongMemEval retrieval (official protocol): recall_any/all@k and nDCG per question type.

    Data: longmemeval_s_cleaned.json, linked from https://github.com/xiaowu0162/LongMemEval (pass it with --data)."""
    from memclaw.cli import bench_cmd

    one = bench_cmd.OneMemory(one_memory, raw, sessions, questions=questions)
    if one.wanted:
        bench_cmd.longmemeval_one_memory(
            data, limit, systems, out,
            bench_cmd.RunOptions(not no_progress, embeddings, embed_cache, rankings, workdir), one,
            corpus=corpus, answers=answers,
        )  # fmt: skip
        return
    bench_cmd.check_one_memory(one)

    bench_cmd.longmemeval(
        data,
        limit,
        systems,
        out,
        bench_cmd.RunOptions(not no_progress, embeddings, embed_cache, rankings, workdir),
        corpus,
        answers,
    )


@bench_app.command("perf")
def bench_perf(
    sizes: Annotated[str, typer.Option("--sizes", help="Store sizes, comma-separated.")] = "1000,10000,100000",
    out: OutOpt = None,
    chroma_url: Annotated[
        str | None, typer.Option("--chroma-url", help="Also measure recall over HTTP on this Chroma server.")
    ] = None,
    no_progress: QuietOpt = False,
) -> None:
    """Warm recall p50/p95, ingest rate, cold CLI start and index size at each size."""
    from memclaw.cli import bench_cmd

    bench_cmd.perf(sizes, out, progress=not no_progress, chroma_url=chroma_url)
