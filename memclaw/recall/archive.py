"""Archived turns in recall (pure): the lifts they give and take, and the excerpts they are served as.

One consolidation writes three records with its id (`extra["cid"]`): the chunk of archived turns, the facts and the
history entry. Recall ties them by that id alone.

- A matching turn lifts the history entry of its consolidation (`cid_boost`), as a matching fact does.
- The entry covers the turn when it already says what the turn says (`covers`); the memory section serves one.
- A matching fact or entry does not lift the turns of its chunk: docs/decisions/0003-the-archive-as-excerpts.md.

The agent's own turns rank with a share of their score (`weigh_agent_turns`): the owner's words are the memory.
A query that asks what the agent said (`asks_what_agent_said`) gives them another share: there they are the evidence.
In an excerpt, a long reply of the agent beside the matched turn is shown as said, not what (`elided`).
Why: docs/decisions/0004-the-agents-own-words.md and docs/decisions/0005-agent-replies-in-an-excerpt.md.

An excerpt is the matched turn's window in its chunk (`window`); `ExcerptBuilder` cuts long turns in it to a passage.
The chunk's turns are consecutive rows of the unit table, in file order.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memclaw.index.passages import is_head, is_long, passage_ids, split_passages, unit_of
from memclaw.markdown.archive import SPEAKER_SEP, speaker_is
from memclaw.markdown.units import MemoryUnit
from memclaw.recall.fusion import Fused

if TYPE_CHECKING:
    from memclaw.index.unittable import UnitTable

Tokenize = Callable[[str], list[str]]

NEIGHBOUR_WORDS = 40
"""A long turn next to the matched one shows at most this many words, those nearest to it."""
CUT = "…"
ELIDED = "elided"
"""The extra that marks a turn shown as its speaker alone (`elided`): it is in an excerpt, its words are not."""
RESTATE_SHARE = 0.75
"""An entry covers a turn when it holds at least this share of the turn's content words (BM25 tokens)."""


def cid_boost(
    hits: list[Fused], table: UnitTable, entries_of: Mapping[str, Sequence[str]], *, weight: float
) -> list[Fused]:
    """A matching archived turn lifts the history entries of its consolidation (`entries_of`: consolidation id ->
    entry ids) by `weight` times its score, the best turn's; an entry a fact lifted already (`link`) gains only what
    this lift adds to that. Entries not yet in the list are added (their provenance shows they have no signal of
    their own)."""
    if weight <= 0 or not hits:
        return hits
    by_id = {h.id: h for h in hits}
    gains: dict[str, float] = {}
    for h in hits:
        if table.kind_of(h.id) != "archive":
            continue
        for target in entries_of.get(_cid_of(table, h.id) or "", ()):
            gains[target] = max(gains.get(target, 0.0), weight * h.score)
    for target, g in gains.items():
        t = by_id.get(target)
        if t is None:
            t = by_id[target] = Fused(target)
        # lifted by a fact already: the best lift, not both
        g -= min(g, t.boosts.get("link", 0.0))
        if g > 0:
            t.score += g
            t.boosts["cid"] = g
    return sorted(by_id.values(), key=lambda h: (-h.score, h.id))


def agent_turns(table: UnitTable, agent: str) -> Callable[[str], bool]:
    """Whether a unit is an archived turn the agent said itself: its speaker is the agent's name (`agent.name`, the
    name consolidation archives its turns under; memclaw.markdown.archive.speaker_is). A blank name has no turns."""
    is_agent = speaker_is(agent)

    def said_by_agent(uid: str) -> bool:
        row = table.row_of(uid)
        if row is None or table.kind_of(uid) != "archive":
            return False
        return is_agent(table.extra_at(row).get("speaker", ""))

    return said_by_agent


_AGENT_SAID = re.compile(
    r"\byou\s+(?:\w+\s+){0,2}(?:said|told|mentioned|recommended|suggested|provided|gave|listed|wrote|created|shared"
    r"|explained|described|proposed|advised|named|came up with|offered|showed|made)\b"
    r"|\bdid you\s+(?:\w+\s+)?(?:say|tell|mention|recommend|suggest|list|give|name|write|share)\b"
    r"|\byour\s+(?:\w+\s+)?(?:answer|reply|response|suggestion|recommendation|advice|list)s?\b"
    r"|\bour\s+(?:previous|last|earlier)\s+(?:conversation|chat|discussion)\b",
    re.IGNORECASE,
)


def asks_what_agent_said(query: str) -> bool:
    """Whether the query asks about the agent's own words: "you recommended", "what did you say", "your
    suggestion", or "our last chat", a conversation with both sides in it. English only."""
    return _AGENT_SAID.search(query) is not None


def weigh_agent_turns(hits: list[Fused], said_by_agent: Callable[[str], bool], *, weight: float) -> list[Fused]:
    """The agent's own archived turns keep `weight` of their fused score (the difference shows as the boost
    `agent`, negative). What the owner said is the memory; the agent's replies restate the topic of the question at
    length and, matched by it, crowd out the turn that holds the answer (measured:
    docs/decisions/0004-the-agents-own-words.md)."""
    if weight >= 1 or not hits:
        return hits
    for h in hits:
        if said_by_agent(h.id):
            cut = h.score * (1 - weight)
            h.score -= cut
            h.boosts["agent"] = -cut
    return sorted(hits, key=lambda h: (-h.score, h.id))


def best_passages(hits: Iterable[Any]) -> dict[str, str]:
    """Vector hits (best first, each with the `id` of a passage: memclaw.index.passages) -> each unit's best passage,
    head vectors aside."""
    out: dict[str, str] = {}
    for h in hits:
        if not is_head(h.id):
            out.setdefault(unit_of(h.id), h.id)
    return out


def _cid_of(table: UnitTable, uid: str) -> str | None:
    row = table.row_of(uid)
    return table.cid_at(row) if row is not None else None


def window(table: UnitTable, uid: str, before: int, after: int) -> tuple[MemoryUnit, ...]:
    """The turns of `uid`'s chunk from `before` turns before it to `after` turns after it (fewer at the chunk's
    edges), in order; () when `uid` is not an archive turn of the table."""
    row = table.row_of(uid)
    if row is None or table.kind_of(uid) != "archive":
        return ()
    return tuple(table.unit(r) for r in table.chunk_span(row, before, after))


def covers(entry_tokens: set[str], turn_tokens: Sequence[str]) -> bool:
    """Whether an entry (its tokens) already says what a turn says: it holds RESTATE_SHARE of the turn's content
    words. A turn without content words ("ok!") is covered by any entry of its consolidation."""
    words = set(turn_tokens)
    return len(words & entry_tokens) >= RESTATE_SHARE * len(words)


class ExcerptBuilder:
    """What an archive hit carries out of recall: its excerpt's window and the entries that cover it. A reply of the
    agent (`said_by_agent`: `agent_turns`) beside the matched turn of more than `agent_words` words is shown as said,
    not what (`elided`); None: as any turn."""

    def __init__(
        self,
        table: UnitTable,
        entries_of: Mapping[str, Sequence[str]],
        tokenize: Tokenize,
        wide: tuple[int, int],
        n_wide: int,
        query: str = "",
        passages: Mapping[str, str] | None = None,
        *,
        said_by_agent: Callable[[str], bool] | None = None,
        agent_words: int | None = None,
    ) -> None:
        self.query = set(tokenize(query)) if query else set()
        self.passages = passages or {}
        self.table = table
        self.entries_of = entries_of
        self.tokenize = tokenize
        self.wide, self.n_wide = wide, n_wide
        self.said_by_agent, self.agent_words = said_by_agent, agent_words
        self._n = 0
        self._entry_tokens: dict[str, set[str]] = {}

    def excerpt(self, u: MemoryUnit) -> tuple[MemoryUnit, ...]:
        """The window of the next archive hit (in rank order): the best `n_wide` get the wide one, the others are
        their matched turn alone."""
        if u.kind != "archive":
            return ()
        self._n += 1
        before, after = self.wide if self._n <= self.n_wide else (0, 0)
        turns = window(self.table, u.id, before, after)
        at = next(n for n, t in enumerate(turns) if t.id == u.id)
        return tuple(elided(t) if n != at and self._elides(t) else self._cut(t, n - at) for n, t in enumerate(turns))

    def _elides(self, t: MemoryUnit) -> bool:
        """Whether a turn beside the match is a reply of the agent too long to show (see the class docstring)."""
        if self.said_by_agent is None or self.agent_words is None:
            return False
        return len(t.text.partition(SPEAKER_SEP)[2].split()) > self.agent_words and self.said_by_agent(t.id)

    def _cut(self, t: MemoryUnit, offset: int) -> MemoryUnit:
        """A long turn as its excerpt shows it: the matched one as its best passage (the vector signal's, else the
        one sharing most words with the query), a neighbour as its NEIGHBOUR_WORDS words nearest to the match."""
        if not is_long(t.text):
            return t
        if offset:
            return _near_words(t, offset, NEIGHBOUR_WORDS)
        speaker, _, body = t.text.partition(SPEAKER_SEP)
        parts = split_passages(t.text)
        ids = passage_ids(t.id, len(parts))
        best = self.passages.get(t.id)
        if best in ids:
            i = ids.index(best)
        else:
            i = max(range(len(parts)), key=lambda n: (len(self.query & set(self.tokenize(parts[n]))), -n))
        text = parts[i] if i == 0 else f"{speaker}{SPEAKER_SEP}{CUT} {parts[i]}"
        return dataclasses.replace(t, text=text if i == len(parts) - 1 else f"{text} {CUT}")

    def covered_by(self, u: MemoryUnit) -> tuple[str, ...]:
        """The history entries of the turn's consolidation that already say what it says."""
        cid = u.extra.get("cid")
        if u.kind != "archive" or not cid:
            return ()
        out = []
        turn = self.tokenize(u.text.split(": ", 1)[-1])
        for eid in self.entries_of.get(cid, ()):
            toks = self._entry_tokens.get(eid)
            if toks is None:
                toks = self._entry_tokens[eid] = set(self.tokenize(self.table[eid].text))
            if covers(toks, turn):
                out.append(eid)
        return tuple(out)


def _near_words(t: MemoryUnit, offset: int, n: int) -> MemoryUnit:
    """A neighbour turn (`offset` from the match, non-zero) as its n words nearest to the match, marked `…`."""
    speaker, _, body = t.text.partition(SPEAKER_SEP)
    words = body.split()
    if len(words) <= n:
        return t
    near = words[-n:] if offset < 0 else words[:n]
    cut = f"{CUT} {' '.join(near)}" if offset < 0 else f"{' '.join(near)} {CUT}"
    return dataclasses.replace(t, text=f"{speaker}{SPEAKER_SEP}{cut}")


def elided(t: MemoryUnit) -> MemoryUnit:
    """The turn as `speaker: …`: an excerpt shows that it was said, not what."""
    text = f"{t.text.partition(SPEAKER_SEP)[0]}{SPEAKER_SEP}{CUT}"
    return dataclasses.replace(t, text=text, extra={**t.extra, ELIDED: "1"})
