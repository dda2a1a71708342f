"""The learned-mark every fact memclaw writes ends with: when it was learned, where a person sees it.

- `memory add` and the `remember` tool write ` (YYYY-MM-DD)`, the day it was said. A text that already ends in a
  date, as `(2023-05-08)` or `[2023-05-08]`, keeps that date and gets no other.
- Consolidation writes ` (YYYY-MM-DD #c7f3a9b21)`: the conversation's day and the consolidation's id, the id its
  history entry and archive chunk carry (memclaw.markdown.formats.fact_mark).
- A mark the model copied from the facts it was shown is dropped first. That is a mark with an id, the replaced
  fact's own date, or the learned day itself. A date the model ended the sentence with for its own reasons stays.

Relative dates are resolved against the learned day first: "tomorrow" becomes "tomorrow (2026-11-26)"
(memclaw.recall.written_dates). `bare_fact` is a fact's text without its mark, what "already remembered" compares.
"""

from __future__ import annotations

from datetime import date

from memclaw.markdown.fact_ops import normalize_fact_text
from memclaw.markdown.formats import fact_cid, fact_mark, split_trailing_date
from memclaw.recall.written_dates import resolve_relative_dates


def bare_fact(text: str) -> str:
    """A fact's text as written, without the date (or learned-mark) it ends in."""
    return split_trailing_date(normalize_fact_text(text))[0]


def mark_fact(text: str, learned: date, cid: str | None = None, *, replaces: str | None = None) -> str:
    """`text`, normalised, as memclaw writes it: relative dates resolved and the learned-mark at the end.

    `replaces` is the text of the fact an update rewrites: its date goes if the model copied it."""
    t = normalize_fact_text(text)
    body, day = split_trailing_date(t)
    if cid is None:
        if day is not None:
            return t
    elif day is not None and (
        fact_cid(t) is not None or day == learned.isoformat() or (replaces and split_trailing_date(replaces)[1] == day)
    ):
        # a mark copied from the facts shown, or the learned day said twice
        t = body
    if not t:
        return t
    return resolve_relative_dates(t, learned) + fact_mark(learned, cid)
