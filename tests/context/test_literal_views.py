"""Any text a user or a file supplies is shown as written in every rich view (issue 19.1 and 19.8).

A property test renders arbitrary text (rich markup such as `[/b]`, `[link](x)`, `[bold]`, `\\[`, emoji codes,
unicode, control characters) as memory text, query, source file, section, scope / sender id, config value and
error message through each view the CLI has: the recall table, `recall --tokens`, `memory list`, `memory forget`,
chat's /recall and /forget replies, `context` (prompt panels and both tables), `status`, warnings and error
lines. Each must render without an exception and show the text literally (control characters as visible
symbols). The consoles are the stricter kind (markup and emoji codes on): the views must not rely on the CLI's
own consoles having them off.

Then the issue's own example end to end through the console script (real workspace, model and Chroma).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from memclaw.agent.commands import forgot_text
from memclaw.agent.turn import AgentReply
from memclaw.cli import agent_cmd, common, context_cmd, memory_cmds
from memclaw.cli.tables import memory_table
from memclaw.config import Config
from memclaw.context._excerpts import MEMORIES_TAG
from memclaw.context.builder import build_messages
from memclaw.context.memory_section import fill_hits
from memclaw.context.recall_view import recall_text
from memclaw.context.senders import Sender
from memclaw.context.tag_guard import unforgeable
from memclaw.errors import UsageError
from memclaw.markdown.units import MemoryUnit
from memclaw.recall.results import RecallHit, RecallResult, Signal
from memclaw.util.redact import redact_text
from memclaw.util.richtext import warning
from memclaw.util.text import ECHO_CHARS, MEMORY_CHARS, shorten
from memclaw.util.visible import visible
from tests.cli import test_bad_input
from tests.context.test_context_support import make_workspace

cli, ws = test_bad_input.cli, test_bad_input.ws

TRICKY = [
    "[/b]",
    "[link](http://x)",
    "[bold]",
    "[bold red]x[/]",
    "[/]",
    "\\[",
    "\\",
    "[",
    "]",
    "[0]",
    ":smile:",
    ":thumbs_up:",
    "*x*",
    "<query>",
    "\x1b[31m",
    "\x1b]0;title\x07",
    "\r",
    "\x9b2J",
    "\x00",
    "\x7f",
    "é",
    "日本語",
    "🎉",
    "e\u0301",
    "\u200d",
]
pieces = st.one_of(st.sampled_from(TRICKY), st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8))
user_text = st.lists(pieces, min_size=1, max_size=5).map("".join).filter(lambda s: s.strip())
one_line = user_text.map(lambda s: s.replace("\n", " ")).filter(lambda s: s.strip())
WIDTH = 3000  # nothing wraps: the text can be found as one run


def flat(s: str) -> str:
    return " ".join(s.split())


def shows(out: str, text: str) -> bool:
    """`text` appears in `out` as a view shows it: control characters visible, whitespace runs as one space."""
    return flat(visible(text)) in flat(out)


class Captured:
    """The CLI modules' consoles replaced by recording ones (markup and emoji codes on: the strict kind)."""

    def __init__(self, terminal: bool = False) -> None:
        self.out, self.err = io.StringIO(), io.StringIO()
        kw = {"width": WIDTH, "color_system": None, "force_terminal": terminal, "markup": True, "emoji": True}
        self.console = Console(file=self.out, **kw)  # type: ignore[arg-type]
        self.err_console = Console(file=self.err, **kw)  # type: ignore[arg-type]
        self.stack = contextlib.ExitStack()

    def __enter__(self) -> Captured:
        mp = self.stack.enter_context(pytest.MonkeyPatch.context())
        for mod in (memory_cmds, agent_cmd):
            mp.setattr(mod, "console", self.console)
            mp.setattr(mod, "err_console", self.err_console)
        mp.setattr("memclaw.cli.common.console", self.console)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    @property
    def text(self) -> str:
        return self.out.getvalue() + self.err.getvalue()


def unit(text: str, source: str = "memory/MEMORY.md", section: str | None = None, uid: str = "f0") -> MemoryUnit:
    return MemoryUnit(uid, "fact", "owner", source, 3, text, datetime(2025, 3, 1), section)


def result(query: str, scope: str, units: list[MemoryUnit]) -> RecallResult:
    hits = [
        RecallHit(unit=u, score=1.0 - i / 10, bm25=Signal(i + 1, 2.5), vector=Signal(i + 1, 0.4))
        for i, u in enumerate(units)
    ]
    return RecallResult(query, scope, "hybrid", hits, scope_size=len(hits) + 5)


def words(text: str) -> int:
    return len(text.split()) + 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=user_text, query=one_line, scope=one_line, source=one_line, section=one_line)
@example(  # a query whose repr is longer than the table's columns: its title was folded inside the narrow table
    text="[/b]", query="[/b][/b][/b]0\x1b\x1b\U00011375\U00011cb7\U00018d090\x1b\x08\U00018d09\U00018d09\U0002ebe1",
    scope="[/b]", source="[/b]", section="[/b]",
)  # fmt: skip
def test_recall_list_and_forget_views_show_any_text_literally(text, query, scope, source, section):
    units = [unit(text, source, section, "f1"), unit("a fact of " + text, uid="f2")]
    res = result(query, scope, units)
    # recall, and recall --tokens (a budget that keeps the first hit and cuts the second)
    for fill in (None, fill_hits(res.hits, words(units[0].text) + 1, words)):
        with Captured() as c:
            memory_cmds.print_recall(res, fill, 8)
        assert shows(c.text, shorten(text, MEMORY_CHARS)), c.text
        assert shows(c.text, repr(shorten(query, ECHO_CHARS))) and shows(c.text, scope), c.text
        assert shows(c.text, f"{source}:3"), c.text
    with Captured() as c:
        memory_cmds.print_recall(result(query, scope, []), None, 8)
    assert shows(c.text, repr(shorten(query, ECHO_CHARS))) and shows(c.text, scope), c.text
    # memory list
    c = Captured()
    c.console.print(memory_table(units, scope, width=WIDTH))
    assert shows(c.text, shorten(text, MEMORY_CHARS)), c.text
    if cell_len(visible(section)) <= 24:  # a longer one wraps in its column
        assert shows(c.text, section), c.text
    assert shows(c.text, scope) and shows(c.text, f"{source}:3"), c.text
    # memory forget: the whole text
    with Captured() as c:
        memory_cmds.print_forgot(units)
    assert shows(c.text, text) and shows(c.text, f"(fact, {source}:3)"), c.text


def turn(text: str, speaker: str, uid: str, n: int) -> MemoryUnit:
    extra = {"cid": "c7f3a9b21", "turn": str(n), "turns": "3", "chunk_line": "3", "speaker": speaker}
    return MemoryUnit(uid, "archive", "owner", "memory/archive/2025-03-01.md", 4 + n, f"{speaker}: {text}",
                      datetime(2025, 3, 1, 14, n), extra=extra)  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=user_text, other=one_line, speaker=one_line, query=one_line, terminal=st.booleans())
def test_excerpts_show_any_text_literally(text, other, speaker, query, terminal):
    """An archived turn's excerpt (issue 22) in every view: the recall table (and its memory-section cut), chat's
    /recall, `memory list` and `memory forget` of a conversation, and the context view's memory section."""
    window = [turn(other, speaker, "a0", 0), turn(text, speaker, "a1", 1), turn(other + "!", "memclaw", "a2", 2)]
    hits = [RecallHit(unit=window[1], score=1.0, bm25=Signal(1, 2.5), vector=Signal(1, 0.4), excerpt=tuple(window))]
    res = RecallResult(query, "owner", "hybrid", hits, scope_size=3)
    for fill in (None, fill_hits(hits, 1000, words), fill_hits(hits, words(window[1].text) + 12, words)):
        with Captured() as c:
            memory_cmds.print_recall(res, fill, 8)
        assert shows(c.text, shorten(window[1].text, MEMORY_CHARS)) and "excerpt" in c.text, c.text
        if fill is not None:
            assert shows(c.text, "memory section: 1 of 1 hit,"), c.text
            served = fill.candidates[0].item  # the item as the prompt gets it: it cannot open or close the block
            assert unforgeable(served, MEMORIES_TAG) == served and window[1].id in fill.served(0)
    with Captured(terminal) as c:
        agent_cmd._print_reply(AgentReply(recall_text(res), command="/recall", recall=res))
    assert shows(c.text, shorten(window[1].text, MEMORY_CHARS)), c.text
    from memclaw.markdown.archive import ArchiveChunk, ArchivedTurn
    from memclaw.markdown.archive_file import chunk_row

    said = (ArchivedTurn(speaker, text), ArchivedTurn("memclaw", other))
    row = chunk_row(ArchiveChunk("c7f3a9b21", datetime(2025, 3, 1, 14, 0), said), scope="owner",
                    source="memory/archive/2025-03-01.md")  # fmt: skip
    c = Captured()
    c.console.print(memory_table([row], "owner", width=WIDTH))
    assert shows(c.text, shorten(f"{speaker}, memclaw · 2 turns · {row.text}", MEMORY_CHARS)), c.text
    with Captured() as c:
        memory_cmds.print_forgot([row])
    assert shows(c.text, f"{speaker}, memclaw · 2 turns · {row.text}") and shows(c.text, "c7f3a9b21"), c.text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=user_text, query=one_line, terminal=st.booleans())
@example(text="[/b]", query="[link](http://x)@", terminal=False)
@example(text="see [link](http://x)@", query="q", terminal=True)
def test_chat_replies_show_any_text_literally(text, query, terminal):
    units = [unit(text, uid="f1"), unit("more: " + text, uid="f2")]
    res = result(query, "owner", units)
    cases = [
        (AgentReply(recall_text(res), command="/recall", recall=res), text),
        (
            AgentReply(recall_text(result(query, "owner", [])), command="/recall", recall=result(query, "owner", [])),
            query,
        ),
        (AgentReply(forgot_text(units), command="/forget"), text),
        (AgentReply(f"Forget failed: unknown fact id {query!r}", ok=False, command="/forget"), repr(query)),
    ]
    for reply, shown in cases:
        with Captured(terminal) as c:
            agent_cmd._print_reply(reply)
        limit = ECHO_CHARS if shown is query else MEMORY_CHARS
        expected = shorten(shown, limit) if shown is not cases[3][1] else shown
        # A view masks URL credentials (`http://x)@` -> `http://***@`) by design; everything else is literal.
        masked = shorten(redact_text(shown), limit) if shown is not cases[3][1] else redact_text(shown)
        assert shows(c.text, expected) or shows(c.text, redact_text(expected)) or shows(c.text, masked), c.text
    with Captured(terminal) as c:
        agent_cmd._print_reply(cases[0][0])
    assert " f1 " in c.text and " f2 " in c.text  # /recall's table has the ids /forget takes


@pytest.fixture(scope="module")
def context_ws(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("ctx") / "ws")


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(message=one_line, text=one_line, name=one_line, sender_id=one_line.filter(str.isprintable))
def test_context_view_shows_any_text_literally(context_ws, message, text, name, sender_id):
    sender = Sender("discord", sender_id, name, "dm-1")

    window = [replace(turn(text, name, f"a{n}", n), scope="owner") for n in range(3)]

    def recall(query: str, *, scope: str, k: int) -> list[RecallHit]:
        window_here = tuple(replace(t, scope=scope) for t in window)
        excerpt = RecallHit(
            unit=window_here[1], score=0.5, bm25=Signal(2, 1.0), vector=Signal(2, 0.3), excerpt=window_here
        )
        return result(query, scope, [replace(unit(text, uid="f1"), scope=scope)]).hits + [excerpt]

    built = build_messages(config=Config(), workspace=context_ws, message=message, sender=sender, recall=recall)
    c = Captured()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("memclaw.cli.common.console", c.console)
        context_cmd.print_context(built, [], False)
    assert shows(c.text, message.strip()), c.text  # the user message's panel
    assert built.memory_fill is not None and built.memory_fill.candidates, c.text
    assert shows(c.text, shorten(built.memory_fill.candidates[0].item, MEMORY_CHARS)), c.text  # the section table
    assert shows(c.text, "excerpt of 3 turns: " + shorten(built.memory_fill.candidates[1].item, MEMORY_CHARS))
    assert "Token budget" in c.text and shows(c.text, f"scope {built.scope}"), c.text


@settings(max_examples=40, deadline=None)
@given(value=one_line, scope=one_line, msg=user_text)
@example(value="[/b]", scope="[/b]", msg="[link](http://x)@")  # found by CI: a URL's userinfo, masked
def test_status_warnings_and_error_lines_show_any_text_literally(value, scope, msg):
    data = {
        "config_file": value,
        "model": value,
        "model_key_missing": msg,
        "embedding_key_missing": msg,
        "embedding_model": value,
        "workspace": value,
        "memory": {
            "workspace": value,
            "model": value,
            "store": value,
            "scopes": {scope: {"facts": 1, "history": 0, "indexed": 1, "fresh": True}},
            "rebuild": msg,
        },
        "channels": {
            "discord": {
                "configured": True,
                "token_from": value,
                "owners": 1,
                "allow_from": 0,
                "guilds": 0,
                "channels": 0,
                "always_answer_channels": 0,
            }
        },
    }
    with Captured() as c:
        memory_cmds.print_status(data)
    said = redact_text(msg)  # a warning masks URL credentials (`http://x)@` -> `http://***@`), by design
    assert shows(c.text, f"config {value}") and shows(c.text, f"warning: {said}") and shows(c.text, scope), c.text
    c = Captured()
    c.console.print(warning(msg))
    assert shows(c.text, f"warning: {said}")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        common.error_line(UsageError(msg))
    assert err.getvalue().startswith("Error: ") and shows(err.getvalue(), said), err.getvalue()
    assert not any(ch in err.getvalue() for ch in "\x1b\x9b\r\x00"), repr(err.getvalue())


# ----- the example, end to end ----------------------------------------------------------------------------
BBCODE = "Forum tip: close tags like [/b] in BBCode"
LINK = "see [link](http://x) and [bold]this[/bold] :smile:"


def test_a_memory_with_markup_is_shown_and_forgotten_through_the_cli(cli, ws):
    for fact in (BBCODE, LINK):
        r = cli("memory", "add", fact, "--date", "2026-11-26")
        assert r.code == 0, r.err
    r = cli("recall", "BBCode")
    assert r.code == 0 and "[/b]" in r.out and "BBCode" in r.out, r.err + r.out
    r = cli("recall", "link bold", "--tokens", "64")
    assert r.code == 0 and LINK in flat(r.out), r.err + r.out
    r = cli("memory", "list")
    assert r.code == 0 and BBCODE in flat(r.out) and LINK in flat(r.out), r.err + r.out
    listed = json.loads(cli("memory", "list", "--json").out)
    ids = {u["text"].removesuffix(" (2026-11-26)"): u["id"] for u in listed}
    r = cli("memory", "forget", ids[BBCODE])
    assert r.code == 0 and f"forgot {ids[BBCODE]}" in r.out and BBCODE in r.out, r.err + r.out
    assert BBCODE not in (ws / "memory" / "MEMORY.md").read_text("utf-8")


def test_forget_says_it_succeeded_even_on_a_terminal_that_cannot_show_the_text(cli, ws, memclaw_home):
    """The memory is deleted before anything is printed: a stdout that cannot encode its text (LANG=C, an
    ASCII pipe) must not turn the success into a failure. The real console script, in a subprocess."""
    assert cli("memory", "add", "Café ☕ [/b] on Fridays").code == 0
    uid = next(u["id"] for u in json.loads(cli("memory", "list", "--json").out) if "Café" in u["text"])
    env = dict(os.environ, PYTHONIOENCODING="ascii", LC_ALL="C", LANG="C", MEMCLAW_HOME=str(memclaw_home))
    p = subprocess.run(
        [sys.executable, "-m", "memclaw.cli.main", "memory", "forget", uid],
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert f"forgot {uid}".encode() in p.stdout and b"[/b]" in p.stdout
    assert "Café" not in (ws / "memory" / "MEMORY.md").read_text("utf-8")


def test_log_lines_show_control_characters_as_symbols():
    """A warning that quotes a path or a memory with an escape sequence does not send it to the terminal, whether
    it goes through the plain log handler or the one that prints above a spinner."""
    import logging

    from memclaw.cli.common import log_through
    from memclaw.runtime import VisibleFormatter

    record = logging.LogRecord(
        "memclaw.service.facade", logging.WARNING, __file__, 1, "cannot read %s", ("a\x1b[2Jb",), None
    )
    assert VisibleFormatter("%(levelname)s %(name)s: %(message)s").format(record) == (
        "WARNING memclaw.service.facade: cannot read a␛[2Jb"
    )
    root = logging.getLogger()
    plain = logging.StreamHandler(io.StringIO())
    root.addHandler(plain)
    try:
        c = Captured()
        log_through(c.err_console)  # the chat's handler: prints above the spinner
        logging.getLogger("memclaw.service.facade").warning("cannot read %s", "a\x1b[2Jb")
    finally:
        for h in [h for h in root.handlers if h is plain or type(h).__name__ == "_ConsoleLogHandler"]:
            root.removeHandler(h)
    assert "a␛[2Jb" in c.text and "\x1b" not in c.text, repr(c.text)


BIDI = "invoice \u202eexe.txt\u202c paid \u2067note\u2069"


def test_bidirectional_overrides_are_drawn_not_obeyed():
    """A right-to-left override makes a terminal show what follows it reversed ("Trojan Source"): "invoice
    \\u202eexe.txt" looks like "invoice txt.exe". Overrides and isolates are drawn as their escapes; ordinary
    right-to-left text and marks are left alone."""
    assert visible(BIDI) == "invoice \\u202eexe.txt\\u202c paid \\u2067note\\u2069"
    rtl = "שלום \u200fעולם\u200e and مرحبا"
    assert visible(rtl) == rtl


def test_a_memory_with_a_bidi_override_is_shown_with_it_visible_through_the_cli(cli, ws):
    assert cli("memory", "add", BIDI, "--date", "2026-11-26").code == 0
    for args in (("recall", "invoice paid"), ("memory", "list")):
        r = cli(*args)
        assert r.code == 0 and "\\u202eexe.txt" in flat(r.out), r.err + r.out
        assert not any(ch in r.out for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"), repr(r.out)
    listed = json.loads(cli("memory", "list", "--json").out)
    assert any(u["text"].startswith(BIDI) for u in listed)  # the data keeps the characters; only views draw them
