"""The one way text reaches a rich view: markup comes only from memclaw's own constant strings.

Text a user or a file supplies is data: memory text, queries, file names, sender ids, section names, config values.
rich parses `[...]` in a plain `str` as markup, so `[/b]` raises and `[link](x)` loses its brackets.
Views therefore never hand rich such a string: they build `Text` objects, which rich prints as they are.

- `lit(text, style)`: user text as a Text, for a cell, a title, a caption or a line.
- `line(*parts)`: a line of memclaw's own words and user text; every `str` part is literal.
- `visible(text)`, from memclaw.util.visible: control characters drawn as symbols, a tab as a space.

The consoles of memclaw.cli.common also switch markup and emoji codes off, as a second guard.
"""

from __future__ import annotations

from rich.text import Text

from memclaw.util.visible import visible


def lit(text: object, style: str = "") -> Text:
    """User or file text as a rich Text: shown literally (never read as markup or emoji codes)."""
    return Text(visible(text), style=style)


def line(*parts: str | Text | tuple[str, str]) -> Text:
    """One line of output: `str` parts literal, `(text, style)` parts literal in that style, Text parts as
    they are. E.g. `line(("warning:", "yellow"), " ", message)`."""
    out = Text()
    for p in parts:
        if isinstance(p, Text):
            out.append_text(p)
        elif isinstance(p, tuple):
            out.append(visible(p[0]), style=p[1])
        else:
            out.append(visible(p))
    return out


def warning(message: object) -> Text:
    """`warning: <message>`, the word in yellow: how every view shows a warning (URL credentials and known secrets
    masked, memclaw.util.redact)."""
    from memclaw.util.redact import redact_text

    return line(("warning:", "yellow"), " ", redact_text(str(message)))
