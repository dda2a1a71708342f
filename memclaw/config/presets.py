"""Recall's ranking presets: the tuning constants, by name, in one place (the model: graphiti's search recipes).

A user picks a preset with `recall.preset`; the benchmarks and the fusion lab vary one through
`RecallConfig.with_tuning`, never through config keys.
Each value is the one source of its default (docs/decisions/0034-one-source-of-ranking-defaults.md).
"""

from __future__ import annotations

import json
import logging
from dataclasses import fields, replace
from typing import Any, Literal

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass
from pydantic_core import PydanticCustomError

PresetName = Literal["default", "plain-rrf"]


@dataclass(frozen=True, kw_only=True, config=ConfigDict(strict=True, allow_inf_nan=False))
class RecallTuning:
    """The constants that rank recall's hits. They were measured together, so they move together."""

    fusion: Literal["adaptive", "weighted", "rrf"]
    """adaptive: each signal on its own scale for the query, weighted by how much it knows about it (its
    confidence to the power bm25_confidence / vector_confidence); weighted: bm25_weight * BM25 / its best +
    vector_weight * cosine; rrf: reciprocal-rank fusion."""
    rrf_k: int = Field(ge=1)
    """rrf: the rank offset of reciprocal-rank fusion."""
    bm25_weight: float = Field(ge=0)
    vector_weight: float = Field(ge=0)
    bm25_context_weight: float = Field(ge=0, le=2)
    """A short archived turn's BM25 score is the better of its own and this times its score with the words of the
    turns beside it (memclaw.index.bm25_context); 0 turns it off."""
    bm25_confidence: float = Field(ge=0, le=4)
    """adaptive: how much BM25's weight follows how much of the query its best hit matches (0: not at all)."""
    vector_confidence: float = Field(ge=0, le=4)
    """adaptive: how much the vector's weight follows how far its best cosine stands out (0: not at all)."""
    min_bm25: float = Field(ge=0)
    """BM25 hits at or below this score are not evidence of relevance."""
    keep_factor: int = Field(ge=0, le=10)
    """A unit that BM25 or the vector alone ranks in its top k is kept within the first keep_factor * k hits
    (itself or the history entry that covers it); 0 turns the guarantee off, else at least 2."""
    keep_agent_turns: bool
    """True: the guarantee holds for the agent's own archived turns too. Else they rank as agent_turn_weight puts
    them (docs/decisions/0005-agent-replies-in-an-excerpt.md)."""
    candidates: int = Field(ge=1, le=2000)
    """How many candidates each signal brings (at least 3 k)."""
    vector_signal: Literal["max", "passages", "head"]
    """A long unit's vector similarity: its best vector (`max`: passages and head), its best passage
    (`passages`), or its head vector alone (`head`: one vector per unit, its first 256 word pieces)."""
    link_sessions: bool
    """A matching fact or archived turn lifts the history entry of its consolidation, a matching fact or entry
    lifts the matching turns of its conversation, and the memory section leaves out what an entry it holds
    covers."""
    link_weight: float = Field(ge=0)
    """The share of a unit's score that a session link passes on."""
    excerpt_before: int = Field(ge=0, le=20)
    excerpt_after: int = Field(ge=0, le=20)
    excerpt_wide: int = Field(ge=0, le=200)
    """A matching archived turn is served as an excerpt of its conversation: the best `excerpt_wide` of them with up
    to `excerpt_before` turns before and `excerpt_after` after, the others alone
    (docs/decisions/0012-the-excerpt-window.md)."""
    excerpt_agent_words: int | None = Field(ge=0, le=400)
    """In an excerpt, an agent's reply of more than this many words beside the matched turn is shown as said, not
    what (docs/decisions/0005-agent-replies-in-an-excerpt.md); None: as any turn."""
    agent_turn_weight: float = Field(ge=0, le=1)
    """An archived turn the agent said itself ranks with this share of its fused score; 1: as any turn
    (docs/decisions/0004-the-agents-own-words.md)."""
    agent_asked_weight: float = Field(ge=0, le=1)
    """The same share when the query asks what the agent said ("you recommended", "our last chat":
    memclaw.recall.archive.asks_what_agent_said), never below agent_turn_weight; then the agent's words are the
    evidence (docs/decisions/0046-questions-about-what-the-agent-said.md)."""
    date_weight: float = Field(ge=0)
    """A query naming a date range lifts memories stamped inside it by this share of the fusion's full scale (of
    the best score with `weighted` or `rrf`); 0 turns date handling off."""
    date_after: float = Field(ge=0, le=1)
    """Memories stamped just after a named range (within its length, at most a week) gain this share of the date
    lift."""

    def __post_init__(self) -> None:
        if self.keep_factor == 1:
            raise ValueError("keep_factor must be 0 (off) or at least 2: two signals' top k cannot both fit in k")


DEFAULT = RecallTuning(
    fusion="adaptive",
    rrf_k=60,
    bm25_weight=0.6,
    vector_weight=1.0,
    bm25_context_weight=0.7,
    bm25_confidence=0.25,
    vector_confidence=0.25,
    min_bm25=0.0,
    keep_factor=3,
    keep_agent_turns=False,
    candidates=50,
    vector_signal="max",
    link_sessions=True,
    link_weight=0.5,
    excerpt_before=1,
    excerpt_after=2,
    excerpt_wide=2,
    excerpt_agent_words=25,
    agent_turn_weight=0.4,
    agent_asked_weight=0.4,
    date_weight=0.5,
    date_after=0.5,
)

PRESETS: dict[str, RecallTuning] = {
    "default": DEFAULT,
    # the textbook hybrid: reciprocal-rank fusion of the two signals alone (the benchmarks' reference system)
    "plain-rrf": replace(
        DEFAULT,
        fusion="rrf",
        bm25_weight=1.0,
        keep_factor=0,
        link_sessions=False,
        agent_turn_weight=1.0,
        agent_asked_weight=1.0,
        date_weight=0.0,
    ),
}
"""Every preset by its `recall.preset` name."""

TUNING_KEYS: frozenset[str] = frozenset(f.name for f in fields(RecallTuning))
"""The names of the tuning constants; as `recall.<name>` config keys they are retired."""


def tuned(base: RecallTuning, changes: dict[str, object]) -> RecallTuning:
    """`base` with `changes`; ValueError naming an unknown name or a value out of its range."""
    unknown = sorted(set(changes) - TUNING_KEYS)
    if unknown:
        raise ValueError(f"no tuning value {', '.join(unknown)}: use one of {', '.join(sorted(TUNING_KEYS))}")
    return replace(base, **changes)  # type: ignore[arg-type]


RETIRED_KEY = "retired_key"
"""The pydantic error type of a retired key set to a value its preset does not have."""

_warned: set[str] = set()
log = logging.getLogger(__name__)


def without_retired(values: dict[str, Any]) -> dict[str, Any]:
    """The `[recall]` values without the retired tuning keys. A retired key that repeats its preset's value loses
    nothing: one warning, once per process. Another value would be lost, so it is an error naming the key."""
    retired = [key for key in values if key in TUNING_KEYS]
    if not retired:
        return values
    name = values.get("preset", "default")
    preset = PRESETS.get(name, DEFAULT) if isinstance(name, str) else DEFAULT
    for key in retired:
        if not _same(values[key], getattr(preset, key)):
            raise PydanticCustomError(
                RETIRED_KEY,
                "is part of recall.preset now ({preset} has {key} = {value}); remove the key to rank with the "
                "preset, or choose another preset",
                {"key": key, "preset": name, "value": json.dumps(getattr(preset, key))},
            )
        if key not in _warned:
            _warned.add(key)
            log.warning(
                "config key recall.%s is part of recall.preset now, which sets the same value; remove the key", key
            )
    return {k: v for k, v in values.items() if k not in TUNING_KEYS}


def _same(value: object, preset_value: object) -> bool:
    """Whether a config value (the environment's as text) is the preset's value."""
    if isinstance(value, str) and not isinstance(preset_value, str):
        text = value.strip().lower()
        if preset_value is None:
            return text in ("", "none", "null")
        if isinstance(preset_value, bool):
            return text in (("true", "1", "yes", "on") if preset_value else ("false", "0", "no", "off"))
        try:
            return float(text) == preset_value
        except ValueError:
            return False
    # True == 1 in Python, but a switch is no number
    return value == preset_value and isinstance(value, bool) == isinstance(preset_value, bool)
