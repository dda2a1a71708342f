"""discord.py's start-up and connection failures in memclaw's words, and its start-up noise kept quiet.

* A token Discord refuses, or the Message Content intent not enabled: ConfigError (exit 2), naming the fix.
* Discord out of reach (no network, DNS, a proxy or firewall; a gateway that cannot be found; Discord's own 5xx):
  DiscordUnreachable (exit 4, a service unreachable, as a Chroma server that cannot be reached).
* discord.py's warnings that PyNaCl/davey are missing (voice): memclaw has no voice, so they are not shown.
"""

from __future__ import annotations

import asyncio

import discord

from memclaw.errors import ConfigError, DiscordUnreachable, MemclawError


def raise_connect_error(exc: BaseException | None) -> None:
    """How discord.py's connect task ended, as memclaw's error (None or a cancellation: nothing to say)."""
    if exc is None or isinstance(exc, asyncio.CancelledError):
        return
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        raise ConfigError(
            "Discord refused the Message Content intent: enable it for the bot in the Discord developer portal "
            "(Bot > Privileged Gateway Intents)"
        ) from None
    if isinstance(exc, discord.LoginFailure) or (isinstance(exc, discord.ConnectionClosed) and exc.code == 4004):
        raise ConfigError("the Discord token was rejected: set a valid bot token in MEMCLAW_DISCORD_TOKEN") from None
    if isinstance(exc, OSError | discord.GatewayNotFound):
        raise unreachable(exc) from None
    if isinstance(exc, Exception):
        raise MemclawError(f"the Discord connection failed: {type(exc).__name__}: {exc}") from None


def unreachable(e: BaseException) -> MemclawError:
    """Discord out of reach (exit 4, a service unreachable), its own 5xx included; any other HTTP error at login
    stays exit 1."""
    if isinstance(e, discord.HTTPException) and not isinstance(e, discord.DiscordServerError):
        return MemclawError(f"Discord refused the login ({type(e).__name__}: HTTP {e.status}); try again later")
    return DiscordUnreachable(
        f"cannot reach Discord ({type(e).__name__}); check the network (DNS, proxy, firewall), then start the "
        "gateway again"
    )


def quiet_voice_warnings() -> None:
    """discord.py warns at its first client that PyNaCl/davey are missing and voice will not work: memclaw has no
    voice, so those two lines are only noise at start-up."""
    from discord.voice_client import VoiceClient

    VoiceClient.warn_nacl = False
    VoiceClient.warn_dave = False
