"""What every benchmark run starts from: memclaw's configuration for a run, how many units each system ranks per
query, and the embedding model, loaded once for all corpora."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memclaw.bench import metrics as M
from memclaw.bench.systems import SystemSpec

if TYPE_CHECKING:
    from memclaw.config import Config, RecallConfig
    from memclaw.embedding.base import Embedder


K_MAX = max(M.RECALL_KS)


BENCH_AGENT = "assistant"
"""The benchmarks' agent name: LongMemEval's haystacks name the AI's turns `assistant`, and the converters archive
them under that speaker, so they are the agent's own turns as memclaw archives them (under `agent.name`)."""


TUNING_VARIABLE = "MEMCLAW_BENCH_TUNING"
"""A JSON object of tuning values (memclaw.config.presets.RecallTuning's fields) a benchmark run ranks with, over the
preset's: `MEMCLAW_BENCH_TUNING='{"rrf_k": 30}'`. The lab's way to try a value; no user config key."""


def bench_config() -> Config:
    """memclaw's default configuration (environment overrides of recall/embeddings apply, and TUNING_VARIABLE, so a
    variant can be tried without code), with the index forced to an embedded Chroma under each temp workspace and
    the agent named BENCH_AGENT."""
    from memclaw.config import Config

    cfg = Config()
    memory = cfg.memory.model_copy(update={"chroma_url": None, "index_dir": None, "auto_sync": True})
    agent = cfg.agent.model_copy(update={"name": BENCH_AGENT})
    recall = _tuned_from_env(cfg.recall)
    return cfg.model_copy(update={"memory": memory, "agent": agent, "workspace": None, "recall": recall})


def _tuned_from_env(recall: RecallConfig) -> RecallConfig:
    from memclaw.errors import ConfigError

    text = os.environ.get(TUNING_VARIABLE, "").strip()
    try:
        changes = json.loads(text) if text else {}
        if not isinstance(changes, dict):
            raise ValueError("not a JSON object")
        return recall.with_tuning(**changes)
    except ValueError as e:
        raise ConfigError(f"environment variable {TUNING_VARIABLE}: {e}; set it to a JSON object such as "
                          '{"rrf_k": 30}') from None  # fmt: skip


def fill_k(base: Config) -> int:
    """How many units each system ranks per query: enough for recall@20, and what auto-recall offers the memory
    section (context.recall_k)."""
    return max(K_MAX, base.context.recall_k)


def load_embedder_once(base: Config, specs: Sequence[SystemSpec]) -> Embedder | None:
    if not any(s.kind == "memclaw" for s in specs):
        return None
    from memclaw.embedding.load import load_embedder

    return load_embedder(base.embeddings)
