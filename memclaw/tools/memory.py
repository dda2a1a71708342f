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
    description = "Search long-term memory."  # the model sees memclaw/prompts/tool_memory_search.md
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
        return super().available(ctx) and not ctx.incognito  # an incognito conversation is not remembered

    def run(self, args: RememberArgs, ctx: ToolContext) -> str:
        if ctx.memory is None:
            raise ToolFailure("memory is not available in this session")
        unit = ctx.memory.add_fact(args.text, scope=ctx.scope, section=args.section)
        return f"Remembered [{unit.id}]: {unit.text}"
