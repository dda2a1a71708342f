"""The memory commands a chat offers, `/recall <query>`, `/forget <id>...` and `/incognito`, in one place: the agent
loop answers them when typed, the Discord gateway when used as slash commands. Owner only: an outsider never sees
nor changes the owner's memories, nor turns off what is remembered of a conversation. Blocking (recall and forget
touch the index, incognito the session file): run in a worker thread.

`/incognito` makes the rest of the session private: every message from then on is marked in the session file
(memclaw.agent.sessions.INCOGNITO), the `remember` tool is withdrawn, and consolidation neither sends those
messages to the model nor archives them: the next trim drops them. `/new` ends it (what came before `/incognito` is
consolidated as usual)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memclaw.context.recall_view import recall_text
from memclaw.context.views import forgot_text, mentioned_text
from memclaw.errors import MemclawError

if TYPE_CHECKING:
    from memclaw.agent.sessions import SessionStore
    from memclaw.recall.results import RecallResult
    from memclaw.service.facade import MemoryService

MEMORY_COMMANDS = ("/recall", "/forget")
INCOGNITO_COMMAND = "/incognito"
USAGE = {
    "/recall": "/recall <query>",
    "/forget": "/forget <id> [<id>...] (ids from /recall; a conversation of the archive by its id c..., a whole day "
    "of it as YYYY-MM-DD)",
}
INCOGNITO_ON = (
    "Incognito: nothing said from now on in this conversation is saved to long-term memory or the archive "
    "(it stays only until the conversation is trimmed). /new ends it."
)
INCOGNITO_ALREADY = "Incognito is already on for this conversation; /new ends it."
INCOGNITO_REFUSED = "Sorry, only the owner can make a conversation incognito."


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
            forgot = memory.forget_detailed(arg.split(), scope=scope)
        except MemclawError as e:
            return CommandOutcome(f"Forget failed: {e}", ok=False)
        also = mentioned_text(forgot.also, "/forget")
        text = forgot_text(forgot.gone) + (f"\n{also[:1].upper()}{also[1:]}" if also else "")
        return CommandOutcome(text if limit is None else text[:limit])
    try:
        result = memory.recall_detailed(arg, scope=scope)
    except MemclawError as e:
        return CommandOutcome(f"Recall failed: {e}", ok=False)
    return CommandOutcome(recall_text(result, markdown=markdown, limit=limit), recall=result)


def incognito_command(sessions: SessionStore, channel: str, chat_id: str, *, is_owner: bool) -> CommandOutcome:
    """`/incognito`: the rest of this chat's session is neither consolidated nor archived (see the module
    docstring). Recorded durably in the session before the reply says so. Owner only."""
    from memclaw.agent.sessions import INCOGNITO

    if not is_owner:
        return CommandOutcome(INCOGNITO_REFUSED, ok=False)
    try:
        session = sessions.load(channel, chat_id)
        if session.incognito:
            return CommandOutcome(INCOGNITO_ALREADY)
        sessions.set_meta(session, **{INCOGNITO: True})
    except MemclawError as e:
        return CommandOutcome(f"Incognito failed, nothing changed: {e}", ok=False)
    return CommandOutcome(INCOGNITO_ON)
