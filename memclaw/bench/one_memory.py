"""One memory at scale: every haystack session of a LongMemEval file (and, for LoCoMo, its conversations among that
filler) written into one workspace through memclaw's writer, indexed once, and each question asked of all of it.

Protocols. `default`: the store as it stood on the question's date (nothing dated after it is a candidate) and the
answer sessions of the *other* questions masked (by the benchmark's construction they are another person's facts on
the same theme); both are candidate filters applied before fusion (`MemoryService.recall_detailed(as_of=...,
exclude=...)`). `raw`: every unit is a candidate. LoCoMo's default protocol masks the other conversations and
dates the store at the asked conversation's last day.

`sessions` caps the store: every answer session is kept and the filler is sampled with a seeded generator, so a
small machine runs a fraction of the scale reproducibly. Scores, reports and systems are the per-question run's
(memclaw.bench.longmemeval, memclaw.bench.runner); the cost of the one store sits beside them (`cost`).
See docs/decisions/0039-one-memory-filtered-before-ranking.md.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memclaw.bench import metrics as M
from memclaw.errors import UsageError

if TYPE_CHECKING:
    from memclaw.bench.locomo import LocomoData
    from memclaw.bench.longmemeval import LMEQuestion, LMESession
    from memclaw.bench.prepared import PreparedCorpus
    from memclaw.bench.record import BenchSession
    from memclaw.bench.systems import Ranked, SystemSpec
    from memclaw.config import Config
    from memclaw.embedding.base import Embedder

PROTOCOLS: tuple[str, ...] = ("default", "raw")
SYSTEMS: str = "bm25-raw,vector-raw,hybrid"
"""The systems asked when none are named: each query over the whole store costs, so the signals and the default."""
SEED = 41
COLD_RUNS = 3


@dataclass
class Filler:
    """The LongMemEval sessions one memory holds (date order), and which are some question's answer sessions."""

    sessions: list[LMESession]
    # Question id -> its answer session ids (every question of the file)
    answers_of: dict[str, frozenset[str]]
    # Distinct sessions in the file
    in_file: int


def lme_filler(
    raw: Sequence[dict[str, Any]], cap: int | None = None, seed: int = SEED, asked: Collection[str] | None = None
) -> Filler:
    """The file's distinct haystack sessions (the first copy of each id): the answer sessions of the `asked`
    question ids (default: all) kept, the rest sampled down to `cap` sessions with `seed`."""
    from memclaw.bench.longmemeval import haystack

    first: dict[str, LMESession] = {}
    answers_of: dict[str, frozenset[str]] = {}
    for rq in raw:
        sessions, relevant = haystack(rq)
        for s in sessions:
            first.setdefault(s.session_id, s)
        named = {str(x) for x in rq.get("answer_session_ids") or ()}
        answers_of[str(rq["question_id"])] = frozenset(named | relevant)
    answers = {sid for q, ids in answers_of.items() if asked is None or q in asked for sid in ids if sid in first}
    keep = set(first)
    if cap is not None:
        if cap < len(answers):
            raise UsageError(
                f"--sessions {cap} is below the {len(answers)} answer sessions of this file: "
                f"pass at least {len(answers)}"
            )
        rest = sorted(set(first) - answers)
        keep = answers | set(random.Random(seed).sample(rest, min(len(rest), cap - len(answers))))
    chosen = sorted((first[s] for s in keep), key=lambda s: (s.when, s.session_id))
    return Filler(chosen, answers_of, len(first))


def filler_sessions(filler: Filler) -> tuple[list[BenchSession], list[dict[str, Any]]]:
    """The filler as the writer's sessions, and their coverage entries: an archived turn covers its session and
    earns it, served, only when it is a `has_answer` turn (as in memclaw.bench.longmemeval)."""
    from memclaw.bench.record import BenchSession, bench_cid
    from memclaw.bench.run_config import BENCH_AGENT
    from memclaw.markdown.archive import ArchivedTurn

    sessions, entries = [], []
    for s in filler.sessions:
        b = BenchSession(s.session_id, s.when, cid=bench_cid("longmemeval-one-memory", s.session_id))
        b.turns = tuple(
            ArchivedTurn(BENCH_AGENT if role == "assistant" else role, text, s.when.time())
            for role, text, _a in s.turns
        )
        entries += [{"kind": "archive", "cid": b.cid, "turn": i, "covers": [s.session_id],
                     "credit": [s.session_id] if answer else []}
                    for i, (_r, _t, answer) in enumerate(s.turns)]  # fmt: skip
        sessions.append(b)
    return sessions, entries


@dataclass
class OneMemory:
    """The built store: its corpus and systems (memclaw.bench.prepared), the unit ids of each group (a session id,
    or a LoCoMo conversation), and what building it cost."""

    root: Path
    prep: PreparedCorpus
    units_of: dict[str, set[str]]
    build: dict[str, Any] = field(default_factory=dict)

    def mask(self, groups: Sequence[str]) -> frozenset[str]:
        return frozenset(u for g in groups for u in self.units_of.get(g, ()))

    def ask(
        self, spec: SystemSpec, query: str, k: int, *, now: datetime | None, as_of: datetime | None,
        exclude: frozenset[str],
    ) -> tuple[Ranked, float]:  # fmt: skip
        """One question of one memclaw system over the whole store, with the protocol's filter; (ranked, ms)."""
        svc = self.prep.service_of[spec.name]
        t = time.perf_counter()
        res = svc.recall_detailed(query, k=k, now=now, as_of=as_of, exclude=exclude)
        ms = (time.perf_counter() - t) * 1000.0
        return [(h.unit.id, h.covered_by, h.excerpt) for h in res.hits], ms


def lme_protocol(
    mem: OneMemory, filler: Filler, q: LMEQuestion, protocol: str
) -> tuple[datetime | None, frozenset[str]]:
    """The candidate filter of one LongMemEval question: (as_of, the unit ids masked). Default: the end of its day,
    and the units of every other question's answer sessions that are not its own; raw: none.
    The file stamps some answer sessions later on the question's own day, so the day is the unit, as for LoCoMo."""
    if protocol == "raw":
        return None, frozenset()
    own = filler.answers_of.get(q.qid, frozenset()) | q.relevant
    others = {s for qid, ids in filler.answers_of.items() if qid != q.qid for s in ids} - own
    as_of = q.question_date.replace(hour=23, minute=59, second=59) if q.question_date else None
    return as_of, mem.mask(sorted(others))


def build_one_memory(
    root: Path,
    sessions: Sequence[BenchSession],
    entries: list[dict[str, Any]],
    group_of: Callable[[str], str],
    specs: Sequence[SystemSpec],
    base: Config,
    embedder: Embedder | None,
    *,
    reused: bool = False,
    progress: bool = False,
) -> OneMemory:
    """Write `sessions` (date order) with their coverage side file, unless `reused`; index once; bind `specs`.
    `group_of` names the group (session, conversation) of a covered item: what a mask leaves out together.
    `progress`: the writing and the index's sync say how far they are on stderr (hours at a year's size)."""
    import contextlib
    import json

    from memclaw.bench.locomo import coverage_path
    from memclaw.bench.prepared import prepare_corpus
    from memclaw.bench.record import write_sessions
    from memclaw.util.progress import stderr_progress

    shown = stderr_progress if progress else None
    build: dict[str, Any] = {"reused": reused}
    if not reused:
        t = time.perf_counter()
        what = f"writing {len(sessions):,} sessions"
        with stderr_progress(0, what) if progress else contextlib.nullcontext():
            write_sessions(root, sorted(sessions, key=lambda s: s.when))
        build["write_seconds"] = round(time.perf_counter() - t, 1)
        coverage_path(root).write_text(json.dumps({"corpus": "one-memory", "units": entries}), "utf-8")
    before = (getattr(embedder, "cached", 0), getattr(embedder, "embedded", 0))
    prep = prepare_corpus(root, coverage_path(root), specs, base, embedder, progress=shown)
    build["index_seconds"] = round(prep.index_seconds, 1)
    if hasattr(embedder, "embedded"):
        # an --embed-cache run: how many of the index's texts the model embedded, and how many the file gave
        build["texts_embedded"] = embedder.embedded - before[1]  # type: ignore[union-attr]
        build["texts_from_cache"] = embedder.cached - before[0]  # type: ignore[union-attr]
    build["units"] = len(prep.corpus.units)
    build["archived_turns"] = sum(1 for u in prep.corpus.units if u.kind == "archive")
    units_of: dict[str, set[str]] = {}
    for u in prep.corpus.units:
        for item in prep.corpus.cover.get(u.id, frozenset()):
            units_of.setdefault(group_of(item), set()).add(u.id)
    return OneMemory(root, prep, units_of, build)


def check_systems(specs: Sequence[SystemSpec]) -> None:
    grep = [s.name for s in specs if s.kind != "memclaw"]
    if grep:
        raise UsageError(
            f"--one-memory asks memclaw's recall only; drop {', '.join(grep)} from --systems (grep reads the "
            "Markdown, which no candidate filter reaches)"
        )


def warm_up(mem: OneMemory, specs: Sequence[SystemSpec], queries: Sequence[str], k: int) -> None:
    """A few untimed queries per system (the first Chroma query after open, caches), as a running agent has had."""
    for spec in specs:
        for q in queries[:3]:
            mem.ask(spec, q, k, now=None, as_of=None, exclude=frozenset())


def cost(mem: OneMemory, queries: Sequence[str], *, cold: bool = True) -> dict[str, Any]:
    """What the store costs: disk (Markdown and index), and a cold `memclaw recall` (a fresh process on the built
    workspace, page cache warm): median time and peak RSS."""
    from memclaw.bench.perf_measure import cold_recall, dir_size

    index = Path(mem.prep.services[0].layout.root) if mem.prep.services else None
    out: dict[str, Any] = {
        **mem.build,
        "markdown_bytes": dir_size(mem.root / "memory"),
        "index_bytes": dir_size(index) if index is not None else 0,
    }
    if cold and queries:
        with tempfile.TemporaryDirectory(prefix="memclaw-cold-") as home:
            out["cold_recall"] = cold_recall(mem.root, Path(home), queries[0], runs=COLD_RUNS)
    return out


def run_lme_one_memory(
    path: Path,
    specs: Sequence[SystemSpec],
    *,
    protocol: str = "default",
    sessions: int | None = None,
    seed: int = SEED,
    limit: int | None = None,
    questions: int | None = None,
    embedder: Embedder | None = None,
    base: Config | None = None,
    workdir: Path | None = None,
    progress: bool = True,
    cold: bool = True,
) -> dict[str, Any]:
    """LongMemEval with every question asked of one memory (module docstring); the per-question run's results
    dict, plus `one_memory` (protocol, store size, cost). `questions` asks a seeded sample of that many; the store
    then keeps their answer sessions, and the other questions' are filler like any session."""
    from memclaw.bench.budgeted import budgeted_view
    from memclaw.bench.longmemeval import convert_question, load_longmemeval
    from memclaw.bench.machine import sha256_file
    from memclaw.bench.progress import Progress
    from memclaw.bench.report import run_provenance
    from memclaw.bench.run_config import bench_config, fill_k, load_embedder_once
    from memclaw.bench.signal_view import run_paired
    from memclaw.bench.workspaces import bench_workspace

    if protocol not in PROTOCOLS:
        raise UsageError(f"unknown protocol {protocol!r}: use one of {', '.join(PROTOCOLS)}")
    check_systems(specs)
    started = time.time()
    raw = load_longmemeval(path)
    chosen = raw[:limit] if limit else raw
    if questions is not None and questions < len(chosen):
        picked = set(random.Random(seed).sample(range(len(chosen)), questions))
        chosen = [q for i, q in enumerate(chosen) if i in picked]
    asked = None if len(chosen) == len(raw) else {str(q["question_id"]) for q in chosen}
    filler = lme_filler(raw, sessions, seed, asked)
    qs = [q for q in map(convert_question, chosen) if q is not None]
    base = base or bench_config()
    embedder = embedder or load_embedder_once(base, specs)
    n_asked = "all" if asked is None else len(chosen)
    key = f"one-memory-lme-{sha256_file(Path(path))[:12]}-{sessions or 'all'}-q{n_asked}-{seed}"
    scores: dict[str, list[M.LMEScore]] = {s.name: [] for s in specs}
    k = fill_k(base)
    with bench_workspace("memclaw-lme-one-", workdir, key) as (root, reused):
        written, entries = filler_sessions(filler) if not reused else ([], [])
        if reused:
            entries = _entries(root)
        mem = build_one_memory(root, written, entries, lambda item: item, specs, base, embedder, reused=reused,
                               progress=progress)  # fmt: skip
        try:
            warm_up(mem, specs, [q.question for q in qs], k)
            with Progress(progress) as prog:
                prog.log(f"LongMemEval one memory ({protocol}): {len(filler.sessions)} sessions, "
                         f"{mem.build['units']} units, {len(qs)} questions")  # fmt: skip
                advance = prog.task("LongMemEval one memory", len(qs) * len(specs))
                for q in qs:
                    as_of, exclude = lme_protocol(mem, filler, q, protocol)
                    for spec in specs:
                        ranked, ms = mem.ask(spec, q.question, k, now=q.question_date, as_of=as_of, exclude=exclude)
                        view = budgeted_view(ranked, mem.prep.items, mem.prep.count)
                        scores[spec.name].append(
                            M.score_lme(
                                [r[0] for r in ranked],
                                mem.prep.corpus.cover,
                                q.relevant,
                                question_type=q.question_type,
                                latency_ms=ms,
                                budgeted=view,
                                credit=mem.prep.corpus.credit,
                            )  # fmt: skip
                        )
                        advance()
            spent = cost(mem, [q.question for q in qs], cold=cold)
        finally:
            mem.prep.close()
    skipped = {"abstention": sum(1 for q in chosen if str(q["question_id"]).endswith("_abs"))}
    skipped["no_has_answer"] = len(chosen) - len(qs) - skipped["abstention"]
    return {
        "dataset": "longmemeval",
        "corpus": "archive",
        "data_file": str(path),
        "data_sha256": sha256_file(Path(path)),
        "n_questions": len(qs),
        "n_in_file": len(raw),
        "n_considered": len(chosen),
        "skipped": skipped,
        "n_sessions": len(filler.sessions),
        "k_ranked": k,
        "disk": _disk(spent),
        **run_provenance(base, mem.build.get("index_seconds", 0.0), started),
        "one_memory": {
            "protocol": protocol,
            "sessions_cap": sessions,
            "seed": seed,
            "sessions_in_file": filler.in_file,
            "cost": spent,
        },  # fmt: skip
        "systems": {s.name: {**M.summarize_lme(scores[s.name]), "description": s.description} for s in specs},
        "paired": run_paired(scores, group=lambda sc: sc.question_type, values=M.question_values),
    }


def run_locomo_one_memory(
    data: LocomoData,
    lme_path: Path,
    specs: Sequence[SystemSpec],
    *,
    protocol: str = "default",
    sessions: int | None = None,
    seed: int = SEED,
    embedder: Embedder | None = None,
    base: Config | None = None,
    workdir: Path | None = None,
    progress: bool = True,
    cold: bool = True,
) -> dict[str, Any]:
    """LoCoMo's conversations (facts, summaries and archive: corpus `full`) among the LongMemEval filler of
    `lme_path` (capped at `sessions`), in one memory; each question asked of all of it (module docstring). The
    per-conversation run's results dict, plus `one_memory`."""
    from memclaw.bench.budgeted import budgeted_view
    from memclaw.bench.locomo import conversation_sessions
    from memclaw.bench.longmemeval import load_longmemeval
    from memclaw.bench.machine import sha256_file
    from memclaw.bench.progress import Progress
    from memclaw.bench.report import run_provenance
    from memclaw.bench.run_config import K_MAX, bench_config, fill_k, load_embedder_once
    from memclaw.bench.signal_view import run_paired
    from memclaw.bench.workspaces import bench_workspace

    if protocol not in PROTOCOLS:
        raise UsageError(f"unknown protocol {protocol!r}: use one of {', '.join(PROTOCOLS)}")
    check_systems(specs)
    started = time.time()
    # No LongMemEval question is asked
    filler = lme_filler(load_longmemeval(lme_path), sessions, seed, asked=())
    base = base or bench_config()
    embedder = embedder or load_embedder_once(base, specs)
    key = (f"one-memory-locomo-{sha256_file(data.path)[:8]}-{sha256_file(Path(lme_path))[:8]}-"
           f"{sessions or 'all'}-{seed}")  # fmt: skip
    scores: dict[str, list[M.QuestionScore]] = {s.name: [] for s in specs}
    k = fill_k(base)
    convs = list(data.conversations)
    n_q = sum(len(c.questions) for c in convs)
    with bench_workspace("memclaw-locomo-one-", workdir, key) as (root, reused):
        written, entries = ([], []) if reused else filler_sessions(filler)
        if reused:
            entries = _entries(root)
        else:
            for c in convs:
                s, e = conversation_sessions(c, "full")
                written += s
                entries += [{**x, "covers": [f"{c.sample_id}/{i}" for i in x["covers"]],
                             **({"credit": [f"{c.sample_id}/{i}" for i in x["credit"]]} if "credit" in x else {})}
                            for x in e]  # fmt: skip
        mem = build_one_memory(root, written, entries, lambda item: item.split("/")[0],
                               specs, base, embedder, reused=reused, progress=progress)  # fmt: skip
        try:
            warm_up(mem, specs, [q.question for c in convs for q in c.questions], k)
            with Progress(progress) as prog:
                advance = prog.task("LoCoMo one memory", n_q * len(specs))
                for c in convs:
                    others = [o.sample_id for o in convs if o.sample_id != c.sample_id]
                    exclude = mem.mask(others) if protocol == "default" else frozenset()
                    as_of = c.last_date.replace(hour=23, minute=59) if protocol == "default" else None
                    for q in c.questions:
                        evidence = [f"{c.sample_id}/{e}" for e in q.evidence]
                        relevant = M.relevant_units(mem.prep.corpus.cover, evidence)
                        for spec in specs:
                            ranked, ms = mem.ask(spec, q.question, k, now=as_of or c.last_date, as_of=as_of,
                                             exclude=exclude)  # fmt: skip
                            view = budgeted_view(ranked, mem.prep.items, mem.prep.count)
                            scores[spec.name].append(
                                M.score_question(
                                    [r[0] for r in ranked],
                                    mem.prep.corpus.cover,
                                    evidence,
                                    category=q.category,
                                    latency_ms=ms,
                                    relevant=relevant,
                                    budgeted=view,
                                    credit=mem.prep.corpus.credit,
                                )  # fmt: skip
                            )
                            advance()
            spent = cost(mem, [q.question for c in convs for q in c.questions], cold=cold)
            kinds = {kind: sum(1 for u in mem.prep.corpus.units if u.kind == kind)
                     for kind in ("fact", "history", "archive")}  # fmt: skip
        finally:
            mem.prep.close()
    return {
        "dataset": "locomo",
        "data_file": str(data.path),
        "data_sha256": sha256_file(data.path),
        "corpus": "full",
        "n_questions": n_q,
        "n_conversations": len(convs),
        "n_qa_total": data.n_qa_total,
        "n_eligible": data.n_eligible,
        "categories": {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"},
        "units": kinds,
        "units_without_coverage": len(mem.prep.corpus.unmatched),
        "disk": _disk(spent),
        "evidence_anomalies": data.anomalies,
        "k_max": K_MAX,
        "k_ranked": k,
        **run_provenance(base, mem.build.get("index_seconds", 0.0), started),
        "one_memory": {
            "protocol": protocol,
            "sessions_cap": sessions,
            "seed": seed,
            "filler_file": str(lme_path),
            "filler_sessions": len(filler.sessions),
            "cost": spent,
        },  # fmt: skip
        "systems": {s.name: {**M.summarize(scores[s.name]), "description": s.description} for s in specs},
        "paired": run_paired(scores, group=lambda sc: sc.category, values=M.question_values),
    }


def _entries(root: Path) -> list[dict[str, Any]]:
    import json

    from memclaw.bench.locomo import coverage_path

    return json.loads(coverage_path(root).read_text("utf-8"))["units"]


def _disk(spent: dict[str, Any]) -> dict[str, Any]:
    turns = spent.get("archived_turns", 0)
    per = 1000.0 / turns if turns else 0.0
    return {"archived_turns": turns, "archive_md_bytes": spent["markdown_bytes"], "index_bytes": spent["index_bytes"],
            "archive_md_bytes_per_1000_turns": round(spent["markdown_bytes"] * per),
            "index_bytes_per_1000_turns": round(spent["index_bytes"] * per)}  # fmt: skip
