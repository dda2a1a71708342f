"""Consolidation: the memory writer. Older session messages -> an archive chunk, a HISTORY entry and fact operations.

When a session holds more than `agent.memory_window` unconsolidated messages (and on `/new`), the older part is cut
at a turn boundary (a user message; an assistant tool call never leaves its results behind) and sent to the LLM
with `memclaw/prompts/consolidate.md`. The model answers JSON, validated with pydantic
(memclaw.agent.consolidation_output, limits included):

    {"history_entry": "...", "facts": [{"op": "add", "text": ..., "section": ...},
                                        {"op": "update", "id": ..., "text": ...}, {"op": "delete", "id": ...}]}

against the scope's current facts shown with their ids (the model never re-emits MEMORY.md). Turns are grouped by
the sender's scope (memclaw.agent.conversation), so what an outsider said lands in that outsider's memory and
archive, never the owner's. Messages sent while the session was incognito are neither read nor archived; turns
that restate what the owner forgot since are redacted for both (memclaw.service.forgotten).

Each scope's part is one `ConsolidationRecord` written by `MemoryService.record_consolidation`
(memclaw.service.consolidation_record): the turns verbatim in the archive, the facts with their learned-mark, the
history entry, all carrying the chunk's consolidation id (from its fingerprint). Order of effects, so that a failure
or a crash at any point loses no turn and duplicates none: (1) LLM + validation (junk -> one retry with the error;
still junk -> stop, nothing written); (2) the answers are kept in the session's progress record (CHUNK_PROGRESS:
the chunk's bounds and fingerprint, the answers, the steps done); (3) per scope: archive, facts, history, each step
noted as done; (4) the index syncs; (5) the chunk is dropped from the session file in one atomic rewrite. A failure
or crash before (5) leaves the session whole, and the next attempt finishes the same chunk with the same answers (no
new model call), skipping the steps done (and any step that landed without being noted: each is idempotent by the
id). Processes share a session (`agent -m`, `chat`, the gateway): a consolidation holds the session's claim
(SessionStore.try_claim) from reading the file to trimming it; it writes memory only if the chunk is still in the
file unconsolidated, and the trim removes the chunk found by content under the session's lock (SessionStore.drop),
never a count of messages, so turns appended meanwhile stay.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memclaw.agent.consolidation_output import ConsolidationOut, FactOpIn, parse_output, to_fact_ops, usable
from memclaw.agent.conversation import (
    USER_SPEAKER,
    archived_turns,
    conversation_start,
    format_conversation,
    group_by_scope,
    is_private,
    message_time,
    owner_speaker,
)
from memclaw.agent.sessions import CLAIM_SUFFIX
from memclaw.agent.sessions import CONSOLIDATION_PROGRESS as CHUNK_PROGRESS
from memclaw.agent.turnlock import lock_held
from memclaw.errors import ConsolidationError, LLMError, MemclawError, MemoryFileError
from memclaw.markdown.archive import consolidation_id
from memclaw.markdown.units import OWNER_SCOPE
from memclaw.prompts import render
from memclaw.service.consolidation_record import STEPS, ConsolidationRecord, RecordResult
from memclaw.service.forgotten import Guard
from memclaw.util.text import counted

if TYPE_CHECKING:
    from memclaw.agent.sessions import Session, SessionStore
    from memclaw.config import Config
    from memclaw.llm.client import LLMClient, Usage
    from memclaw.service.facade import MemoryService

log = logging.getLogger(__name__)


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


# ----- the consolidator ----------------------------------------------------------------------------------------
@dataclass
class ScopeResult:
    scope: str
    history: bool = False  # its history entry is in HISTORY.md
    ops: list[FactOpIn] = field(default_factory=list)
    archived: int = 0  # turns in its archive chunk


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


@dataclass
class _Scope:
    """One scope's part of the chunk: its messages as the model and the archive see them, and the forgotten-guard."""

    msgs: list[dict[str, Any]]
    guard: Guard


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
        failures: the report says what happened and the session is only trimmed on full success. Runs under the
        session's consolidation claim (waiting while another thread or process holds it) on the session as its file
        is then, so no two consolidations of one session overlap."""
        async with lock_held(self.sessions, session, CLAIM_SUFFIX):
            await asyncio.to_thread(self.sessions.refresh, session)
            return await self._consolidate(session, everything=everything, now=now)

    async def _consolidate(self, session: Session, *, everything: bool, now: datetime | None) -> ConsolidationReport:
        start = session.last_consolidated
        cut = cut_index(session.messages, start, self.config.agent.memory_window, everything=everything)
        done, answers, cut = _resume(session, start, cut)
        if cut <= start:
            if everything and start:
                await asyncio.to_thread(self.sessions.trim, session, start)
            return ConsolidationReport(ok=True)
        chunk = session.messages[start:cut]
        report = ConsolidationReport(ok=False)
        fingerprint = chunk_fingerprint(chunk)
        try:
            parts = await asyncio.to_thread(self._split, session, chunk)
            asked = await self._answer(parts, answers, done, report, now)
            if not await asyncio.to_thread(self.sessions.holds, session, chunk):
                log.warning(
                    "session %s/%s: the chunk was consolidated elsewhere meanwhile; nothing written", *session.key
                )
                return ConsolidationReport(ok=True, usage=report.usage)
            progress = {"start": start, "cut": cut, "chunk": fingerprint, "answers": answers, "done": done}
            if asked:  # the answers are kept before anything is written: a retry writes exactly them
                await asyncio.to_thread(self.sessions.set_meta, session, **{CHUNK_PROGRESS: progress})
            await self._write(session, parts, answers, consolidation_id(fingerprint), progress, report)
        except (LLMError, ConsolidationError) as e:
            report.error = str(e)
            log.warning("consolidation of session %s/%s failed, nothing trimmed: %s", *session.key, e)
            return report
        except MemclawError as e:
            report.error = f"writing memory failed: {e}"
            log.warning("consolidation of session %s/%s could not write memory, nothing trimmed: %s", *session.key, e)
            return report
        if not await asyncio.to_thread(self.sessions.drop, session, chunk):  # found by content, under the lock
            log.warning("session %s/%s: the consolidated chunk was gone at the trim; nothing trimmed", *session.key)
        report.ok = True
        report.consolidated = cut - start
        log.info("consolidated %d messages of session %s/%s", cut - start, *session.key)
        return report

    async def _answer(
        self,
        parts: dict[str, _Scope],
        answers: dict[str, Any],
        done: list[str],
        report: ConsolidationReport,
        now: datetime | None,
    ) -> bool:
        """Ask the model for each scope not answered yet (into `answers`); whether it was asked at all."""
        asked = False
        for scope, part in parts.items():
            if scope in answers or f"{scope}#history" in done:  # answered before a crash or failure
                continue
            out, usage = await self._ask(scope, part, now=now)
            report.usage = usage if report.usage is None else report.usage + usage
            answers[scope] = out.model_dump(exclude_none=True)
            asked = True
        return asked

    def _split(self, session: Session, chunk: list[dict[str, Any]]) -> dict[str, _Scope]:
        """The chunk's conversation per scope: incognito messages out, what was forgotten since redacted."""
        from memclaw.service.forgotten import FORGOTTEN_FILE, load

        default_scope = session.meta.get("scope") or next(
            (m.get("scope") for m in chunk if m.get("role") == "user" and m.get("scope")), OWNER_SCOPE
        )
        forgotten = load(self.memory.workspace.sessions_dir / FORGOTTEN_FILE)
        parts: dict[str, _Scope] = {}
        for scope, msgs in group_by_scope([m for m in chunk if not is_private(m)], default_scope).items():
            if not any(m.get("role") == "user" for m in msgs) and not any(m.get("content") for m in msgs):
                continue
            guard = Guard(forgotten, scope, msgs, self.memory.tokenizer.tokenize, self.memory.scopes.doc_freq(scope))
            parts[scope] = _Scope(guard.redact(msgs), guard)
        return parts

    async def _write(
        self,
        session: Session,
        parts: dict[str, _Scope],
        answers: dict[str, Any],
        cid: str,
        progress: dict[str, Any],
        report: ConsolidationReport,
    ) -> None:
        """Write each scope's archive chunk, facts and history entry (in that order, each step once: the steps
        already done are in `progress`), then sync the index of the scopes written."""
        steps = STEPS if self.config.memory.archive else tuple(s for s in STEPS if s != "archive")
        done: list[str] = progress["done"]
        pending = sum(f"{s}#{step}" not in done for s in parts for step in steps)
        speaker = owner_speaker(self.memory.workspace)
        for scope, part in parts.items():
            out = ConsolidationOut.model_validate(answers.get(scope) or {})
            rec = ConsolidationRecord(
                cid=cid,
                when=conversation_start(part.msgs),
                turns=archived_turns(
                    part.msgs, self.config.agent.name, speaker if scope == OWNER_SCOPE else USER_SPEAKER
                ),
                history_entry=out.history_entry,
                fact_ops=tuple(to_fact_ops(out.facts)),
            )
            res = ScopeResult(scope, ops=list(out.facts), archived=len(rec.turns) if "archive" in steps else 0)
            for step in steps:
                if f"{scope}#{step}" in done:
                    continue
                got = await asyncio.to_thread(self._record, scope, rec, step)
                res.history = res.history or got.history
                done.append(f"{scope}#{step}")
                pending -= 1
                if pending:  # after the last step the pointer moves past the chunk instead
                    await asyncio.to_thread(self.sessions.set_meta, session, **{CHUNK_PROGRESS: progress})
            res.history = res.history or bool(out.history_entry)
            report.scopes.append(res)
        if parts:
            try:
                await asyncio.to_thread(self.memory.sync, list(parts))
            except MemclawError as e:  # the Markdown holds it all: the next sync (or recall) indexes it
                log.warning("consolidation wrote memory, but the index could not be updated now: %s", e)

    def _record(self, scope: str, rec: ConsolidationRecord, step: str) -> RecordResult:
        try:
            return self.memory.record_consolidation(scope, rec, steps=(step,), sync=False)
        except OSError as e:
            raise MemoryFileError(
                f"cannot write the memory of scope {scope}: {e.strerror or e}; fix the workspace permissions "
                "or free disk space (the session is kept and consolidated again later)"
            ) from e

    async def _ask(self, scope: str, part: _Scope, *, now: datetime | None) -> tuple[ConsolidationOut, Usage]:
        out, usage = await self._ask_model(scope, part.msgs, part.guard.texts, now=now)
        out.facts = [op for op in out.facts if op.op == "delete" or part.guard.keeps(op.text)]
        out.history_entry = part.guard.scrub(out.history_entry)
        return out, usage

    async def _ask_model(
        self, scope: str, msgs: list[dict[str, Any]], forgotten: list[str], *, now: datetime | None
    ) -> tuple[ConsolidationOut, Usage]:
        facts = await asyncio.to_thread(self.memory.facts, scope)
        known = {f.id for f in facts}
        stamps = [t for t in (message_time(m) for m in msgs) if t]
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


def _resume(session: Session, start: int, cut: int) -> tuple[list[str], dict[str, Any], int]:
    """An earlier attempt got the model's answers for a chunk (and maybe wrote part of them) and then failed or was
    killed: finish exactly that chunk with those answers (its steps already written are skipped; every step is
    idempotent by the consolidation id anyway), whatever arrived since. Otherwise: nothing done, no answers, the
    planned cut. An answer kept that no longer validates (a limit it breaks) is asked for again."""
    progress = session.meta.get(CHUNK_PROGRESS) or {}
    prev = progress.get("cut")
    if (
        progress.get("start") == start
        and isinstance(prev, int)
        and start < prev <= len(session.messages)
        and chunk_fingerprint(session.messages[start:prev]) == progress.get("chunk")
    ):
        answers = progress.get("answers")
        kept = {s: a for s, a in answers.items() if usable(a)} if isinstance(answers, dict) else {}
        return list(progress.get("done", [])), kept, prev
    return [], {}, cut


def chunk_fingerprint(chunk: list[dict[str, Any]]) -> str:
    """Identifies a run of session messages (the same chunk retried after a failure has the same fingerprint)."""
    body = json.dumps(chunk, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")
    return hashlib.sha256(body).hexdigest()[:16]


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
        archived = f", {counted(s.archived, 'turn')} archived" if s.archived else ""
        parts.append(f"{s.scope}: {'1 history entry' if s.history else 'no history entry'}, {ops}{archived}")
    return f"consolidated {counted(report.consolidated, 'message')} ({'; '.join(parts)})"
