"""Long memory units split into passages for embedding, and the context a short archived turn is embedded with.

A long unit is embedded as passages of at most `max_words` words, cut at line or sentence boundaries.
MiniLM truncates at 256 word pieces, and one vector would blur a long session summary.
On LoCoMo's raw sessions, passages raised recall@5 from 0.52 to 0.74.
A long unit also gets one vector of its head: the whole text, which the model truncates.
A short unit's only passage is its whole text, so it is its own head.
Which of these vectors make a unit's similarity is the setting `recall.vector_signal`.

A short archived turn means little alone ("Yes, last Friday!"), so its vector is blended with its context's.
The context is `turn_context`: the end of the turn before it, itself, and the start of the turn after it.
Why: docs/decisions/0007-a-turn-embedded-with-its-neighbours.md.
A long turn's passages carry their own context.
All of it is pure: no I/O.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from memclaw.index.unittable import TextColumn
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


def unit_vectors(unit_id: str, text: str, *, whole: bool = False) -> list[tuple[str, str]]:
    """(vector-store id, text) of every vector a unit is embedded as: its passages, then its head if it has more
    than one passage. `whole`: a long unit's head alone (the agent's replies may be embedded so, the setting
    memory.agent_reply_vectors); a short unit is its own head either way."""
    if whole and is_long(text):
        return [(head_id(unit_id), text)]
    parts = split_passages(text)
    out = list(zip(passage_ids(unit_id, len(parts)), parts, strict=True))
    if len(parts) > 1:
        out.append((head_id(unit_id), text))
    return out


def turn_context(before: str | None, text: str, after: str | None, words: int = CONTEXT_WORDS) -> str | None:
    """What a short archived turn is embedded with besides itself, or None for a long turn or one without context.

    The context is the last `words` words of the turn before it, the turn, and the first `words` of the turn after.
    A long neighbour is left out: it would drown the turn, as measured on LongMemEval.
    """
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
    """The rows of the turns each short archived turn is read with: the turn before it and the turn after it.

    Each array holds -1 where that neighbour is missing or long.
    Both are -1 for a long turn, a turn with no short neighbour, or a unit that is no archived turn.
    This is the one rule for the vector's context (`turn_context`) and the words' (memclaw.index.bm25_context).
    With `rows`, only those rows are read and the arrays follow `rows`, so an append sync does not read the scope.
    One vectorised pass reads 100k turns in about 0.1 s.
    """
    c = table.columns
    n = len(c["ids"])
    if rows is None:
        # the rows whose columns are read; where each asked row is among them
        read = at = np.arange(n)
    else:
        asked = np.asarray(rows, np.int64)
        read = np.unique(np.clip(np.concatenate([asked - 1, asked, asked + 1]), 0, max(n - 1, 0)))
        at = np.searchsorted(read, asked)
    m = len(read)
    rows_read = range(n) if rows is None else read.tolist()
    texts = c["texts"] if rows is None else [c["texts"][r] for r in rows_read]
    is_short = short_texts(texts)
    extras, extra_ix, source_ix = c["extras"], c["extra_ix"], c["source_ix"]
    keys: dict[tuple, int] = {}
    chunk = np.full(m, -1, np.int64)
    for i, row in enumerate(rows_read):
        key = chunk_of(str(source_ix[row]), dict(extras[extra_ix[row]]))
        if key is not None:
            chunk[i] = keys.setdefault(key, len(keys))
    short = is_short & (chunk >= 0)
    # read[i] and read[i + 1] are consecutive turns of one chunk
    same = np.zeros(m, np.bool_)
    same[:-1] = (chunk[:-1] == chunk[1:]) & (chunk[:-1] >= 0) & (np.diff(read) == 1)
    before = short & np.r_[False, same[:-1]] & np.r_[False, short[:-1]]
    after = short & same & np.r_[short[1:], False]
    row = read[at]
    return np.where(before[at], row - 1, -1), np.where(after[at], row + 1, -1)


def short_texts(texts: Sequence[str]) -> np.ndarray:
    """`not is_long(t)` of every text, as a bool array, reading as little of each as that needs.

    A text of at most 2 * MAX_WORDS - 1 characters holds at most MAX_WORDS words. From a loaded table (TextColumn),
    such a row is known by its length in bytes, without decoding it. Any other text is split at MAX_WORDS words
    at most: more than MAX_WORDS words leave MAX_WORDS + 1 parts. A cold recall reads every row's answer.
    """
    out = np.zeros(len(texts), np.bool_)
    if isinstance(texts, TextColumn):
        sure = texts.byte_lengths() <= 2 * MAX_WORDS - 1
        out[sure] = True
        todo = np.flatnonzero(~sure).tolist()
    else:
        todo = range(len(texts))
    for i in todo:
        out[i] = len(texts[i].split(None, MAX_WORDS)) <= MAX_WORDS
    return out


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
