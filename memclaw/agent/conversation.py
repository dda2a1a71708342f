"""A chunk of session messages as conversation: who it belongs to, what the consolidating model reads of it, and what
the archive keeps of it.

* `group_by_scope`: whole turns grouped by the scope of the user who started them, so an outsider's turns and the
  replies to them go to that outsider's memory (and archive), never the owner's.
* `format_conversation`: the transcript the model reads: every message stamped, tool calls and (shortened) results
  included, so the model knows what the assistant did.
* `archived_turns`: what the archive keeps verbatim: the user's and the assistant's text, one turn per message, with
  its time. Tool calls and tool results are not conversation (they can be whole files or command output) and are
  left out; an assistant message that only called tools leaves nothing.
* `is_private`: a message sent while the session was incognito (`/incognito`, memclaw.agent.commands): neither
  read by the model nor archived; the trim drops it.
"""

from __future__ import annotations

from datetime import datetime, time
from typing import TYPE_CHECKING, Any

from memclaw.agent.sessions import INCOGNITO
from memclaw.context.inputs import content_text, profile_name, read_cached
from memclaw.context.tag_guard import unforgeable
from memclaw.markdown.archive import ArchivedTurn

if TYPE_CHECKING:
    from memclaw.workspace import Workspace

CONVERSATION_TAG = "conversation"
"""The tag that quotes the transcript in the consolidation prompt."""
# A user message without a sender name (the terminal's owner)
USER_SPEAKER = "user"
# How much of each tool result the consolidation prompt shows
TOOL_RESULT_CHARS = 400
MAX_PROMPT_CHARS = 60_000


def is_private(m: dict[str, Any]) -> bool:
    """Whether a session message was sent while its session was incognito."""
    return m.get(INCOGNITO) is True


def group_by_scope(messages: list[dict[str, Any]], default_scope: str) -> dict[str, list[dict[str, Any]]]:
    """Whole turns grouped by the scope of the user who started them (order kept within a scope)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    scope = default_scope
    for m in messages:
        if m.get("role") == "user":
            scope = m.get("scope") or default_scope
        groups.setdefault(scope, []).append(m)
    return groups


def message_time(m: dict[str, Any]) -> datetime | None:
    """When a session message was sent (its `ts`), as naive local time; None when it has no valid one."""
    value = m.get("ts")
    if not isinstance(value, str):
        return None
    try:
        ts = datetime.fromisoformat(value)
    except ValueError:
        return None
    return ts.astimezone().replace(tzinfo=None) if ts.tzinfo else ts


def conversation_start(messages: list[dict[str, Any]]) -> datetime:
    """The time of the first message that has one (now, when none has)."""
    return next((t for t in (message_time(m) for m in messages) if t), None) or datetime.now()


def format_conversation(messages: list[dict[str, Any]], agent_name: str) -> str:
    lines: list[str] = []
    for m in messages:
        ts = message_time(m)
        stamp = f"[{ts:%Y-%m-%d %H:%M}] " if ts else ""
        role = m.get("role")
        text = content_text(m.get("content"), " ").strip()
        if role == "user":
            who = m.get("sender_name") or USER_SPEAKER
            lines.append(f"{stamp}{who}: {text}")
        elif role == "assistant":
            if text:
                lines.append(f"{stamp}{agent_name}: {text}")
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function", {})
                lines.append(f"{stamp}{agent_name} used tool {fn.get('name')}({str(fn.get('arguments', ''))[:300]})")
        elif role == "tool":
            if len(text) > TOOL_RESULT_CHARS:
                text = text[:TOOL_RESULT_CHARS] + " [...]"
            lines.append(f"    -> {m.get('name') or 'tool'} result: {text}")
    # It is quoted in <conversation> (prompts/consolidate.md)
    out = unforgeable("\n".join(lines), CONVERSATION_TAG)
    # Keep the end, where conclusions usually are, and the start
    if len(out) > MAX_PROMPT_CHARS:
        half = MAX_PROMPT_CHARS // 2
        out = out[:half] + "\n[... middle of the conversation omitted ...]\n" + out[-half:]
    return out


def owner_speaker(workspace: Workspace) -> str:
    """What the archive calls the owner when a message has no sender name: the name USER.md gives (`- Name: Maya`),
    else USER_SPEAKER."""
    return profile_name(read_cached(workspace.user_file), USER_SPEAKER)


def archived_turns(
    messages: list[dict[str, Any]], agent_name: str, user_name: str = USER_SPEAKER
) -> tuple[ArchivedTurn, ...]:
    """The conversation of `messages` as the archive keeps it (see the module docstring); a user message without a
    sender name (the terminal's owner) is `user_name`'s (`owner_speaker`)."""
    turns: list[ArchivedTurn] = []
    for m in messages:
        role = m.get("role")
        if role not in ("user", "assistant") or is_private(m):
            continue
        text = content_text(m.get("content"), "\n").strip()
        if not text:
            continue
        speaker = (m.get("sender_name") or user_name) if role == "user" else agent_name
        ts = message_time(m)
        turns.append(ArchivedTurn(str(speaker), text, time(ts.hour, ts.minute) if ts else None))
    return tuple(turns)
