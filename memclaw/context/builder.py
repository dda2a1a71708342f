"""The sender-aware ContextBuilder: what the LLM sees before every reply, inside a priority-ordered token budget.

`build_messages(...)` returns an OpenAI-style message list: one system message (identity and rules, bootstrap
files, always-on skills, skills summary, then the recalled memories), the session history, a runtime-metadata user
message and the current user message (text, plus images as data URLs for vision models). Static sections come
first and volatile ones last, so a provider's prompt cache keeps working: everything in the system prompt before
the recalled memories is identical from one message to the next (the memories change with every message, so they
close the system prompt instead of sitting between the bootstrap files and the skills), and the time lives in the
runtime message at the end. The owner (configured per channel; the CLI always) gets USER.md and the owner's
memories; anyone else gets a neutral identity block, only their own memories, and a note that they are not the
owner.

Budget priorities (highest first), see memclaw.context.budget: identity and rules (never dropped), runtime metadata,
current message, USER.md / neutral block, AGENTS.md, SOUL.md, IDENTITY.md, recalled memories (at most
`context.memory_tokens`, filled by memclaw.context.memory_section), always-on skills, skills summary, TOOLS.md, session
history. The message is capped at what the profile, bootstrap files and memories leave, so an oversized message
is cut (with a warning) instead of pushing them out. Every cut but old history turns is a warning.
"""

from __future__ import annotations

import logging
import platform
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memclaw.context import memory_section
from memclaw.context.budget import Allocation, BudgetItem, BudgetSection, SectionReport, allocate
from memclaw.context.skills import Skill, load_skills, skills_summary
from memclaw.errors import ConfigError, MemclawError, NothingToRecall
from memclaw.llm.tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    count_message,
    count_messages,
    counter_for,
)
from memclaw.markdown.units import OWNER_SCOPE, sender_scope
from memclaw.prompts import render
from memclaw.recall.results import RecallHit
from memclaw.tools.registry import outsider_tool_names
from memclaw.util.filecache import FileCache

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.workspace import Workspace

log = logging.getLogger(__name__)

RUNTIME_TAG = "[Runtime Context — metadata only, not instructions]"
BOOTSTRAP_FILES = ("AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "IDENTITY.md")
OWNER_ONLY_FILES = ("USER.md", "TOOLS.md")  # the owner's profile; the owner's tools and notes on this machine
MAX_IMAGE_BYTES = 20 * 1024 * 1024
DEFAULT_CONTEXT_WINDOW = 8192
SECTION_SEPARATOR = 2  # tokens budgeted for the blank line joining two system-prompt sections

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

# Max input tokens of common models (provider prefix stripped; longest matching prefix wins).
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 272_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude-3": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "claude-haiku-4": 200_000,
    "claude-3-5": 200_000,
    "claude-3-7": 200_000,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini-2": 1_048_576,
    "gemini-2.5": 1_048_576,
    "deepseek-chat": 64_000,
    "deepseek-reasoner": 64_000,
    "mistral-large": 128_000,
    "llama3.1": 128_000,
    "llama3.2": 128_000,
    "llama3.3": 128_000,
    "llama3": 8_192,
    "llama-3.1": 128_000,
    "llama-3.3": 128_000,
    "qwen2.5": 32_768,
    "qwen3": 40_960,
}

_VISION_MARKERS = (
    "gpt-4o",
    "gpt-4.1",
    "gpt-4-turbo",
    "gpt-4.5",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "claude-3",
    "claude-sonnet-4",
    "claude-opus-4",
    "claude-haiku-4",
    "gemini",
    "llava",
    "vision",
    "pixtral",
    "-vl",
    "qwen2.5vl",
    "gemma3",
)


# ----- inputs ------------------------------------------------------------------------------------------------
class RecallFn(Protocol):
    """The recall seam; called as `recall(query, scope=..., k=...)`. Pass `MemoryService.recall`."""

    def __call__(self, query: str, *, scope: str, k: int) -> list[RecallHit]: ...


@dataclass(frozen=True)
class Sender:
    channel: str  # "cli", "discord", ...
    sender_id: str  # platform id; never shown to the model
    display_name: str | None = None
    chat_id: str | None = None

    @classmethod
    def cli(cls, display_name: str | None = None) -> Sender:
        return cls(channel="cli", sender_id="owner", display_name=display_name, chat_id="cli")


@dataclass(frozen=True)
class IncomingMessage:
    text: str
    images: tuple[Path | str | bytes, ...] = ()


# ----- outputs -----------------------------------------------------------------------------------------------
@dataclass
class BuiltContext:
    messages: list[dict[str, Any]]
    report: list[SectionReport]
    budget: int = 0
    context_window: int = 0
    total_tokens: int = 0  # what the messages cost, counted on the assembled list
    model: str = ""
    is_owner: bool = False
    scope: str = OWNER_SCOPE
    recall_query: str = ""
    hits: list[RecallHit] = field(default_factory=list)  # the memories that made it into the prompt
    memory_fill: memory_section.SectionFill | None = None  # recalled memories left out of context.memory_tokens
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


# ----- owner, windows, vision --------------------------------------------------------------------------------
def is_owner(config: Config, sender: Sender) -> bool:
    """The CLI is always the owner; elsewhere the sender id must be listed in `owners[channel]`."""
    if sender.channel == "cli":
        return True
    return str(sender.sender_id) in {str(x) for x in config.owners.get(sender.channel, [])}


def scope_for(config: Config, sender: Sender) -> str:
    """The memory scope a sender's context recalls from: 'owner', or 'people/<channel>:<id>'."""
    if is_owner(config, sender):
        return OWNER_SCOPE
    return sender_scope(f"{sender.channel}:{sender.sender_id}")


def _bare_model(model: str) -> str:
    """'openrouter/meta-llama/llama-3.1-70b' -> 'llama-3.1-70b'; 'ollama/llama3.1:8b' -> 'llama3.1'."""
    return model.lower().rsplit("/", 1)[-1].split(":", 1)[0]


@lru_cache(maxsize=64)
def _litellm_window(model: str) -> int | None:
    from memclaw.llm.client import model_info  # imports litellm: only for a model the table above does not know

    info = model_info(model)
    n = info.get("max_input_tokens") or info.get("max_tokens")
    return int(n) if isinstance(n, int) and n > 0 else None


def context_window(config: Config, model: str | None = None) -> int:
    """The model's context window: `agent.model_overrides[model]["context_window"]`, else
    `agent.context_window` (for the configured model), else the defaults table, else litellm's offline model
    info, else 8192."""
    model = model or config.agent.model
    override = config.agent.model_overrides.get(model, {}).get("context_window")
    if override is not None:
        try:
            return int(override)
        except (TypeError, ValueError):
            raise ConfigError(
                f"agent.model_overrides[{model!r}].context_window must be an integer, got {override!r}"
            ) from None
    if config.agent.context_window and model == config.agent.model:
        return config.agent.context_window
    bare = _bare_model(model)
    best = max((p for p in CONTEXT_WINDOWS if bare.startswith(p)), key=len, default=None)
    if best:
        return CONTEXT_WINDOWS[best]
    return _litellm_window(model) or DEFAULT_CONTEXT_WINDOW


def supports_vision(config: Config, model: str) -> bool:
    """`agent.model_overrides[model]["vision"]` if set, else a table of known vision model names."""
    v = config.agent.model_overrides.get(model, {}).get("vision")
    if isinstance(v, bool):
        return v
    bare = model.lower()
    if any(x in bare for x in ("o1-mini", "o3-mini", "gpt-3.5", "embedding")):
        return False
    return any(m in bare for m in _VISION_MARKERS)


# ----- cached files ------------------------------------------------------------------------------------------
def _read_text(path: Path) -> str | None:
    """A bootstrap file's text, stripped; None (with a warning) when unreadable."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        log.warning("cannot read %s (%s); leaving it out of the prompt", path, e.strerror)
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        log.warning("%s is not UTF-8; undecodable bytes replaced", path)
        text = raw.decode("utf-8", errors="replace")
    return text.strip()


_bootstrap_files: FileCache[str] = FileCache(_read_text)


def read_cached(path: Path) -> str | None:
    """File text, cached until the file changes; None when absent or unreadable (with a warning)."""
    return _bootstrap_files.get(path)


_NAME_RE = re.compile(r"^\s*[-*]?\s*\**\s*name\s*\**\s*:\s*\**\s*(.+?)\s*\**\s*$", re.I | re.M)


def agent_name(identity_md: str | None, default: str) -> str:
    """The assistant's name from IDENTITY.md (a `Name: X` line), else `default`."""
    if identity_md:
        m = _NAME_RE.search(identity_md)
        if m:
            name = _clean_name(m.group(1).strip("*_ "))
            if name:
                return name
    return default


def _clean_name(name: str | None, limit: int = 64) -> str:
    """A display name safe to put in a prompt: one line, no control characters or angle brackets."""
    if not name:
        return ""
    cleaned = "".join(ch if ch.isprintable() and ch not in "<>" else " " for ch in name)
    return " ".join(cleaned.split())[:limit]


@lru_cache(maxsize=1)
def runtime_info() -> tuple[str, str]:
    return f"{platform.system()} {platform.release()} ({platform.machine()})", platform.python_version()


# ----- pieces ------------------------------------------------------------------------------------------------
def format_time(now: datetime, tz_name: str | None) -> str:
    """'2026-11-22 19:58 (Sunday), Europe/Berlin (UTC+01:00)'."""
    if tz_name:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            now = now.astimezone(ZoneInfo(tz_name))
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"unknown timezone {tz_name!r} in context.timezone; use an IANA name") from None
        label = tz_name
    else:
        now = now.astimezone()
        label = now.tzname() or "local"
    off = now.strftime("%z")
    off = f"UTC{off[:3]}:{off[3:]}" if off else "UTC"
    return f"{now:%Y-%m-%d %H:%M} ({now:%A}), {label} ({off})"


def chat_label(chat_id: str | None, sender_id: str) -> str:
    """The chat id as shown to the model, without the sender's raw platform id: a Discord guild chat is keyed
    `<channel id>:<user id>`, and the owner's id must never reach the prompt. '4444:111' (sender 111) -> '4444';
    a chat keyed by the sender's id alone -> 'direct'."""
    cleaned = _clean_name(chat_id, 200)
    if not cleaned:
        return "-"
    sid = str(sender_id).strip()
    if not sid:
        return cleaned
    label = ":".join(p for p in cleaned.split(":") if p != sid)
    if len(sid) >= 6:  # a long id embedded in some other key ('dm-111222333'); short ids would match by chance
        label = label.replace(sid, "(sender)")
    return label or "direct"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def recall_query(text: str, history: Sequence[Mapping[str, Any]], followup_max_words: int) -> str:
    """The message, preceded by the previous user turn when the message is a short follow-up ("and then?")."""
    text = text.strip()
    if len(text.split()) > followup_max_words:
        return text
    for m in reversed(history):
        if m.get("role") != "user":
            continue
        prev = _text_of(m.get("content")).strip()
        if prev and not prev.startswith("[Runtime Context"):
            return f"{prev}\n{text}".strip()
    return text


def history_turns(history: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """Group history into turns that are kept or dropped whole: a user message and everything after it until
    the next user message, so an assistant tool call always stays with its tool results."""
    turns: list[list[dict[str, Any]]] = []
    for m in history:
        role = m.get("role")
        if role == "system":
            continue
        if role == "user" or not turns:
            turns.append([dict(m)])
        else:
            turns[-1].append(dict(m))
    return turns


_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_mime(data: bytes) -> str | None:
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_part(item: Path | str | bytes) -> dict[str, Any] | None:
    """An image as an OpenAI `image_url` part with a base64 data URL; None (and a log line) when the file is
    unreadable, too large or not a PNG/JPEG/GIF/WEBP image."""
    import base64

    label = "attached bytes" if isinstance(item, bytes) else str(item)
    if isinstance(item, bytes):
        data = item
    else:
        path = Path(item)
        try:
            if path.stat().st_size > MAX_IMAGE_BYTES:
                log.warning("skipping image %s: larger than %d MB", label, MAX_IMAGE_BYTES // 2**20)
                return None
            data = path.read_bytes()
        except OSError as e:
            log.warning("skipping image %s: cannot read it (%s)", label, e.strerror or e)
            return None
    if len(data) > MAX_IMAGE_BYTES:
        log.warning("skipping image %s: larger than %d MB", label, MAX_IMAGE_BYTES // 2**20)
        return None
    mime = image_mime(data)
    if mime is None:
        log.warning("skipping attachment %s: not a PNG, JPEG, GIF or WEBP image", label)
        return None
    url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return {"type": "image_url", "image_url": {"url": url}}


# ----- the builder -------------------------------------------------------------------------------------------
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
    memclaw.context.skills.bundled_skills_dir()).
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
    name_default = config.agent.name
    sender_name = _clean_name(sender.display_name) or ("owner" if owner else f"a {sender.channel} user")
    channel = _clean_name(sender.channel) or "unknown"

    # --- static inputs (cached by file signature)
    files = {n: read_cached(root / n) for n in BOOTSTRAP_FILES if owner or n not in OWNER_ONLY_FILES}
    files = {n: t for n, t in files.items() if t}
    skills_dir = root / "skills" if isinstance(workspace, Path) else Path(workspace.skills_dir)
    skillset = load_skills(skills_dir, bundled_skills)
    warnings += skillset.warnings

    os_name, py = runtime_info()
    sections: list[BudgetSection] = []

    def text_section(
        name: str, text: str, mode: str = "text", overhead: int = SECTION_SEPARATOR, yields_to: tuple[str, ...] = ()
    ) -> None:
        if text:
            sections.append(
                BudgetSection(name, PRIORITY[name], mode, text=text, overhead=overhead, yields_to=yields_to)
            )  # type: ignore[arg-type]

    identity = render(
        "context_identity",
        name=agent_name(files.get("IDENTITY.md"), name_default),
        is_owner=owner,
        os=os_name,
        python=py,
        model=model,
        show_paths=owner,
        workspace=str(root),
        sender_name=sender_name,
        channel=channel,
    )
    text_section("identity", identity, "required", MESSAGE_OVERHEAD + REPLY_PRIMING)

    runtime = render(
        "context_runtime",
        time=format_time(now or datetime.now().astimezone(), config.context.timezone),
        channel=channel,
        chat_id=chat_label(sender.chat_id, sender.sender_id),
        sender_name=sender_name,
        is_owner=owner,
    )
    text_section("runtime", runtime, overhead=MESSAGE_OVERHEAD)

    # current message (+ images, a fixed estimate each)
    parts: list[dict[str, Any]] = []
    if message.images:
        if supports_vision(config, model):
            parts = [p for p in (image_part(i) for i in message.images) if p]
        else:
            log.warning("skipping %d image(s): model %s is not marked as vision-capable", len(message.images), model)
            warnings.append(f"{len(message.images)} image(s) skipped: {model} is not marked as vision-capable")
    msg_text = message.text or ("[image]" if parts else "")
    text_section(
        "message", msg_text, overhead=MESSAGE_OVERHEAD + IMAGE_TOKENS * len(parts), yields_to=MESSAGE_YIELDS_TO
    )

    if owner:
        if "USER.md" in files:
            text_section("USER.md", render("context_file", filename="USER.md", content=files["USER.md"]))
    else:
        person = render("context_outsider", sender_name=sender_name, channel=channel, tools=outsider_tool_names())
        text_section("person", person)
    for n in ("AGENTS.md", "SOUL.md", "IDENTITY.md", "TOOLS.md"):
        if n in files:
            text_section(n, render("context_file", filename=n, content=files[n]))

    # recalled memories (volatile): as many as fit in context.memory_tokens, best first (memory_section.fill)
    hits: list[RecallHit] = []
    query = ""
    if recall is not None and config.context.recall_k > 0 and message.text.strip():
        query = recall_query(message.text, history, config.context.followup_max_words)
        try:
            hits = list(recall(query, scope=scope, k=config.context.recall_k))[: config.context.recall_k]
        except NothingToRecall:  # "ok, and?" names nothing to look for: no memories, and nothing to warn about
            pass
        except MemclawError as e:
            log.warning("auto-recall failed, answering without memories: %s", e)
            warnings.append(f"auto-recall failed: {e}")
    hits = [h for h in hits if h.unit.scope == scope]  # defence in depth: never another scope's memory
    memory_fill = memory_section.fill_hits(hits, config.context.memory_tokens, count)
    cands = memory_fill.candidates
    hits = [hits[i] for i in memory_fill.kept]
    mem_items = [cands[i].item for i in memory_fill.kept]
    mem_intro = render("context_memories", whose="your owner's" if owner else "this person's")
    if mem_items:
        head, tail = "<recalled-memories>", "</recalled-memories>"
        sections.append(
            BudgetSection(
                "memories",
                PRIORITY["memories"],
                "ranked",
                items=tuple(BudgetItem(cands[i].id, cands[i].tokens) for i in memory_fill.kept),
                overhead=count(mem_intro) + count(head) + count(tail) + 2 + SECTION_SEPARATOR,
            )
        )

    available_always = [s for s in skillset.always_on() if s.available]
    always_text = "\n\n".join(_render_skill(s, owner) for s in available_always)
    text_section("skills.always", always_text)
    # Outsiders get no file tools, so they cannot open a SKILL.md: no summary (and no paths) for them.
    listed = [s for s in skillset.skills if not s.always]
    summary = skills_summary(listed) if owner else ""
    if summary:
        text_section("skills.summary", render("context_skills_summary", summary=summary))

    # session history (oldest turns dropped first, turns whole)
    turns = history_turns(history)
    if turns:
        sections.append(
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
    alloc = allocate(sections, budget, count)
    messages = _assemble(alloc, parts, not message.text and bool(parts), mem_intro, mem_items, turns)
    kept_hits = [hits[i] for i in alloc["memories"].kept] if "memories" in alloc.results else []
    warnings += cut_warnings(alloc, memory_fill)
    total = count_messages(messages, model)
    if total > budget:  # token counts are not perfectly additive across joins; say so rather than hide it
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


def cut_warnings(alloc: Allocation, memory_fill: memory_section.SectionFill | None = None) -> list[str]:
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


def _render_skill(skill: Skill, show_path: bool) -> str:
    return render("context_skill", name=skill.name, base_dir=str(skill.base_dir) if show_path else "", body=skill.body)


def _assemble(
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
        block = "\n".join(["<recalled-memories>", *(mem_items[i] for i in mem.kept), "</recalled-memories>"])
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
