"""`memclaw bench perf`, the run over every size: recall latency, ingest rate, cold CLI start and index size at 1k /
10k / 100k memories (measured in memclaw.bench.perf_measure, written by memclaw.bench.perf_report).

Memories are synthetic but realistic (memclaw.bench.synthetic): a seeded template grammar of people, places,
activities, foods, jobs and dates produces MEMORY.md facts (85 %) and HISTORY.md entries (15 %) in one scope. Per size:

* ingest: write the Markdown, then one `MemoryService.sync()` (embedding + Chroma + BM25) -> memories/s; the
  model load, its first run and the chromadb import are one-time process costs paid before any size is timed;
* warm hybrid recall: p50/p95 over a few hundred queries after a warm-up, query embedding included;
* add one fact to the full store (`add_fact`: Markdown + incremental index update), median of a few;
* cold `memclaw recall` in a fresh process (subprocess wall time, median of 3);
* index size on disk (Chroma + BM25 + unit table);
* with a Chroma server URL (`--chroma-url`): the same index copied to the server (`memory migrate`, no
  re-embedding) and warm/cold recall measured again over HTTP, beside the embedded figures.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from datetime import datetime
from typing import Any

from memclaw.bench.estimate import SECONDS_PER_MEMORY, SECONDS_PER_SIZE, Estimate
from memclaw.bench.perf_measure import preload, run_size
from memclaw.errors import UsageError


def parse_sizes(value: str) -> list[int]:
    try:
        sizes = [int(s.replace("_", "").replace("k", "000")) for s in value.split(",") if s.strip()]
    except ValueError:
        raise UsageError(
            f"--sizes must be a comma-separated list of integers, e.g. 1000,10000 (got {value!r})"
        ) from None
    if not sizes or any(s < 10 for s in sizes):
        raise UsageError(f"--sizes needs sizes of at least 10 memories (got {value!r})")
    return sizes


def run_perf(
    sizes: list[int],
    *,
    progress: bool = True,
    n_queries: int = 300,
    cold_runs: int = 3,
    chroma_url: str | None = None,
) -> dict[str, Any]:
    from memclaw.bench.machine import machine_info
    from memclaw.bench.progress import Progress
    from memclaw.bench.run_config import bench_config, load_embedder_once
    from memclaw.bench.systems import SYSTEMS

    cfg = bench_config()
    embedder = load_embedder_once(cfg, [SYSTEMS["hybrid"]])
    preload(embedder)
    results = []
    per_memory_s, fixed_s = SECONDS_PER_MEMORY, SECONDS_PER_SIZE
    basis = "on 2 cores; then as measured on each size"
    with Progress(progress) as prog:
        for n in sizes:
            estimate = Estimate(n, per_memory_s, "memory", fixed_s=fixed_s, basis=basis)
            prog.log(f"perf: {n} memories: {estimate.describe()}")
            advance = prog.task(f"ingest {n}", n)
            t = time.perf_counter()
            results.append(
                run_size(
                    n,
                    embedder=embedder,
                    n_queries=n_queries,
                    cold_runs=cold_runs,
                    progress=advance,
                    chroma_url=chroma_url,
                )
            )
            # the next size's estimate: this machine's ingest rate and fixed cost, as measured on this size
            ingest_s = results[-1]["ingest_seconds"]
            per_memory_s = ingest_s / n if n else per_memory_s
            fixed_s = max(0.0, time.perf_counter() - t - ingest_s)
            basis = f"as measured on {n} memories"
    return {
        "benchmark": "perf",
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine_info(),
        "embeddings_model": cfg.embeddings.model,
        "embedder": type(embedder).__name__,
        "recall_config": json.loads(cfg.recall.model_dump_json()),
        "recall_tuning": asdict(cfg.recall.tuning),
        "sizes": results,
    }
