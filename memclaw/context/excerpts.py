"""Excerpts of the archive in the memory section (pure): how a window of archived turns is written as one item, and
how it is cut to what the budget leaves.

An archived turn that recall returns comes with its window (memclaw.recall.archive.window): the turns of its chunk
around it. It is served as one item, dated with its first turn's time and marked as conversation, the turns in
order, each as `speaker: text`, separated by ` / ` (a turn's own further lines are indented, as every item's are):

    - (2026-11-25 14:02, conversation) Maya: Lena booked Taberna da Ribeira for Friday / memclaw: … / Maya: ...

(a reply of the agent beside the matched turn is shown as said, not what: memclaw.recall.archive.elided; such a
turn is not served by the excerpt, memclaw.context.memory_section).

When the whole window does not fit, the turns farthest from the one that matched go first, those before it
before those after it (an answer follows its question); when the matched turn alone does not fit, its text is cut
at a word, marked with `…`, down to MIN_CUT_WORDS. Nothing but the window is ever served: never a whole chunk or day.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from memclaw.markdown.units import MemoryUnit

TURN_SEP = " / "
CUT_MARK = " …"
MIN_CUT_WORDS = 8
"""A matched turn cut shorter than this many words is not served (a few words out of context tell little)."""


def escape(text: str) -> str:
    """No `<` is left, so nothing can open or close a tag; `&` too, so no escape can be forged."""
    return text.replace("&", "&amp;").replace("<", "&lt;")


def excerpt_item(turns: Sequence[MemoryUnit]) -> str:
    """The memory-section item of these consecutive turns of one chunk (see the module docstring)."""
    first = turns[0]
    label = f"{first.timestamp:%Y-%m-%d %H:%M}, conversation" if first.timestamp else "conversation"
    body = TURN_SEP.join(t.text.strip() for t in turns)
    return f"- ({label}) {escape(body).replace(chr(10), chr(10) + '  ')}"


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


def fit_excerpt(
    turns: Sequence[MemoryUnit], focus: int, room: int, count: Callable[[str], int]
) -> tuple[tuple[MemoryUnit, ...], str, int] | None:
    """The largest part of the window whose item costs at most `room` tokens: its turns, its item and its cost;
    None when not even a cut of the matched turn fits."""
    for lo, hi in sub_windows(len(turns), focus):
        part = tuple(turns[lo:hi])
        item = excerpt_item(part)
        cost = count(item)
        if cost <= room:
            return part, item, cost
    return _cut_turn(turns[focus], room, count)


def _cut_turn(
    turn: MemoryUnit, room: int, count: Callable[[str], int]
) -> tuple[tuple[MemoryUnit, ...], str, int] | None:
    """The matched turn cut at a word so that its item fits `room` (the longest such cut), or None."""
    import dataclasses

    words = turn.text.split(" ")
    best = None
    lo, hi = MIN_CUT_WORDS, len(words) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        cut = dataclasses.replace(turn, text=" ".join(words[:mid]).rstrip() + CUT_MARK)
        item = excerpt_item((cut,))
        cost = count(item)
        if cost <= room:
            best, lo = ((cut,), item, cost), mid + 1
        else:
            hi = mid - 1
    return best
