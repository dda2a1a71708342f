"""The agent loop: one inbound message -> session -> context (with auto-recall) -> LLM <-> tools -> reply.

`Agent.handle(InboundMessage) -> AgentReply` is the only entry point channels need (CLI, Discord). Per turn:

1. Slash commands (`/new`, `/help`; `/recall <query>`, `/forget <id>` and `/incognito` through
   memclaw.agent.commands) are answered directly and not stored in the session.
2. The session is read as its file is now and the user's message is appended to it (fsynced) before anything can
   fail (marked private when the session is incognito, as is everything the turn appends). A message sent again
   after its turn failed replaces its unanswered first copy (SessionStore.drop_retried).
3. `memclaw.context.builder.build_messages` assembles the prompt for this sender (owner or outsider) with recalled
   memories of the sender's scope and the session history.
4. The LLM is called with the tools this sender may use. Tool calls run and their results are appended, until
   the model answers without tools. At `agent.max_tool_iterations` the reply honestly says it stopped.
5. The reply is appended to the session (fsynced) and returned; if the session is now longer than
   `agent.memory_window`, its older part is consolidated into memory (in the background by default).

Turns of one chat run one at a time: a lock per chat in this process, and the session's turn lock across
processes (memclaw.agent._turnlock), held from step 2 to step 5. Different chats run concurrently. Blocking work
runs in worker threads. A failure gives a short apology; the session and memory stay intact.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memclaw.agent._turnlock import turn_held
from memclaw.agent.commands import INCOGNITO_COMMAND, MEMORY_COMMANDS, incognito_command, memory_command
from memclaw.agent.consolidate import ConsolidationReport, Consolidator, describe
from memclaw.agent.sessions import INCOGNITO, Session, SessionStore
from memclaw.agent.turn import AgentReply, InboundMessage, ToolUse, TurnRecord, apology
from memclaw.config import config_secrets
from memclaw.context.builder import IncomingMessage, build_messages
from memclaw.context.senders import Sender, is_owner, scope_for
from memclaw.errors import InvalidSenderError, LLMError, MemclawError, MemoryFileError
from memclaw.llm.client import LLMClient, LLMResponse
from memclaw.prompts import render
from memclaw.tools.base import ToolContext
from memclaw.tools.registry import ToolRegistry
from memclaw.util.redact import redact_text
from memclaw.util.text import shorten
from memclaw.workspace import Workspace

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.service.facade import MemoryService

log = logging.getLogger(__name__)

REFUSED = "Sorry, I cannot answer you: your memory here cannot be used safely. The owner can see why in the log."
EMPTY_REPLY = "(The model returned an empty reply.)"
"""Shown when the model answers nothing; not stored: the session and the archive keep only what memclaw said."""
COMMANDS = ("/new", "/help", INCOGNITO_COMMAND, *MEMORY_COMMANDS)


def _describe_attachments(msg: InboundMessage) -> str:
    text = msg.text or ""
    if msg.attachments:
        listed = "; ".join(str(a) for a in msg.attachments)
        text = f"{text}\n\n[Attachments (not readable here): {listed}]".strip()
    return text


class _KeyedLocks:
    """One asyncio lock per key, kept only while a task holds it or waits for it: a crowd of chats leaves none."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._users: dict[tuple[str, str], int] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: tuple[str, str]) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key], self._locks[key]

    def __len__(self) -> int:
        return len(self._locks)


class Agent:
    def __init__(
        self,
        config: Config,
        workspace: Workspace | Path,
        memory: MemoryService | None = None,
        *,
        llm: LLMClient | None = None,
        sessions: SessionStore | None = None,
        tools: ToolRegistry | None = None,
        background_consolidation: bool = True,
    ) -> None:
        self.config = config
        self.workspace = Workspace(Path(workspace)) if isinstance(workspace, str | Path) else workspace
        self.root = self.workspace.root
        self.memory = memory
        self.llm = llm or LLMClient(config)
        self.sessions = sessions or SessionStore(self.workspace.sessions_dir)
        self.tools = tools or ToolRegistry()
        self.background_consolidation = background_consolidation
        self.consolidator = Consolidator(config, self.llm, memory, self.sessions) if memory is not None else None
        self._locks = _KeyedLocks()
        self._consolidating = _KeyedLocks()
        self._background: set[asyncio.Task[Any]] = set()

    # ----- public ----------------------------------------------------------------------------------------
    async def handle(self, message: InboundMessage) -> AgentReply:
        """Answer one message. Never raises for model, tool or memory failures: they become a short reply."""
        key = (message.channel, message.chat_id)
        async with self._locks.hold(key):
            t0 = time.perf_counter()
            rec = TurnRecord(channel=message.channel, chat_id=message.chat_id)
            try:
                reply = self._refused(message) or await self._handle(message, rec)
            # The last line of defence: the user gets an answer, told whether it was kept
            except Exception as e:
                if isinstance(e, MemclawError):
                    # an error of memclaw's own names its fix in one line: no traceback
                    log.error("turn in %s/%s failed: %s", *key, e)
                else:
                    log.exception("turn in %s/%s failed", *key)
                rec.error = f"{type(e).__name__}: {e}"
                rec.failure = e
                reply = AgentReply(apology(unsaved=rec.unsaved), ok=False, record=rec)
            reply.record.timings_ms["total"] = (time.perf_counter() - t0) * 1000
            return reply

    def _refused(self, msg: InboundMessage) -> AgentReply | None:
        """A sender whose memory scope cannot be used safely (an id no scope can hold, or a scope folder or file
        that is a symlink) is refused before anything is read or written: one log line, a short reply."""
        sender = Sender(channel=msg.channel, sender_id=str(msg.sender_id), chat_id=msg.chat_id)
        try:
            scope = scope_for(self.config, sender)
            self.workspace.check_scope(scope)
        except (InvalidSenderError, MemoryFileError) as e:
            log.warning("refused a message from %s user %s: %s", msg.channel, shorten(str(msg.sender_id), 40), e)
            rec = TurnRecord(channel=msg.channel, chat_id=msg.chat_id, error=str(e))
            return AgentReply(REFUSED, ok=False, record=rec)
        return None

    async def consolidate(self, channel: str, chat_id: str, *, everything: bool = False) -> ConsolidationReport:
        """Consolidate a session now (older part, or all of it). One consolidation per session at a time."""
        if self.consolidator is None:
            return ConsolidationReport(ok=False, error="no memory service attached")
        async with self._consolidating.hold((channel, chat_id)):
            session = await asyncio.to_thread(self.sessions.load, channel, chat_id)
            report = await self.consolidator.consolidate(session, everything=everything)
        if not report.nothing_to_do:
            log.info("session %s/%s: %s", channel, chat_id, describe(report))
        return report

    async def drain(self) -> None:
        """Wait for background consolidations to finish."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def aclose(self) -> None:
        await self.drain()

    # ----- the turn --------------------------------------------------------------------------------------
    async def _handle(self, msg: InboundMessage, rec: TurnRecord) -> AgentReply:
        sender = Sender(
            channel=msg.channel, sender_id=str(msg.sender_id), display_name=msg.sender_name, chat_id=msg.chat_id
        )
        owner = is_owner(self.config, sender)
        scope = scope_for(self.config, sender)
        rec.scope, rec.is_owner = scope, owner
        ctx = ToolContext(root=self.root, config=self.config, scope=scope, is_owner=owner, memory=self.memory)

        text = (msg.text or "").strip()
        cmd = text.split(maxsplit=1)[0].lower() if text.startswith("/") else ""
        if cmd in COMMANDS:
            return await self._command(cmd, text[len(cmd) :].strip(), msg, ctx, rec)
        # One turn at a time per session
        async with turn_held(self.sessions, msg.channel, msg.chat_id):
            reply, replied = await self._turn(msg, sender, ctx, rec)
        # 5. consolidation when the session outgrew the window (after the turn lock: it may wait for the claim)
        if replied and self.consolidator is not None and len(replied.unconsolidated) > self.config.agent.memory_window:
            await self._after_turn(msg.channel, msg.chat_id)
        return reply

    async def _turn(
        self, msg: InboundMessage, sender: Sender, ctx: ToolContext, rec: TurnRecord
    ) -> tuple[AgentReply, Session | None]:
        """Steps 1-4 of a turn, under the session's turn lock: the session as its file is now, the user's message,
        the model and tools, the reply. With the reply, the session when the reply was stored in it."""
        owner, scope = ctx.is_owner, ctx.scope
        # 1. the user's message, on disk before anything else can fail
        t = time.perf_counter()
        rec.unsaved = True
        session = await asyncio.to_thread(self.sessions.load, msg.channel, msg.chat_id)
        rec.warnings += session.warnings
        ctx.incognito = session.incognito
        content = _describe_attachments(msg)
        stored = content + (f"\n[{len(msg.images)} image(s) attached]" if msg.images else "")
        user_msg = {
            "role": "user",
            "content": stored,
            "sender_id": str(msg.sender_id),
            "sender_name": msg.sender_name,
            "scope": scope,
        }
        # a retry of a message whose turn failed: its first copy goes, so it is sent and archived once
        if await asyncio.to_thread(self.sessions.drop_retried, session, user_msg):
            log.info(
                "turn in %s/%s: a retry of the unanswered last message (its first copy dropped)",
                msg.channel,
                msg.chat_id,
            )
        history = session.history()
        await asyncio.to_thread(self.sessions.append, session, *_private(session, user_msg))
        rec.unsaved = False
        rec.timings_ms["session"] = (time.perf_counter() - t) * 1000

        # 2. the context (auto-recall inside)
        t = time.perf_counter()
        built = await asyncio.to_thread(
            build_messages,
            config=self.config,
            workspace=self.workspace,
            message=IncomingMessage(content, tuple(msg.images)),
            sender=sender,
            history=history,
            recall=self.memory.recall if self.memory is not None else None,
            model=self.llm.model,
        )
        rec.timings_ms["context"] = (time.perf_counter() - t) * 1000
        rec.context_tokens = built.total_tokens
        rec.recalled = [h.unit.id for h in built.hits]
        rec.warnings += built.warnings
        messages: list[dict[str, Any]] = list(built.messages)
        tool_defs = self.tools.definitions(ctx)

        # 3. model <-> tools
        final: str | None = None
        rec.timings_ms["llm"] = 0.0
        rec.timings_ms["tools"] = 0.0
        try:
            for _ in range(self.config.agent.max_tool_iterations):
                t = time.perf_counter()
                resp = await self.llm.chat(messages, tool_defs or None)
                rec.timings_ms["llm"] += (time.perf_counter() - t) * 1000
                self._account(rec, resp)
                if not resp.tool_calls:
                    final = (resp.content or "").strip()
                    break
                await self._run_tools(resp, messages, session, ctx, rec)
            else:
                rec.stopped_at_limit = True
                names = [u.name for u in rec.tools[-3:]]
                final = render("agent_max_iterations", n=self.config.agent.max_tool_iterations, last_tools=names)
        except LLMError as e:
            rec.error = str(e)
            # the terminal shows the error itself (one line); other channels' operators need it in the log
            level = logging.INFO if msg.channel == "cli" else logging.WARNING
            log.log(level, "turn in %s/%s: %s", msg.channel, msg.chat_id, e)
            if owner:
                text = f"Sorry, I could not get an answer from the model: {e}. Your message is saved."
            else:
                text = "Sorry, I can't answer right now. Please try again in a little while."
            return AgentReply(text, ok=False, record=rec), None

        # Nothing memclaw said: shown, never stored or archived as its words (the message is kept)
        if not final:
            return AgentReply(EMPTY_REPLY, record=rec), None

        # 4. the reply, on disk before it is returned: a known secret's value is *** in the session and every channel
        t = time.perf_counter()
        final = redact_text(final, config_secrets(self.config))
        final_msg: dict[str, Any] = {"role": "assistant", "content": final}
        if rec.reasoning:
            final_msg["reasoning_content"] = rec.reasoning[-1]
        final_msg["usage"] = rec.usage.to_json()
        await asyncio.to_thread(self.sessions.append, session, *_private(session, final_msg))
        rec.timings_ms["session"] += (time.perf_counter() - t) * 1000
        return AgentReply(final, ok=not rec.stopped_at_limit, record=rec), session

    def _account(self, rec: TurnRecord, resp: LLMResponse) -> None:
        rec.llm_calls += 1
        rec.usage = rec.usage + resp.usage
        if resp.reasoning_content:
            rec.reasoning.append(resp.reasoning_content)

    async def _run_tools(
        self, resp: LLMResponse, messages: list[dict[str, Any]], session: Any, ctx: ToolContext, rec: TurnRecord
    ) -> None:
        assistant = resp.assistant_message()
        new: list[dict[str, Any]] = [assistant]
        for tc in resp.tool_calls:
            t = time.perf_counter()
            result = await self.tools.execute(tc.name, tc.arguments, ctx)
            ms = (time.perf_counter() - t) * 1000
            rec.timings_ms["tools"] += ms
            rec.tools.append(ToolUse(tc.name, result.ok, ms))
            log.info("tool %s -> %s", tc.name, "ok" if result.ok else result.content[:200])
            new.append({"role": "tool", "tool_call_id": tc.id, "name": tc.name, "content": result.content})
        messages.extend(new)
        stored = [dict(new[0], reasoning_content=resp.reasoning_content) if resp.reasoning_content else new[0]]
        await asyncio.to_thread(self.sessions.append, session, *_private(session, *stored, *new[1:]))

    async def _after_turn(self, channel: str, chat_id: str) -> None:
        if self.background_consolidation:
            task = asyncio.get_running_loop().create_task(
                self.consolidate(channel, chat_id), name=f"consolidate {channel}/{chat_id}"
            )
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        else:
            await self.consolidate(channel, chat_id)

    # ----- commands --------------------------------------------------------------------------------------
    async def _command(self, cmd: str, arg: str, msg: InboundMessage, ctx: ToolContext, rec: TurnRecord) -> AgentReply:
        if cmd == "/help":
            text = render(
                "agent_help",
                agent_name=self.config.agent.name,
                is_owner=ctx.is_owner,
                tools=self.tools.names(ctx),
                terminal=msg.channel == "cli",
                archive=self.config.memory.archive,
            )
            return AgentReply(text, command=cmd, record=rec)
        if cmd == "/new":
            return await self._cmd_new(msg, rec)
        if cmd == INCOGNITO_COMMAND:
            if not ctx.is_owner:
                who = shorten(str(msg.sender_id), 40)
                log.info("refused /incognito from %s user %s: not the owner", msg.channel, who)
            outcome = await asyncio.to_thread(
                incognito_command, self.sessions, msg.channel, msg.chat_id, is_owner=ctx.is_owner
            )
            return AgentReply(outcome.text, ok=outcome.ok, command=cmd, record=rec)
        outcome = await asyncio.to_thread(
            memory_command,
            self.memory,
            cmd,
            arg,
            scope=ctx.scope,
            is_owner=ctx.is_owner,
            markdown=msg.channel != "cli",
        )
        return AgentReply(outcome.text, ok=outcome.ok, command=cmd, record=rec, recall=outcome.recall)

    async def _cmd_new(self, msg: InboundMessage, rec: TurnRecord) -> AgentReply:
        # wait for a running background consolidation of this chat, then consolidate everything
        key = (msg.channel, msg.chat_id)
        pending = [t for t in self._background if t.get_name() == f"consolidate {key[0]}/{key[1]}"]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        # A turn in flight ends first, then the claim
        async with turn_held(self.sessions, msg.channel, msg.chat_id):
            return await self._new_session(msg, rec)

    async def _new_session(self, msg: InboundMessage, rec: TurnRecord) -> AgentReply:
        session = await asyncio.to_thread(self.sessions.load, msg.channel, msg.chat_id)
        if not session.unconsolidated:
            if session.messages:
                await asyncio.to_thread(self.sessions.clear, session)
            await self._end_incognito(session)
            return AgentReply("New session started.", command="/new", record=rec)
        if self.consolidator is None:
            return AgentReply(
                "I can't save this conversation to memory (no memory attached), so the session was kept.",
                ok=False,
                command="/new",
                record=rec,
            )
        report = await self.consolidate(msg.channel, msg.chat_id, everything=True)
        if report.usage:
            rec.usage = rec.usage + report.usage
        if not report.ok:
            rec.error = report.error
            return AgentReply(
                "I couldn't save this conversation to long-term memory, so I kept it; try /new again later."
                + (f" ({report.error})" if rec.is_owner else ""),
                ok=False,
                command="/new",
                record=rec,
            )
        await self._end_incognito(session)
        return AgentReply("Saved this conversation to memory. New session started.", command="/new", record=rec)

    async def _end_incognito(self, session: Session) -> None:
        """/new ends an incognito conversation (its private messages are gone with the old session)."""
        if session.incognito:
            await asyncio.to_thread(self.sessions.set_meta, session, **{INCOGNITO: None})


def _private(session: Session, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages to append, each marked private when the session is incognito."""
    return [dict(m, **{INCOGNITO: True}) for m in messages] if session.incognito else list(messages)
