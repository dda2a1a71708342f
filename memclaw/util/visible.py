"""Text as a terminal should show it. No rich and no imports: log formatting uses it at start-up too.

A memory, a file name or a query can hold control characters. ESC and CSI sequences move the cursor, recolour or
retitle the terminal; a bare carriage return overwrites the line. A bidirectional override or isolate
(U+202A-202E, U+2066-2069) shows the characters after it out of order ("Trojan Source").
Everything memclaw shows people goes through `visible`, which draws these as symbols.
memclaw.util.richtext does the same for rich views.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _picture(m: re.Match[str]) -> str:
    c = ord(m.group())
    if c < 0x20:
        # the Unicode control pictures: \x1b -> "␛"
        return chr(0x2400 + c)
    if c == 0x7F:
        return "\u2421"
    if c > 0xFF:
        # a bidirectional override or isolate, as its escape
        return f"\\u{c:04x}"
    # C1 controls have no picture; 0x9b is an 8-bit CSI
    return f"\\x{c:02x}"


def visible(text: object, *, keep_tabs: bool = False) -> str:
    """`text`, any object as str, as memclaw shows user text.

    Each control character other than newline and tab becomes a visible symbol: a control picture for C0 and DEL,
    `\\x9b` for C1, `\\u202e` for a bidirectional override or isolate. A tab becomes a space, since rich would
    widen it past the width it measured for a table cell. `keep_tabs` keeps tabs, for Markdown indentation."""
    s = text if isinstance(text, str) else str(text)
    if "\t" in s and not keep_tabs:
        s = s.replace("\t", " ")
    return _CONTROL.sub(_picture, s) if _CONTROL.search(s) else s
