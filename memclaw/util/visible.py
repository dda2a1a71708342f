"""Text as a terminal should show it (no rich, no imports: log formatting uses it at start-up too).

A memory, a file name or a query can hold control characters: ESC and CSI sequences move the cursor, recolour or
retitle the terminal, a bare carriage return overwrites the line; a bidirectional override or isolate (U+202A-202E,
U+2066-2069) makes the terminal show the characters after it in another order than they are stored ("Trojan
Source"). Everything memclaw shows people goes through `visible`, which draws them as symbols instead (see
memclaw.util.richtext for rich views).
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _picture(m: re.Match[str]) -> str:
    c = ord(m.group())
    if c < 0x20:
        return chr(0x2400 + c)  # the Unicode control pictures: \x1b -> "␛"
    if c == 0x7F:
        return "\u2421"  # "␡"
    if c > 0xFF:
        return f"\\u{c:04x}"  # a bidirectional override or isolate, as its escape
    return f"\\x{c:02x}"  # C1 controls (0x9b is an 8-bit CSI) have no picture


def visible(text: object, *, keep_tabs: bool = False) -> str:
    """`text` (any object, as str) as memclaw shows user text: each control character other than newline and tab
    as a visible symbol (control pictures for C0 and DEL, `\\x9b` for C1, `\\u202e` for a bidirectional override
    or isolate), a tab as a space (rich would expand it to up to 8 columns, past the width it measured for a table
    cell) unless `keep_tabs` (Markdown, where a tab is indentation)."""
    s = text if isinstance(text, str) else str(text)
    if "\t" in s and not keep_tabs:
        s = s.replace("\t", " ")
    return _CONTROL.sub(_picture, s) if _CONTROL.search(s) else s
