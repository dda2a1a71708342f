"""One turn's records: the message a channel passes in, what the turn cost and did, and the reply it gives back;
and the one apology a failed turn gets (memclaw/prompts/apology.md), on every channel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memclaw.llm.client import Usage
from memclaw.markdown.formats import clean_text
from memclaw.prompts import render

if TYPE_CHECKING:
    from memclaw.recall.results import RecallResult


def apology(*, unsaved: bool = False) -> str:
    """What a person reads when their turn failed on our side: their message is kept, or (`unsaved`) it could not
    be saved and they should send it again (memclaw/prompts/apology_unsaved.md)."""
    return render("apology_unsaved" if unsaved else "apology")


@dataclass
class InboundMessage:
    """One message from a channel. `sender_id` is the platform's user id ("owner" on the CLI)."""

    channel: str
    chat_id: str
    sender_id: str
    sender_name: str | None = None
    text: str = ""
    images: Sequence[Path | str | bytes] = ()
    # Descriptions of non-image attachments, e.g. "report.pdf (1.2 MB)"
    attachments: Sequence[str] = ()

    def __post_init__(self) -> None:
        # where text enters from a channel: a lone surrogate (undecodable argv bytes, a Discord "\ud800") cannot be
        # encoded, so it would fail the session write; it becomes U+FFFD here
        self.text = clean_text(self.text)
        self.sender_name = clean_text(self.sender_name) if self.sender_name is not None else None
        self.attachments = [clean_text(a) for a in self.attachments]

    @classmethod
    def cli(cls, text: str, chat_id: str = "cli") -> InboundMessage:
        return cls(channel="cli", chat_id=chat_id, sender_id="owner", sender_name=None, text=text)


@dataclass
class ToolUse:
    name: str
    ok: bool
    ms: float


@dataclass
class TurnRecord:
    """What one turn cost and did: kept on the reply; its usage and reasoning also go to the session."""

    channel: str = ""
    chat_id: str = ""
    scope: str = ""
    is_owner: bool = False
    usage: Usage = field(default_factory=Usage)
    llm_calls: int = 0
    tools: list[ToolUse] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    # Ids of memories that made it into the prompt
    recalled: list[str] = field(default_factory=list)
    context_tokens: int = 0
    stopped_at_limit: bool = False
    error: str | None = None
    # What ended a failed turn
    failure: Exception | None = field(default=None, repr=False, compare=False)
    warnings: list[str] = field(default_factory=list)
    # Session, context, llm, tools, total
    timings_ms: dict[str, float] = field(default_factory=dict)
    unsaved: bool = False
    """The turn's message is not (yet) in the session: a failure now must not say it was kept."""

    def to_json(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "chat_id": self.chat_id,
            "scope": self.scope,
            "usage": self.usage.to_json(),
            "llm_calls": self.llm_calls,
            "tools": [{"name": t.name, "ok": t.ok} for t in self.tools],
            "recalled": self.recalled,
            "context_tokens": self.context_tokens,
            "stopped_at_limit": self.stopped_at_limit,
            "error": self.error,
            "timings_ms": {k: round(v, 2) for k, v in self.timings_ms.items()},
        }


@dataclass
class AgentReply:
    text: str
    ok: bool = True
    # "/new", "/help", "/recall" when the message was a command
    command: str | None = None
    record: TurnRecord = field(default_factory=TurnRecord)
    # /recall's result, for channels that draw their own table
    recall: RecallResult | None = None
