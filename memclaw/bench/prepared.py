"""One corpus ready to query: its converted workspace parsed, indexed once by memclaw, and every requested system
bound to it; one timed query at a time."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from memclaw.bench import metrics as M
from memclaw.bench.baselines import GrepIndex
from memclaw.bench.budgeted import budgeted_view
from memclaw.bench.corpus import BenchCorpus, load_corpus
from memclaw.bench.systems import Ranked, SystemFn, SystemSpec, make_system, system_config

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.context.memory_section import Candidate
    from memclaw.embedding.base import Embedder
    from memclaw.service.facade import MemoryService
    from memclaw.util.progress import ProgressFactory


@dataclass
class PreparedCorpus:
    """A synced corpus with every requested system bound to it, and each unit as the memory section shows it."""

    corpus: BenchCorpus
    systems: dict[str, SystemFn]
    index_seconds: float
    services: list[MemoryService] = field(default_factory=list)
    items: dict[str, Candidate] = field(default_factory=dict)
    # The memory section's token counter (cuts excerpts to fit)
    count: Callable[[str], int] | None = None
    # A memclaw system's own service
    service_of: dict[str, MemoryService] = field(default_factory=dict)

    def close(self) -> None:
        for s in self.services:
            s.close()

    def run(self, system: str, query: str, k: int) -> tuple[list[str], M.Budgeted, float]:
        """One query: the ranked ids, the memory-section view of them, and the latency in ms."""
        ranked, ms = timed(self.systems[system], query, k)
        return [r[0] for r in ranked], budgeted_view(ranked, self.items, self.count), ms


def prepare_corpus(
    root: Path,
    side_file: Path,
    specs: Sequence[SystemSpec],
    base: Config,
    embedder: Embedder | None,
    *,
    now: datetime | None = None,
    progress: ProgressFactory | None = None,
) -> PreparedCorpus:
    """Parse the workspace at `root`, index it once with memclaw (if any memclaw system is asked for), and bind
    every system to it. `progress` shows the index's sync (memclaw.util.progress), as `memclaw memory sync` does."""
    from memclaw.context.memory_section import candidates
    from memclaw.llm.tokens import counter_for
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    corpus = load_corpus(root, side_file)
    count = counter_for(base.agent.model)
    items = {c.id: c for c in candidates(corpus.units, count)}
    systems: dict[str, SystemFn] = {}
    services: list[MemoryService] = []
    t_index = 0.0
    grep_index = GrepIndex.build(root, corpus.units) if any(s.kind == "grep" for s in specs) else None
    mem_specs = [s for s in specs if s.kind == "memclaw"]
    if mem_specs:
        ws = Workspace(Path(root))
        main = MemoryService(ws, base, embedder=embedder)
        main.progress = progress
        t0 = time.perf_counter()
        main.sync()
        t_index = time.perf_counter() - t0
        services.append(main)
        for spec in mem_specs:
            svc = MemoryService(ws, system_config(base, spec), embedder=main.embedder, store=main.store)
            services.append(svc)
            systems[spec.name] = make_system(spec, service=svc, now=now)
    for spec in specs:
        if spec.kind == "grep":
            systems[spec.name] = make_system(spec, grep_index=grep_index)
    service_of = dict(zip([s.name for s in mem_specs], services[1:], strict=True))
    return PreparedCorpus(corpus, {s.name: systems[s.name] for s in specs}, t_index, services, items, count, service_of)


def timed(fn: SystemFn, query: str, k: int) -> tuple[Ranked, float]:
    t0 = time.perf_counter()
    ranked = fn(query, k)
    return ranked, (time.perf_counter() - t0) * 1000.0
