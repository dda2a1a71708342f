"""The Discord channel: turns discord.py events into agent turns and the agent's replies back into messages.

Thin on purpose. Who may talk is decided by memclaw.channels.access (pure); splitting long answers by
memclaw.channels.chunking
(pure); ordering by memclaw.channels.queue (one chat's turns in order, chats concurrently). The agent runs on its
own event loop in a worker thread (`AgentThread`), so blocking work inside a turn (embedding, index sync, file
I/O) never stalls discord.py's heartbeat, and a slow model in one chat never holds up another.

Identity: the sender id passed to the agent is the Discord user id (a number as a string) on channel "discord";
the agent recognises the owner from `owners.discord` (ids only, never names) and gives everyone else the outsider
context, tool policy and their own memory scope.

Sessions: a DM is one session (chat id = the DM channel id). In a guild channel or thread each person has their
own session in that place (chat id = "<channel or thread id>:<user id>"), so a thread is its own session and one
person's conversation (and tool results) never lands in another person's context.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import discord
from discord import app_commands

from memclaw.channels.access import AccessPolicy, Decision, MessageFacts, decide
from memclaw.channels.chunking import DISCORD_LIMIT, split_message
from memclaw.channels.discord.errors import quiet_voice_warnings, raise_connect_error, unreachable
from memclaw.channels.queue import ChannelQueue
from memclaw.errors import ConfigError, MemclawError
from memclaw.prompts import render
from memclaw.util.text import ECHO_CHARS, MEMORY_CHARS, shorten

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.markdown.units import MemoryUnit
    from memclaw.recall.results import RecallResult

log = logging.getLogger(__name__)

CHANNEL = "discord"
MAX_IMAGE_BYTES = 20 * 1024 * 1024
APOLOGY = "Sorry, something went wrong on my side while answering. Nothing was lost; please try again."
DENIED_COMMAND = "Sorry, I only answer people I have been set up to talk to."
OWNER_ONLY = "Only my owner can use /recall."
OWNER_ONLY_FORGET = "Only my owner can use /forget."
SHUTDOWN_GRACE_S = 60.0
_NO_MENTIONS = discord.AllowedMentions(everyone=False, users=False, roles=False, replied_user=False)

T = TypeVar("T")


class AgentLike(Protocol):
    async def handle(self, message: Any) -> Any: ...


# ----- running the agent off the Discord loop ------------------------------------------------------------------
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

        async def cancel_leftovers() -> None:  # e.g. litellm's background logging worker
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


# ----- message -> facts, ids, text ----------------------------------------------------------------------------
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


def format_recall(result: RecallResult, limit: int = DISCORD_LIMIT) -> str:
    """The recall table, compact enough for one Discord message: one line per hit."""
    query = shorten(result.query, ECHO_CHARS)
    head = f"recall `{query}` · scope {result.scope} · {result.mode} · {len(result.hits)} hits"
    lines = [head]
    for w in result.warnings:
        lines.append(f"⚠ {w}")
    if not result.hits:
        lines.append("(nothing found)")
    for n, h in enumerate(result.hits, 1):
        u = h.unit
        b = f"b{h.bm25.rank}" if h.bm25.rank else "b-"
        v = f"v{h.vector.rank}" if h.vector.rank else "v-"
        date = f" {u.timestamp:%Y-%m-%d}" if u.timestamp else ""
        text = shorten(u.text, MEMORY_CHARS)
        lines.append(f"`{n:>2}` `{h.score:.3f}` {b} {v} {u.kind}{date} · {text} · `{u.id}`")
    out = ""
    for line in lines:
        if len(out) + len(line) + 1 > limit - 20:
            out += "\n…"
            break
        out = f"{out}\n{line}" if out else line
    return out


# ----- the agent boundary (adapted to memclaw.agent.loop) -----------------------------------------------------------
def make_inbound(**fields: Any) -> Any:
    """memclaw.agent.loop.InboundMessage for this channel (imported lazily: the agent pulls in litellm)."""
    from memclaw.agent.loop import InboundMessage

    return InboundMessage(**fields)


def reply_text(reply: Any) -> str:
    if isinstance(reply, str):
        return reply
    for attr in ("text", "content"):
        value = getattr(reply, attr, None)
        if isinstance(value, str):
            return value
    return str(reply)


# ----- the gateway -------------------------------------------------------------------------------------------
@dataclass
class TurnRecord:
    """What happened to one accepted message (kept for logs and tests)."""

    message_id: int
    chat_id: str
    sender_id: str
    ok: bool = True
    chunks: int = 0


class DiscordGateway:
    """discord.py client + event handlers + slash commands around one agent.

    `agent` needs `async handle(InboundMessage) -> AgentReply`; `recall` (optional) answers /recall with a
    RecallResult for the owner. With `agent_thread=True` (default) the agent runs on its own loop in a thread.
    """

    def __init__(
        self,
        agent: AgentLike,
        config: Config,
        *,
        recall: Callable[[str], RecallResult] | None = None,
        forget: Callable[[list[str]], list[MemoryUnit]] | None = None,
        client: discord.Client | None = None,
        agent_thread: bool = True,
        shutdown_grace_s: float = SHUTDOWN_GRACE_S,
        inbound: Callable[..., Any] = make_inbound,
    ) -> None:
        self.agent = agent
        self._inbound = inbound
        self.config = config
        self.policy = AccessPolicy.from_config(config)
        self._recall = recall
        self._forget = forget
        quiet_voice_warnings()
        self.client = client or discord.Client(intents=default_intents())
        self.tree = app_commands.CommandTree(self.client)
        self.queue = ChannelQueue()
        self.runner = AgentThread() if agent_thread else None
        self.shutdown_grace_s = shutdown_grace_s
        self.turns: list[TurnRecord] = []
        self._closing = False
        self._aborted = False
        self._shutdown: asyncio.Future[bool] | None = None
        self._synced = False
        self._register_events()
        self._register_commands()

    # ----- wiring ------------------------------------------------------------------------------------------
    def _register_events(self) -> None:
        c = self.client
        c.event(self.on_message)
        c.event(self.on_ready)
        c.event(self.on_resumed)
        c.event(self.on_disconnect)

    def _register_commands(self) -> None:
        gw = self

        @app_commands.command(name="recall", description="Show what memory finds for a query (owner only).")
        @app_commands.describe(query="What to recall")
        async def recall_cmd(interaction: discord.Interaction, query: str) -> None:
            await gw.slash_recall(interaction, query)

        @app_commands.command(name="new", description="Save this conversation to memory and start a fresh one.")
        async def new_cmd(interaction: discord.Interaction) -> None:
            await gw.slash_new(interaction)

        @app_commands.command(name="help", description="What I can do and how to talk to me.")
        async def help_cmd(interaction: discord.Interaction) -> None:
            await gw.slash_help(interaction)

        @app_commands.command(name="forget", description="Delete memories by id, as /recall shows them (owner only).")
        @app_commands.describe(ids="One or more memory ids, separated by spaces")
        async def forget_cmd(interaction: discord.Interaction, ids: str) -> None:
            await gw.slash_forget(interaction, ids)

        for cmd in (recall_cmd, new_cmd, help_cmd, forget_cmd):
            self.tree.add_command(cmd)

    @property
    def me(self) -> discord.ClientUser:
        user = self.client.user
        if user is None:
            raise MemclawError("the Discord client is not logged in yet")
        return user

    async def _run_agent(self, inbound: Any) -> Any:
        coro = self.agent.handle(inbound)
        if self.runner is not None:
            return await self.runner.run(coro)
        return await coro

    # ----- events ------------------------------------------------------------------------------------------
    async def on_ready(self) -> None:
        if self._synced:  # discord.py reconnected with a new session (the old one could not be resumed)
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
        except (discord.DiscordException, ValueError) as e:  # e.g. HTTP errors, no application id
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

    async def on_message(self, message: discord.Message) -> asyncio.Future[TurnRecord] | None:
        """discord.py's message event. Queues the turn on its channel; returns the turn's future (or None when
        the message is ignored). No await before the turn is queued, so arrival order is queue order."""
        decision = self.accept(message)
        if not decision.allowed:
            return None
        if self._closing:
            log.info("ignored message %s: shutting down", message.id)
            return None
        return self.queue.submit(str(message.channel.id), lambda: self._turn(message))

    async def _turn(self, message: discord.Message) -> TurnRecord:
        is_dm = message.guild is None
        rec = TurnRecord(
            message.id,
            chat_id_for(message.channel.id, message.author.id, is_dm=is_dm),
            str(message.author.id),
        )
        self.turns.append(rec)
        try:
            async with self._typing(message.channel):
                images, described = await self._attachments(message)
                inbound = self._inbound(
                    channel=CHANNEL,
                    chat_id=rec.chat_id,
                    sender_id=rec.sender_id,
                    sender_name=message.author.display_name,
                    text=message_text(message, self.me),
                    images=images,
                    attachments=described,
                )
                reply = await self._run_agent(inbound)
            text = reply_text(reply)
        except asyncio.CancelledError:  # a forced shutdown: the agent saved the message before the model call
            rec.ok = False
            raise
        except Exception:
            log.exception("turn for message %s in chat %s failed", message.id, rec.chat_id)
            rec.ok = False
            text = APOLOGY
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
                        await message.reply(chunk, mention_author=False, allowed_mentions=_NO_MENTIONS)
                    except discord.HTTPException as e:  # e.g. the message was deleted meanwhile
                        log.info("reply to %s failed (%s); sending without the reference", message.id, e)
                        await message.channel.send(chunk, allowed_mentions=_NO_MENTIONS)
                else:
                    await message.channel.send(chunk, allowed_mentions=_NO_MENTIONS)
                sent += 1
            except discord.HTTPException as e:
                log.error("could not send a reply in channel %s: %s", message.channel.id, e)
                break
        return sent

    # ----- slash commands ----------------------------------------------------------------------------------
    def _interaction_facts(self, interaction: discord.Interaction) -> MessageFacts:
        ch = interaction.channel
        parent_id = str(ch.parent_id) if isinstance(ch, discord.Thread) and ch.parent_id else None
        return MessageFacts(
            author_id=str(interaction.user.id),
            is_dm=interaction.guild_id is None,
            guild_id=str(interaction.guild_id) if interaction.guild_id else None,
            channel_id=str(interaction.channel_id),
            parent_channel_id=parent_id,
            mentions_bot=True,  # a slash command is addressed to the bot
        )

    async def slash_recall(self, interaction: discord.Interaction, query: str) -> None:
        recall = self._recall
        run = None if recall is None else (lambda: format_recall(recall(query)))
        await self._owner_command(interaction, "/recall", run, refusal=OWNER_ONLY, failed="Recall failed")

    async def slash_forget(self, interaction: discord.Interaction, ids: str) -> None:
        from memclaw.context.views import forgot_text

        forget = self._forget
        run = None if forget is None else (lambda: forgot_text(forget(ids.split()))[:DISCORD_LIMIT])
        await self._owner_command(interaction, "/forget", run, refusal=OWNER_ONLY_FORGET, failed="Forget failed")

    async def _owner_command(
        self, interaction: discord.Interaction, cmd: str, run: Callable[[], str] | None, *, refusal: str, failed: str
    ) -> None:
        """An owner-only slash command: refused for anyone else; `run` (in a worker thread) gives the reply."""
        facts = self._interaction_facts(interaction)
        if not self.policy.is_owner(facts.author_id):
            log.info("refused %s from user %s: not the owner", cmd, facts.author_id)
            await interaction.response.send_message(refusal, ephemeral=True)
            return
        if run is None:
            await interaction.response.send_message(f"{cmd} is not available here.", ephemeral=True)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            text = await asyncio.to_thread(run)
        except MemclawError as e:
            text = f"{failed}: {e}"
        except Exception:
            log.exception("%s failed", cmd)
            text = APOLOGY
        await interaction.followup.send(text, ephemeral=True, allowed_mentions=_NO_MENTIONS)

    async def slash_new(self, interaction: discord.Interaction) -> None:
        facts = self._interaction_facts(interaction)
        decision = decide(self.policy, facts)
        if not decision.allowed:
            log.info("refused /new from user %s: %s", facts.author_id, decision.reason)
            await interaction.response.send_message(DENIED_COMMAND, ephemeral=True)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        chat_id = chat_id_for(interaction.channel_id or 0, interaction.user.id, is_dm=facts.is_dm)
        inbound = self._inbound(
            channel=CHANNEL,
            chat_id=chat_id,
            sender_id=facts.author_id,
            sender_name=interaction.user.display_name,
            text="/new",
            images=[],
            attachments=[],
        )

        async def job() -> str:
            try:
                return reply_text(await self._run_agent(inbound))
            except Exception:
                log.exception("/new failed in chat %s", chat_id)
                return APOLOGY

        text = await self.queue.submit(str(interaction.channel_id), job)
        for chunk in split_message(text) or ["Started a new conversation."]:
            await interaction.followup.send(chunk, ephemeral=True, allowed_mentions=_NO_MENTIONS)

    async def slash_help(self, interaction: discord.Interaction) -> None:
        await interaction.response.send_message(render("discord_help"), ephemeral=True)

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
            await self.shutdown()  # idempotent; also after a failed login
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
