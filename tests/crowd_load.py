"""A crowd of distinct outside senders (issue 39), shared by tests/test_load.py (correctness under a low open-file
limit) and benchmarks/bench_load.py --crowd (the footprint at 10,000 senders).

Each sender writes one message in their own Discord DM; the scripted model (tests/llm_server.py, over real HTTP)
answers it with two `remember` calls, then a short reply. So every sender's first turn opens a scope, writes two
facts to its MEMORY.md, syncs it (embedded Chroma, the real model or the test's embedder) and recalls from it. An
owner turn can be run at any point (`owner_turn`); it recalls the owner's secret.

The turns go through the real `Agent.handle` on one asyncio loop, `concurrency` at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import resource
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.llm_server import Scripted, ScriptedLLMServer

OWNER = "4000000000000001"
TAG_RE = re.compile(r"\bu(\d{6})\b")
SECRET_RE = re.compile(r"LOCKER-[0-9a-f]{8}")


def answer(req: dict[str, Any]) -> Scripted:
    """The scripted model: two `remember` calls for a user message, then a reply naming the secrets it saw."""
    msgs = req.get("messages", [])
    last = msgs[-1] if msgs else {}
    if last.get("role") == "user":
        m = TAG_RE.search(str(last.get("content")))
        if m is not None:
            tag = m.group(0)
            calls = [
                {"id": f"call_{tag}_{i}", "type": "function",
                 "function": {"name": "remember", "arguments": json.dumps({"text": text})}}
                for i, text in enumerate((f"{tag} likes green tea.", f"{tag} has a cat called Miso."))
            ]  # fmt: skip
            return Scripted(message={"role": "assistant", "content": None, "tool_calls": calls})
    seen = sorted(set(SECRET_RE.findall(json.dumps(msgs))))
    return Scripted(message={"role": "assistant", "content": f"ok saw {' '.join(seen) or 'none'}"})


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def disk_bytes(root: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


@dataclass
class CrowdRun:
    """Build with `CrowdRun.create(...)`, then `await run.senders(a, b)` and `await run.owner_turn()`."""

    root: Path
    server: ScriptedLLMServer
    agent: Any
    memory: Any
    owner_secret: str
    failures: list[str] = field(default_factory=list)
    replies: int = 0

    @classmethod
    def create(cls, root: Path, server: ScriptedLLMServer, *, embedder: Any = None, **memory: Any) -> CrowdRun:
        from memclaw.agent.loop import Agent
        from memclaw.config import Config
        from memclaw.service.facade import MemoryService
        from memclaw.workspace import Workspace

        ws = Workspace(root)
        owner_secret = f"LOCKER-{secrets.token_hex(4)}"
        owner_file = ws.memory_file("owner")
        owner_file.parent.mkdir(parents=True, exist_ok=True)
        owner_file.write_text(f"# Memory\n\n- My locker code is {owner_secret}.\n", encoding="utf-8")
        cfg = Config(
            workspace=root,
            owners={"discord": [OWNER]},
            agent={"model": "openai/gpt-4o-mini", "api_base": server.url, "api_key": "sk-test-not-a-real-key",
                   "max_retries": 0, "timeout_s": 120, "memory_window": 10_000},
            memory=memory,
        )  # fmt: skip
        mem = MemoryService(ws, cfg, embedder=embedder)
        mem.sync()
        server.requests = deque(maxlen=50)  # type: ignore[assignment]  # (a long run keeps only the last few)
        server.default = Scripted(fn=answer)
        return cls(root, server, Agent(cfg, ws, mem, background_consolidation=False), mem, owner_secret)

    async def _one(self, i: int) -> None:
        from memclaw.agent.turn import InboundMessage

        uid = str(5_000_000_000_000_000 + i)
        msg = InboundMessage(channel="discord", chat_id=f"dm{uid}", sender_id=uid, text=f"u{i:06d}: hello there")
        reply = await self.agent.handle(msg)
        self.replies += 1
        if not reply.ok or not reply.text.startswith("ok saw"):
            self.failures.append(f"sender {i}: {reply.text[:120]!r} ({reply.record.error})")

    async def senders(self, start: int, stop: int, *, concurrency: int = 8) -> None:
        """One turn each for senders start..stop-1, `concurrency` at a time."""
        sem = asyncio.Semaphore(concurrency)

        async def run(i: int) -> None:
            async with sem:
                await self._one(i)

        await asyncio.gather(*(run(i) for i in range(start, stop)))

    async def owner_turn(self) -> tuple[bool, str, float]:
        """One owner turn in the owner's DM: (ok, reply, seconds)."""
        from memclaw.agent.turn import InboundMessage

        t = time.perf_counter()
        msg = InboundMessage(channel="discord", chat_id="dm-owner", sender_id=OWNER, text="what is my locker code?")
        reply = await self.agent.handle(msg)
        return reply.ok and self.owner_secret in reply.text, reply.text, time.perf_counter() - t

    def facts_of(self, i: int) -> str:
        from memclaw.markdown.units import sender_scope

        path = self.memory.workspace.memory_file(sender_scope(f"discord:{5_000_000_000_000_000 + i}"))
        return path.read_text(encoding="utf-8") if path.exists() else ""
