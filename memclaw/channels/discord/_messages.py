"""A Discord message or slash-command interaction as plain facts.

The facts are its session key, what the access policy needs, its text without the bot's mention, and its
attachments."""

from __future__ import annotations

import re

import discord

from memclaw.channels.access import MessageFacts


def chat_id_for(channel_id: int | str, user_id: int | str, *, is_dm: bool) -> str:
    """The session key inside channel "discord" (see the module docstring)."""
    return str(channel_id) if is_dm else f"{channel_id}:{user_id}"


def message_facts(message: discord.Message, me: discord.abc.User) -> MessageFacts:
    ch = message.channel
    is_dm = message.guild is None
    parent_id = str(ch.parent_id) if isinstance(ch, discord.Thread) and ch.parent_id else None
    ref = message.reference
    resolved = ref.resolved if ref is not None else None
    if ref is not None and resolved is None and ref.cached_message is not None:
        resolved = ref.cached_message
    replies_to_bot = isinstance(resolved, discord.Message) and resolved.author.id == me.id
    return MessageFacts(
        author_id=str(message.author.id),
        is_self=message.author.id == me.id,
        is_dm=is_dm,
        guild_id=str(message.guild.id) if message.guild is not None else None,
        channel_id=str(ch.id),
        parent_channel_id=parent_id,
        mentions_bot=me.id in message.raw_mentions,
        replies_to_bot=replies_to_bot,
    )


def message_text(message: discord.Message, me: discord.abc.User) -> str:
    """The content without the bot's own mention; other user mentions become @names."""
    text = re.sub(rf"<@!?{me.id}>", "", message.content)
    names = {u.id: u.display_name for u in message.mentions}

    def user(m: re.Match[str]) -> str:
        uid = int(m.group(1))
        return f"@{names[uid]}" if uid in names else m.group(0)

    text = re.sub(r"<@!?(\d+)>", user, text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


def describe_attachment(att: discord.Attachment) -> str:
    kind = f", {att.content_type}" if att.content_type else ""
    return f"{att.filename} ({human_size(att.size)}{kind})"


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"


def is_image(att: discord.Attachment) -> bool:
    if att.content_type:
        return att.content_type.split(";")[0].strip().lower().startswith("image/")
    return att.filename.lower().rsplit(".", 1)[-1] in ("png", "jpg", "jpeg", "gif", "webp")


def interaction_facts(interaction: discord.Interaction) -> MessageFacts:
    """A slash command as the access policy sees it: addressed to the bot, from the invoking user."""
    ch = interaction.channel
    parent_id = str(ch.parent_id) if isinstance(ch, discord.Thread) and ch.parent_id else None
    return MessageFacts(
        author_id=str(interaction.user.id),
        is_dm=interaction.guild_id is None,
        guild_id=str(interaction.guild_id) if interaction.guild_id else None,
        channel_id=str(interaction.channel_id),
        parent_channel_id=parent_id,
        # A slash command is addressed to the bot
        mentions_bot=True,
    )
