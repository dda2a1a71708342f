"""`memclaw agent -m "..."` (one shot) and `memclaw chat` (interactive). The terminal is always the owner.

Both use the session ("cli", "cli"), so a one-shot message and a chat continue the same conversation; `/new`
consolidates it into memory and starts over. Consolidation runs inline here (a CLI process may exit right after
the reply), shown with a spinner.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from memclaw.cli.common import arg_or_stdin, console, err_console, log_through
from memclaw.util.richtext import line, lit, warning

if TYPE_CHECKING:
    from memclaw.agent.loop import Agent
    from memclaw.agent.turn import AgentReply

EXIT_WORDS = {"exit", "quit", ":q", "/exit", "/quit"}
# "/recall", not "/etc/hosts is missing"
_COMMAND_RE = re.compile(r"/[A-Za-z][\w-]*")


def make_agent(workspace: Path | None, *, need_key: bool = False) -> Agent:
    """The terminal's agent. `need_key`: a provider without its API key is LLMError (exit 5) here, before the
    agent, the memory or litellm is loaded. litellm is then imported in the background, unless the model is asked
    without it."""
    from memclaw.cli.common import auto_recall_embeds, load, memory_service
    from memclaw.llm.client import LLMClient, import_in_background

    cfg, ws = load(workspace)
    llm = LLMClient(cfg)
    if need_key:
        llm.check_key()
    if not llm.direct:
        # litellm imports while the memory, the agent and the turn's context are made
        import_in_background()
    # The model loads while the agent does
    memory = memory_service(cfg, ws, embeds=auto_recall_embeds(cfg))
    from memclaw.agent.loop import Agent

    return Agent(cfg, ws, memory, llm=llm, background_consolidation=False)


def _print_reply(reply: AgentReply) -> None:
    """The model's reply (and /help) as Markdown on a terminal (memclaw.util.markdown_view: control characters as
    symbols, links with their URL); a command's answer (it quotes memories, queries and ids) and anything on a
    pipe as written (control characters as symbols too). Every known secret value in it is shown as ***."""
    from memclaw.util.redact import redact_text

    style = "" if reply.ok else "yellow"
    text = redact_text(reply.text)
    # An error is not a reply: stderr, so a script reading stdout never takes it for one
    if _failed(reply):
        err_console.print(lit(text, "yellow"))
    # /recall: the table of `memclaw recall`, with ids
    elif reply.recall is not None and reply.recall.hits:
        from memclaw.cli.tables import recall_table

        for w in reply.recall.warnings:
            err_console.print(warning(w))
        console.print(recall_table(reply.recall, width=console.width, ids=True))
    elif console.is_terminal and reply.command in (None, "/help"):
        from memclaw.util.markdown_view import reply_markdown

        console.print(reply_markdown(text), style=style)
    else:
        console.print(lit(text, style), soft_wrap=True)


def _failed(reply: AgentReply) -> bool:
    """The turn failed (model unavailable, no key, an internal error), as opposed to a command's refusal."""
    return not reply.ok and bool(reply.record.error) and not reply.command


async def _turn(agent: Agent, text: str) -> AgentReply:
    from memclaw.agent.turn import InboundMessage

    with err_console.status(line(("thinking...", "dim")), spinner="dots"):
        return await agent.handle(InboundMessage.cli(text))


def agent_command(message: str, *, workspace: Path | None = None) -> None:
    """Send one message as the owner and print the reply on stdout. When the model was unavailable (or has no key),
    nothing goes to stdout: LLMError (one line on stderr, exit 5)."""
    from memclaw.errors import LLMError, MemclawError, UsageError

    message = arg_or_stdin(message)
    if not message or not message.strip():
        raise UsageError('empty message: use memclaw agent -m "your message"')
    log_through(err_console)
    agent = make_agent(workspace, need_key=True)

    async def main() -> AgentReply:
        try:
            return await _turn(agent, message)
        finally:
            await agent.aclose()

    try:
        reply = asyncio.run(main())
    finally:
        if agent.memory is not None:
            agent.memory.close()
    if _failed(reply):
        failure = reply.record.failure
        if isinstance(failure, MemclawError) and not isinstance(failure, LLMError):
            # (the agent logged its one line already: exit with its code, not a second line)
            raise SystemExit(failure.exit_code)
        raise LLMError(reply.record.error or "the model did not answer")
    _print_reply(reply)


def _history_file() -> Path:
    from memclaw.config import memclaw_home

    return memclaw_home() / "chat_history"


def _setup_readline() -> None:
    try:
        import readline
    # Not on every platform
    except ImportError:
        return
    path = _history_file()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            readline.read_history_file(path)
    readline.set_history_length(1000)

    import atexit

    def save() -> None:
        with contextlib.suppress(OSError):
            readline.write_history_file(path)
            os.chmod(path, 0o600)

    atexit.register(save)


def _saved(agent: Agent, text: str) -> bool:
    """Whether an interrupted turn had already stored the user's message (commands store nothing)."""
    with contextlib.suppress(Exception):
        users = [m for m in agent.sessions.load("cli", "cli").messages if m.get("role") == "user"]
        return bool(users) and users[-1].get("content") == text and not text.startswith("/")
    return False


def chat_command(*, workspace: Path | None = None) -> None:
    """Interactive chat as the owner, with line editing and history; Ctrl-D, `exit` or `/exit` to leave. An unknown
    /command is answered with the list of commands, never sent to the model."""
    from memclaw.agent.loop import COMMANDS

    agent = make_agent(workspace)
    from memclaw.runtime import steady_gc

    # A long session from here on
    steady_gc()
    log_through(err_console)
    _setup_readline()
    known = ", ".join((*COMMANDS, "/exit"))
    err_console.print(
        line((agent.config.agent.name, "bold"), f" ({agent.llm.model}) — /help for commands, Ctrl-D to quit")
    )
    no_key = agent.llm.missing_key()
    if no_key:
        err_console.print(warning(f"{no_key}; replies will fail until then"))
    loop = asyncio.new_event_loop()
    try:
        while True:
            try:
                text = input("you> ")
            except EOFError:
                err_console.print()
                break
            except KeyboardInterrupt:
                err_console.print()
                continue
            text = text.strip()
            if not text:
                continue
            if text.lower() in EXIT_WORDS:
                break
            word = text.split(maxsplit=1)[0].lower()
            # A typo is not a message to the model
            if _COMMAND_RE.fullmatch(word) and word not in COMMANDS:
                console.print(line(f"unknown command {word}; commands: {known}"))
                continue
            turn = loop.create_task(_turn(agent, text))
            try:
                reply = loop.run_until_complete(turn)
            # Stop the turn (it would hold the chat's lock), then say what was kept
            except KeyboardInterrupt:
                turn.cancel()
                with contextlib.suppress(BaseException):
                    loop.run_until_complete(turn)
                saved = "; your message is saved" if _saved(agent, text) else ""
                err_console.print(line((f"(interrupted{saved})", "dim")))
                continue
            _print_reply(reply)
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(agent.aclose())
        loop.close()
        if agent.memory is not None:
            agent.memory.close()
