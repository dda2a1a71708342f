"""One way to show long text to people: on one line, cut to a limit. Every human-facing view (recall tables and
titles, chat and Discord lines, CLI messages that echo a query) uses it; JSON output always keeps the whole text."""

from __future__ import annotations

ECHO_CHARS = 80
"""A query or message echoed back in a title or a one-line message."""
MEMORY_CHARS = 240
"""A memory's text in a table or a list of hits."""

ELLIPSIS = "…"


def escape(text: str) -> str:
    """No `<` is left, so nothing can open or close a tag; `&` too, so no escape can be forged."""
    return text.replace("&", "&amp;").replace("<", "&lt;")


def shorten(text: str, limit: int) -> str:
    """`text` with its whitespace runs (newlines too) collapsed to single spaces, and when still longer than `limit`
    characters, cut at the last word boundary near the limit and ended with "…" plus how much was left out."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    tail = f"{ELLIPSIS} (+{len(flat) - limit:,} chars)"
    room = max(limit - len(tail), 1)
    head = flat[:room]
    space = head.rfind(" ")
    # A word boundary close to the cut: do not split a word
    if space >= room * 3 // 4:
        head = head[:space]
    return f"{head.rstrip()}{ELLIPSIS} (+{len(flat) - len(head.rstrip()):,} chars)"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun agreeing with it: "1 memory", "2 memories", "1,204 facts". `plural` where English does not
    add -s, -es or -ies ("1 person", "3 people")."""
    if n == 1:
        return f"{n:,} {noun}"
    if plural is None:
        if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "o", "u"):
            plural = noun[:-1] + "ies"
        elif noun.endswith(("s", "x", "ch", "sh")):
            plural = noun + "es"
        else:
            plural = noun + "s"
    return f"{n:,} {plural}"
