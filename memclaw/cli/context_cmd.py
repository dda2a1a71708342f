"""`memclaw context "message"`: show what the LLM would see for a message, and the token budget behind it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from memclaw.errors import UsageError

if TYPE_CHECKING:
    from rich.table import Table

    from memclaw.context.builder import BuiltContext


def budget_table(built: BuiltContext) -> Table:
    from rich.table import Table
    from rich.text import Text

    from memclaw.util.richtext import lit

    t = Table(
        title=lit(
            f"Token budget: {built.total_tokens} used of {built.budget} "
            f"({built.context_window} window - reply reserve), model {built.model}"
        ),
        title_justify="left",
    )
    for col, kw in (
        ("section", {}),
        ("priority", {"justify": "right"}),
        ("requested", {"justify": "right"}),
        ("allotted", {"justify": "right"}),
        ("used", {"justify": "right"}),
        ("status", {}),
        ("dropped", {"overflow": "fold"}),
    ):
        t.add_column(col, **kw)
    style = {"kept": "green", "truncated": "yellow", "dropped": "red"}
    for r in built.report:
        dropped = ", ".join(r.dropped[:6]) + (f" (+{len(r.dropped) - 6} more)" if len(r.dropped) > 6 else "")
        t.add_row(
            lit(r.name),
            str(r.priority),
            str(r.requested),
            str(r.allotted),
            str(r.used),
            Text(r.status, style=style[r.status]),
            lit(dropped),
        )
    return t


def memory_section_table(built: BuiltContext) -> Table:
    """The recalled memories offered to the memory section: which went in, and why each of the others did not."""
    from rich.table import Table
    from rich.text import Text

    from memclaw.cli.tables import section_status
    from memclaw.util.richtext import lit
    from memclaw.util.text import MEMORY_CHARS, counted, shorten

    f = built.memory_fill
    assert f is not None
    recalled = counted(len(f.candidates), "recalled memory", "recalled memories")
    t = Table(
        title=Text(
            f"Memory section: {len(f.kept)} of {recalled}, {f.used} of {f.budget} tokens (context.memory_tokens)"
        ),
        title_justify="left",
    )
    for col, kw in (("#", {"justify": "right"}), ("tokens", {"justify": "right"}), ("status", {}), ("memory", {})):
        t.add_column(col, overflow="fold", **kw)
    for i, c in enumerate(f.candidates):
        # The turns whose words it holds: a reply shown as said, not what, is not one
        n = len(c.serves)
        what = f"excerpt of {n} turn{'s' if n != 1 else ''}: " if c.window else ""
        t.add_row(
            str(i + 1),
            str(c.tokens),
            section_status(f, i),
            Text.assemble((what, "dim"), lit(shorten(c.item, MEMORY_CHARS))),
        )
    return t


def build_for_cli(
    message: str, sender: str | None, channel: str, workspace: Path | None, *, progress: bool = True
) -> tuple[BuiltContext, list[str]]:
    """Build the context as the agent would (auto-recall over the workspace's MemoryService)."""
    from memclaw.cli.common import auto_recall_embeds, load, memory_service
    from memclaw.cli.sender_opt import sender_scope_for
    from memclaw.config import config_secrets
    from memclaw.context.builder import build_messages

    cfg, ws = load(workspace)
    who = sender_scope_for(cfg, sender, channel)
    # Refused at once, not a recall that fails with a warning
    ws.check_scope(who.scope)
    mem = memory_service(cfg, ws, progress=progress, embeds=auto_recall_embeds(cfg))
    try:
        built = build_messages(config=cfg, workspace=ws, message=message, sender=who.sender, recall=mem.recall)
    finally:
        mem.close()
    return built, config_secrets(cfg)


def context_command(message: str, *, channel: str, sender: str | None, json_out: bool, workspace: Path | None) -> None:
    """Print the assembled messages and the budget table (or {messages, report, ...} as JSON)."""
    from memclaw.cli.common import arg_or_stdin
    from memclaw.markdown.formats import clean_text

    message = arg_or_stdin(message)
    if not message or not message.strip():
        raise UsageError('empty message: say what the message is, e.g. memclaw context "what is my address"')
    # Undecodable argv bytes arrive as lone surrogates, which cannot be printed
    message = clean_text(message)
    built, secrets = build_for_cli(message, sender, channel, workspace, progress=not json_out)
    print_context(built, secrets, json_out)


def print_context(built: BuiltContext, secrets: list[str], json_out: bool) -> None:
    from rich.panel import Panel

    from memclaw.cli.common import console, print_json
    from memclaw.util.redact import redact_data
    from memclaw.util.richtext import line, lit, warning
    from memclaw.util.text import ECHO_CHARS, shorten

    data = redact_data(built.to_json(), secrets)
    if json_out:
        print_json(data)
        return
    for i, m in enumerate(data["messages"]):
        content = m.get("content")
        if isinstance(content, list):
            content = "\n".join(
                p.get("text", "") if p.get("type") == "text" else f"[image: {len(str(p))} chars of data URL]"
                for p in content
            )
        if m.get("tool_calls"):
            content = (content or "") + "\n" + json.dumps(m["tool_calls"], ensure_ascii=False)
        console.print(Panel(lit(content or ""), title=lit(f"[{i}] {m.get('role')}"), title_align="left"))
    console.print(budget_table(built))
    if built.memory_fill is not None and built.memory_fill.candidates:
        console.print(memory_section_table(built))
    who = "the owner" if built.is_owner else f"not the owner (scope {built.scope})"
    query = shorten(built.recall_query or "-", ECHO_CHARS)
    console.print(line(f"Sender: {who}. Recall query: {query}"))
    for w in data["warnings"]:
        console.print(warning(w))
