"""The systems a benchmark compares: a system is a function (query, k) -> ranked unit ids.

memclaw systems are the default configuration with named changes: recall keys (`recall`) and tuning values
(`tuning`, on top of the preset: memclaw.config.presets). They share one index per corpus and go through
`MemoryService.recall_detailed`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memclaw.errors import UsageError

if TYPE_CHECKING:
    from memclaw.bench.baselines import GrepIndex
    from memclaw.config import Config
    from memclaw.markdown.units import MemoryUnit
    from memclaw.service.facade import MemoryService

Ranked = list[tuple[str, tuple[str, ...], tuple["MemoryUnit", ...]]]
"""A system's answer: unit ids best first, each with the ids of the units that cover it and, for an archived turn,
its excerpt's window (for the memory section)."""
SystemFn = Callable[[str, int], Ranked]


@dataclass(frozen=True)
class SystemSpec:
    name: str
    # "grep" | "memclaw"
    kind: str
    description: str
    # recall keys (memclaw systems): mode, preset, recency_half_life_days, the floors
    recall: dict[str, Any] = field(default_factory=dict)
    # tuning values over the preset's (memclaw systems): memclaw.config.presets.RecallTuning's fields
    tuning: dict[str, Any] = field(default_factory=dict)


_RAW = {"link_sessions": False, "date_weight": 0.0, "agent_turn_weight": 1.0}
"""The tuning of a signal alone: no session links, dates or agent's-turn weight."""

SYSTEMS: dict[str, SystemSpec] = {
    s.name: s
    for s in (
        SystemSpec("grep", "grep", "nanobot-style keyword alternation over the Markdown, matching lines in file order"),
        SystemSpec("grep-ranked", "grep", "grep matches ranked by distinct query keywords per unit"),
        SystemSpec("bm25", "memclaw", "memclaw recall --mode bm25 (default links/diversity apply)", {"mode": "bm25"}),
        SystemSpec(
            "vector", "memclaw", "memclaw recall --mode vector (default links/diversity apply)", {"mode": "vector"}
        ),
        SystemSpec(
            "bm25-raw",
            "memclaw",
            "BM25 signal alone (a short turn's score with its context included): no session links, dates, agent's-turn "
            "weight or diversity",
            {"mode": "bm25"},
            _RAW,
        ),
        SystemSpec(
            "vector-raw",
            "memclaw",
            "vector signal alone: no session links, dates, agent's-turn weight or diversity",
            {"mode": "vector"},
            _RAW,
        ),
        SystemSpec(
            "vector-head",
            "memclaw",
            "one vector per unit from its first 256 word pieces (a plain MiniLM index): no passages, links, dates or "
            "agent's-turn weight",
            {"mode": "vector"},
            {"vector_signal": "head", **_RAW},
        ),
        SystemSpec("hybrid", "memclaw", "memclaw default configuration", {}),
        SystemSpec(
            "hybrid-head",
            "memclaw",
            "default with the head vector alone as the vector signal",
            tuning={"vector_signal": "head"},
        ),
        SystemSpec(
            "hybrid-passages",
            "memclaw",
            "default with the best passage alone as the vector signal (no head vectors)",
            tuning={"vector_signal": "passages"},
        ),
        SystemSpec(
            "hybrid-rrf-plain",
            "memclaw",
            "plain reciprocal-rank fusion, no session links, dates or agent's-turn weight (the reference hybrid: the "
            "preset plain-rrf)",
            {"mode": "hybrid", "preset": "plain-rrf"},
        ),
        SystemSpec(
            "hybrid-rrf",
            "memclaw",
            "reciprocal-rank fusion with the default links",
            tuning={"fusion": "rrf", "keep_factor": 0},
        ),
        SystemSpec(
            "hybrid-weighted",
            "memclaw",
            "the previous default's fusion: BM25 / its best * 0.7 + cosine, dates lifted by half the best score, no "
            "signal-rank placement (date words are out of BM25 here too)",
            tuning={"fusion": "weighted", "bm25_weight": 0.7, "keep_factor": 0, "date_after": 0.0},
        ),
        SystemSpec(
            "hybrid-nokeep",
            "memclaw",
            "default without the signal-rank placement (keep_factor 0)",
            tuning={"keep_factor": 0},
        ),
        SystemSpec(
            "hybrid-nolink",
            "memclaw",
            "default fusion without session links/diversity",
            tuning={"link_sessions": False},
        ),
        SystemSpec("hybrid-nodate", "memclaw", "default without date-range handling", tuning={"date_weight": 0.0}),
        SystemSpec(
            "hybrid-nocontext",
            "memclaw",
            "default without a short archived turn's BM25 score with the turns beside it (bm25_context_weight 0)",
            tuning={"bm25_context_weight": 0.0},
        ),
        SystemSpec(
            "hybrid-noagent",
            "memclaw",
            "default with the agent's own archived turns weighed as any turn (agent_turn_weight 1)",
            tuning={"agent_turn_weight": 1.0},
        ),
        SystemSpec(
            "hybrid-replies",
            "memclaw",
            "default with the agent's own turns kept in place like any unit and its replies beside an excerpt's match "
            "shown as any turn (keep_agent_turns, excerpt_agent_words None: the default before they were elided)",
            tuning={"keep_agent_turns": True, "excerpt_agent_words": None},
        ),
        SystemSpec(
            "hybrid-recency",
            "memclaw",
            "default plus recency for history (half-life 30 days)",
            {"recency_half_life_days": 30.0},
        ),
    )
}
DEFAULT_SYSTEMS: tuple[str, ...] = (
    "grep",
    "grep-ranked",
    "bm25",
    "vector",
    "bm25-raw",
    "vector-raw",
    "vector-head",
    "hybrid",
    "hybrid-rrf-plain",
    "hybrid-nolink",
    "hybrid-recency",
)


def parse_systems(value: str | None) -> list[SystemSpec]:
    """ "a,b,c" -> specs (default: DEFAULT_SYSTEMS; "all": every registered system). Unknown names fail loudly."""
    if not value:
        names = list(DEFAULT_SYSTEMS)
    elif value.strip() == "all":
        names = list(SYSTEMS)
    else:
        names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        raise UsageError(f"unknown system(s) {', '.join(unknown)}: choose from {', '.join(SYSTEMS)} (or 'all')")
    return [SYSTEMS[n] for n in dict.fromkeys(names)]


def system_config(base: Config, spec: SystemSpec) -> Config:
    """The memclaw Config of a system: base with the spec's recall keys (validated) and tuning values. The tuning
    starts from the spec's preset when it names one, else from the base's tuning (a run's MEMCLAW_BENCH_TUNING)."""
    from dataclasses import asdict

    from memclaw.config import RecallConfig

    recall = RecallConfig.model_validate({**base.recall.model_dump(), **spec.recall})
    start = {} if "preset" in spec.recall else asdict(base.recall.tuning)
    recall = recall.with_tuning(**{**start, **spec.tuning})
    return base.model_copy(update={"recall": recall})


def make_system(
    spec: SystemSpec,
    *,
    grep_index: GrepIndex | None = None,
    service: MemoryService | None = None,
    now: datetime | None = None,
) -> SystemFn:
    """Bind a spec to one corpus: grep systems need its GrepIndex; memclaw systems a synced MemoryService whose
    config is already this system's (see system_config). `now` anchors recency (the corpus's last date)."""
    if spec.kind == "grep":
        if grep_index is None:
            raise UsageError(f"system {spec.name} needs the corpus's grep index")
        fn = grep_index.grep if spec.name == "grep" else grep_index.grep_ranked
        return lambda query, k: [(i, (), ()) for i in fn(query, k)]
    if service is None:
        raise UsageError(f"system {spec.name} needs a MemoryService")

    def run(query: str, k: int) -> Ranked:
        res = service.recall_detailed(query, k=k, now=now)
        return [(h.unit.id, h.covered_by, h.excerpt) for h in res.hits]

    return run
