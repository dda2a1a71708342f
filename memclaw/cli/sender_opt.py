"""`--sender` (and `context --channel`): the one reading of who a command acts for, shared by every command that
takes it (recall, memory add/list/forget, context). The sender is read as a channel gives it (`discord:1234`,
normalize_sender_id), then placed by the same rule as the agent places a message (memclaw.context.senders): an id
listed in `owners.<channel>` is the owner (scope `owner`), anyone else their own scope `people/<channel>:<id>`. The
terminal is always the owner (`owner`, `cli:owner`, no --sender); an id with no channel is refused, never read as
the terminal's (that would hand an outsider's preview the owner's memories)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memclaw.context.senders import Sender, is_owner, scope_for
from memclaw.errors import UsageError
from memclaw.markdown.units import normalize_sender_id

if TYPE_CHECKING:
    from memclaw.config import Config

CLI = "cli"


@dataclass(frozen=True)
class SenderScope:
    """Who a command acts for: the sender, whether it is the owner, and the memory scope it reads and writes."""

    sender: Sender
    is_owner: bool
    scope: str


def sender_scope_for(config: Config, sender: str | None, channel: str = CLI) -> SenderScope:
    """The one resolution of `--sender` (and `--channel`) to the sender, is_owner and scope (see the module)."""
    who = resolve_sender(config, sender, channel)
    return SenderScope(who, is_owner(config, who), scope_for(config, who))


def resolve_sender(config: Config, sender: str | None, channel: str = CLI) -> Sender:
    """`--sender`/`--channel` to a Sender. No sender: the owner (the CLI, or the channel's first configured
    owner id). `--sender discord:1234` with the default channel means channel discord, id 1234."""
    channel = channel.strip() or CLI
    if sender is None:
        return _channel_owner(config, channel)
    given = sid = normalize_sender_id(sender)
    if channel == CLI and ":" in sid:
        channel, sid = _split_channel(sid)
    if channel != CLI:
        return Sender(channel=channel, sender_id=sid, display_name=f"{channel} user", chat_id=f"{channel}-preview")
    if sid == "owner":
        return Sender.cli()
    raise UsageError(
        f"--sender {given!r} names no outside channel, and the terminal is always the owner; name an outside sender "
        "with its channel: --sender discord:<id> (or, for context, --channel discord --sender <id>)"
    )


def _channel_owner(config: Config, channel: str) -> Sender:
    if channel == CLI:
        return Sender.cli()
    ids = config.owners.get(channel) or []
    if not ids:
        raise UsageError(f"no owner configured for channel {channel!r}; pass --sender ID or set owners.{channel}")
    return Sender(channel=channel, sender_id=str(ids[0]), display_name="owner", chat_id=f"{channel}-preview")


def _split_channel(sid: str) -> tuple[str, str]:
    """'discord:1234' -> ('discord', '1234'), each part read as a sender id is (whitespace around it dropped)."""
    channel, rest = (p.strip() for p in sid.split(":", 1))
    if not channel or not rest:
        missing = "channel before" if not channel else "id after"
        raise UsageError(f"--sender {sid!r} names no {missing} ':'; e.g. --sender discord:1234")
    return channel, normalize_sender_id(rest)
