"""The memory commands a chat offers, `/recall <query>`, `/forget <id>...` and `/incognito`, and their replies.

The agent loop answers them when typed, the Discord gateway when used as slash commands. Owner only: an outsider
never sees nor changes the owner's memories. They block on the index or the session file: run them in a worker
thread.

`/incognito` makes the rest of the session private. Every message from then on is marked in the session file
(memclaw.agent.sessions.INCOGNITO), and the `remember` tool is withdrawn. Consolidation neither sends those
messages to the model nor archives them; the next trim drops them. `/new` ends it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memclaw.context.recall_view import recall_text
from memclaw.errors import MemclawError
from memclaw.util.text import MEMORY_CHARS, counted, shorten

if TYPE_CHECKING:
    from memclaw.agent.sessions import SessionStore
    from memclaw.markdown.units import MemoryUnit
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
    # /recall's result, for channels that draw their own table
    recall: RecallResult | None = None


def owner_only(cmd: str) -> str:
    """The refusal an outsider gets for a memory command."""
    return f"{cmd} is only available to the owner."


def listed_text(u: MemoryUnit) -> str:
    """A memory's text as a list shows it: an archive chunk's (`memory list`) with its speakers and turn count."""
    if u.kind == "archive" and "speakers" in u.extra:
        return f"{', '.join(u.extra['speakers'].split(chr(10)))} · {counted(int(u.extra['turns']), 'turn')} · {u.text}"
    return u.text


def forgot_text(units: list[MemoryUnit]) -> str:
    """What /forget removed, one line per memory (plain text for chat channels)."""
    return "\n".join(["Forgot:"] + [f"- {u.id} ({u.kind}): {shorten(listed_text(u), MEMORY_CHARS)}" for u in units])


def mentioned_text(also: list[MemoryUnit], forget_command: str) -> str | None:
    """The line after a forget naming the facts and history entries that still restate what it forgot, and the
    command (`forget_command`, quoted by the caller) that forgets them too; None when there are none."""
    if not also:
        return None
    n_hist = sum(u.kind == "history" for u in also)
    n_fact = len(also) - n_hist
    kinds = [f"{n} {word}" for n, word in ((n_hist, "history entry" if n_hist == 1 else "history entries"),
                                           (n_fact, "fact" if n_fact == 1 else "facts")) if n]  # fmt: skip
    it = "it" if len(also) == 1 else "them"
    return (f"also mentioned in {' and '.join(kinds)}: {', '.join(u.id for u in also)} (recall hides it there); "
            f"forget {it} too with {forget_command} {' '.join(u.id for u in also)}")  # fmt: skip


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
