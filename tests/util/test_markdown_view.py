"""A model's reply on a terminal (memclaw.util.markdown_view through agent_cmd._print_reply): the bytes a real
terminal console (rich, force_terminal, colours on) writes hold no escape sequence from the reply's text, only
rich's own styling (SGR), and no hyperlink: a link shows its URL."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rich.console import Console

from memclaw.agent.turn import AgentReply
from memclaw.cli import agent_cmd
from memclaw.util.markdown_view import reply_markdown

ATTACK = (
    "Hi \x1b]0;PWNED-TITLE\x07 \x1b[31mRED\x1b[0m \x1b[2J "
    "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ \x9b2J done"
)
RICH_STYLE = re.compile(r"\x1b\[[0-9;]*m")  # what rich itself writes for colours and bold (SGR), nothing else


def terminal_console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    console = Console(
        file=buf, force_terminal=True, color_system="truecolor", width=100, markup=False, emoji=False, highlight=False
    )
    return console, buf


def printed(reply: AgentReply, monkeypatch: pytest.MonkeyPatch) -> str:
    """What `_print_reply` writes to a terminal's stdout."""
    console, buf = terminal_console()
    monkeypatch.setattr(agent_cmd, "console", console)
    monkeypatch.setattr(agent_cmd, "err_console", console)
    agent_cmd._print_reply(reply)
    return buf.getvalue()


def foreign_controls(out: str) -> list[str]:
    """The control characters left once rich's own SGR sequences are taken out (newlines aside)."""
    return [c for c in RICH_STYLE.sub("", out) if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F]


def test_an_escape_sequence_in_a_reply_is_drawn_as_symbols(monkeypatch):
    out = printed(AgentReply(ATTACK), monkeypatch)
    assert foreign_controls(out) == [], repr(out)
    assert "\x1b]" not in out and "\x07" not in out and "\x1b[2J" not in out  # no title, no hyperlink, no clear
    plain = RICH_STYLE.sub("", out)
    for shown in ("␛]0;PWNED-TITLE␇", "␛[31mRED␛[0m", "␛[2J", "␛]8;;http://evil.example␛\\click", "\\x9b2J done"):
        assert shown in plain, plain
    assert "\x1b[1m" in printed(AgentReply("**bold** words"), monkeypatch)  # still Markdown: rich's styling


def test_a_markdown_link_or_image_shows_its_url_and_is_no_hyperlink(monkeypatch):
    text = "See [your bank](http://evil.example/login) and ![logo](http://img.example/l.png) and <http://a.example>."
    out = printed(AgentReply(text), monkeypatch)
    assert "\x1b]8" not in out, repr(out)  # no OSC 8 terminal hyperlink
    plain = RICH_STYLE.sub("", out)
    assert "your bank (http://evil.example/login)" in plain, plain
    assert "🌆 logo (http://img.example/l.png)" in plain, plain
    assert "http://a.example (http://a.example)" in plain, plain
    assert plain.index("See") < plain.index("🌆")  # an image stays where it is, inside its paragraph


def test_an_image_does_not_crop_its_paragraph():
    """rich's own image placeholder is drawn before its paragraph, whose first line then loses its end."""
    words = " ".join(f"word{n}" for n in range(30))
    console, buf = terminal_console()
    console.print(reply_markdown(f"{words} ![pic](http://i.example/p.png) tail"))
    plain = " ".join(RICH_STYLE.sub("", buf.getvalue()).split())
    assert plain == f"{words} 🌆 pic (http://i.example/p.png) tail"


def test_tabs_stay_indentation_in_a_reply(monkeypatch):
    out = RICH_STYLE.sub("", printed(AgentReply("```\nif x:\n\treturn 1\n```"), monkeypatch))
    assert re.search(r"\n\s*if x:\s*\n\s*     +return 1", out), repr(out)  # a tab, not one space
    assert "\t" not in out


def test_a_failed_turn_and_a_piped_reply_show_symbols_too(monkeypatch):
    failed = AgentReply(ATTACK, ok=False)
    failed.record.error = "unavailable"
    for reply in (failed, AgentReply(ATTACK, command="/forget")):
        out = printed(reply, monkeypatch)
        assert foreign_controls(out) == [] and "␛]0;PWNED-TITLE␇" in RICH_STYLE.sub("", out), repr(out)


markdownish = st.lists(
    st.sampled_from([*"ab []()!<>*_`#-|\\:/.\n\t\x1b\x07\x9b\x00\x7f\r", "http://x.y", "```", "\x1b]8;;", "\n- "]),
    max_size=60,
).map("".join)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=markdownish)
@example(text=ATTACK)
@example(text="[\x1b]8;;x\x1b\\](http://a\x1b[2J)")
def test_no_control_character_of_any_reply_reaches_the_terminal(monkeypatch, text):
    out = printed(AgentReply(text), monkeypatch)
    assert foreign_controls(out) == [] and "\x1b]" not in out, repr(out)
