"""Fixed ranking settings for the pure fusion and ranking tests.

The product's values come from RecallConfig (memclaw.recall.search.rank_settings); these tests pin their own, so a
change of a default does not change what they check."""

from __future__ import annotations

from typing import Any

from memclaw.recall.fusion import FusionParams
from memclaw.recall.ranking import RankSettings


def params(**kw: Any) -> FusionParams:
    """RRF fusion with equal weights and a 0.25 cosine floor, with `kw` replacing any of them."""
    base: dict[str, Any] = {
        "method": "rrf",
        "rrf_k": 60,
        "bm25_weight": 1.0,
        "vector_weight": 1.0,
        "min_similarity": 0.25,
        "min_bm25": 0.0,
        "bm25_confidence": 0.25,
        "vector_confidence": 0.25,
    }
    return FusionParams(**(base | kw))


def ranking(**kw: Any) -> RankSettings:
    """Ranking with RRF `params()`, the date and link lifts at 0.5, no placement guarantee, no agent weight."""
    base: dict[str, Any] = {
        "fusion": params(),
        "date_weight": 0.5,
        "date_scale": "best",
        "date_after": 0.0,
        "link_weight": 0.5,
        "recency_half_life_days": None,
        "keep_factor": 0,
        "agent_weight": 1.0,
        "keep_agent_turns": True,
        "archive_min_similarity": 0.0,
    }
    return RankSettings(**(base | kw))
