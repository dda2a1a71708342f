"""Consolidation: the memory writer. The older part of a session becomes an archive chunk, a history entry and
fact operations.

Past `agent.memory_window` messages (and on `/new`), the older part is cut at a turn boundary. Each scope's part
goes to the model with `prompts/consolidate.md`, and its JSON answer is checked by
memclaw.agent._consolidation_output. Invariants:

- The prompt fits `agent.consolidation_tokens`. It shows every fact of the scope when all fit; otherwise the facts
  the conversation's turns recall, best first, until the budget is full.
- An update or a delete names only a fact the prompt showed; facts not shown are left as they are.
- A chunk over the budget is halved at a turn boundary until it fits; the rest waits for the next consolidation.
  A turn that cannot fit alone, or a `/new` over the budget, is said once as one warning, and the session is kept.
- Nothing is lost or written twice. The answers are kept in the session before any write; each write is idempotent
  by the chunk's consolidation id; the chunk leaves the session last, found by content under the session's lock.
- Incognito messages are never read; what the owner forgot since is redacted (memclaw.service.forgotten).
- One consolidation per session at a time, across processes (`SessionStore.try_lock`).
See docs/decisions/0036-bounded-consolidation.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memclaw.agent._consolidation_output import ConsolidationOut, FactOpIn, parse_output, to_fact_ops, usable
from memclaw.agent._turnlock import lock_held
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
from memclaw.agent.sessions import CLAIM_SUFFIX, CONSOLIDATION_PROGRESS
from memclaw.context.inputs import content_text
from memclaw.errors import ConsolidationError, ConsolidationOverBudget, LLMError, MemclawError, MemoryFileError
from memclaw.llm.tokens import count_messages, counter_for
from memclaw.markdown.archive import consolidation_id
from memclaw.markdown.units import OWNER_SCOPE, MemoryUnit
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

RECALL_K = 12
"""Facts each query of a turn brings, at most (two queries a turn: `relevant_facts`)."""
FUSION_K = 60
"""The constant of reciprocal-rank fusion across the turns' queries."""
OVER_BUDGET = "over_budget"
"""Session metadata: the chunk start whose prompt could not fit, so that the warning is said once."""


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


def half_cut(messages: list[dict[str, Any]], start: int, cut: int) -> int:
    """A cut at the user message nearest the middle of messages[start:cut]; `start` when the chunk is one turn."""
    middle = start + (cut - start) // 2
    turns = [i for i in range(start + 1, cut) if messages[i].get("role") == "user"]
    return min(turns, key=lambda i: abs(i - middle), default=start)


# ----- the consolidator ----------------------------------------------------------------------------------------
@dataclass
class ScopeResult:
    scope: str
    # whether its history entry is in HISTORY.md
    history: bool = False
    ops: list[FactOpIn] = field(default_factory=list)
    # turns in its archive chunk
    archived: int = 0


@dataclass
class ConsolidationReport:
    ok: bool
    # messages moved out of the session
    consolidated: int = 0
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


@dataclass
class _Prompt:
    """What one scope's model call sends, and the ids of the facts it shows (the only ones an answer may name)."""

    messages: list[dict[str, Any]]
    known: set[str]


class Consolidator:
    def __init__(self, config: Config, llm: LLMClient, memory: MemoryService, sessions: SessionStore) -> None:
        self.config = config
        self.llm = llm
        self.memory = memory
        self.sessions = sessions

    async def consolidate(
        self, session: Session, *, everything: bool = False, now: datetime | None = None
    ) -> ConsolidationReport:
        """Consolidate the older part of `session`, or all of it with `everything`.

        Never raises for LLM or memory failures: the report says what happened, and the session is trimmed only on
        full success. It runs under the session's consolidation claim, on the session file as it is then."""
        async with lock_held(self.sessions, session, CLAIM_SUFFIX):
            await asyncio.to_thread(self.sessions.refresh, session)
            return await self._consolidate(session, everything=everything, now=now)

    async def _consolidate(
        self, session: Session, *, everything: bool, now: datetime | None, shorter: int | None = None
    ) -> ConsolidationReport:
        start = session.last_consolidated
        planned = shorter or cut_index(session.messages, start, self.config.agent.memory_window, everything=everything)
        done, answers, cut = _resume(session, start, planned)
        resumed = bool(done or answers) or cut != planned
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
            # the answers are kept before anything is written: a retry writes exactly them
            if asked:
                await asyncio.to_thread(self.sessions.set_meta, session, **{CONSOLIDATION_PROGRESS: progress})
            await self._write(session, parts, answers, consolidation_id(fingerprint), progress, report)
        except ConsolidationOverBudget as e:
            # a first attempt of a chunk of several turns tries its first half; `/new` keeps its one chunk
            half = half_cut(session.messages, start, cut)
            if not everything and not resumed and start < half < cut:
                log.info("session %s/%s: %s; trying the chunk's first %d messages", *session.key, e, half - start)
                return await self._consolidate(session, everything=False, now=now, shorter=half)
            report.error = str(e)
            await asyncio.to_thread(self._over_budget, session, start, e)
            return report
        except (LLMError, ConsolidationError) as e:
            report.error = str(e)
            log.warning("consolidation of session %s/%s failed, nothing trimmed: %s", *session.key, e)
            return report
        except MemclawError as e:
            report.error = f"writing memory failed: {e}"
            log.warning("consolidation of session %s/%s could not write memory, nothing trimmed: %s", *session.key, e)
            return report
        # the chunk is found by content, under the session's lock
        if not await asyncio.to_thread(self.sessions.drop, session, chunk):
            log.warning("session %s/%s: the consolidated chunk was gone at the trim; nothing trimmed", *session.key)
        report.ok = True
        report.consolidated = cut - start
        log.info("consolidated %d messages of session %s/%s", cut - start, *session.key)
        return report

    def _over_budget(self, session: Session, start: int, err: ConsolidationOverBudget) -> None:
        """Say once per chunk start, as a warning, that the session is kept because its prompt cannot fit."""
        if session.meta.get(OVER_BUDGET) == start:
            log.info("session %s/%s still kept: %s", *session.key, err)
            return
        log.warning("session %s/%s kept, not consolidated: %s", *session.key, err)
        self.sessions.set_meta(session, **{OVER_BUDGET: start})

    async def _answer(
        self,
        parts: dict[str, _Scope],
        answers: dict[str, Any],
        done: list[str],
        report: ConsolidationReport,
        now: datetime | None,
    ) -> bool:
        """Ask the model for each scope not answered yet, into `answers`; whether it was asked at all.

        Every prompt is built before the first call, so a scope over the budget costs no call for the others."""
        # a scope answered before a crash or a failure is not asked again
        todo = [s for s in parts if s not in answers and f"{s}#history" not in done]
        prompts = {s: await asyncio.to_thread(self._prompt, s, parts[s], now) for s in todo}
        for scope, prompt in prompts.items():
            out, usage = await self._ask(parts[scope], prompt)
            report.usage = usage if report.usage is None else report.usage + usage
            answers[scope] = out.model_dump(exclude_none=True)
        return bool(prompts)

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
        """Write each scope's archive chunk, facts and history entry, in that order, each step once.

        The steps already done are in `progress`. Then the index of the scopes written syncs."""
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
                # after the last step the pointer moves past the chunk instead
                if pending:
                    await asyncio.to_thread(self.sessions.set_meta, session, **{CONSOLIDATION_PROGRESS: progress})
            res.history = res.history or bool(out.history_entry)
            report.scopes.append(res)
        if parts:
            try:
                await asyncio.to_thread(self.memory.sync, list(parts))
            except MemclawError as e:
                # the Markdown holds it all: the next sync, or recall, indexes it
                log.warning("consolidation wrote memory, but the index could not be updated now: %s", e)

    def _record(self, scope: str, rec: ConsolidationRecord, step: str) -> RecordResult:
        try:
            return self.memory.record_consolidation(scope, rec, steps=(step,), sync=False)
        except OSError as e:
            raise MemoryFileError(
                f"cannot write the memory of scope {scope}: {e.strerror or e}; fix the workspace permissions "
                "or free disk space (the session is kept and consolidated again later)"
            ) from e

    async def _ask(self, part: _Scope, prompt: _Prompt) -> tuple[ConsolidationOut, Usage]:
        out, usage = await self._ask_model(prompt)
        out.facts = [op for op in out.facts if op.op == "delete" or part.guard.keeps(op.text)]
        out.history_entry = part.guard.scrub(out.history_entry)
        return out, usage

    def _prompt(self, scope: str, part: _Scope, now: datetime | None) -> _Prompt:
        """The scope's prompt within `agent.consolidation_tokens`; raises ConsolidationOverBudget when even no fact
        fits. Every fact is shown when all fit, else those the conversation recalls, best first (`relevant_facts`)."""
        msgs = part.msgs
        budget = self.config.agent.consolidation_tokens
        model = self.config.agent.model
        facts = self.memory.facts(scope)
        stamps = [t for t in (message_time(m) for m in msgs) if t]
        owner = scope == OWNER_SCOPE
        sender = next((m.get("sender_name") for m in msgs if m.get("role") == "user" and m.get("sender_name")), None)
        who_short = "the owner" if owner else (sender or "this person")
        values = {
            "agent_name": self.config.agent.name,
            "who": "its owner" if owner else f"{sender or 'a person'} (not the owner)",
            "who_short": who_short,
            "now": f"{(now or datetime.now()):%Y-%m-%d %H:%M (%A)}",
            "forgotten": [" ".join(t.split()) for t in part.guard.texts],
            "conversation": format_conversation(msgs, self.config.agent.name),
            "first_ts": f"{stamps[0]:%Y-%m-%d %H:%M}" if stamps else "unknown",
            "last_ts": f"{stamps[-1]:%Y-%m-%d %H:%M}" if stamps else "unknown",
            "total": len(facts),
        }

        def messages(shown: list[MemoryUnit]) -> list[dict[str, Any]]:
            listed = [{"id": f.id, "text": f.text, "section": f.section} for f in shown]
            prompt = render("consolidate", facts=listed, partial=len(shown) < len(facts), **values)
            return [{"role": "system", "content": render("consolidate_system")}, {"role": "user", "content": prompt}]

        fixed = count_messages(messages([]), model)
        if fixed > budget:
            raise ConsolidationOverBudget(
                f"its conversation makes a consolidation prompt of {fixed:,} tokens, over agent.consolidation_tokens "
                f"({budget:,}); the session is kept whole, and memory learns from it once you raise that setting"
            )
        count = counter_for(model)
        room = budget - fixed
        cost = {f.id: count(fact_line(f)) for f in _while_within(facts, room, count)}
        if len(cost) == len(facts) and sum(cost.values()) <= room:
            chosen = facts
        else:
            ranked = relevant_facts(self.memory, scope, msgs, facts, now=now)
            chosen = []
            used = 0
            for f in ranked:
                c = cost.get(f.id) or count(fact_line(f))
                if used + c <= room:
                    chosen.append(f)
                    used += c
        # the facts in file order; the exact count drops the least relevant while a rounding leaves it over
        rank_of = {f.id: i for i, f in enumerate(chosen)}
        shown = [f for f in facts if f.id in rank_of]
        out = messages(shown)
        tokens = count_messages(out, model)
        while tokens > budget and shown:
            worst = max(shown, key=lambda f: rank_of[f.id])
            shown.remove(worst)
            out = messages(shown)
            tokens = count_messages(out, model)
        log.info(
            "consolidation prompt of scope %s: %d tokens, %d of %d facts shown", scope, tokens, len(shown), len(facts)
        )
        return _Prompt(out, {f.id for f in shown})

    async def _ask_model(self, prompt: _Prompt) -> tuple[ConsolidationOut, Usage]:
        messages = list(prompt.messages)
        resp = await self.llm.chat(messages, temperature=0)
        usage = resp.usage
        try:
            return parse_output(resp.content, prompt.known), usage
        except ValueError as e:
            log.warning("consolidation reply unusable (%s); asking once more", e)
            messages += [
                {"role": "assistant", "content": resp.content or ""},
                {"role": "user", "content": render("consolidate_retry", error=str(e))},
            ]
        resp = await self.llm.chat(messages, temperature=0)
        usage = usage + resp.usage
        try:
            return parse_output(resp.content, prompt.known), usage
        except ValueError as e:
            raise ConsolidationError(
                f"the model returned unusable memory JSON twice ({e}); the session was kept and consolidation "
                "runs again after the next message or /new (or choose a stronger agent.model)"
            ) from None


# ----- which facts the model sees ------------------------------------------------------------------------------
def fact_line(f: MemoryUnit) -> str:
    """A fact as the prompt lists it (prompts/consolidate.md), for counting its tokens."""
    return f"- [{f.id}] ({f.section}) {f.text}\n" if f.section else f"- [{f.id}] {f.text}\n"


def _while_within(facts: list[MemoryUnit], room: int, count: Callable[[str], int]) -> Iterator[MemoryUnit]:
    """The facts in file order while their lines fit `room` tokens, and the first one past it."""
    used = 0
    for f in facts:
        yield f
        used += count(fact_line(f))
        if used > room:
            return


def turn_texts(msgs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Per turn of a conversation: what the user said, and all its text (the user's words and every reply)."""
    turns: list[tuple[str, list[str]]] = []
    for m in msgs:
        text = " ".join(content_text(m.get("content"), " ").split())
        if m.get("role") == "user":
            turns.append((text, [text]))
        elif m.get("role") == "assistant" and text:
            if not turns:
                turns.append(("", []))
            turns[-1][1].append(text)
    return [(said, " ".join(parts)) for said, parts in turns]


def relevant_facts(
    memory: MemoryService, scope: str, msgs: list[dict[str, Any]], facts: list[MemoryUnit], *, now: datetime | None
) -> list[MemoryUnit]:
    """The facts a conversation concerns, most relevant first, by memclaw's own recall of the scope's facts.

    Each turn is two queries: hybrid recall of what the user said, and BM25 of the whole turn. The second finds a
    fact the turn changes by its words ("moved from Lisbon" -> "Lives in Lisbon"). The lists are fused by
    reciprocal rank; a recalled fact no longer in `facts` is left out."""
    current = {f.id: f for f in facts}
    score: dict[str, float] = {}
    for said, whole in turn_texts(msgs):
        for query, mode in ((said, "hybrid"), (whole, "bm25")):
            if not query:
                continue
            try:
                # many queries a conversation, each placing facts within a budget: no re-ranker's cost
                hits = memory.recall_detailed(query, scope=scope, k=RECALL_K, mode=mode, kind="fact", now=now,
                                              rerank=False).hits  # fmt: skip
            except MemclawError as e:
                log.info("consolidation: recall of a turn found nothing (%s)", e)
                continue
            for rank, hit in enumerate(hits):
                uid = hit.unit.id
                if uid in current:
                    score[uid] = score.get(uid, 0.0) + 1.0 / (FUSION_K + rank + 1)
    return [current[uid] for uid in sorted(score, key=lambda u: -score[u])]


def _resume(session: Session, start: int, cut: int) -> tuple[list[str], dict[str, Any], int]:
    """An earlier attempt got the model's answers for a chunk (and maybe wrote part of them) and then failed or was
    killed: finish exactly that chunk with those answers (its steps already written are skipped; every step is
    idempotent by the consolidation id anyway), whatever arrived since. Otherwise: nothing done, no answers, the
    planned cut. An answer kept that no longer validates (a limit it breaks) is asked for again."""
    progress = session.meta.get(CONSOLIDATION_PROGRESS) or {}
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
