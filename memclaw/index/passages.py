"""Split long memory units into passages for embedding (pure).

MiniLM truncates at 256 word pieces, and one vector for a long session summary blurs it: a long history entry
is embedded as several passages of at most `max_words` words, cut at line or sentence boundaries (measured on
LoCoMo raw sessions: recall@5 0.52 -> 0.74). A long unit also gets one vector of its own head (the whole text,
which the model truncates at its token limit): the unit as a whole, as a plain one-vector-per-unit index sees it.
A short unit's only passage is its whole text, so it is its own head. Which of these vectors make a unit's
similarity is the recall setting `recall.vector_signal`.

A short archived turn means little alone ("Yes, last Friday!", "How'd the kids like it?"), so its one vector is
blended with its context's (memclaw.index.vector_writer): `turn_context`, the end of the turn before it, itself and
the start of the turn after it (short neighbours only). Measured
(docs/decisions/0007-a-turn-embedded-with-its-neighbours.md): on LoCoMo's raw sessions the evidence among the
vector signal's top 40 turns 0.692 -> 0.730 (equal
weights), recall within 1,024 tokens 0.836 -> 0.842 (the context at half weight, memclaw.index.vector_writer). A
long turn's passages carry their own context and are embedded as before.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from memclaw.markdown.archive import chunk_of

if TYPE_CHECKING:
    from collections.abc import Sequence

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


def context_rows_all(table: UnitTable, rows: Sequence[int] | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The rows of the turns each short archived turn is read with, as two arrays: the turn before it and the turn
    after it in its chunk, each only if short (-1 where there is none or it is long); both -1 for a row without
    context: a long turn, a turn with no short neighbour, a unit that is no archived turn. The one rule for the
    vector's context (`turn_context`, memclaw.index.sync) and the words' (memclaw.index.bm25_context).

    For every row of the table, or for `rows` only (the arrays then follow `rows`: an append sync reads its new
    turns and the rows beside them, not the scope). Vectorised: one pass over the rows read (a scope of 100k turns
    in ~0.1 s, 20 appended turns in well under a millisecond)."""
    c = table.columns
    n = len(c["ids"])
    if rows is None:
        read = at = np.arange(n)  # the rows whose columns are read; where each asked row is among them
    else:
        asked = np.asarray(rows, np.int64)
        read = np.unique(np.clip(np.concatenate([asked - 1, asked, asked + 1]), 0, max(n - 1, 0)))
        at = np.searchsorted(read, asked)
    m = len(read)
    rows_read = range(n) if rows is None else read.tolist()
    texts = c["texts"] if rows is None else [c["texts"][r] for r in rows_read]
    words = np.fromiter((len(t.split()) for t in texts), np.int64, m)
    extras, extra_ix, source_ix = c["extras"], c["extra_ix"], c["source_ix"]
    keys: dict[tuple, int] = {}
    chunk = np.full(m, -1, np.int64)
    for i, row in enumerate(rows_read):
        key = chunk_of(str(source_ix[row]), dict(extras[extra_ix[row]]))
        if key is not None:
            chunk[i] = keys.setdefault(key, len(keys))
    short = (words <= MAX_WORDS) & (chunk >= 0)
    same = np.zeros(m, np.bool_)  # read[i] and read[i + 1] are consecutive turns of one chunk
    same[:-1] = (chunk[:-1] == chunk[1:]) & (chunk[:-1] >= 0) & (np.diff(read) == 1)
    before = short & np.r_[False, same[:-1]] & np.r_[False, short[:-1]]
    after = short & same & np.r_[short[1:], False]
    row = read[at]
    return np.where(before[at], row - 1, -1), np.where(after[at], row + 1, -1)


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
