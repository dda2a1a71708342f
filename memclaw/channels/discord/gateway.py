"""The Discord channel: turns discord.py events into agent turns and the agent's replies back into messages.

This module holds events, replies and the connection's lifecycle. Who may talk is decided by
memclaw.channels.access; a message's facts by .messages; splitting long answers by memclaw.channels._chunking.
memclaw.channels.queue keeps one chat's turns in order; .slash holds the slash commands.
The agent runs on its own event loop in a thread (AgentThread), so a turn never stalls discord.py's heartbeat.
Connection failures of discord.py are said as memclaw's errors: a refused token or a missing intent is a
ConfigError (exit 2), Discord out of reach is DiscordUnreachable (exit 4).

Identity: the sender id passed to the agent is the Discord user id, as a string, on channel "discord". The agent
recognises the owner from `owners.discord`, by id and never by name. Everyone else gets the outsider context, tool
policy and their own memory scope.

Sessions: a DM is one session, keyed by the DM channel id. In a guild channel or thread each person has their own
session there, keyed "<channel or thread id>:<user id>". So one person's conversation never lands in another
person's context.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import discord
from discord import app_commands

from memclaw.agent.turn import AgentReply, InboundMessage, apology
from memclaw.channels._chunking import split_message
from memclaw.channels.access import AccessPolicy, Decision, decide
from memclaw.channels.discord._messages import (
    chat_id_for,
    describe_attachment,
    is_image,
    message_facts,
    message_text,
)
from memclaw.channels.discord._slash import CHANNEL, NO_MENTIONS, SlashCommands
from memclaw.channels.queue import ChannelQueue
from memclaw.context.images import MAX_IMAGE_BYTES
from memclaw.errors import ConfigError, DiscordUnreachable, MemclawError

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.service.facade import MemoryService

log = logging.getLogger(__name__)

T = TypeVar("T")

SHUTDOWN_GRACE_S = 60.0


class AgentLike(Protocol):
    async def handle(self, message: InboundMessage) -> AgentReply: ...


@dataclass
class DiscordTurn:
    """What happened to one accepted message: the result of its turn's future."""

    message_id: int
    chat_id: str
    sender_id: str
    ok: bool = True
    chunks: int = 0


class DiscordGateway:
    """discord.py client + event handlers + slash commands around one agent.

    `agent` needs `async handle(InboundMessage) -> AgentReply`; `memory` (optional) is the owner's memory for the
    /recall and /forget slash commands (memclaw.channels.discord._slash). With `agent_thread=True` (default) the
    agent runs on its own loop in a thread.
    """

    def __init__(
        self,
        agent: AgentLike,
        config: Config,
        *,
        memory: MemoryService | None = None,
        client: discord.Client | None = None,
        agent_thread: bool = True,
        shutdown_grace_s: float = SHUTDOWN_GRACE_S,
    ) -> None:
        self.agent = agent
        self.config = config
        self.policy = AccessPolicy.from_config(config)
        quiet_voice_warnings()
        self.client = client or discord.Client(intents=default_intents())
        self.tree = app_commands.CommandTree(self.client)
        self.queue = ChannelQueue()
        self.runner = AgentThread() if agent_thread else None
        self.shutdown_grace_s = shutdown_grace_s
        self._closing = False
        self._aborted = False
        self._shutdown: asyncio.Future[bool] | None = None
        self._synced = False
        self._register_events()
        self.slash = SlashCommands(self.tree, self.policy, self.queue, memory=memory, run_agent=self._run_agent)

    # ----- wiring ------------------------------------------------------------------------------------------
    def _register_events(self) -> None:
        c = self.client
        c.event(self.on_message)
        c.event(self.on_ready)
        c.event(self.on_resumed)
        c.event(self.on_disconnect)

    @property
    def me(self) -> discord.ClientUser:
        user = self.client.user
        if user is None:
            raise MemclawError("the Discord client is not logged in yet")
        return user

    async def _run_agent(self, inbound: InboundMessage) -> AgentReply:
        coro = self.agent.handle(inbound)
        if self.runner is not None:
            return await self.runner.run(coro)
        return await coro

    # ----- events ------------------------------------------------------------------------------------------
    async def on_ready(self) -> None:
        # discord.py reconnected with a new session (the old one could not be resumed)
        if self._synced:
            log.info("reconnected to Discord as %s (id %s), new session", self.me.name, self.me.id)
            return
        log.info("connected to Discord as %s (id %s)", self.me.name, self.me.id)
        self._synced = True
        await self.sync_commands()

    async def on_resumed(self) -> None:
        log.info("reconnected to Discord: session resumed")

    async def on_disconnect(self) -> None:
        if not self._closing:
            log.warning("disconnected from Discord; discord.py reconnects")

    async def sync_commands(self) -> None:
        """Register the slash commands: globally, and per listed guild (guild commands appear at once)."""
        try:
            for gid in self.policy.guilds:
                guild = discord.Object(id=int(gid))
                self.tree.copy_global_to(guild=guild)
                await self.tree.sync(guild=guild)
            await self.tree.sync()
        # e.g. HTTP errors, no application id
        except (discord.DiscordException, ValueError) as e:
            log.warning("could not register slash commands: %s", e)

    def accept(self, message: discord.Message) -> Decision:
        facts = message_facts(message, self.me)
        decision = decide(self.policy, facts)
        if not decision.allowed and not facts.is_self:
            log.info(
                "ignored message %s from user %s in channel %s: %s",
                message.id,
                facts.author_id,
                facts.channel_id,
                decision.reason,
            )
        return decision

    async def on_message(self, message: discord.Message) -> asyncio.Future[DiscordTurn] | None:
        """discord.py's message event. Queues the turn on its channel; returns the turn's future (or None when
        the message is ignored). No await before the turn is queued, so arrival order is queue order."""
        decision = self.accept(message)
        if not decision.allowed:
            return None
        if self._closing:
            log.info("ignored message %s: shutting down", message.id)
            return None
        return self.queue.submit(str(message.channel.id), lambda: self._turn(message))

    async def _turn(self, message: discord.Message) -> DiscordTurn:
        is_dm = message.guild is None
        rec = DiscordTurn(
            message.id,
            chat_id_for(message.channel.id, message.author.id, is_dm=is_dm),
            str(message.author.id),
        )
        try:
            async with self._typing(message.channel):
                images, described = await self._attachments(message)
                inbound = InboundMessage(
                    channel=CHANNEL,
                    chat_id=rec.chat_id,
                    sender_id=rec.sender_id,
                    sender_name=message.author.display_name,
                    text=message_text(message, self.me),
                    images=images,
                    attachments=described,
                )
                reply = await self._run_agent(inbound)
            text = reply.text
        # A forced shutdown: the agent saved the message before the model call
        except asyncio.CancelledError:
            rec.ok = False
            raise
        except Exception:
            log.exception("turn for message %s in chat %s failed", message.id, rec.chat_id)
            rec.ok = False
            text = apology()
        rec.chunks = await self.send_reply(message, text)
        return rec

    @contextlib.asynccontextmanager
    async def _typing(self, channel: discord.abc.Messageable):
        """The typing indicator while working; a failure to show it never fails the turn."""
        typing = channel.typing()
        try:
            await typing.__aenter__()
        except (discord.HTTPException, discord.ClientException) as e:
            log.debug("typing indicator failed: %s", e)
            yield
            return
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                await typing.__aexit__(None, None, None)

    async def _attachments(self, message: discord.Message) -> tuple[list[bytes], list[str]]:
        images: list[bytes] = []
        described: list[str] = []
        for att in message.attachments:
            if is_image(att) and att.size <= MAX_IMAGE_BYTES:
                try:
                    images.append(await att.read())
                    continue
                except (discord.HTTPException, discord.NotFound) as e:
                    log.warning("could not download image %s: %s", att.filename, e)
            described.append(describe_attachment(att))
        return images, described

    async def send_reply(self, message: discord.Message, text: str) -> int:
        """Reply to `message` with `text` split under the limit; the reply reference on the first chunk only.
        Returns how many messages were sent."""
        chunks = split_message(text) or ["(no answer)"]
        sent = 0
        for i, chunk in enumerate(chunks):
            try:
                if i == 0:
                    try:
                        await message.reply(chunk, mention_author=False, allowed_mentions=NO_MENTIONS)
                    # e.g. the message was deleted meanwhile
                    except discord.HTTPException as e:
                        log.info("reply to %s failed (%s); sending without the reference", message.id, e)
                        await message.channel.send(chunk, allowed_mentions=NO_MENTIONS)
                else:
                    await message.channel.send(chunk, allowed_mentions=NO_MENTIONS)
                sent += 1
            except discord.HTTPException as e:
                log.error("could not send a reply in channel %s: %s", message.channel.id, e)
                break
        return sent

    # ----- lifecycle ---------------------------------------------------------------------------------------
    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued turn has been answered."""
        return await self.queue.drain(timeout)

    async def shutdown(self) -> bool:
        """Stop taking messages, let in-flight turns finish (up to the grace period), close the agent and the
        Discord connection. Returns True if every turn finished."""
        if self._shutdown is not None:
            return await asyncio.shield(self._shutdown)
        self._shutdown = asyncio.ensure_future(self._shutdown_once())
        return await asyncio.shield(self._shutdown)

    def abort_turns(self) -> None:
        """Stop now (a second SIGINT/SIGTERM): cancel queued and in-flight turns. An in-flight turn's message stays
        saved in its session (the agent writes the user's message before calling the model)."""
        self._closing = True
        self._aborted = True
        n = self.queue.abort()
        log.warning("stopping now: %d unanswered turn(s) cancelled; messages of started turns are saved", n)

    async def _shutdown_once(self) -> bool:
        self._closing = True
        finished = await self.queue.close(self.shutdown_grace_s) and not self._aborted
        if not finished and not self._aborted:
            log.warning(
                "shutdown: some turns did not finish in %.0f s (their messages are saved)", self.shutdown_grace_s
            )
        await self._close_agent()
        if not self.client.is_closed():
            await self.client.close()
        return finished

    async def _close_agent(self) -> None:
        closer = getattr(self.agent, "aclose", None) or getattr(self.agent, "close", None)
        try:
            if closer is not None:
                if self.runner is not None:
                    await asyncio.to_thread(self.runner.call, closer)
                else:
                    r = closer()
                    if asyncio.iscoroutine(r):
                        await r
        except Exception:
            log.exception("closing the agent failed")
        finally:
            if self.runner is not None:
                await asyncio.to_thread(self.runner.stop)

    def _on_signal(self, stop: asyncio.Event, sig: int) -> None:
        """First SIGINT/SIGTERM: graceful shutdown. A second one while shutting down: stop now."""
        if stop.is_set():
            log.warning("%s again: not waiting for in-flight turns", signal.Signals(sig).name)
            self.abort_turns()
            return
        log.warning(
            "%s: shutting down; in-flight turns may take up to %.0f s (send it again to stop now)",
            signal.Signals(sig).name,
            self.shutdown_grace_s,
        )
        stop.set()

    async def serve(self, token: str, stop: asyncio.Event | None = None) -> None:
        """Log in, connect (discord.py reconnects by itself) and run until `stop` is set or SIGINT/SIGTERM;
        then shut down gracefully (a second signal stops at once). A rejected token or a refused intent raises
        ConfigError. The token is never logged nor put in an error message."""
        loop = asyncio.get_running_loop()
        stop = stop or asyncio.Event()
        installed: list[int] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._on_signal, stop, sig)
                installed.append(sig)
        connect: asyncio.Task[None] | None = None
        try:
            async with self.client:
                try:
                    await self.client.login(token)
                except discord.LoginFailure:
                    raise ConfigError(
                        "the Discord token was rejected: set a valid bot token in MEMCLAW_DISCORD_TOKEN "
                        "or channels.discord.token"
                    ) from None
                except (OSError, discord.HTTPException) as e:
                    raise unreachable(e) from None
                connect = asyncio.create_task(self.client.connect(reconnect=True), name="discord-connect")
                stopper = asyncio.create_task(stop.wait(), name="memclaw-stop")
                done, _ = await asyncio.wait({connect, stopper}, return_when=asyncio.FIRST_COMPLETED)
                if stopper in done:
                    log.warning("shutting down: finishing in-flight turns")
                stopper.cancel()
                await self.shutdown()
        finally:
            # Idempotent; also after a failed login
            await self.shutdown()
            for sig in installed:
                loop.remove_signal_handler(sig)
        if connect is not None:
            if not connect.done():
                connect.cancel()
            (exc,) = await asyncio.gather(connect, return_exceptions=True)
            raise_connect_error(exc)


def default_intents() -> discord.Intents:
    intents = discord.Intents.default()
    intents.message_content = True
    return intents


# ----- the agent's own event loop --------------------------------------------------------------------------
class AgentThread:
    """Runs coroutines on a private event loop in a daemon thread; `await run(coro)` from any other loop."""

    def __init__(self, name: str = "memclaw-agent") -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._ready.set)
        self._loop.run_forever()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    def call(self, fn: Callable[[], Awaitable[T]] | Callable[[], T]) -> T:
        """Run `fn` on the agent loop from a plain thread and wait for it (used at shutdown)."""

        async def wrapper() -> Any:
            r = fn()
            return await r if asyncio.iscoroutine(r) else r

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result()

    def stop(self) -> None:
        if self._loop.is_closed():
            return

        # e.g. litellm's background logging worker
        async def cancel_leftovers() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._loop.shutdown_asyncgens()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cancel_leftovers(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()


# ----- discord.py's failures in memclaw's words -------------------------------------------------------------
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
