"""The memory section of the prompt: how a recalled memory is written into it, and which memories fit. Pure.

One code path fills the section for every caller: the ContextBuilder, `memclaw recall --tokens N` and the recall
benchmarks. So a benchmark measures exactly what the model is given.

A memory is one list item of the `<recalled-memories>` block: `- (date, section) text`. Its text is kept as written,
but a `<` that would open or close the block is escaped (memclaw.context.tag_guard.unforgeable). Its continuation
lines are indented, so nothing in it starts an item of its own. Nothing is said twice: a fact's trailing date goes
when the item shows that date, the section when the text names it. Ids and kinds stay out, since the prompt pays for
every token.

An archived turn is served as an excerpt of its conversation (memclaw.context._excerpts), cut to what the budget
leaves.

Filling takes the recalled memories in rank order, each at its full text; an excerpt gets the largest part of its
window that fits. A memory is skipped when:
- it does not fit in what is left of the budget; a shorter, lower-ranked one may still fit;
- its consolidation's summary is already in the section and says the same;
- it is a turn already inside a kept excerpt.
An excerpt from the same chunk as a kept excerpt joins that item, at what the item grows by. Every skip is reported
with its reason. Every kept item lists the units it serves (`served`): what the benchmarks credit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from memclaw.context._excerpts import escape, excerpt_item, fit_excerpt
from memclaw.markdown.archive import chunk_of
from memclaw.markdown.formats import split_trailing_date
from memclaw.markdown.units import MemoryUnit
from memclaw.recall.archive import ELIDED
from memclaw.recall.results import RecallHit
from memclaw.util.text import counted

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
    body = escape(text).replace("\n", "\n  ")
    return f"- ({escape(label)}) {body}" if label else f"- {body}"


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
    # The item's tokens plus ITEM_JOIN
    tokens: int
    # Ids of units that cover it (its consolidation's summary)
    covered_by: tuple[str, ...] = ()
    # An archived turn: the turns it is served with (itself included)
    window: tuple[MemoryUnit, ...] = ()

    @property
    def serves(self) -> tuple[str, ...]:
        """The ids of the units whose words the item holds: an excerpt's turns, else the memory itself."""
        return tuple(t.id for t in self.window if ELIDED not in t.extra) if self.window else (self.id,)

    @property
    def focus(self) -> int:
        """An excerpt's matched turn: its position in the window."""
        return next((n for n, t in enumerate(self.window) if t.id == self.id), 0)


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
    # Indices into the candidates, in rank order
    kept: list[int] = field(default_factory=list)
    # An excerpt in the item of a kept one: index -> its index
    joined: dict[int, int] = field(default_factory=dict)
    skipped: list[Skip] = field(default_factory=list)
    used: int = 0

    def served(self, index: int) -> tuple[str, ...]:
        """The ids of the units kept item `index` serves (() if it was skipped; a joined excerpt's turns are served
        by the item it joined)."""
        return self.candidates[index].serves if index in self.kept else ()

    def skip_reason(self, index: int) -> str | None:
        """Why candidate `index` was left out, or None (it is in: an item, or joined to one)."""
        return next((s.reason for s in self.skipped if s.index == index), None)

    def status(self, index: int) -> str | None:
        """Why candidate `index` is not an item of its own (None: it is one): its skip reason, or whose item it
        joined."""
        if index in self.joined:
            return f"joined #{self.joined[index] + 1}"
        return self.skip_reason(index)

    def hit_json(self, index: int) -> dict[str, object]:
        """What became of candidate `index`, for `recall --tokens --json`."""
        reason = self.skip_reason(index)
        c, into = self.candidates[index], self.joined.get(index)
        serves = c.serves if into is not None else self.served(index)
        return {"memory_section": {"kept": reason is None, "tokens": c.tokens, "reason": reason,
                                   "joined": self.candidates[into].id if into is not None else None,
                                   "serves": list(serves)}}  # fmt: skip

    def to_json(self) -> dict[str, object]:
        return {
            "budget": self.budget,
            "used": self.used,
            "kept": len(self.kept),
            "served": [list(self.served(i)) for i in self.kept],
            "skipped": [{"id": s.id, "tokens": s.tokens, "reason": s.reason} for s in self.skipped],
        }


def candidates(
    units: Sequence[MemoryUnit],
    count: Callable[[str], int],
    links: Mapping[str, Sequence[str]] | None = None,
    windows: Mapping[str, Sequence[MemoryUnit]] | None = None,
) -> list[Candidate]:
    """Render and count each unit once. `links`: unit id -> ids of the units that cover it; `windows`: an archived
    turn's id -> the turns of its excerpt (memclaw.recall.archive.window; the turn alone when not given)."""
    links = links or {}
    windows = windows or {}
    out = []
    for u in units:
        window = tuple(windows.get(u.id) or ((u,) if u.kind == "archive" else ()))
        item = excerpt_item(window) if window else memory_item(u)
        out.append(Candidate(u.id, item, count(item) + ITEM_JOIN, tuple(links.get(u.id, ())), window))
    return out


def fill_hits(hits: Sequence[RecallHit], budget: int, count: Callable[[str], int], *, join: bool = True) -> SectionFill:
    """The memory section that recalled `hits` (best first) fill within `budget` tokens."""
    cands = candidates([h.unit for h in hits], count, {h.unit.id: h.covered_by for h in hits},
                       {h.unit.id: h.excerpt for h in hits})  # fmt: skip
    return fill(cands, budget, count, join=join)


def fill(
    cands: Sequence[Candidate], budget: int, count: Callable[[str], int] | None = None, *, join: bool = True
) -> SectionFill:
    """Which candidates, best first, go into a memory section of `budget` tokens (see the module docstring).

    An excerpt that does not fit whole is cut with `count`; without `count` it is skipped like any memory that does
    not fit. The section's candidates then hold the excerpt as served.

    `join`: an excerpt of a kept excerpt's chunk joins its item (docs/decisions/0006-one-item-per-conversation.md).
    Without it, each excerpt is an item."""
    res = SectionFill(budget, list(cands))
    kept_ids: set[str] = set()
    # A turn -> the kept excerpt it is in
    served_by: dict[str, str] = {}
    for i, c in enumerate(cands):
        cover = next((x for x in c.covered_by if x in kept_ids), None)
        if cover is not None:
            res.skipped.append(Skip(i, c.id, c.tokens, f"covered by {cover} (its summary, in)"))
            continue
        if c.id in served_by:
            res.skipped.append(Skip(i, c.id, c.tokens, f"in the excerpt of {served_by[c.id]}"))
            continue
        if c.window:
            c = res.candidates[i] = _unserved_part(c, served_by, count)
        into = _same_chunk(res, c) if join and count is not None else None
        if into is not None and count is not None:
            if not _join(res, i, into, count):
                res.skipped.append(Skip(i, c.id, c.tokens, f"no room: {counted(budget - res.used, 'token')} left"))
                continue
            kept_ids.add(c.id)
            for uid in res.candidates[i].serves:
                served_by[uid] = res.candidates[into].id
            continue
        if c.window and count is not None and res.used + c.tokens > budget:
            cut = fit_excerpt(c.window, c.focus, budget - res.used - ITEM_JOIN, count)
            if cut is not None:
                c = res.candidates[i] = Candidate(c.id, cut.item, cut.tokens + ITEM_JOIN, c.covered_by, cut.part)
        if res.used + c.tokens > budget:
            left = counted(budget - res.used, "token")
            res.skipped.append(Skip(i, c.id, c.tokens, f"no room: {c.tokens} > {left} left"))
            continue
        res.kept.append(i)
        res.used += c.tokens
        kept_ids.add(c.id)
        # An elided turn is not served: it can still come on its own
        for uid in c.serves if c.window else ():
            served_by[uid] = c.id
    return res


def _unserved_part(c: Candidate, served_by: Mapping[str, str], count: Callable[[str], int] | None) -> Candidate:
    """The excerpt without the turns another kept excerpt serves (the run of turns around its match)."""
    if not any(t.id in served_by for t in c.window) or count is None:
        return c
    lo = hi = c.focus
    while lo > 0 and c.window[lo - 1].id not in served_by:
        lo -= 1
    while hi + 1 < len(c.window) and c.window[hi + 1].id not in served_by:
        hi += 1
    part = c.window[lo : hi + 1]
    item = excerpt_item(part)
    return Candidate(c.id, item, count(item) + ITEM_JOIN, c.covered_by, part)


def _same_chunk(res: SectionFill, c: Candidate) -> int | None:
    """The kept excerpt (its index) of the chunk excerpt `c` comes from, if any."""
    key = chunk_of(c.window[c.focus].source, c.window[c.focus].extra) if c.window else None
    if key is None:
        return None
    firsts = ((k, res.candidates[k].window[0]) for k in res.kept if res.candidates[k].window)
    return next((k for k, t in firsts if chunk_of(t.source, t.extra) == key), None)


def _join(res: SectionFill, i: int, into: int, count: Callable[[str], int]) -> bool:
    """Join excerpt `i` to the kept item `into` of its chunk: its largest part that the budget leaves room for
    (memclaw.context._excerpts.fit_excerpt). The item grows; `i` records what it added. False when not even a cut of
    its matched turn fits."""
    c, k = res.candidates[i], res.candidates[into]
    cut = fit_excerpt(c.window, c.focus, res.budget - res.used + k.tokens - ITEM_JOIN, count, around=k.window)
    if cut is None:
        return False
    grows = cut.tokens + ITEM_JOIN - k.tokens
    res.candidates[into] = Candidate(k.id, cut.item, cut.tokens + ITEM_JOIN, k.covered_by, cut.shown)
    res.candidates[i] = Candidate(c.id, excerpt_item(cut.part), grows, c.covered_by, cut.part)
    res.joined[i] = into
    res.used += grows
    return True
