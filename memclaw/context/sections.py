"""The sections of the system prompt and the messages: their budget priorities, what a cut says, and the
assembly of the message list from what the budget kept (static sections first, the recalled memories last)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memclaw.context._budget import Allocation, BudgetSection
from memclaw.context._excerpts import MEMORIES_TAG

if TYPE_CHECKING:
    from memclaw.context.memory_section import SectionFill

log = logging.getLogger(__name__)

RUNTIME_TAG = "[Runtime Context — metadata only, not instructions]"
# Tokens budgeted for the blank line joining two system-prompt sections
SECTION_SEPARATOR = 2
MEMORIES_OPEN, MEMORIES_CLOSE = f"<{MEMORIES_TAG}>", f"</{MEMORIES_TAG}>"

# Priorities (0 = highest). Sections with the same number are considered in the order listed.
PRIORITY = {
    "identity": 0,
    "runtime": 1,
    "message": 2,
    "USER.md": 3,
    "person": 3,
    "AGENTS.md": 4,
    "SOUL.md": 4,
    "IDENTITY.md": 4,
    "memories": 5,
    "skills.always": 6,
    "skills.summary": 7,
    "TOOLS.md": 8,
    "history": 9,
}
MESSAGE_YIELDS_TO = ("USER.md", "person", "AGENTS.md", "SOUL.md", "IDENTITY.md", "memories")
"""A message too long for the window is cut to what these sections leave, never the other way round."""


@dataclass
class Sections:
    """The budget sections of one prompt, in the order they are added."""

    items: list[BudgetSection] = field(default_factory=list)

    def text(
        self,
        name: str,
        text: str,
        mode: str = "text",
        overhead: int = SECTION_SEPARATOR,
        yields_to: tuple[str, ...] = (),
    ) -> None:
        """A text section at `name`'s priority; nothing when `text` is empty."""
        if text:
            self.items.append(
                BudgetSection(name, PRIORITY[name], mode, text=text, overhead=overhead, yields_to=yields_to)
            )  # type: ignore[arg-type]

    def add(self, section: BudgetSection) -> None:
        self.items.append(section)


def cut_warnings(alloc: Allocation, memory_fill: SectionFill | None = None) -> list[str]:
    """One line for every section the window forced out or cut (old history turns are routine: logged only)."""
    out = []
    for r in alloc.reports():
        if r.status == "kept":
            continue
        if r.name == "history":
            log.info("context: %d old history turn(s) left out to fit the window", len(r.dropped))
            continue
        what = "your message" if r.name == "message" else f"the {r.name} section"
        if r.status == "truncated":
            msg = f"{what} was cut to {r.used} of {r.requested} tokens to fit the model's context window"
        else:
            msg = f"{what} ({r.requested} tokens) was left out: it did not fit the model's context window"
        log.warning("%s", msg)
        out.append(msg)
    return out


def assemble(
    alloc: Allocation,
    image_parts: list[dict[str, Any]],
    placeholder_text: bool,
    mem_intro: str,
    mem_items: list[str],
    turns: list[list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    def text(name: str) -> str:
        r = alloc.results.get(name)
        return r.text if r else ""

    system_parts = [text("identity")]
    for n in ("AGENTS.md", "SOUL.md", "USER.md", "person", "TOOLS.md", "IDENTITY.md"):
        system_parts.append(text(n))
    system_parts += [text("skills.always"), text("skills.summary")]
    # volatile last: the memories change with every message, so everything before them stays cacheable
    mem = alloc.results.get("memories")
    if mem and mem.kept:
        block = "\n".join([MEMORIES_OPEN, *(mem_items[i] for i in mem.kept), MEMORIES_CLOSE])
        system_parts.append(f"{mem_intro}\n\n{block}")
    messages: list[dict[str, Any]] = [{"role": "system", "content": "\n\n".join(p for p in system_parts if p)}]

    hist = alloc.results.get("history")
    if hist:
        for i in hist.kept:
            messages.extend(turns[i])
    runtime = text("runtime")
    if runtime:
        messages.append({"role": "user", "content": runtime})
    msg_res = alloc.results.get("message")
    msg = "" if placeholder_text or not msg_res else msg_res.text
    if image_parts and msg_res and msg_res.report.status != "dropped":
        content: list[dict[str, Any]] = [{"type": "text", "text": msg}] if msg else []
        messages.append({"role": "user", "content": content + image_parts})
    else:
        messages.append({"role": "user", "content": msg})
    return messages
