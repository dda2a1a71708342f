"""`memclaw gateway`: the Discord channel, the agent loop and the memory in one process."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from memclaw.errors import ConfigError

if TYPE_CHECKING:
    from memclaw.config import Config

log = logging.getLogger(__name__)

TOKEN_ENV = "MEMCLAW_DISCORD_TOKEN"


def token_source(config: Config) -> str | None:
    """Where the bot token comes from (TOKEN_ENV, "config") or None; never the token itself (for `status`)."""
    if (os.environ.get(TOKEN_ENV) or "").strip():
        return TOKEN_ENV
    if config.channels.discord.token is not None and config.channels.discord.token.get_secret_value().strip():
        # The generic environment override of the config key
        override = "MEMCLAW_CHANNELS__DISCORD__TOKEN"
        return override if (os.environ.get(override) or "").strip() else "config"
    return None


def discord_token(config: Config) -> str:
    """The bot token from MEMCLAW_DISCORD_TOKEN, else config `channels.discord.token`. Never logged."""
    token = (os.environ.get(TOKEN_ENV) or "").strip()
    if not token and config.channels.discord.token is not None:
        token = config.channels.discord.token.get_secret_value().strip()
    if not token:
        raise ConfigError(
            f"no Discord bot token: set {TOKEN_ENV} or channels.discord.token in the config "
            "(create a bot at https://discord.com/developers/applications)"
        )
    if any(c.isspace() for c in token):
        raise ConfigError(f"the Discord bot token contains whitespace: check {TOKEN_ENV} / channels.discord.token")
    return token


def gateway_logging() -> None:
    """A long-running service keeps a record: memclaw's INFO lines (connects, reconnects, ignored senders, refused
    commands, shutdown) are shown even without -v; discord.py itself stays at WARNING unless -v/-vv asks more."""
    mc = logging.getLogger("memclaw")
    if mc.getEffectiveLevel() > logging.INFO:
        mc.setLevel(logging.INFO)
    from memclaw.runtime import redact_logs, setup_logging

    # The console script set it up; not so when called on its own
    if not logging.getLogger().handlers:
        # A reply or a tool's output in a log line: control characters as symbols
        setup_logging()
    redact_logs()


def gateway_command(*, workspace: Path | None) -> None:
    """Run the Discord gateway until SIGINT/SIGTERM. Missing or rejected token: ConfigError (exit code 2)."""
    from memclaw.cli.common import err_console
    from memclaw.config import load_config
    from memclaw.util.richtext import line, warning

    cfg = load_config()
    # Fail before touching the workspace or loading anything heavy
    token = discord_token(cfg)

    from memclaw.workspace import resolve_workspace

    ws = resolve_workspace(cfg, workspace)
    gateway_logging()
    if not cfg.owners.get("discord"):
        err_console.print(
            warning(
                'no owner configured (owners.discord = ["<your Discord user id>"]): '
                "nobody will be answered unless allow-lists are set"
            )
        )

    from memclaw.agent.loop import Agent
    from memclaw.channels.discord.gateway import DiscordGateway
    from memclaw.cli.common import memory_service
    from memclaw.errors import MemclawError

    memory = memory_service(cfg, ws)
    # Index fresh and the embedding model loaded before the first message arrives
    try:
        memory.sync()
    except MemclawError as e:
        err_console.print(warning(f"memory sync failed: {e}; recall will retry on each turn"))
    from memclaw.llm.client import direct_transport, litellm_module
    from memclaw.llm.tokens import count_tokens

    # The tokenizer and litellm are loaded now, not on the first message.
    count_tokens("warm-up", cfg.agent.model)
    if not direct_transport(cfg):
        litellm_module()
    from memclaw.runtime import steady_gc

    # A long-running process from here on
    steady_gc()
    agent = Agent(cfg, ws, memory=memory)

    gateway = DiscordGateway(agent, cfg, memory=memory)
    err_console.print(line(f"memclaw gateway: workspace {ws.root}, model {cfg.agent.model}; Ctrl-C to stop"))
    try:
        asyncio.run(gateway.serve(token))
    finally:
        memory.close()
    err_console.print("memclaw gateway stopped")
