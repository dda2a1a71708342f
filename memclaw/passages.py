"""Split long memory units into passages for embedding (pure).

MiniLM truncates at 256 word pieces, and one vector for a long session summary blurs it: a long history entry
is embedded as several passages of at most `max_words` words, cut at line or sentence boundaries, and a unit's
vector similarity is the best of its passages (measured on LoCoMo raw sessions: recall@5 0.52 -> 0.74).
"""

from __future__ import annotations

import re

MAX_WORDS = 60
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_SEP = "~"


def split_passages(text: str, max_words: int = MAX_WORDS) -> list[str]:
    """Passages of at most ~max_words words, cut at line, then sentence, boundaries. Short texts stay whole."""
    words = text.split()
    if len(words) <= max_words:
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


def passage_ids(unit_id: str, n: int) -> list[str]:
    """Vector-store ids of a unit's passages: the unit id itself, then `<id>~1`, `<id>~2`, ..."""
    return [unit_id] + [f"{unit_id}{_SEP}{i}" for i in range(1, n)]


def unit_of(passage_id: str) -> str:
    return passage_id.split(_SEP, 1)[0]
