"""What every benchmark run starts from: memclaw's configuration for a run, how many units each system ranks per
query, and the embedding model, loaded once for all corpora."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memclaw.bench import metrics as M
from memclaw.bench.systems import SystemSpec

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.embedding.base import Embedder


K_MAX = max(M.RECALL_KS)


BENCH_AGENT = "assistant"
"""The benchmarks' agent name: LongMemEval's haystacks name the AI's turns `assistant`, and the converters archive
them under that speaker, so they are the agent's own turns as memclaw archives them (under `agent.name`)."""


def bench_config() -> Config:
    """memclaw's default configuration (environment overrides of recall/embeddings apply, so a variant can be
    tried without code), with the index forced to an embedded Chroma under each temp workspace and the agent named
    BENCH_AGENT."""
    from memclaw.config import Config

    cfg = Config()
    memory = cfg.memory.model_copy(update={"chroma_url": None, "index_dir": None, "auto_sync": True})
    agent = cfg.agent.model_copy(update={"name": BENCH_AGENT})
    return cfg.model_copy(update={"memory": memory, "agent": agent, "workspace": None})


def fill_k(base: Config) -> int:
    """How many units each system ranks per query: enough for recall@20, and what auto-recall offers the memory
    section (context.recall_k)."""
    return max(K_MAX, base.context.recall_k)


def load_embedder_once(base: Config, specs: Sequence[SystemSpec]) -> Embedder | None:
    if not any(s.kind == "memclaw" for s in specs):
        return None
    from memclaw.embedding.load import load_embedder

    return load_embedder(base.embeddings)
