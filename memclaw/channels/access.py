"""Who may talk to the bot, and where. Pure logic over plain facts about a message (no discord.py here).

The rules, in order:
1. The bot's own messages are always ignored.
2. In a guild: if `guilds` is set, the guild must be listed; if `channels` is set, the channel (or, for a thread,
   its parent channel) must be listed in `channels` or `always_answer_channels`. These location lists apply to
   everyone, the owner included: they say where the bot lives.
3. In a guild the bot must be addressed: mentioned, or replied to (a reply to one of its messages), unless the
   channel (or the thread's parent) is in `always_answer_channels`. DMs are always addressed.
4. The owner (a user id listed in `owners.discord`; never a name) is answered.
5. If `allow_from` is set, only those user ids (and the owner) are answered, in DMs and guilds alike.
6. Otherwise, with a location allow-list configured (`guilds`, `channels` or `always_answer_channels`), anyone
   who passed rules 2 and 3 in a guild is answered; DMs from others are not.
7. With no allow-list at all, only the owner is answered (deny by default).

A denied message is ignored silently; the caller logs the decision's `reason`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memclaw.context.senders import is_owner_id, owner_ids

if TYPE_CHECKING:
    from memclaw.config import Config

CHANNEL = "discord"


@dataclass(frozen=True)
class AccessPolicy:
    owners: frozenset[str] = frozenset()
    allow_from: frozenset[str] = frozenset()
    guilds: frozenset[str] = frozenset()
    channels: frozenset[str] = frozenset()
    always_answer_channels: frozenset[str] = frozenset()

    @classmethod
    def from_config(cls, config: Config, channel: str = CHANNEL) -> AccessPolicy:
        dc = config.channels.discord

        def ids(xs: list[str]) -> frozenset[str]:
            return frozenset(str(x).strip() for x in xs if str(x).strip())

        return cls(
            owners=owner_ids(config.owners.get(channel, [])),
            allow_from=ids(dc.allow_from),
            guilds=ids(dc.guilds),
            channels=ids(dc.channels),
            always_answer_channels=ids(dc.always_answer_channels),
        )

    @property
    def has_location_allowlist(self) -> bool:
        return bool(self.guilds or self.channels or self.always_answer_channels)

    def is_owner(self, user_id: str) -> bool:
        """The one owner rule (memclaw.context.senders.is_owner_id), as the context builder applies it."""
        return is_owner_id(self.owners, user_id)


@dataclass(frozen=True)
class MessageFacts:
    """What the policy needs to know about one incoming message (ids as strings)."""

    author_id: str
    is_self: bool = False
    is_dm: bool = False
    guild_id: str | None = None
    channel_id: str = ""
    # The channel a thread belongs to
    parent_channel_id: str | None = None
    mentions_bot: bool = False
    replies_to_bot: bool = False


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str
    is_owner: bool = False


def _in(channel_id: str, parent_id: str | None, allowed: frozenset[str]) -> bool:
    return channel_id in allowed or (parent_id is not None and parent_id in allowed)


def decide(policy: AccessPolicy, m: MessageFacts) -> Decision:
    """Answer this message or not, and why."""
    if m.is_self:
        return Decision(False, "own message")
    owner = policy.is_owner(m.author_id)
    if not m.is_dm:
        if policy.guilds and (m.guild_id or "") not in policy.guilds:
            return Decision(False, f"guild {m.guild_id} is not in channels.discord.guilds", owner)
        always = _in(m.channel_id, m.parent_channel_id, policy.always_answer_channels)
        if policy.channels and not (always or _in(m.channel_id, m.parent_channel_id, policy.channels)):
            return Decision(False, f"channel {m.channel_id} is not in channels.discord.channels", owner)
        if not (always or m.mentions_bot or m.replies_to_bot):
            return Decision(False, "not addressed to the bot (no mention or reply)", owner)
    if owner:
        return Decision(True, "owner", True)
    if policy.allow_from:
        if m.author_id in policy.allow_from:
            return Decision(True, "in channels.discord.allow_from")
        return Decision(False, f"user {m.author_id} is not in channels.discord.allow_from")
    if not m.is_dm and policy.has_location_allowlist:
        return Decision(True, "allowed location")
    return Decision(False, f"user {m.author_id} is not the owner and no allow-list is configured (deny by default)")
