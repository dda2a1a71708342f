"""The approaches memclaw replaces, run on the same Markdown and scored on the same units.

* `grep` (what nanobot does): the query's keywords (words of >= 3 characters minus a small stop list) as one
  case-insensitive regex alternation over MEMORY.md then HISTORY.md; matching lines in file order, mapped to
  the units that contain them (first occurrence wins).
* `grep-ranked`: the same matching units, ranked by how many distinct query keywords each unit's text contains
  (substring match); ties keep file order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memclaw.markdown.units import MemoryUnit

STOP_WORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "was",
        "were",
        "what",
        "when",
        "where",
        "who",
        "whom",
        "which",
        "why",
        "how",
        "did",
        "does",
        "has",
        "have",
        "had",
        "with",
        "from",
        "that",
        "this",
        "these",
        "those",
        "you",
        "your",
        "his",
        "her",
        "hers",
        "its",
        "our",
        "their",
        "them",
        "they",
        "she",
        "him",
        "there",
        "then",
        "than",
        "into",
        "onto",
        "about",
        "after",
        "before",
        "over",
        "under",
        "some",
        "any",
        "all",
        "not",
        "but",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "been",
        "being",
        "also",
        "just",
        "very",
        "more",
        "most",
        "much",
        "many",
        "such",
        "only",
        "own",
        "same",
        "too",
        "out",
        "off",
        "per",
        "via",
        "get",
        "got",
    ]
)
_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")


def keywords(query: str) -> list[str]:
    """Distinct lower-cased query words of >= 3 characters that are not stop words, in query order."""
    out: list[str] = []
    for w in _WORD.findall(query.lower()):
        w = w.split("'")[0]
        if len(w) >= 3 and w not in STOP_WORDS and w not in out:
            out.append(w)
    return out


@dataclass
class GrepIndex:
    """The memory files' lines and which unit each line belongs to (None for headings and blank lines)."""

    # (line text, unit id) in file order, MEMORY.md then HISTORY.md
    lines: list[tuple[str, str | None]]
    # Unit id -> unit text (lower-cased), for grep-ranked
    texts: dict[str, str]

    @classmethod
    def build(cls, root: Path, units: Sequence[MemoryUnit]) -> GrepIndex:
        """`units` as parsed from the files under `root` (their `source` and 1-based `line`)."""
        by_source: dict[str, list[MemoryUnit]] = {}
        for u in units:
            by_source.setdefault(u.source, []).append(u)
        lines: list[tuple[str, str | None]] = []
        for source in sorted(by_source, key=lambda s: (0 if s.endswith("MEMORY.md") else 1, s)):
            us = sorted(by_source[source], key=lambda u: u.line)
            file_lines = (Path(root) / source).read_text("utf-8").splitlines()
            owner: list[str | None] = [None] * len(file_lines)
            for i, u in enumerate(us):
                end = us[i + 1].line - 1 if i + 1 < len(us) else len(file_lines)
                for ln in range(u.line, end + 1):
                    text = file_lines[ln - 1].strip() if ln - 1 < len(file_lines) else ""
                    if not text or (u.kind == "fact" and text.startswith("#")):
                        if u.kind == "fact":
                            # A fact ends at a blank line or a heading
                            break
                        continue
                    owner[ln - 1] = u.id
            lines.extend(zip(file_lines, owner, strict=True))
        return cls(lines, {u.id: u.text.lower() for u in units})

    def grep(self, query: str, k: int | None = None) -> list[str]:
        """Units of the lines matching any keyword (case-insensitive), in file order."""
        kws = keywords(query)
        if not kws:
            return []
        pattern = re.compile("|".join(re.escape(w) for w in kws), re.IGNORECASE)
        out: list[str] = []
        seen: set[str] = set()
        for text, uid in self.lines:
            if uid is not None and uid not in seen and pattern.search(text):
                seen.add(uid)
                out.append(uid)
                if k is not None and len(out) >= k:
                    break
        return out

    def grep_ranked(self, query: str, k: int | None = None) -> list[str]:
        """The grep matches ranked by the number of distinct keywords each unit's text contains."""
        kws = keywords(query)
        matches = self.grep(query)
        scored = [(sum(1 for w in kws if w in self.texts.get(uid, "")), i, uid) for i, uid in enumerate(matches)]
        scored.sort(key=lambda t: (-t[0], t[1]))
        ranked = [uid for _s, _i, uid in scored]
        return ranked[:k] if k is not None else ranked
