"""Split a long answer into messages under a chat platform's length limit (Discord: 2,000 characters).

Pure logic. Splits prefer paragraph boundaries (a blank line outside code), then line boundaries outside code,
then line boundaries inside a code block; a single line longer than the limit is cut at a space when possible.
A code fence cut by a split is closed at the end of one chunk and reopened, with the same language tag, at the
start of the next, so every chunk renders as valid Markdown on its own.

Lengths are counted in UTF-16 code units, which is never less than the number of characters: a chunk that fits
by that measure fits under either way of counting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DISCORD_LIMIT = 2000

_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})(.*)$")
# A preferred boundary is used only if the chunk is at least this full
_MIN_FILL = 0.5


def text_len(s: str) -> int:
    """Length in UTF-16 code units (what JavaScript's String.length counts)."""
    return len(s.encode("utf-16-le")) // 2


@dataclass(frozen=True)
class _Fence:
    # e.g. "```" or "~~~~"
    marker: str
    # First word of the info string, e.g. "python"; may be empty
    lang: str

    @property
    def open_line(self) -> str:
        return self.marker + self.lang

    @property
    def close_line(self) -> str:
        return self.marker


def _fence_states(lines: list[str]) -> list[_Fence | None]:
    """states[i] is the fence open *before* line i; states[len(lines)] the one open at the end."""
    states: list[_Fence | None] = []
    cur: _Fence | None = None
    for line in lines:
        states.append(cur)
        m = _FENCE_RE.match(line)
        if not m:
            continue
        marker, info = m.group(1), m.group(2)
        if cur is None:
            if marker[0] == "`" and "`" in info:
                # Inline code like ```x``` is not a fence
                continue
            cur = _Fence(marker, info.strip().split(" ", 1)[0] if info.strip() else "")
        elif marker[0] == cur.marker[0] and len(marker) >= len(cur.marker) and not info.strip():
            cur = None
    states.append(cur)
    return states


def _hard_split(line: str, width: int) -> list[str]:
    """Cut one over-long line into pieces of at most `width` units, at a space when one is near the end."""
    pieces: list[str] = []
    rest = line
    while text_len(rest) > width:
        cut = width
        # Astral characters count twice
        while text_len(rest[:cut]) > width:
            cut -= 1
        space = rest.rfind(" ", 0, cut)
        if space > cut // 2:
            cut = space + 1
        pieces.append(rest[:cut].rstrip(" ") or rest[:cut])
        rest = rest[cut:]
    pieces.append(rest)
    return pieces


def split_message(text: str, limit: int = DISCORD_LIMIT) -> list[str]:
    """Split `text` into chunks of at most `limit` UTF-16 units each, never breaking a code fence.

    Returns [] for blank text. Chunks carry no leading or trailing blank lines outside code blocks.
    """
    if limit < 40:
        raise ValueError("limit must be at least 40 characters")
    text = text.replace("\r\n", "\n").strip("\n")
    if not text.strip():
        return []
    if text_len(text) <= limit:
        return [text]

    raw_lines = text.split("\n")
    # Reserve room for a reopened fence line at the start and a closing fence at the end of a chunk.
    longest_fence = max((len(ln.strip()) for ln in raw_lines if _FENCE_RE.match(ln)), default=0)
    reserve = 2 * min(longest_fence, 40) + 2
    width = limit - reserve
    lines: list[str] = []
    for ln in raw_lines:
        lines.extend(_hard_split(ln, width) if text_len(ln) > width else [ln])
    states = _fence_states(lines)
    sizes = [text_len(ln) for ln in lines]

    def chunk_len(s: int, e: int) -> int:
        n = sum(sizes[s:e]) + (e - s - 1)
        if states[s] is not None:
            n += text_len(states[s].open_line) + 1
        if states[e] is not None:
            n += text_len(states[e].close_line) + 1
        return n

    def render(s: int, e: int) -> str:
        body = lines[s:e]
        if states[s] is None:
            while body and not body[0].strip():
                body = body[1:]
        if states[e] is None:
            while body and not body[-1].strip():
                body = body[:-1]
        parts = ([states[s].open_line] if states[s] is not None else []) + body
        if states[e] is not None:
            parts.append(states[e].close_line)
        return "\n".join(parts)

    chunks: list[str] = []
    s, n = 0, len(lines)
    while s < n:
        # Skip blank lines between chunks (outside code).
        while s < n and states[s] is None and not lines[s].strip():
            s += 1
        if s >= n:
            break
        # At least one line always fits (over-long lines were cut above)
        e = s + 1
        while e < n and chunk_len(s, e + 1) <= limit:
            e += 1
        if e < n:
            e = _best_cut(lines, states, s, e, lambda j, s=s: chunk_len(s, j) >= limit * _MIN_FILL)
        chunk = render(s, e)
        if chunk.strip():
            chunks.append(chunk)
        s = e
    return chunks


def _best_cut(lines: list[str], states: list[_Fence | None], s: int, e: int, full_enough) -> int:
    """The cut in (s, e] to use: a paragraph break outside code, else a line break outside code, else e."""
    for j in range(e, s, -1):
        if states[j] is None and not lines[j - 1].strip() and full_enough(j):
            return j
    for j in range(e, s, -1):
        if states[j] is None and full_enough(j):
            return j
    return e
