"""The Discord slash commands: /recall, /forget, /new, /incognito and /help.

/recall and /forget are owner only and answered by memclaw.agent.commands, as when typed in a chat. /new and
/incognito go through the agent, which refuses anyone but the owner. Both are queued in the chat's order, so they
land between the messages around them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import discord
from discord import app_commands

from memclaw.agent.commands import memory_command
from memclaw.agent.turn import AgentReply, InboundMessage, apology
from memclaw.channels._chunking import DISCORD_LIMIT, split_message
from memclaw.channels.access import AccessPolicy, decide
from memclaw.channels.discord._messages import chat_id_for, interaction_facts
from memclaw.channels.queue import ChannelQueue
from memclaw.markdown.units import OWNER_SCOPE
from memclaw.prompts import render

if TYPE_CHECKING:
    from memclaw.service.facade import MemoryService

log = logging.getLogger(__name__)

CHANNEL = "discord"
DENIED_COMMAND = "Sorry, I only answer people I have been set up to talk to."
NO_MENTIONS = discord.AllowedMentions(everyone=False, users=False, roles=False, replied_user=False)


class SlashCommands:
    """The slash commands of one gateway, registered on its command tree."""

    def __init__(
        self,
        tree: app_commands.CommandTree,
        policy: AccessPolicy,
        queue: ChannelQueue,
        *,
        memory: MemoryService | None,
        run_agent: Callable[[InboundMessage], Awaitable[AgentReply]],
    ) -> None:
        self.policy = policy
        self.queue = queue
        self.memory = memory
        self._run_agent = run_agent
        self._register(tree)

    def _register(self, tree: app_commands.CommandTree) -> None:
        slash = self

        @app_commands.command(name="recall", description="Show what memory finds for a query (owner only).")
        @app_commands.describe(query="What to recall")
        async def recall_cmd(interaction: discord.Interaction, query: str) -> None:
            await slash.memory_command(interaction, "/recall", query)

        @app_commands.command(name="new", description="Save this conversation to memory and start a fresh one.")
        async def new_cmd(interaction: discord.Interaction) -> None:
            await slash.new(interaction)

        @app_commands.command(
            name="incognito", description="Keep the rest of this conversation out of memory, until /new (owner only)."
        )
        async def incognito_cmd(interaction: discord.Interaction) -> None:
            await slash.through_agent(interaction, "/incognito")

        @app_commands.command(name="help", description="What I can do and how to talk to me.")
        async def help_cmd(interaction: discord.Interaction) -> None:
            await slash.help(interaction)

        @app_commands.command(
            name="forget",
            description="Delete memories by id, as /recall shows them, or a day of the archive (owner only).",
        )
        @app_commands.describe(ids="One or more memory ids, separated by spaces")
        async def forget_cmd(interaction: discord.Interaction, ids: str) -> None:
            await slash.memory_command(interaction, "/forget", ids)

        for cmd in (recall_cmd, new_cmd, help_cmd, forget_cmd, incognito_cmd):
            tree.add_command(cmd)

    async def memory_command(self, interaction: discord.Interaction, cmd: str, arg: str) -> None:
        """/recall or /forget: the owner's memory (memclaw.agent.commands), answered only to the owner, privately."""
        facts = interaction_facts(interaction)
        owner = self.policy.is_owner(facts.author_id)
        if owner:
            await interaction.response.defer(ephemeral=True, thinking=True)
        else:
            log.info("refused %s from user %s: not the owner", cmd, facts.author_id)
        try:
            outcome = await asyncio.to_thread(
                memory_command,
                self.memory,
                cmd,
                arg,
                scope=OWNER_SCOPE,
                is_owner=owner,
                markdown=True,
                limit=DISCORD_LIMIT,
            )
            text = outcome.text
        except Exception:
            log.exception("%s failed", cmd)
            text = apology()
        if owner:
            await interaction.followup.send(text, ephemeral=True, allowed_mentions=NO_MENTIONS)
        else:
            await interaction.response.send_message(text, ephemeral=True)

    async def new(self, interaction: discord.Interaction) -> None:
        await self.through_agent(interaction, "/new")

    async def through_agent(self, interaction: discord.Interaction, command: str) -> None:
        """A command the agent answers (/new, /incognito), queued in the chat's order; answered privately."""
        facts = interaction_facts(interaction)
        decision = decide(self.policy, facts)
        if not decision.allowed:
            log.info("refused %s from user %s: %s", command, facts.author_id, decision.reason)
            await interaction.response.send_message(DENIED_COMMAND, ephemeral=True)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        chat_id = chat_id_for(interaction.channel_id or 0, interaction.user.id, is_dm=facts.is_dm)
        inbound = InboundMessage(
            channel=CHANNEL,
            chat_id=chat_id,
            sender_id=facts.author_id,
            sender_name=interaction.user.display_name,
            text=command,
            images=[],
            attachments=[],
        )

        async def job() -> str:
            try:
                return (await self._run_agent(inbound)).text
            except Exception:
                log.exception("%s failed in chat %s", command, chat_id)
                return apology()

        text = await self.queue.submit(str(interaction.channel_id), job)
        for chunk in split_message(text) or ["Done."]:
            await interaction.followup.send(chunk, ephemeral=True, allowed_mentions=NO_MENTIONS)

    async def help(self, interaction: discord.Interaction) -> None:
        await interaction.response.send_message(render("discord_help"), ephemeral=True)
