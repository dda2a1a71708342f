"""The one way text reaches a rich view: markup comes only from memclaw's own constant strings.

Any text a user or a file supplies (memory text, queries, file names, sender ids, Discord names, section names,
config values, error messages that quote them) is data. rich parses `[...]` in a plain `str` as markup (a
`[/b]` raises MarkupError, a `[link](x)` loses its brackets, `:smile:` turns into an emoji), so views never hand
rich such a string: they build `Text` objects, which rich prints as they are.

* `lit(text, style)`: user text as a Text (a table cell, a title, a caption, a line);
* `line(*parts)`: a line made of memclaw's own words, styled by name, and user text: every `str` part is
  literal, a `(text, style)` pair is literal text in that style;
* `visible(text)` (memclaw.util.visible, which log lines use too): the text as a terminal should show it: control
  characters (ESC, CSI, a bare carriage return, ...) drawn as visible symbols, so a memory cannot move the
  cursor or recolour the terminal; a tab as a space.

The consoles memclaw prints through (`memclaw.cli.common`) also have markup and emoji codes switched off, so
even a plain `str` that slips through is shown as written.
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
