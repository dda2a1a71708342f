"""The memory commands a chat offers, `/recall <query>` and `/forget <id>...`, in one place: the agent loop answers
them when typed, the Discord gateway when used as slash commands. Owner only: an outsider never sees nor changes
the owner's memories. Blocking (recall and forget touch the index): run in a worker thread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memclaw.context.recall_view import recall_text
from memclaw.context.views import forgot_text
from memclaw.errors import MemclawError

if TYPE_CHECKING:
    from memclaw.recall.results import RecallResult
    from memclaw.service.facade import MemoryService

MEMORY_COMMANDS = ("/recall", "/forget")
USAGE = {
    "/recall": "/recall <query>",
    "/forget": "/forget <id> [<id>...] (ids from /recall; a conversation of the archive by its id c..., a whole day "
    "of it as YYYY-MM-DD)",
}


@dataclass
class CommandOutcome:
    text: str
    ok: bool = True
    recall: RecallResult | None = None  # /recall's result, for channels that draw their own table


def owner_only(cmd: str) -> str:
    """The refusal an outsider gets for a memory command."""
    return f"{cmd} is only available to the owner."


def memory_command(
    memory: MemoryService | None,
    cmd: str,
    arg: str,
    *,
    scope: str,
    is_owner: bool,
    markdown: bool = False,
    limit: int | None = None,
) -> CommandOutcome:
    """Answer `/recall <arg>` or `/forget <arg>` for a sender of `scope`. `markdown` and `limit`: how the recall
    view is written for the medium (see memclaw.context.recall_view.recall_text)."""
    if cmd not in MEMORY_COMMANDS:
        raise ValueError(f"not a memory command: {cmd!r}")
    if not is_owner:
        return CommandOutcome(owner_only(cmd), ok=False)
    arg = arg.strip()
    if not arg:
        return CommandOutcome(f"Usage: {USAGE[cmd]}", ok=False)
    if memory is None:
        return CommandOutcome("Memory is not available.", ok=False)
    if cmd == "/forget":
        try:
            gone = memory.forget(arg.split(), scope=scope)
        except MemclawError as e:
            return CommandOutcome(f"Forget failed: {e}", ok=False)
        text = forgot_text(gone)
        return CommandOutcome(text if limit is None else text[:limit])
    try:
        result = memory.recall_detailed(arg, scope=scope)
    except MemclawError as e:
        return CommandOutcome(f"Recall failed: {e}", ok=False)
    return CommandOutcome(recall_text(result, markdown=markdown, limit=limit), recall=result)
