"""The memory section of the prompt (pure): how a recalled memory is written into it, and which memories fit.

One code path fills the section for every caller: the ContextBuilder (each reply), `memclaw recall --tokens N`
(what the section would hold) and the recall benchmarks (recall within a budget of B tokens). So the benchmark
measures exactly what the model is given.

A memory is one list item of the `<recalled-memories>` block: `- (date, section) text`. Its `<` and `&` are escaped
(nothing in it can close the block or open a tag) and its continuation lines are indented (nothing in it can start
an item of its own). Nothing is said twice: a fact's trailing `(YYYY-MM-DD)` is dropped when the item shows that
date, and the section when the text names it already. Ids and kinds stay out (a date with a time marks a
conversation summary): the prompt pays for every token of every memory, so the item carries only what the model
reads.

Filling: the recalled memories are taken in rank order, each at its full text. A memory that does not fit in
what is left of the budget is skipped (a shorter, lower-ranked one may still fit), and a memory whose session
summary is already in the section is skipped as redundant (the summary covers it). Every skip is reported with its
reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from memclaw.markdown.formats import split_trailing_date
from memclaw.markdown.units import MemoryUnit
from memclaw.recall.results import RecallHit

ITEM_JOIN = 1
"""Tokens budgeted for the newline between two items."""


def memory_date(u: MemoryUnit) -> str | None:
    """The date an item shows: a history entry's stamp with its time, a fact's date."""
    if u.timestamp is None:
        return None
    return u.timestamp.strftime("%Y-%m-%d %H:%M" if u.kind == "history" else "%Y-%m-%d")


def memory_item(u: MemoryUnit) -> str:
    """One memory as a list item of the recalled-memories block (see the module docstring)."""
    date = memory_date(u)
    text = u.text.strip()
    if date and u.kind == "fact":
        body, written = split_trailing_date(text)
        if written == date:
            text = body
    label = ", ".join(x for x in (date, _section_label(u.section, text)) if x)
    body = _escape(text).replace("\n", "\n  ")
    return f"- ({_escape(label)}) {body}" if label else f"- {body}"


def _escape(text: str) -> str:
    """No `<` is left, so nothing can open or close a tag; `&` too, so no escape can be forged."""
    return text.replace("&", "&amp;").replace("<", "&lt;")


def _section_label(section: str | None, text: str) -> str | None:
    """The fact's heading path, unless the text already names every part of it ("Caroline" for a fact about
    Caroline): a label that tells the model nothing new only costs tokens."""
    if not section:
        return None
    low = text.lower()
    return None if all(p.strip().lower() in low for p in section.split(">")) else section


@dataclass(frozen=True)
class Candidate:
    """A recalled memory offered to the section: its id, its rendered item and what that costs."""

    id: str
    item: str
    tokens: int  # the item's tokens plus ITEM_JOIN
    covered_by: tuple[str, ...] = ()  # ids of units that cover it (its session's summary)


@dataclass
class Skip:
    index: int
    id: str
    tokens: int
    reason: str


@dataclass
class SectionFill:
    budget: int
    candidates: list[Candidate] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)  # indices into the candidates, in rank order
    skipped: list[Skip] = field(default_factory=list)
    used: int = 0

    def hit_json(self, index: int) -> dict[str, object]:
        """What became of candidate `index`, for `recall --tokens --json`."""
        skip = next((s for s in self.skipped if s.index == index), None)
        tokens = self.candidates[index].tokens
        return {"memory_section": {"kept": skip is None, "tokens": tokens, "reason": skip.reason if skip else None}}

    def to_json(self) -> dict[str, object]:
        return {
            "budget": self.budget,
            "used": self.used,
            "kept": len(self.kept),
            "skipped": [{"id": s.id, "tokens": s.tokens, "reason": s.reason} for s in self.skipped],
        }


def candidates(
    units: Sequence[MemoryUnit],
    count: Callable[[str], int],
    links: Mapping[str, Sequence[str]] | None = None,
) -> list[Candidate]:
    """Render and count each unit once. `links`: unit id -> ids of the units that cover it."""
    links = links or {}
    out = []
    for u in units:
        item = memory_item(u)
        out.append(Candidate(u.id, item, count(item) + ITEM_JOIN, tuple(links.get(u.id, ()))))
    return out


def fill_hits(hits: Sequence[RecallHit], budget: int, count: Callable[[str], int]) -> SectionFill:
    """The memory section that recalled `hits` (best first) fill within `budget` tokens."""
    return fill(candidates([h.unit for h in hits], count, {h.unit.id: h.covered_by for h in hits}), budget)


def fill(cands: Sequence[Candidate], budget: int) -> SectionFill:
    """Which candidates (best first) go into a memory section of `budget` tokens (see the module docstring)."""
    res = SectionFill(budget, list(cands))
    kept_ids: set[str] = set()
    for i, c in enumerate(cands):
        cover = next((x for x in c.covered_by if x in kept_ids), None)
        if cover is not None:
            res.skipped.append(Skip(i, c.id, c.tokens, f"covered by {cover} (its session, in)"))
        elif res.used + c.tokens > budget:
            res.skipped.append(Skip(i, c.id, c.tokens, f"no room: {c.tokens} > {budget - res.used} tokens left"))
        else:
            res.kept.append(i)
            res.used += c.tokens
            kept_ids.add(c.id)
    return res
