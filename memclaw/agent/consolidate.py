"""Consolidation: the memory writer. Older session messages -> a HISTORY entry and fact operations, via the LLM.

When a session holds more than `agent.memory_window` unconsolidated messages (and on `/new`), the older part is cut
at a turn boundary (a user message; an assistant tool call never leaves its results behind) and sent to the LLM
with `memclaw/prompts/consolidate.md`. The model answers JSON, validated with pydantic:

    {"history_entry": "...", "facts": [{"op": "add", "text": ..., "section": ...},
                                        {"op": "update", "id": ..., "text": ...}, {"op": "delete", "id": ...}]}

against the scope's current facts shown with their ids (the model never re-emits MEMORY.md). Turns are grouped by
the sender's scope, so what an outsider said lands in that outsider's memory, never the owner's.

Order of effects, so that a failure or a crash loses nothing: (1) LLM + validation (junk -> one retry with the
error; still junk -> stop, nothing written), (2) facts applied and the history entry appended per scope (Markdown
first, then the index syncs), (3) the session's consolidation pointer is written, (4) the session file is trimmed
atomically. A failure before (3) leaves the session whole; a crash between (3) and (4) is finished by the next trim.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from memclaw.agent.sessions import CHUNK_PROGRESS
from memclaw.context.inputs import content_text
from memclaw.errors import ConsolidationError, LLMError, MemclawError, MemoryFileError
from memclaw.markdown.units import OWNER_SCOPE, MemoryUnit
from memclaw.prompts import render
from memclaw.util.jsonfix import extract_object

if TYPE_CHECKING:
    from memclaw.agent.sessions import Session, SessionStore
    from memclaw.config import Config
    from memclaw.llm.client import LLMClient, Usage
    from memclaw.service.facade import MemoryService

log = logging.getLogger(__name__)

TOOL_RESULT_CHARS = 400  # how much of each tool result the consolidation prompt shows
MAX_PROMPT_CHARS = 60_000


# ----- the model's answer ------------------------------------------------------------------------------------
class FactOpIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    op: Literal["add", "update", "delete"]
    id: str | None = None
    text: str | None = None
    section: str | None = None

    @model_validator(mode="after")
    def _check(self) -> FactOpIn:
        if self.text is not None:
            self.text = " ".join(self.text.split())
        if self.op in ("add", "update") and not self.text:
            raise ValueError(f"'{self.op}' needs a non-empty 'text'")
        if self.op in ("update", "delete") and not self.id:
            raise ValueError(f"'{self.op}' needs the 'id' of an existing fact")
        if self.section is not None:
            self.section = " ".join(self.section.split()) or None
        return self


class ConsolidationOut(BaseModel):
    model_config = ConfigDict(extra="ignore")

    history_entry: str = ""
    facts: list[FactOpIn] = Field(default_factory=list)


def parse_output(text: str | None, known_ids: set[str]) -> ConsolidationOut:
    """Validate the model's reply; raises ValueError with a message fit to send back to the model."""
    try:
        data = extract_object(text)
    except ValueError as e:
        raise ValueError(str(e)) from None
    try:
        out = ConsolidationOut.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in err['loc']) or '(object)'}: {err['msg']}" for err in e.errors()[:5]
        )
        raise ValueError(f"the JSON does not match the expected shape ({problems})") from None
    unknown = [op.id for op in out.facts if op.op != "add" and op.id not in known_ids]
    if unknown:
        raise ValueError(f"unknown fact id(s) {', '.join(map(str, unknown))}: use only the ids listed")
    out.history_entry = " ".join(out.history_entry.split())
    return out


# ----- selecting what to consolidate ---------------------------------------------------------------------------
def cut_index(messages: list[dict[str, Any]], start: int, window: int, *, everything: bool = False) -> int:
    """Index up to which messages[start:] are consolidated (exclusive); `start` means nothing to do.

    Over the window, about half the window's most recent messages are kept; the cut lands on a user message so a
    turn (and every tool call with its results) stays whole."""
    n = len(messages)
    if everything:
        return n
    if n - start <= window:
        return start
    target = n - max(1, window // 2)
    for i in range(target, n):
        if messages[i].get("role") == "user":
            return i
    for i in range(target - 1, start, -1):
        if messages[i].get("role") == "user":
            return i
    return start


def group_by_scope(messages: list[dict[str, Any]], default_scope: str) -> dict[str, list[dict[str, Any]]]:
    """Whole turns grouped by the scope of the user who started them (order kept within a scope)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    scope = default_scope
    for m in messages:
        if m.get("role") == "user":
            scope = m.get("scope") or default_scope
        groups.setdefault(scope, []).append(m)
    return groups


def _parse_ts(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        ts = datetime.fromisoformat(value)
    except ValueError:
        return None
    return ts.astimezone().replace(tzinfo=None) if ts.tzinfo else ts


def format_conversation(messages: list[dict[str, Any]], agent_name: str) -> str:
    lines: list[str] = []
    for m in messages:
        ts = _parse_ts(m.get("ts"))
        stamp = f"[{ts:%Y-%m-%d %H:%M}] " if ts else ""
        role = m.get("role")
        text = content_text(m.get("content"), " ").strip()
        if role == "user":
            who = m.get("sender_name") or "user"
            lines.append(f"{stamp}{who}: {text}")
        elif role == "assistant":
            if text:
                lines.append(f"{stamp}{agent_name}: {text}")
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function", {})
                lines.append(f"{stamp}{agent_name} used tool {fn.get('name')}({str(fn.get('arguments', ''))[:300]})")
        elif role == "tool":
            if len(text) > TOOL_RESULT_CHARS:
                text = text[:TOOL_RESULT_CHARS] + " [...]"
            lines.append(f"    -> {m.get('name') or 'tool'} result: {text}")
    out = "\n".join(lines)
    if len(out) > MAX_PROMPT_CHARS:  # keep the end, where conclusions usually are, and the start
        half = MAX_PROMPT_CHARS // 2
        out = out[:half] + "\n[... middle of the conversation omitted ...]\n" + out[-half:]
    return out


# ----- the consolidator ----------------------------------------------------------------------------------------
@dataclass
class ScopeResult:
    scope: str
    history: MemoryUnit | None = None
    ops: list[FactOpIn] = field(default_factory=list)


@dataclass
class ConsolidationReport:
    ok: bool
    consolidated: int = 0  # messages moved out of the session
    scopes: list[ScopeResult] = field(default_factory=list)
    error: str | None = None
    usage: Usage | None = None

    @property
    def nothing_to_do(self) -> bool:
        return self.ok and self.consolidated == 0


class Consolidator:
    def __init__(self, config: Config, llm: LLMClient, memory: MemoryService, sessions: SessionStore) -> None:
        self.config = config
        self.llm = llm
        self.memory = memory
        self.sessions = sessions

    async def consolidate(
        self, session: Session, *, everything: bool = False, now: datetime | None = None
    ) -> ConsolidationReport:
        """Consolidate the older part of `session` (all of it with `everything`); never raises for LLM or memory
        failures: the report says what happened and the session is only trimmed on full success."""
        start = session.last_consolidated
        cut = cut_index(session.messages, start, self.config.agent.memory_window, everything=everything)
        done, cut = _resume(session, start, cut)
        if cut <= start:
            if everything and start:
                await asyncio.to_thread(self.sessions.trim, session, start)
            return ConsolidationReport(ok=True)
        chunk = session.messages[start:cut]
        default_scope = session.meta.get("scope") or next(
            (m.get("scope") for m in chunk if m.get("role") == "user" and m.get("scope")), OWNER_SCOPE
        )
        report = ConsolidationReport(ok=False)
        fingerprint = chunk_fingerprint(chunk)
        try:
            planned: list[tuple[str, ConsolidationOut, datetime]] = []
            for scope, msgs in group_by_scope(chunk, default_scope).items():
                if not any(m.get("role") == "user" for m in msgs) and not any(m.get("content") for m in msgs):
                    continue
                if f"{scope}#history" in done:  # written by an attempt that failed on a later scope
                    continue
                out, usage = await self._ask(scope, msgs, now=now)
                report.usage = usage if report.usage is None else report.usage + usage
                ts = next((t for t in (_parse_ts(m.get("ts")) for m in msgs) if t), None) or datetime.now()
                planned.append((scope, out, ts))
            pending = sum(f"{s}#{step}" not in done for s, _, _ in planned for step in ("facts", "history"))
            for scope, out, ts in planned:
                res = ScopeResult(scope, ops=list(out.facts))
                for step in ("facts", "history"):
                    if f"{scope}#{step}" in done:
                        continue
                    await asyncio.to_thread(self._apply, step, res, out, ts)
                    done.append(f"{scope}#{step}")
                    pending -= 1
                    if pending:  # after the last step the pointer moves past the chunk instead
                        progress = {"start": start, "cut": cut, "chunk": fingerprint, "done": done}
                        await asyncio.to_thread(self.sessions.set_meta, session, **{CHUNK_PROGRESS: progress})
                report.scopes.append(res)
        except (LLMError, ConsolidationError) as e:
            report.error = str(e)
            log.warning("consolidation of session %s/%s failed, nothing trimmed: %s", *session.key, e)
            return report
        except MemclawError as e:
            report.error = f"writing memory failed: {e}"
            log.warning("consolidation of session %s/%s could not write memory, nothing trimmed: %s", *session.key, e)
            return report
        await asyncio.to_thread(self.sessions.set_pointer, session, cut)
        await asyncio.to_thread(self.sessions.trim, session, cut)
        report.ok = True
        report.consolidated = cut - start
        log.info("consolidated %d messages of session %s/%s", cut - start, *session.key)
        return report

    async def _ask(
        self, scope: str, msgs: list[dict[str, Any]], *, now: datetime | None
    ) -> tuple[ConsolidationOut, Usage]:
        from memclaw.service.forgotten import FORGOTTEN_FILE, Guard, load

        forgotten = await asyncio.to_thread(load, self.memory.workspace.sessions_dir / FORGOTTEN_FILE)
        guard = Guard(forgotten, scope, msgs, self.memory.tokenizer.tokenize)
        out, usage = await self._ask_model(scope, guard.redact(msgs), guard.texts, now=now)
        out.facts = [op for op in out.facts if op.op == "delete" or guard.keeps(op.text)]
        out.history_entry = guard.scrub(out.history_entry)
        return out, usage

    async def _ask_model(
        self, scope: str, msgs: list[dict[str, Any]], forgotten: list[str], *, now: datetime | None
    ) -> tuple[ConsolidationOut, Usage]:
        facts = await asyncio.to_thread(self.memory.facts, scope)
        known = {f.id for f in facts}
        stamps = [t for t in (_parse_ts(m.get("ts")) for m in msgs) if t]
        owner = scope == OWNER_SCOPE
        sender = next((m.get("sender_name") for m in msgs if m.get("role") == "user" and m.get("sender_name")), None)
        who_short = "the owner" if owner else (sender or "this person")
        prompt = render(
            "consolidate",
            agent_name=self.config.agent.name,
            who="its owner" if owner else f"{sender or 'a person'} (not the owner)",
            who_short=who_short,
            now=f"{(now or datetime.now()):%Y-%m-%d %H:%M (%A)}",
            facts=[{"id": f.id, "text": f.text, "section": f.section} for f in facts],
            forgotten=[" ".join(t.split()) for t in forgotten],
            conversation=format_conversation(msgs, self.config.agent.name),
            first_ts=f"{stamps[0]:%Y-%m-%d %H:%M}" if stamps else "unknown",
            last_ts=f"{stamps[-1]:%Y-%m-%d %H:%M}" if stamps else "unknown",
        )
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": render("consolidate_system")},
            {"role": "user", "content": prompt},
        ]
        resp = await self.llm.chat(messages, temperature=0)
        usage = resp.usage
        try:
            return parse_output(resp.content, known), usage
        except ValueError as e:
            log.warning("consolidation reply unusable (%s); asking once more", e)
            messages += [
                {"role": "assistant", "content": resp.content or ""},
                {"role": "user", "content": render("consolidate_retry", error=str(e))},
            ]
        resp = await self.llm.chat(messages, temperature=0)
        usage = usage + resp.usage
        try:
            return parse_output(resp.content, known), usage
        except ValueError as e:
            raise ConsolidationError(
                f"the model returned unusable memory JSON twice ({e}); the session was kept and consolidation "
                "runs again after the next message or /new (or choose a stronger agent.model)"
            ) from None

    def _apply(self, step: str, res: ScopeResult, out: ConsolidationOut, ts: datetime) -> None:
        """Write one step of a scope's consolidation: its fact operations, or its history entry."""
        try:
            if step == "facts" and out.facts:
                self.memory.apply_fact_ops(res.scope, to_fact_ops(out.facts))
            elif step == "history" and out.history_entry:
                res.history = self.memory.append_history(res.scope, out.history_entry, ts)
        except OSError as e:
            raise MemoryFileError(
                f"cannot write the memory of scope {res.scope}: {e.strerror or e}; fix the workspace permissions "
                "or free disk space (the session is kept and consolidated again later)"
            ) from e


def _resume(session: Session, start: int, cut: int) -> tuple[list[str], int]:
    """An earlier attempt wrote part of a chunk and then failed: finish exactly that chunk (its steps already
    written are skipped), whatever arrived since. Otherwise: nothing done, the planned cut."""
    progress = session.meta.get(CHUNK_PROGRESS) or {}
    prev = progress.get("cut")
    if (
        progress.get("start") == start
        and isinstance(prev, int)
        and start < prev <= len(session.messages)
        and chunk_fingerprint(session.messages[start:prev]) == progress.get("chunk")
    ):
        return list(progress.get("done", [])), prev
    return [], cut


def chunk_fingerprint(chunk: list[dict[str, Any]]) -> str:
    """Identifies a run of session messages (the same chunk retried after a failure has the same fingerprint)."""
    body = json.dumps(chunk, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")
    return hashlib.sha256(body).hexdigest()[:16]


def to_fact_ops(ops: list[FactOpIn]) -> list[Any]:
    """Our validated ops -> memclaw.markdown.fact_ops.FactOp (the memory layer's type)."""
    from memclaw.markdown.fact_ops import FactOp

    return [FactOp(op=o.op, id=o.id, text=o.text, section=o.section) for o in ops]


def describe(report: ConsolidationReport) -> str:
    """One line for logs and the /new reply."""
    if not report.ok:
        return f"consolidation failed: {report.error}"
    if report.consolidated == 0:
        return "nothing to consolidate"
    parts = []
    for s in report.scopes:
        counts = {k: sum(1 for o in s.ops if o.op == k) for k in ("add", "update", "delete")}
        ops = ", ".join(f"{v} {k}" for k, v in counts.items() if v) or "no fact changes"
        parts.append(f"{s.scope}: {'1 history entry' if s.history else 'no history entry'}, {ops}")
    return f"consolidated {report.consolidated} messages ({'; '.join(parts)})"


def dumps_ops(ops: list[FactOpIn]) -> str:
    return json.dumps([o.model_dump(exclude_none=True) for o in ops], ensure_ascii=False)
