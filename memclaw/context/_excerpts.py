"""Excerpts of the archive in the memory section (pure): how a window of archived turns is written as one item, and
how it is cut to what the budget leaves.

An archived turn that recall returns comes with its window (memclaw.recall.archive.window): the turns of its chunk
around it. It is served as one item, dated with its first turn's time and marked as conversation, the turns in
order, each as `speaker: text`, separated by ` / ` (a turn's own further lines are indented, as every item's are):

    - (2026-11-25 14:02, conversation) Maya: Lena booked Taberna da Ribeira for Friday / memclaw: … / Maya: ...

A reply of the agent beside the matched turn is shown as said, not what (memclaw.recall.archive.elided). Such a
turn is not served by the excerpt. Two excerpts of one chunk are one item with one date label, the conversation in
order. A run of turns left out between them is marked with `…`:

    - (2026-11-25 14:02, conversation) Maya: ... / memclaw: ... / … / Maya: ...

When the whole window does not fit, the turns farthest from the one that matched go first. Turns before it go
before those after it, since an answer follows its question. When the matched turn alone does not fit, its text is
cut at a word, marked with `…`, down to MIN_CUT_WORDS. Nothing but the window is ever served: never a whole chunk
or day.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from memclaw.context.tag_guard import unforgeable
from memclaw.markdown.units import MemoryUnit
from memclaw.recall.archive import ELIDED

MEMORIES_TAG = "recalled-memories"
"""The tag that quotes the memory section (memclaw.context.sections)."""
TURN_SEP = " / "
GAP = "…"
"""Stands for the turns of the chunk left out between two runs of one item."""
CUT_MARK = " …"
MIN_CUT_WORDS = 8
"""A matched turn cut shorter than this many words is not served (a few words out of context tell little)."""


def escape(text: str) -> str:
    """The text as the memory section quotes it: as written, but for a `<` that would open or close the
    `<recalled-memories>` block (memclaw.context.tag_guard.unforgeable)."""
    return unforgeable(text, MEMORIES_TAG)


def excerpt_item(turns: Sequence[MemoryUnit]) -> str:
    """The memory-section item of these turns of one chunk, in order (see the module docstring): a gap in their
    positions (`extra["turn"]`) is shown as GAP."""
    first = turns[0]
    label = f"{first.timestamp:%Y-%m-%d %H:%M}, conversation" if first.timestamp else "conversation"
    parts: list[str] = []
    for prev, t in zip((None, *turns), turns, strict=False):
        if prev is not None and turn_position(t) - turn_position(prev) > 1:
            parts.append(GAP)
        parts.append(escape(t.text.strip()))
    return f"- ({label}) {TURN_SEP.join(parts).replace(chr(10), chr(10) + '  ')}"


def turn_position(turn: MemoryUnit) -> int:
    """An archived turn's 0-based position in its chunk (memclaw.markdown.archive); -1 when it has none."""
    pos = turn.extra.get("turn", "")
    return int(pos) if pos.isdigit() else -1


def joined_turns(kept: Sequence[MemoryUnit], more: Sequence[MemoryUnit]) -> tuple[MemoryUnit, ...]:
    """The turns of two excerpts of one chunk as one, in chunk order; a turn in both is shown once, as its words
    when either shows them (an elided reply beside one excerpt may be what the other matched)."""
    by_id: dict[str, MemoryUnit] = {}
    for t in (*kept, *more):
        if t.id not in by_id or ELIDED in by_id[t.id].extra:
            by_id[t.id] = t
    return tuple(sorted(by_id.values(), key=turn_position))


def sub_windows(n: int, focus: int) -> Iterator[tuple[int, int]]:
    """The (start, end) slices of a window of `n` turns, matched turn at `focus`, from the whole window down to the
    matched turn alone: the farthest turns go first, those before it first."""
    lo, hi = 0, n
    yield lo, hi
    while hi - lo > 1:
        if focus - lo >= hi - 1 - focus and lo < focus:
            lo += 1
        else:
            hi -= 1
        yield lo, hi


@dataclass(frozen=True)
class Fit:
    """A part of an excerpt's window that fits: its turns, the turns its item shows (with those of the excerpt it
    joins, if any), that item and its tokens."""

    part: tuple[MemoryUnit, ...]
    shown: tuple[MemoryUnit, ...]
    item: str
    tokens: int


def fit_excerpt(
    turns: Sequence[MemoryUnit],
    focus: int,
    room: int,
    count: Callable[[str], int],
    around: Sequence[MemoryUnit] = (),
) -> Fit | None:
    """The largest part of the window whose item costs at most `room` tokens; None when not even a cut of the
    matched turn fits. `around`: the turns of a kept excerpt of the same chunk it joins (the item and its cost are
    then those of the joined item: `joined_turns`)."""
    for lo, hi in sub_windows(len(turns), focus):
        fit = _fit(tuple(turns[lo:hi]), around, count)
        if fit.tokens <= room:
            return fit
    return _cut_turn(turns[focus], room, count, around)


def _fit(part: tuple[MemoryUnit, ...], around: Sequence[MemoryUnit], count: Callable[[str], int]) -> Fit:
    shown = joined_turns(around, part)
    item = excerpt_item(shown)
    return Fit(part, shown, item, count(item))


def _cut_turn(turn: MemoryUnit, room: int, count: Callable[[str], int], around: Sequence[MemoryUnit]) -> Fit | None:
    """The matched turn cut at a word so that its item fits `room` (the longest such cut), or None."""
    words = turn.text.split(" ")
    best = None
    lo, hi = MIN_CUT_WORDS, len(words) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        fit = _fit((dataclasses.replace(turn, text=" ".join(words[:mid]).rstrip() + CUT_MARK),), around, count)
        if fit.tokens <= room:
            best, lo = fit, mid + 1
        else:
            hi = mid - 1
    return best
