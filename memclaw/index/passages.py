"""Split long memory units into passages for embedding (pure).

MiniLM truncates at 256 word pieces, and one vector for a long session summary blurs it: a long history entry
is embedded as several passages of at most `max_words` words, cut at line or sentence boundaries (measured on
LoCoMo raw sessions: recall@5 0.52 -> 0.74). A long unit also gets one vector of its own head (the whole text,
which the model truncates at its token limit): the unit as a whole, as a plain one-vector-per-unit index sees it.
A short unit's only passage is its whole text, so it is its own head. Which of these vectors make a unit's
similarity is the recall setting `recall.vector_signal`.

A short archived turn means little alone ("Yes, last Friday!", "How'd the kids like it?"), so its one vector is
blended with its context's (memclaw.index.vector_writer): `turn_context`, the end of the turn before it, itself and
the start of the turn after it (short neighbours only). Measured (benchmarks/README.md, "A turn embedded with the turns
beside it"): on LoCoMo's raw sessions the evidence among the vector signal's top 40 turns 0.692 -> 0.730 (equal
weights), recall within 1,024 tokens 0.836 -> 0.842 (the context at half weight, memclaw.index.vector_writer). A
long turn's passages carry their own context and are embedded as before.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from memclaw.markdown.archive_units import chunk_of

if TYPE_CHECKING:
    from memclaw.index.unittable import UnitTable

MAX_WORDS = 60
CONTEXT_WORDS = 40
"""Words of each neighbour a short turn's context takes (the end of the one before, the start of the one after)."""
HEAD = "h"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_SEP = "~"


def split_passages(text: str, max_words: int = MAX_WORDS) -> list[str]:
    """Passages of at most ~max_words words, cut at line, then sentence, boundaries. Short texts stay whole."""
    if not is_long(text, max_words):
        words = text.split()
        return [" ".join(words)] if words else [""]
    pieces: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        for sentence in _SENTENCE.split(line):
            sw = sentence.split()
            # A single over-long sentence is cut into word windows.
            for i in range(0, len(sw), max_words):
                pieces.append(" ".join(sw[i : i + max_words]))
    out: list[str] = []
    cur: list[str] = []
    n = 0
    for p in pieces:
        w = len(p.split())
        if cur and n + w > max_words:
            out.append(" ".join(cur))
            cur, n = [], 0
        cur.append(p)
        n += w
    if cur:
        out.append(" ".join(cur))
    return out


def unit_vectors(unit_id: str, text: str) -> list[tuple[str, str]]:
    """(vector-store id, text) of every vector a unit is embedded as: its passages, then its head if it has more
    than one passage."""
    parts = split_passages(text)
    out = list(zip(passage_ids(unit_id, len(parts)), parts, strict=True))
    if len(parts) > 1:
        out.append((head_id(unit_id), text))
    return out


def turn_context(before: str | None, text: str, after: str | None, words: int = CONTEXT_WORDS) -> str | None:
    """What a short archived turn is embedded with besides itself: the last `words` words of the turn before it, the
    turn, the first `words` of the turn after it, separated as in an excerpt; a long neighbour (an essay of a reply)
    is left out, it would drown the turn (measured on LongMemEval); None for a long turn or one with no short
    neighbour."""
    before = None if before is None or is_long(before) else before
    after = None if after is None or is_long(after) else after
    if is_long(text) or (before is None and after is None):
        return None
    parts = [" ".join(before.split()[-words:])] if before is not None else []
    parts.append(text)
    if after is not None:
        parts.append(" ".join(after.split()[:words]))
    return " / ".join(parts)


def context_rows(table: UnitTable, row: int) -> tuple[int | None, int | None] | None:
    """The rows of the turns a short archived turn (at `row`) is read with, before and after it in its chunk (None
    where there is none or it is long), or None when the turn has no context: it is long, or has no short neighbour.
    The one rule for the vector's context (`turn_context`) and the words' (memclaw.index.bm25_context)."""
    texts = table.texts
    if is_long(texts[row]):
        return None
    span = table.chunk_span(row, 1, 1)
    before = row - 1 if span.start < row and not is_long(texts[row - 1]) else None
    after = row + 1 if span.stop > row + 1 and not is_long(texts[row + 1]) else None
    return None if before is None and after is None else (before, after)


def context_rows_all(table: UnitTable) -> tuple[np.ndarray, np.ndarray]:
    """`context_rows` for every row at once, as two arrays: the row of the turn before and after each row's context
    (-1 where there is none; both -1 for a row without context). Vectorised: one pass over the columns (a scope of
    100k turns in a fraction of a second; tests check it agrees with `context_rows` row by row)."""
    c = table.columns
    n = len(c["ids"])
    words = np.fromiter((len(t.split()) for t in c["texts"]), np.int64, n)
    keys: dict[tuple, int] = {}
    chunk = np.full(n, -1, np.int64)
    extras, extra_ix, source_ix = c["extras"], c["extra_ix"], c["source_ix"]
    for row in range(n):
        key = chunk_of(str(source_ix[row]), dict(extras[extra_ix[row]]))
        if key is not None:
            chunk[row] = keys.setdefault(key, len(keys))
    short = (words <= MAX_WORDS) & (chunk >= 0)
    same = np.zeros(n, np.bool_)  # row r and row r + 1 are turns of one chunk
    same[:-1] = (chunk[:-1] == chunk[1:]) & (chunk[:-1] >= 0)
    rows = np.arange(n)
    before = np.where(short & np.r_[False, same[:-1]] & np.r_[False, short[:-1]], rows - 1, -1)
    after = np.where(short & same & np.r_[short[1:], False], rows + 1, -1)
    none = (before < 0) & (after < 0)
    return np.where(none, -1, before), np.where(none, -1, after)


def is_long(text: str, max_words: int = MAX_WORDS) -> bool:
    """The text is split into more than one passage (and so has a head vector of its own)."""
    return len(text.split()) > max_words


def head_id(unit_id: str) -> str:
    return f"{unit_id}{_SEP}{HEAD}"


def is_head(vector_id: str) -> bool:
    return vector_id.endswith(_SEP + HEAD)


def passage_ids(unit_id: str, n: int) -> list[str]:
    """Vector-store ids of a unit's passages: the unit id itself, then `<id>~1`, `<id>~2`, ..."""
    return [unit_id] + [f"{unit_id}{_SEP}{i}" for i in range(1, n)]


def unit_of(passage_id: str) -> str:
    return passage_id.split(_SEP, 1)[0]
