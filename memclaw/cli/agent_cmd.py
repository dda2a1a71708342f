"""`memclaw agent -m "..."` (one shot) and `memclaw chat` (interactive). The terminal is always the owner.

Both use the session ("cli", "cli"), so a one-shot message and a chat continue the same conversation; `/new`
consolidates it into memory and starts over. Consolidation runs inline here (a CLI process may exit right after
the reply), shown with a spinner.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from memclaw.cli.common import arg_or_stdin, console, err_console

if TYPE_CHECKING:
    from memclaw.agent import Agent, AgentReply

EXIT_WORDS = {"exit", "quit", ":q", "/exit", "/quit"}


def make_agent(workspace: Path | None) -> Agent:
    from memclaw.agent import Agent
    from memclaw.cli.common import load
    from memclaw.memory import MemoryService

    cfg, ws = load(workspace)
    return Agent(cfg, ws, MemoryService(ws, cfg), background_consolidation=False)


def _print_reply(reply: AgentReply) -> None:
    if _failed(reply):  # an error is not a reply: stderr, so a script reading stdout never takes it for one
        err_console.print(f"[yellow]{escape(reply.text)}[/]")
    elif console.is_terminal:
        from rich.markdown import Markdown

        style = None if reply.ok else "yellow"
        console.print(Markdown(reply.text), style=style)
    else:
        console.print(reply.text, markup=False, highlight=False, soft_wrap=True)


def _failed(reply: AgentReply) -> bool:
    """The turn failed (model unavailable, no key, an internal error), as opposed to a command's refusal."""
    return not reply.ok and bool(reply.record.error) and not reply.command


async def _turn(agent: Agent, text: str) -> AgentReply:
    from memclaw.agent import InboundMessage

    with err_console.status("[dim]thinking...[/dim]", spinner="dots"):
        return await agent.handle(InboundMessage.cli(text))


def agent_command(message: str, workspace: Path | None = None) -> None:
    """Send one message as the owner and print the reply on stdout. When the model was unavailable (or has no key),
    nothing goes to stdout: LLMError (one line on stderr, exit 5)."""
    from memclaw.errors import LLMError, UsageError

    message = arg_or_stdin(message)
    if not message or not message.strip():
        raise UsageError('empty message: use memclaw agent -m "your message"')
    agent = make_agent(workspace)

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
        raise LLMError(reply.record.error or "the model did not answer")
    _print_reply(reply)


def _history_file() -> Path:
    from memclaw.config import memclaw_home

    return memclaw_home() / "chat_history"


def _setup_readline() -> None:
    try:
        import readline
    except ImportError:  # not on every platform
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


def chat_command(workspace: Path | None = None) -> None:
    """Interactive chat as the owner, with line editing and history; Ctrl-D or `exit` to leave."""
    agent = make_agent(workspace)
    _setup_readline()
    err_console.print(
        f"[bold]{agent.config.agent.name}[/bold] ({agent.llm.model}) — /help for commands, Ctrl-D to quit"
    )
    no_key = agent.llm.missing_key()
    if no_key:
        err_console.print(f"[yellow]warning:[/] {escape(no_key)}; replies will fail until then")
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
            try:
                reply = loop.run_until_complete(_turn(agent, text))
            except KeyboardInterrupt:
                err_console.print("[dim](interrupted; your message is saved)[/dim]")
                continue
            _print_reply(reply)
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(agent.aclose())
        loop.close()
        if agent.memory is not None:
            agent.memory.close()
