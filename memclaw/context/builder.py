"""The sender-aware ContextBuilder: what the LLM sees before every reply, inside a priority-ordered token budget.

`build_messages(...)` returns an OpenAI-style message list. First one system message: identity and rules,
bootstrap files, always-on skills, skills summary, then the recalled memories. Then the session history, a
runtime-metadata user message, and the current user message with any images as data URLs. Static sections come
first and volatile ones last, so a provider's prompt cache keeps working. The recalled memories change with every
message, so they close the system prompt; the time lives in the runtime message at the end. The owner gets USER.md
and the owner's memories. Anyone else gets a neutral identity block, only their own memories, and a note that they
are not the owner.

Budget priorities (highest first), see memclaw.context._budget: identity and rules (never dropped), runtime metadata,
current message, USER.md / neutral block, AGENTS.md, SOUL.md, IDENTITY.md, recalled memories (at most
`context.memory_tokens`, filled by memclaw.context.memory_section), always-on skills, skills summary, TOOLS.md, session
history. The message is capped at what the profile, bootstrap files and memories leave, so an oversized message
is cut (with a warning) instead of pushing them out. Every cut but old history turns is a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memclaw.context import memory_section
from memclaw.context._budget import BudgetItem, BudgetSection, SectionReport, allocate
from memclaw.context._skills import Skill, SkillSet, load_skills, skills_summary
from memclaw.context._windows import context_window, supports_vision
from memclaw.context.images import image_part
from memclaw.context.inputs import agent_name, format_time, history_turns, read_cached, recall_query, runtime_info
from memclaw.context.sections import (
    MEMORIES_CLOSE,
    MEMORIES_OPEN,
    MESSAGE_YIELDS_TO,
    PRIORITY,
    SECTION_SEPARATOR,
    Sections,
    assemble,
    cut_warnings,
)
from memclaw.context.senders import Sender, chat_label, clean_name, is_owner, scope_for
from memclaw.context.tag_guard import own_words
from memclaw.errors import ConfigError, MemclawError, NothingToRecall
from memclaw.llm.tokens import IMAGE_TOKENS, MESSAGE_OVERHEAD, REPLY_PRIMING, count_message, count_messages, counter_for
from memclaw.markdown.units import OWNER_SCOPE
from memclaw.prompts import render
from memclaw.recall.results import RecallHit
from memclaw.tools.registry import outsider_tool_names
from memclaw.workspace import BOOTSTRAP_FILES

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.workspace import Workspace

log = logging.getLogger(__name__)

# The owner's profile; the owner's tools and notes on this machine
OWNER_ONLY_FILES = ("USER.md", "TOOLS.md")


class RecallFn(Protocol):
    """The recall seam; called as `recall(query, scope=..., k=...)`. Pass `MemoryService.recall`."""

    def __call__(self, query: str, *, scope: str, k: int) -> list[RecallHit]: ...


@dataclass(frozen=True)
class IncomingMessage:
    text: str
    images: tuple[Path | str | bytes, ...] = ()


@dataclass
class BuiltContext:
    messages: list[dict[str, Any]]
    report: list[SectionReport]
    budget: int = 0
    context_window: int = 0
    # What the messages cost, counted on the assembled list
    total_tokens: int = 0
    model: str = ""
    is_owner: bool = False
    scope: str = OWNER_SCOPE
    recall_query: str = ""
    # The memories that made it into the prompt
    hits: list[RecallHit] = field(default_factory=list)
    # Recalled memories left out of context.memory_tokens
    memory_fill: memory_section.SectionFill | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "context_window": self.context_window,
            "budget": self.budget,
            "total_tokens": self.total_tokens,
            "is_owner": self.is_owner,
            "scope": self.scope,
            "recall_query": self.recall_query,
            "messages": self.messages,
            "report": [r.to_json() for r in self.report],
            "memories": [h.to_json() for h in self.hits],
            "memory_section": self.memory_fill.to_json() if self.memory_fill else None,
            "warnings": list(self.warnings),
        }


def _root_of(workspace: Workspace | Path) -> Path:
    return workspace if isinstance(workspace, Path) else Path(workspace.root)


def build_messages(
    *,
    config: Config,
    workspace: Workspace | Path,
    message: IncomingMessage | str,
    sender: Sender,
    history: Sequence[Mapping[str, Any]] = (),
    recall: RecallFn | Callable[..., list[RecallHit]] | None = None,
    model: str | None = None,
    now: datetime | None = None,
    bundled_skills: Path | None = None,
) -> BuiltContext:
    """Assemble the messages for one reply. See the module docstring.

    `recall` is called as `recall(query, scope=scope, k=config.context.recall_k)`; pass `MemoryService.recall`.
    A recall failure (MemclawError) leaves the memories out with a warning instead of failing the turn.
    `bundled_skills` overrides where bundled skills are looked up (default:
    memclaw.context._skills.bundled_skills_dir()).
    Raises ConfigError when the identity and rules alone do not fit the model's window.
    """
    if isinstance(message, str):
        message = IncomingMessage(message)
    model = model or config.agent.model
    root = _root_of(workspace)
    owner = is_owner(config, sender)
    scope = scope_for(config, sender)
    count = counter_for(model)
    warnings: list[str] = []
    sender_name = clean_name(sender.display_name) or ("owner" if owner else f"a {sender.channel} user")
    channel = clean_name(sender.channel) or "unknown"

    # --- static inputs (cached by file signature)
    files = {n: read_cached(root / n) for n in BOOTSTRAP_FILES if owner or n not in OWNER_ONLY_FILES}
    files = {n: t for n, t in files.items() if t}
    skills_dir = root / "skills" if isinstance(workspace, Path) else Path(workspace.skills_dir)
    skillset = load_skills(skills_dir, bundled_skills)
    warnings += skillset.warnings

    os_name, py = runtime_info()
    sections = Sections()
    identity = render(
        "context_identity",
        name=agent_name(files.get("IDENTITY.md"), config.agent.name),
        is_owner=owner,
        os=os_name,
        python=py,
        model=model,
        show_paths=owner,
        workspace=str(root),
        sender_name=sender_name,
        channel=channel,
    )
    sections.text("identity", identity, "required", MESSAGE_OVERHEAD + REPLY_PRIMING)
    runtime = render(
        "context_runtime",
        time=format_time(now or datetime.now().astimezone(), config.context.timezone),
        channel=channel,
        chat_id=chat_label(sender.chat_id, sender.sender_id),
        sender_name=sender_name,
        is_owner=owner,
    )
    sections.text("runtime", runtime, overhead=MESSAGE_OVERHEAD)

    # current message (+ images, a fixed estimate each)
    parts = _image_parts(config, model, message, warnings)
    # Never the runtime tag
    msg_text = own_words(message.text) if message.text else ("[image]" if parts else "")
    sections.text(
        "message", msg_text, overhead=MESSAGE_OVERHEAD + IMAGE_TOKENS * len(parts), yields_to=MESSAGE_YIELDS_TO
    )
    _profile_sections(sections, files, owner, sender_name, channel)

    # recalled memories (volatile): as many as fit in context.memory_tokens, best first (memory_section.fill)
    query, hits = _recalled(config, recall, message, history, scope, warnings)
    memory_fill = memory_section.fill_hits(hits, config.context.memory_tokens, count)
    cands = memory_fill.candidates
    hits = [hits[i] for i in memory_fill.kept]
    mem_items = [cands[i].item for i in memory_fill.kept]
    mem_intro = render("context_memories", whose="your owner's" if owner else "this person's")
    if mem_items:
        sections.add(
            BudgetSection(
                "memories",
                PRIORITY["memories"],
                "ranked",
                items=tuple(BudgetItem(cands[i].id, cands[i].tokens) for i in memory_fill.kept),
                overhead=count(mem_intro) + count(MEMORIES_OPEN) + count(MEMORIES_CLOSE) + 2 + SECTION_SEPARATOR,
            )
        )

    _skill_sections(sections, skillset, owner)

    # session history (oldest turns dropped first, turns whole)
    turns = history_turns(history)
    if turns:
        sections.add(
            BudgetSection(
                "history",
                PRIORITY["history"],
                "history",
                items=tuple(
                    BudgetItem(f"turn {i + 1} ({len(t)} msg)", sum(count_message(m, model) for m in t))
                    for i, t in enumerate(turns)
                ),
            )
        )

    window = context_window(config, model)
    budget = window - config.context.reply_reserve
    if budget <= 0:
        raise ConfigError(
            f"context.reply_reserve ({config.context.reply_reserve}) leaves no room in the {window}-token window "
            f"of {model}; lower context.reply_reserve or set agent.context_window"
        )
    alloc = allocate(sections.items, budget, count)
    messages = assemble(alloc, parts, not message.text and bool(parts), mem_intro, mem_items, turns)
    kept_hits = [hits[i] for i in alloc["memories"].kept] if "memories" in alloc.results else []
    warnings += cut_warnings(alloc, memory_fill)
    total = count_messages(messages, model)
    # Token counts are not perfectly additive across joins; say so rather than hide it
    if total > budget:
        log.warning("assembled context has %d tokens, %d over the %d budget", total, total - budget, budget)
    return BuiltContext(
        messages=messages,
        report=alloc.reports(),
        budget=budget,
        context_window=window,
        total_tokens=total,
        model=model,
        is_owner=owner,
        scope=scope,
        recall_query=query,
        hits=kept_hits,
        memory_fill=memory_fill,
        warnings=warnings,
    )


def _image_parts(config: Config, model: str, message: IncomingMessage, warnings: list[str]) -> list[dict[str, Any]]:
    """The message's images as parts, for a vision model; for any other model none (with a warning)."""
    if not message.images:
        return []
    if supports_vision(config, model):
        return [p for p in (image_part(i) for i in message.images) if p]
    log.warning("skipping %d image(s): model %s is not marked as vision-capable", len(message.images), model)
    warnings.append(f"{len(message.images)} image(s) skipped: {model} is not marked as vision-capable")
    return []


def _profile_sections(sections: Sections, files: dict[str, str], owner: bool, sender_name: str, channel: str) -> None:
    """USER.md for the owner, the neutral block about the person for anyone else, then the other bootstrap files."""
    if owner:
        if "USER.md" in files:
            sections.text("USER.md", render("context_file", filename="USER.md", content=files["USER.md"]))
    else:
        person = render("context_outsider", sender_name=sender_name, channel=channel, tools=outsider_tool_names())
        sections.text("person", person)
    for n in ("AGENTS.md", "SOUL.md", "IDENTITY.md", "TOOLS.md"):
        if n in files:
            sections.text(n, render("context_file", filename=n, content=files[n]))


def _recalled(
    config: Config,
    recall: RecallFn | Callable[..., list[RecallHit]] | None,
    message: IncomingMessage,
    history: Sequence[Mapping[str, Any]],
    scope: str,
    warnings: list[str],
) -> tuple[str, list[RecallHit]]:
    """The recall query and the hits of the sender's scope (a recall failure: none, with a warning)."""
    hits: list[RecallHit] = []
    query = ""
    if recall is not None and config.context.recall_k > 0 and message.text.strip():
        query = recall_query(message.text, history, config.context.followup_max_words)
        try:
            hits = list(recall(query, scope=scope, k=config.context.recall_k))[: config.context.recall_k]
        # "ok, and?" names nothing to look for: no memories, and nothing to warn about
        except NothingToRecall:
            pass
        except MemclawError as e:
            log.warning("auto-recall failed, answering without memories: %s", e)
            warnings.append(f"auto-recall failed: {e}")
    # Defence in depth: never another scope's memory
    return query, [h for h in hits if h.unit.scope == scope]


def _skill_sections(sections: Sections, skillset: SkillSet, owner: bool) -> None:
    """The always-on skills in full; the summary of the others for the owner only (outsiders get no file tools,
    so they cannot open a SKILL.md: no summary and no paths for them)."""
    available_always = [s for s in skillset.always_on() if s.available]
    sections.text("skills.always", "\n\n".join(_render_skill(s, owner) for s in available_always))
    listed = [s for s in skillset.skills if not s.always]
    summary = skills_summary(listed) if owner else ""
    if summary:
        sections.text("skills.summary", render("context_skills_summary", summary=summary))


def _render_skill(skill: Skill, show_path: bool) -> str:
    return render("context_skill", name=skill.name, base_dir=str(skill.base_dir) if show_path else "", body=skill.body)
