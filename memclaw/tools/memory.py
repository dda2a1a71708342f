"""The memory tools every sender gets, on their own scope: memory_search and remember."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memclaw.markdown.unit_size import MAX_SECTION_CHARS
from memclaw.tools.base import Args, Tool, ToolContext, ToolFailure


class MemorySearchArgs(Args):
    query: str = Field(description="What to look for, in natural language or keywords.", min_length=1)
    k: int = Field(5, ge=1, le=20, description="How many memories to return.")
    kind: Literal["fact", "history"] | None = Field(
        None, description="Only facts (MEMORY.md) or only history entries (HISTORY.md); default both."
    )


class RememberArgs(Args):
    text: str = Field(description="The fact, as one self-contained sentence.", min_length=1, max_length=2000)
    section: str | None = Field(
        None,
        description=f"Optional heading to file it under, e.g. 'Work' (default: 'Notes'; at most {MAX_SECTION_CHARS} "
        "characters).",
    )


class MemorySearch(Tool):
    name = "memory_search"
    # The model sees memclaw/prompts/tool_memory_search.md
    description = "Search long-term memory."
    description_template = "tool_memory_search"
    Args = MemorySearchArgs
    owner_only = False

    def run(self, args: MemorySearchArgs, ctx: ToolContext) -> str:
        if ctx.memory is None:
            raise ToolFailure("memory is not available in this session")
        hits = ctx.memory.recall(args.query, scope=ctx.scope, k=args.k, kind=args.kind)
        hits = [h for h in hits if h.unit.scope == ctx.scope]
        if not hits:
            return "No matching memories."
        lines = []
        for i, h in enumerate(hits, 1):
            u = h.unit
            meta = [u.kind]
            if u.timestamp:
                meta.append(u.timestamp.strftime("%Y-%m-%d %H:%M" if u.kind == "history" else "%Y-%m-%d"))
            if u.section:
                meta.append(u.section)
            lines.append(f"{i}. [{u.id}] ({', '.join(meta)}) {u.text}")
        return "\n".join(lines)


class Remember(Tool):
    name = "remember"
    description = "Save one durable fact to long-term memory right away (e.g. a preference, a name, a date)."
    Args = RememberArgs
    owner_only = False

    def available(self, ctx: ToolContext) -> bool:
        # An incognito conversation is not remembered
        return super().available(ctx) and not ctx.incognito

    def run(self, args: RememberArgs, ctx: ToolContext) -> str:
        if ctx.memory is None:
            raise ToolFailure("memory is not available in this session")
        refused = over_cap(args.text, ctx)
        if refused:
            raise ToolFailure(f"not saved: {refused}")
        unit = ctx.memory.add_fact(args.text, scope=ctx.scope, section=args.section)
        ctx.facts_written += 1
        ctx.fact_chars_written += len(args.text)
        return f"Remembered [{unit.id}]: {unit.text}"


def over_cap(text: str, ctx: ToolContext) -> str | None:
    """Why writing `text` as a fact now would pass a cap, or None. Caps: facts and characters per turn
    (`agent.turn_facts`, `agent.turn_fact_chars`; the owner's: `agent.owner_turn_*`), and an outsider's scope in
    all (`memory.outsider_facts`, `memory.outsider_fact_chars`)."""
    a = ctx.config.agent
    calls, chars = (a.owner_turn_facts, a.owner_turn_fact_chars) if ctx.is_owner else (a.turn_facts, a.turn_fact_chars)
    if ctx.facts_written >= calls:
        return f"this turn already saved {ctx.facts_written} facts, the most one turn may save"
    if ctx.fact_chars_written + len(text) > chars:
        return f"one turn may save at most {chars} characters of facts ({ctx.fact_chars_written} saved so far)"
    if ctx.is_owner or ctx.memory is None:
        return None
    m = ctx.config.memory
    facts = ctx.memory.facts(ctx.scope)
    if len(facts) >= m.outsider_facts:
        return f"this person's memory is full ({len(facts)} facts, the most it may hold)"
    held = sum(len(u.text) for u in facts)
    if held + len(text) > m.outsider_fact_chars:
        return f"this person's memory is full ({held} of at most {m.outsider_fact_chars} characters of facts)"
    return None
