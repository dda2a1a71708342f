"""The Discord load scenario of issue 7, shared by tests/channels/test_load.py (correctness) and
benchmarks/bench_load.py (figures).

N outside senders x M messages each go through memclaw's real Discord handler (`DiscordGateway.on_message` with
real discord.py Messages built from gateway payloads: tests/discord_harness.py), the real Agent and MemoryService
(the bundled model, embedded Chroma, Markdown files, session JSONL) and litellm over HTTP to the scripted LLM server
(tests/llm_server.py). Every sender is in `allow_from`; the first half write in their own DMs, the others in a few
shared guild channels, mentioning the bot, so one channel carries several people's turns.

Each sender has a secret (a locker code) in their own memory scope (memory/people/<discord:id>/MEMORY.md), and so
does the owner. The scripted model echoes who asked what (the sender tag and message number from the user's text)
and every secret it can see in the whole prompt, so a misrouted reply or a leaked memory shows up in the reply text
as well as in the recorded requests.

`LoadRun.check()` lists every violation: a lost, duplicated or misrouted reply, a broken per-channel or per-session
order, a prompt or reply with someone else's (or the owner's) secret, a sender whose own secret was not recalled.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.llm_server import Scripted, ScriptedLLMServer

OWNER = 4_000_000_000_000_001
SECRET_RE = re.compile(r"LOCKER-[0-9a-f]{8}")
ASK_RE = re.compile(r"\b(s\d{3}) m(\d{3}):")
QUESTIONS = ("what is my locker code?", "remind me of my locker code please", "do you still know my locker code?")
PETS = ("Miso", "Pixel", "Tofu", "Biscuit", "Nori", "Pepper", "Waffles", "Mochi")


@dataclass
class Sender:
    idx: int
    uid: int
    secret: str
    channel_id: int = 0
    guild_id: int | None = None

    @property
    def tag(self) -> str:
        return f"s{self.idx:03d}"

    @property
    def scope(self) -> str:
        return f"people/discord:{self.uid}"


@dataclass
class Delivered:
    """One message handed to the gateway."""

    sender: Sender
    n: int
    message_id: int
    channel_id: int
    at: float  # perf_counter just before on_message


class RecordingAgent:
    """The real Agent behind the gateway's `agent` seam, keeping every (inbound, reply) pair."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.pairs: list[tuple[Any, Any]] = []

    async def handle(self, message: Any) -> Any:
        reply = await self.agent.handle(message)
        self.pairs.append((message, reply))
        return reply

    async def aclose(self) -> None:
        await self.agent.aclose()


def answer(req: dict[str, Any]) -> Scripted:
    """The scripted model: 'ack <tag> m<n> saw <secrets in the prompt>' for the last user message."""
    user = next((m for m in reversed(req.get("messages", [])) if m.get("role") == "user"), {})
    content = user.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    m = ASK_RE.search(text or "")
    who = f"{m.group(1)} m{m.group(2)}" if m else "unknown"
    seen = sorted(set(SECRET_RE.findall(json.dumps(req.get("messages", [])))))
    return Scripted(message={"role": "assistant", "content": f"ack {who} saw {' '.join(seen) or 'none'}"})


def write_memories(ws: Any, senders: list[Sender], owner_secret: str) -> None:
    from memclaw.markdown.units import sender_scope

    owner = ws.memory_file("owner")
    owner.parent.mkdir(parents=True, exist_ok=True)
    owner.write_text(
        f"# Memory\n\n- My locker code is {owner_secret}.\n- My sister Anna lives in Lisbon.\n", encoding="utf-8"
    )
    for s in senders:
        path = ws.memory_file(sender_scope(f"discord:{s.uid}"))
        path.parent.mkdir(parents=True, exist_ok=True)
        pet = PETS[s.idx % len(PETS)]
        path.write_text(
            f"# Memory\n\n- My locker code is {s.secret}.\n- My cat is called {pet}.\n- I prefer tea over coffee.\n",
            encoding="utf-8",
        )


@dataclass
class LoadRun:
    """Build with `LoadRun.create(...)`, then `await run.drive()`, then `run.check()` / the figures."""

    senders: list[Sender]
    messages: int
    owner_secret: str
    server: ScriptedLLMServer
    agent: RecordingAgent
    memory: Any
    gateway: Any
    world: Any
    index_s: float = 0.0
    delivered: list[Delivered] = field(default_factory=list)
    records: list[Any] = field(default_factory=list)
    wall_s: float = 0.0

    @classmethod
    def create(
        cls,
        root: Path,
        server: ScriptedLLMServer,
        *,
        senders: int,
        messages: int,
        guild_channels: int = 5,
        embedder: Any = None,
    ) -> LoadRun:
        import discord

        from memclaw.agent.loop import Agent
        from memclaw.channels.discord.gateway import DiscordGateway, default_intents
        from memclaw.config import Config
        from memclaw.llm.client import litellm_module
        from memclaw.llm.tokens import count_tokens
        from memclaw.service.facade import MemoryService
        from memclaw.workspace import Workspace
        from tests.discord_harness import DiscordWorld, snowflake

        people = [Sender(i, snowflake(), f"LOCKER-{secrets.token_hex(4)}") for i in range(senders)]
        owner_secret = f"LOCKER-{secrets.token_hex(4)}"
        ws = Workspace(root)
        write_memories(ws, people, owner_secret)
        gid = snowflake()
        cfg = Config(
            workspace=root,
            owners={"discord": [str(OWNER)]},
            agent={
                "model": "openai/gpt-4o-mini",
                "api_base": server.url,
                "api_key": "sk-test-not-a-real-key",
                "max_retries": 0,
                "timeout_s": 120,
                "memory_window": 10_000,  # no consolidation during the load
            },
            channels={"discord": {"allow_from": [str(p.uid) for p in people], "guilds": [str(gid)]}},
        )
        memory = MemoryService(ws, cfg, embedder=embedder)
        t = time.perf_counter()
        memory.sync()  # every scope indexed before the first message, as `memclaw gateway` does at start
        index_s = time.perf_counter() - t
        count_tokens("warm-up", cfg.agent.model)  # the tokenizer loaded and litellm imported: ditto
        litellm_module()
        agent = RecordingAgent(Agent(cfg, ws, memory, background_consolidation=False))
        gateway = DiscordGateway(agent, cfg, client=discord.Client(intents=default_intents()))
        world = DiscordWorld(gateway.client)
        names = tuple(f"room-{i}" for i in range(max(1, guild_channels)))
        _, chans = world.guild("load", names, gid=gid)
        half = senders // 2
        for p in people:
            world.user(f"user{p.idx:03d}", p.uid)
            if p.idx < half or not guild_channels:
                p.channel_id = world.dm_channel(p.uid)
            else:
                p.channel_id, p.guild_id = chans[names[p.idx % len(names)]], gid
        server.dynamic(answer, times=senders * messages)
        return cls(people, messages, owner_secret, server, agent, memory, gateway, world, index_s)

    async def drive(self) -> None:
        """Deliver every message (round-robin over senders, so channels interleave) and wait for every reply."""
        futures = []
        w, gw = self.world, self.gateway
        async with w:
            try:
                t0 = time.perf_counter()
                for n in range(self.messages):
                    for s in self.senders:
                        text = f"{s.tag} m{n:03d}: {QUESTIONS[(n + s.idx) % len(QUESTIONS)]}"
                        if s.guild_id is None:
                            msg = w.dm(s.uid, text, channel_id=s.channel_id)
                        else:
                            msg = w.guild_message(
                                s.uid, text, guild_id=s.guild_id, channel_id=s.channel_id, mention_bot=True
                            )
                        at = time.perf_counter()
                        fut = await gw.on_message(msg)
                        if fut is None:
                            raise AssertionError(f"message {text!r} was not accepted")
                        self.delivered.append(Delivered(s, n, msg.id, s.channel_id, at))
                        futures.append(fut)
                self.records = list(await asyncio.gather(*futures))
                self.wall_s = time.perf_counter() - t0
            finally:
                await gw.shutdown()
                w.close()
                self.memory.close()

    # ----- correctness ----------------------------------------------------------------------------------------
    def check(self) -> list[str]:
        bad: list[str] = []
        by_tag = {s.tag: s for s in self.senders}
        all_secrets = {s.secret for s in self.senders} | {self.owner_secret}
        replies: dict[int, list[Any]] = {}
        for c in self.world.recorder.sent():
            ref = (c.json or {}).get("message_reference") or {}
            replies.setdefault(int(ref.get("message_id", 0)), []).append(c)
        # every message: exactly one reply, in its channel, answering it (sender tag and number echoed)
        for d in self.delivered:
            got = replies.get(d.message_id, [])
            if len(got) != 1:
                bad.append(f"{d.sender.tag} m{d.n:03d}: {len(got)} replies")
                continue
            c = got[0]
            text = c.json.get("content", "")
            if c.channel_id != d.channel_id:
                bad.append(f"{d.sender.tag} m{d.n:03d}: reply sent to channel {c.channel_id}, not {d.channel_id}")
            if not text.startswith(f"ack {d.sender.tag} m{d.n:03d} saw "):
                bad.append(f"{d.sender.tag} m{d.n:03d}: misrouted reply {text[:80]!r}")
            seen = set(SECRET_RE.findall(text))
            if seen != {d.sender.secret}:
                bad.append(f"{d.sender.tag} m{d.n:03d}: the model saw {sorted(seen)}, expected only their own")
        if len(self.world.recorder.sent()) != len(self.delivered):
            bad.append(f"{len(self.world.recorder.sent())} replies sent for {len(self.delivered)} messages")
        # per-channel order: replies leave each channel in the order its messages arrived
        for ch in {d.channel_id for d in self.delivered}:
            arrived = [d.message_id for d in self.delivered if d.channel_id == ch]
            answered = [int(c.json["message_reference"]["message_id"]) for c in self.world.recorder.sent(ch)]
            if answered != arrived:
                bad.append(f"channel {ch}: replies out of order")
        # every prompt the model received: only its sender's own secret (and that one recalled)
        for i, req in enumerate(self.server.requests):
            user = next((m for m in reversed(req["messages"]) if m["role"] == "user"), {})
            m = ASK_RE.search(str(user.get("content")))
            sender = by_tag.get(m.group(1)) if m else None
            if sender is None:
                bad.append(f"request {i}: no sender tag in the user message")
                continue
            seen = set(SECRET_RE.findall(json.dumps(req))) & all_secrets
            if seen != {sender.secret}:
                bad.append(f"request {i} for {sender.tag}: secrets {sorted(seen)}, expected only their own")
        if len(self.server.requests) != len(self.delivered):
            bad.append(f"{len(self.server.requests)} LLM requests for {len(self.delivered)} messages")
        # the agent: each turn in its sender's scope and session, sessions in message order
        for msg, reply in self.agent.pairs:
            s = by_tag[ASK_RE.search(msg.text).group(1)]
            if not reply.ok or reply.record.scope != s.scope or msg.sender_id != str(s.uid):
                bad.append(f"{s.tag}: turn ok={reply.ok} scope={reply.record.scope!r} sender={msg.sender_id}")
        if any(not r.ok for r in self.records):
            bad.append(f"{sum(not r.ok for r in self.records)} gateway turns failed")
        for s in self.senders:
            chat = str(s.channel_id) if s.guild_id is None else f"{s.channel_id}:{s.uid}"
            session = self.agent.agent.sessions.load("discord", chat)
            users = [ASK_RE.search(m["content"]) for m in session.messages if m.get("role") == "user"]
            if [(u.group(1), int(u.group(2))) if u else None for u in users] != [
                (s.tag, n) for n in range(self.messages)
            ]:
                bad.append(f"{s.tag}: session has the wrong user messages or order")
        return bad

    # ----- figures --------------------------------------------------------------------------------------------
    def timings(self) -> dict[str, list[float]]:
        """Per turn, in ms: overhead outside the LLM (agent total - LLM call), its parts, the LLM call, and the
        latency from arrival to the reply being sent (includes waiting behind the channel's earlier turns)."""
        out: dict[str, list[float]] = {"overhead": [], "context": [], "session": [], "llm": [], "latency": []}
        for _, reply in self.agent.pairs:
            tm = reply.record.timings_ms
            out["overhead"].append(tm["total"] - tm["llm"])
            out["context"].append(tm["context"])
            out["session"].append(tm["session"])
            out["llm"].append(tm["llm"])
        sent_at = {
            int(c.json["message_reference"]["message_id"]): c.at
            for c in self.world.recorder.sent()
            if c.json and c.json.get("message_reference")
        }
        out["latency"] = [(sent_at[d.message_id] - d.at) * 1000 for d in self.delivered if d.message_id in sent_at]
        return out
