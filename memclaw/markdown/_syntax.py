"""The line-level syntax of MEMORY.md (pure): what block a line opens, closes or continues.

Each function looks at one line, stripped of its indentation unless said otherwise. The block scanner of
memclaw.markdown.memory_md reads lines through these, and so does the append fast path of memclaw.markdown.incremental.
So both always agree on what a line is. memclaw.markdown.fact_ops writes headings and items through `heading_line` and
`bullet_first_line`, which parse back to exactly the text they were given.
"""

from __future__ import annotations

import re

_BULLET = re.compile(r"[-*+]|[0-9]{1,9}[.)]")
_HEADING = re.compile(r"#{1,6}")
_THEMATIC = re.compile(r"([-*_])(?:[ \t]*\1){2,}[ \t]*\Z")
_SETEXT = re.compile(r"(=+|-+)[ \t]*\Z")
_FENCE = re.compile(r"(`{3,}|~{3,})(.*)\Z", re.S)
_CLOSING_HASHES = re.compile(r"(?:^| )#+\Z")
SETEXT_MAX_INDENT = 3


def dedent(line: str, n: int) -> str:
    """`line` without up to `n` leading whitespace characters."""
    i = 0
    while i < n and i < len(line) and line[i].isspace():
        i += 1
    return line[i:]


def atx_heading(s: str) -> tuple[int, str] | None:
    """(level, text) if the stripped line `s` is an ATX heading (`## Text`, closing hashes optional)."""
    m = _HEADING.match(s)
    if m is None:
        return None
    rest = s[m.end() :]
    if rest and rest[0] not in " \t":
        return None
    text = " ".join(rest.split())
    text = _CLOSING_HASHES.sub("", text).strip()
    return m.end(), text


def setext_level(s: str, indent: int) -> int | None:
    """1 (`===`) or 2 (`---`) if the stripped line `s`, indented by `indent` columns, can underline a setext
    heading (only right under a paragraph does it make one)."""
    if indent > SETEXT_MAX_INDENT or _SETEXT.match(s) is None:
        return None
    return 1 if s[0] == "=" else 2


def fence_open(s: str) -> tuple[str, int] | None:
    """(fence character, length) if the stripped line `s` opens a fenced code block (``` or ~~~)."""
    m = _FENCE.match(s)
    if m is None:
        return None
    run = m.group(1)
    if run[0] == "`" and "`" in m.group(2):
        return None
    return run[0], len(run)


def fence_closes(s: str, fence: tuple[str, int]) -> bool:
    """Whether the stripped line `s` closes the code block `fence` opened."""
    ch, n = fence
    return len(s) >= n and s == ch * len(s)


def bullet(s: str) -> int | None:
    """The length of the list marker if the stripped line `s` is a list item (`-`, `*`, `+`, `1.`, `1)`)."""
    m = _BULLET.match(s)
    if m is None:
        return None
    k = m.end()
    if k < len(s) and s[k] not in " \t":
        return None
    return k


def is_thematic_break(line: str) -> bool:
    """A line like `---`, `* * *` or `___` (ignored, never a fact; `---` right under a paragraph underlines it)."""
    return _THEMATIC.match(line.strip()) is not None


def strip_comments(line: str, in_comment: bool) -> tuple[str, bool]:
    """Remove HTML comments from one line; returns (rest, whether a comment is still open)."""
    if in_comment:
        end = line.find("-->")
        if end < 0:
            return "", True
        line = line[end + 3 :]
    still_open = False
    while True:
        parts: list[str] = []
        pos = 0
        while True:
            start = line.find("<!--", pos)
            if start < 0:
                parts.append(line[pos:])
                break
            parts.append(line[pos:start])
            end = line.find("-->", start + 4)
            if end < 0:
                still_open = True
                break
            pos = end + 3
        out = "".join(parts)
        if "<!--" not in out:
            return out, still_open
        # removing a comment joined "<!" and "--" into a new opener: strip again
        line = out


def joins_item_above(line: str) -> bool:
    """Whether `line`, right under a list item, would become part of it (a paragraph, a code fence, an indented
    line). A blank line, a heading, an item at column 0 or a break would not."""
    s = line.strip()
    if not s or atx_heading(s) is not None or is_thematic_break(s):
        return False
    return line[0].isspace() or bullet(s) is None


def underlines(above: str, below: str) -> bool:
    """Whether `below`, right under the non-blank line `above`, could underline it as a setext heading (so the
    two must not meet when what was between them is removed)."""
    return bool(above.strip()) and setext_level(below.strip(), len(below) - len(below.lstrip())) is not None


def heading_line(level: int, text: str) -> str:
    """An ATX heading that parses back to exactly `text`."""
    line = "#" * level
    if text:
        line += " " + text
        if _CLOSING_HASHES.search(text):
            line += " #"
    return line


def bullet_first_line(text_line: str) -> str:
    """`- text`, or `* text` where `- text` would read as a thematic break."""
    line = "- " + text_line
    return "* " + text_line if _THEMATIC.match(line) else line
