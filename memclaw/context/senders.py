"""Who is talking: the sender, the one owner rule (shared with memclaw.channels.access), the sender's memory scope,
and the names and chat labels that may be shown to the model."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memclaw.errors import InvalidSenderError
from memclaw.markdown.units import OWNER_SCOPE, normalize_sender_id, sender_scope

if TYPE_CHECKING:
    from memclaw.config import Config


@dataclass(frozen=True)
class Sender:
    # "cli", "discord", ...
    channel: str
    # Platform id; never shown to the model
    sender_id: str
    display_name: str | None = None
    chat_id: str | None = None

    @classmethod
    def cli(cls, display_name: str | None = None) -> Sender:
        return cls(channel="cli", sender_id="owner", display_name=display_name, chat_id="cli")


def _normalized(sender_id: object) -> str | None:
    try:
        return normalize_sender_id(str(sender_id))
    except InvalidSenderError:
        return None


def owner_ids(ids: Iterable[object]) -> frozenset[str]:
    """Configured owner ids (`owners[channel]`) read the way every sender id is read (normalize_sender_id);
    an entry no sender id can match (empty, control characters) is left out."""
    return frozenset(sid for sid in (_normalized(x) for x in ids) if sid is not None)


def is_owner_id(owners: frozenset[str], sender_id: object) -> bool:
    """The one owner rule: the sender id, normalized like the configured ids, is one of `owners` (see owner_ids)."""
    sid = _normalized(sender_id)
    return sid is not None and sid in owners


def is_owner(config: Config, sender: Sender) -> bool:
    """The CLI is always the owner; elsewhere the sender id must be listed in `owners[channel]`."""
    if sender.channel == "cli":
        return True
    return is_owner_id(owner_ids(config.owners.get(sender.channel, [])), sender.sender_id)


def scope_for(config: Config, sender: Sender) -> str:
    """The memory scope a sender's context recalls from: 'owner', or 'people/<channel>:<id>' with the id read as
    is_owner reads it (normalize_sender_id; InvalidSenderError for an id no scope can hold). The agent and every
    CLI command that takes --sender (memclaw.cli.sender_opt) place a sender with this and is_owner."""
    if is_owner(config, sender):
        return OWNER_SCOPE
    return sender_scope(f"{sender.channel}:{normalize_sender_id(sender.sender_id)}")


def clean_name(name: str | None, limit: int = 64) -> str:
    """A display name safe to put in a prompt: one line, no control characters or angle brackets."""
    if not name:
        return ""
    cleaned = "".join(ch if ch.isprintable() and ch not in "<>" else " " for ch in name)
    return " ".join(cleaned.split())[:limit]


def chat_label(chat_id: str | None, sender_id: str) -> str:
    """The chat id as shown to the model, without the sender's raw platform id: a Discord guild chat is keyed
    `<channel id>:<user id>`, and the owner's id must never reach the prompt. '4444:111' (sender 111) -> '4444';
    a chat keyed by the sender's id alone -> 'direct'."""
    cleaned = clean_name(chat_id, 200)
    if not cleaned:
        return "-"
    sid = str(sender_id).strip()
    if not sid:
        return cleaned
    label = ":".join(p for p in cleaned.split(":") if p != sid)
    # A long id embedded in some other key ('dm-111222333'); short ids would match by chance
    if len(sid) >= 6:
        label = label.replace(sid, "(sender)")
    return label or "direct"
