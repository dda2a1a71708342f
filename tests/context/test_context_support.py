"""Shared helpers for the context tests (no tests here): a workspace on disk, memory units, a real PNG."""

from __future__ import annotations

import re
import struct
import zlib
from datetime import datetime
from pathlib import Path

from memclaw.markdown.units import MemoryUnit, scope_dirname, unit_id
from memclaw.recall.results import RecallHit, Signal

OWNER_ADDRESS = "14 Rue des Tanneurs, Lyon"
USER_MD = f"""# User profile

- Name: Maya Okafor
- Home address: {OWNER_ADDRESS}
- Doctor: Dr. Ilse Brandt (cardiology)

Maya prefers short answers.
"""
AGENTS_MD = "# Agent instructions\n\nBe concise and kind.\n\nAsk before deleting files."
SOUL_MD = "# Soul\n\nCurious, warm, a little dry."
TOOLS_MD = "# Tools\n\nexec runs shell commands in the workspace.\n\nweb_fetch is not available."
IDENTITY_MD = "# Identity\n\n- Name: Clawdia\n- Emoji: crab"

OWNER_FACTS = [
    ("Home", f"Maya lives at {OWNER_ADDRESS}"),
    ("Health", "Maya takes bisoprolol every morning"),
    ("People", "Maya's sister Lena lives in Porto"),
]


def make_workspace(root: Path, *, bootstrap: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if bootstrap:
        for name, text in (
            ("USER.md", USER_MD),
            ("AGENTS.md", AGENTS_MD),
            ("SOUL.md", SOUL_MD),
            ("TOOLS.md", TOOLS_MD),
            ("IDENTITY.md", IDENTITY_MD),
        ):
            (root / name).write_text(text, encoding="utf-8")
    (root / "skills").mkdir(exist_ok=True)
    return root


def fact_unit(scope: str, text: str, section: str | None = None, when: datetime | None = None) -> MemoryUnit:
    source = f"{scope_dirname(scope)}/MEMORY.md"
    return MemoryUnit(
        id=unit_id(scope, source, "fact", text),
        kind="fact",
        scope=scope,
        source=source,
        line=3,
        text=text,
        timestamp=when,
        section=section,
    )


def history_unit(scope: str, text: str, when: datetime) -> MemoryUnit:
    source = f"{scope_dirname(scope)}/HISTORY.md"
    return MemoryUnit(
        id=unit_id(scope, source, "history", text),
        kind="history",
        scope=scope,
        source=source,
        line=1,
        text=text,
        timestamp=when,
    )


def hit(unit: MemoryUnit, score: float = 1.0, rank: int = 1) -> RecallHit:
    return RecallHit(unit=unit, score=score, bm25=Signal(rank, score), vector=Signal(rank, 0.5))


class ScopedRecall:
    """A recall seam over a fixed table of units: keyword overlap, restricted to the asked scope (as the real
    engine is). Records every call."""

    def __init__(self, units: list[MemoryUnit]) -> None:
        self.units = units
        self.calls: list[tuple[str, str, int]] = []

    def __call__(self, query: str, *, scope: str, k: int) -> list[RecallHit]:
        self.calls.append((query, scope, k))
        words = set(re.findall(r"\w+", query.lower()))
        scored = []
        for u in self.units:
            if u.scope != scope:
                continue
            overlap = len(words & set(re.findall(r"\w+", u.text.lower())))
            scored.append((overlap, u))
        scored.sort(key=lambda x: -x[0])
        return [hit(u, float(s), i + 1) for i, (s, u) in enumerate(scored[:k])]


def png_bytes(width: int = 2, height: int = 2) -> bytes:
    """A real, valid RGB PNG."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def all_text(messages: list[dict]) -> str:
    """Every string the model would see, tool calls included."""
    out = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            out += [p.get("text", "") for p in c if isinstance(p, dict)]
        for call in m.get("tool_calls") or ():
            out.append(str(call))
    return "\n".join(out)
