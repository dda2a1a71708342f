"""LongMemEval (Wu et al., ICLR 2025) retrieval benchmark: loader, converter and runner.

Format (`longmemeval_s_cleaned.json`, `longmemeval_oracle.json`): a JSON list of questions with `question_id`,
`question_type`, `question`, `answer`, `question_date`, `haystack_session_ids`, `haystack_dates`,
`haystack_sessions` (each a list of turns `{role, content, has_answer?}`) and `answer_session_ids`.

Official retrieval protocol: one HISTORY.md entry per haystack session, stamped with the session's date, whose
text is the session's user turns joined (one line per turn); questions whose id ends in `_abs` and questions with
no user turn marked `has_answer` are skipped; a session is relevant when one of its user turns has `has_answer`.
`answers="all"` (the archive corpus only) also scores what the assistant said: a session is relevant by any turn
marked `has_answer`, so the single-session-assistant questions count. It is not the official key.
One workspace per question, removed as soon as it is scored. The file is loaded once with `json` (a 250 MB file
fits easily in memory); each question is converted lazily.
"""

from __future__ import annotations

import gzip
import json
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memclaw.bench import metrics as M
from memclaw.bench.estimate import SECONDS_PER_SESSION, Estimate, format_duration
from memclaw.errors import UsageError

if TYPE_CHECKING:
    from memclaw.bench.systems import SystemSpec
    from memclaw.config import Config
    from memclaw.embedding.base import Embedder

_DATE = re.compile(r"(\d{4})[/-](\d{1,2})[/-](\d{1,2})(?:\s*\([A-Za-z]+\))?(?:\s+(\d{1,2}):(\d{2}))?")


def parse_lme_date(text: str) -> datetime:
    """ "2023/05/20 (Sat) 02:21" -> 2023-05-20 02:21."""
    m = _DATE.search(str(text))
    if not m:
        raise UsageError(f"unrecognised LongMemEval date {text!r}: expected e.g. '2023/05/20 (Sat) 02:21'")
    y, mo, d, h, mi = m.groups()
    return datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0))


@dataclass(frozen=True)
class LMESession:
    session_id: str
    when: datetime
    # The user turns, one line each (the official key)
    text: str
    # Every turn with text: (role, text, has_answer)
    turns: tuple[tuple[str, str, bool], ...] = ()


@dataclass(frozen=True)
class LMEQuestion:
    qid: str
    question_type: str
    question: str
    question_date: datetime | None
    sessions: tuple[LMESession, ...]
    # Session ids with a has_answer user turn (any turn with answers="all")
    relevant: frozenset[str]


ANSWERS: tuple[str, ...] = ("user", "all")
"""Whose `has_answer` turns make a session relevant: the user's (the official key), or anyone's."""


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    # Must not look like the start of a new history entry
    if re.match(r"^\[\d{4}-\d{2}-\d{2}", line):
        line = "(" + line[1:]
    return line


def haystack(raw: dict[str, Any], *, answers: str = "user") -> tuple[list[LMESession], set[str]]:
    """One question's haystack sessions that hold text, and the ids of those with a `has_answer` user turn (any
    turn with `answers="all"`)."""
    qid = str(raw["question_id"])
    ids = raw.get("haystack_session_ids") or []
    dates = raw.get("haystack_dates") or []
    sessions_raw = raw.get("haystack_sessions") or []
    if not (len(ids) == len(dates) == len(sessions_raw)):
        raise UsageError(
            f"question {qid}: haystack_session_ids, haystack_dates and haystack_sessions differ in length; "
            "pass an unmodified LongMemEval file"
        )
    sessions: list[LMESession] = []
    relevant: set[str] = set()
    for sid, date, turns in zip(ids, dates, sessions_raw, strict=True):
        user = [t for t in turns or [] if t.get("role") == "user"]
        if any(t.get("has_answer") for t in (turns or [] if answers == "all" else user)):
            relevant.add(str(sid))
        text = "\n".join(line for line in (_one_line(t.get("content", "")) for t in user) if line)
        said = [(str(t.get("role", "?")), " ".join(str(t.get("content", "")).split()), bool(t.get("has_answer")))
                for t in turns or []]  # fmt: skip
        said = [t for t in said if t[1]]
        if said:
            sessions.append(LMESession(str(sid), parse_lme_date(date), text, tuple(said)))
    return sessions, relevant


def convert_question(raw: dict[str, Any], *, answers: str = "user") -> LMEQuestion | None:
    """One question of the file -> LMEQuestion, or None when the protocol skips it (`_abs`, no has_answer)."""
    qid = str(raw["question_id"])
    if qid.endswith("_abs"):
        return None
    sessions, relevant = haystack(raw, answers=answers)
    if not relevant:
        return None
    qdate = parse_lme_date(raw["question_date"]) if raw.get("question_date") else None
    return LMEQuestion(
        qid, str(raw.get("question_type", "?")), str(raw["question"]), qdate, tuple(sessions), frozenset(relevant)
    )


def load_longmemeval(path: Path) -> list[dict[str, Any]]:
    path = Path(path)
    try:
        data = path.read_bytes()
        # Gzip, by name or by magic
        if path.suffix == ".gz" or data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        raw = json.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"no LongMemEval file at {path}: pass longmemeval_s_cleaned.json or longmemeval_oracle.json "
            "(.json or .json.gz)"
        ) from None
    # gzip.BadGzipFile is an OSError; UnicodeDecodeError a ValueError
    except (OSError, ValueError, EOFError) as e:
        raise UsageError(
            f"cannot read LongMemEval file {path}: {e}; pass a valid LongMemEval .json or .json.gz file"
        ) from None
    if not isinstance(raw, list) or not all(isinstance(q, dict) and "haystack_sessions" in q for q in raw):
        raise UsageError(f"{path} is not in the LongMemEval format (a list of questions with 'haystack_sessions')")
    return raw


def iter_questions(raw: Sequence[dict[str, Any]], limit: int | None = None) -> Iterator[LMEQuestion | None]:
    """The first `limit` questions of the file, converted one at a time (None for a skipped question)."""
    for q in raw[:limit] if limit else raw:
        yield convert_question(q)


CORPORA: tuple[str, ...] = ("archive", "history")
CORPUS_NOTES = {
    "archive": "each haystack session is one consolidation written through memclaw's writer, its turns (user and "
    "assistant) archived verbatim, one unit per turn. Count view: a ranked turn counts for its session (the official "
    "session-level protocol; the official key is a session's user turns, this index holds the assistant's too). "
    "Budgeted view: a session is credited only when a served excerpt holds one of its `has_answer` turns.",
    "history": "the official key: one HISTORY.md entry per session, its user turns; a served entry credits its "
    "session.",
}


ANSWERS_ALL_NOTE = (
    "- answers `all`: a session is relevant by any turn marked `has_answer`, the assistant's too, so questions "
    "about what the assistant said are scored. The official key counts the user's turns only."
)


def write_question(q: LMEQuestion, root: Path, corpus: str = "archive") -> list[dict[str, Any]]:
    """Write one question's haystack as a workspace and its coverage side file (see CORPORA). An archived turn
    covers its session in the count view (the official session-level protocol) and, served in the memory section,
    earns its session only when it is a `has_answer` turn (`credit`, memclaw.bench.corpus)."""
    from memclaw.bench.locomo import coverage_path

    if corpus not in CORPORA:
        raise UsageError(f"unknown LongMemEval corpus {corpus!r}: use one of {', '.join(CORPORA)}")
    if corpus == "archive":
        return _write_archive(q, root)
    mem = Path(root) / "memory"
    mem.mkdir(parents=True, exist_ok=True)
    entries = []
    blocks = []
    for s in q.sessions:
        if not s.text:
            continue
        stamp = s.when.strftime("%Y-%m-%d %H:%M")
        blocks.append(f"[{stamp}] {s.text}")
        entries.append(
            {"kind": "history", "text": s.text, "date": stamp, "session": s.session_id, "covers": [s.session_id]}
        )
    (mem / "MEMORY.md").write_text("", "utf-8")
    (mem / "HISTORY.md").write_text("\n\n".join(blocks) + "\n", "utf-8")
    coverage_path(root).write_text(json.dumps({"question": q.qid, "units": entries}), "utf-8")
    return entries


def _write_archive(q: LMEQuestion, root: Path) -> list[dict[str, Any]]:
    from memclaw.bench.locomo import coverage_path
    from memclaw.bench.record import BenchSession, bench_cid, write_sessions
    from memclaw.bench.run_config import BENCH_AGENT
    from memclaw.markdown.archive import ArchivedTurn

    sessions, entries = [], []
    for s in q.sessions:
        b = BenchSession(s.session_id, s.when, cid=bench_cid("longmemeval", q.qid, s.session_id))
        # The AI's turns are the agent's own
        b.turns = tuple(
            ArchivedTurn(BENCH_AGENT if role == "assistant" else role, text, s.when.time())
            for role, text, _a in s.turns
        )
        for i, (_r, _t, answer) in enumerate(s.turns):
            credit = [s.session_id] if answer else []
            entries.append({"kind": "archive", "cid": b.cid, "turn": i, "covers": [s.session_id], "credit": credit})
        sessions.append(b)
    write_sessions(root, sessions)
    coverage_path(root).write_text(json.dumps({"question": q.qid, "corpus": "archive", "units": entries}), "utf-8")
    return entries


def check_answers(answers: str, corpus: str) -> None:
    """Refuse an `answers` value that is unknown, or that the corpus cannot score (history holds user turns only)."""
    if answers not in ANSWERS:
        raise UsageError(f"unknown --answers {answers!r}: use one of {', '.join(ANSWERS)}")
    if answers == "all" and corpus != "archive":
        raise UsageError("--answers all needs the archive corpus: the history corpus holds the user's turns only")


def run_longmemeval(
    path: Path,
    specs: Sequence[SystemSpec],
    *,
    limit: int | None = None,
    progress: bool = True,
    embedder: Embedder | None = None,
    base: Config | None = None,
    rankings: bool = False,
    workdir: Path | None = None,
    corpus: str = "archive",
    answers: str = "user",
) -> dict[str, Any]:
    """Every requested system on every kept question (one workspace each, its haystack written as `corpus` says:
    CORPORA); results dict with recall_any@k, recall_all@k, ndcg_any@k for k = 1, 5, 10, overall and
    `by_question_type`, the archive's `disk` use (and `rankings`, as
    memclaw.bench.rankings.ranking_record gives them per question and system, when asked). `workdir` keeps each
    question's workspace and index there and reuses them on a later run (memclaw.bench.workspaces.bench_workspace).
    `answers` says whose `has_answer` turns count (ANSWERS)."""
    from memclaw.bench.locomo import coverage_path
    from memclaw.bench.machine import sha256_file
    from memclaw.bench.prepared import prepare_corpus
    from memclaw.bench.progress import Progress
    from memclaw.bench.rankings import ranking_record
    from memclaw.bench.record import DiskUse
    from memclaw.bench.report import run_provenance
    from memclaw.bench.run_config import bench_config, fill_k, load_embedder_once
    from memclaw.bench.signal_view import run_paired
    from memclaw.bench.workspaces import bench_workspace

    check_answers(answers, corpus)
    raw = load_longmemeval(path)
    chosen = raw[:limit] if limit else raw
    n_sessions = sum(len(q.get("haystack_sessions") or []) for q in chosen)
    base = base or bench_config()
    embedder = embedder or load_embedder_once(base, specs)
    scores: dict[str, list[M.LMEScore]] = {s.name: [] for s in specs}
    skipped = {"abstention": 0, "no_has_answer": 0}
    ranked_by_q: dict[str, dict[str, Any]] = {}
    index_s = 0.0
    started = time.time()
    k_ranked = fill_k(base)
    estimate = Estimate(n_sessions, SECONDS_PER_SESSION, "session")
    disk = DiskUse()
    with Progress(progress) as prog:
        prog.log(f"LongMemEval: {len(chosen)} questions, {n_sessions} haystack sessions: {estimate.describe()}")
        advance = prog.task("LongMemEval (sessions)", n_sessions)
        for rq in chosen:
            n_here = len(rq.get("haystack_sessions") or [])
            q = convert_question(rq, answers=answers)
            if q is None:
                skipped["abstention" if str(rq["question_id"]).endswith("_abs") else "no_has_answer"] += 1
                estimate.skip(n_here)
                advance(n_here)
                continue
            t_question = time.perf_counter()
            with bench_workspace("memclaw-lme-", workdir, f"lme-{corpus}-{q.qid}") as (root, reused):
                if not reused:
                    write_question(q, root, corpus)
                prep = prepare_corpus(root, coverage_path(root), specs, base, embedder, now=q.question_date)
                try:
                    index_s += prep.index_seconds
                    disk.add(root, prep)
                    for spec in specs:
                        ranked, view, ms = prep.run(spec.name, q.question, k_ranked)
                        if rankings:
                            ranked_by_q.setdefault(q.qid, {})[spec.name] = ranking_record(ranked, view)
                        scores[spec.name].append(
                            M.score_lme(
                                ranked,
                                prep.corpus.cover,
                                q.relevant,
                                question_type=q.question_type,
                                latency_ms=ms,
                                budgeted=view,
                                credit=prep.corpus.credit,
                            )
                        )
                finally:
                    prep.close()
            first = not estimate.measured
            estimate.record(n_here, time.perf_counter() - t_question)
            if first and estimate.done < estimate.total:
                prog.log(f"LongMemEval: the first question took {format_duration(estimate.spent_s)}; the rest: "
                         f"{estimate.describe()}")  # fmt: skip
            advance(n_here, description=f"LongMemEval: {q.qid}")
    n_scored = len(next(iter(scores.values()))) if scores else 0
    return {
        "dataset": "longmemeval",
        "corpus": corpus,
        **({"answers": answers} if answers != "user" else {}),
        "data_file": str(path),
        "data_sha256": sha256_file(Path(path)),
        "n_questions": n_scored,
        "n_in_file": len(raw),
        "n_considered": len(chosen),
        "skipped": skipped,
        "n_sessions": n_sessions,
        "k_ranked": k_ranked,
        "disk": disk.report(),
        **run_provenance(base, index_s, started),
        "systems": {s.name: {**M.summarize_lme(scores[s.name]), "description": s.description} for s in specs},
        "paired": run_paired(scores, group=lambda sc: sc.question_type, values=M.question_values),
        **({"rankings": ranked_by_q} if rankings else {}),
    }


SIGNAL_VIEW_KEYS = ("recall_any@5", "recall_all@5", "recall_any@10", "recall_all@10", "recall_all@1024t")
SESSION_KEYS = ("sessions_any@5", "sessions_all@5", "sessions_any@10", "sessions_all@10")
"""The archive's count view at session level: sessions ranked by their best turn (the official protocol's unit)."""


def sessions_md(res: dict[str, Any]) -> list[str]:
    """The archive's session-level count view, overall and per type; empty for other corpora (there a unit is a
    session and these equal recall_any/all@k) and for runs made before it existed."""
    from memclaw.bench.report import md_table

    systems = res["systems"]
    if res.get("corpus") != "archive" or not all(SESSION_KEYS[0] in s for s in systems.values()):
        return []
    types = sorted({t for s in systems.values() for t in s["by_question_type"]})
    rows = [[n, "all", *[s[k] for k in SESSION_KEYS]] for n, s in systems.items()]
    rows += [[n, t, *[s["by_question_type"][t][k] for k in SESSION_KEYS]]
             for t in types for n, s in systems.items() if t in s["by_question_type"]]  # fmt: skip
    return [
        "## Sessions by their best turn",
        "",
        "The count view at session level: the first k distinct sessions the turn ranking reaches (the official "
        "protocol ranks sessions; recall_any/all@k above rank turns, so their top 5 is at most five sessions).",
        "",
        *md_table(["system", "type", *SESSION_KEYS], rows),
    ]


def questions_title(res: dict[str, Any]) -> str:
    """How many questions were asked and how many of them scored ("5 questions asked, 3 scored")."""
    asked, scored = res["n_considered"], res["n_questions"]
    return f"{asked} questions" + ("" if scored == asked else f" asked, {scored} scored")


def skipped_line(res: dict[str, Any]) -> str | None:
    """Why questions were not scored, in one line, or None when every question was."""
    skipped = res.get("skipped") or {}
    if not sum(skipped.values()):
        return None
    why = {
        "abstention": "abstention (_abs: the answer is not in the haystack, nothing to retrieve)",
        "no_has_answer": "no turn marked has_answer (no evidence to score)"
        if res.get("answers") == "all"
        else "no user turn marked has_answer (no evidence to score)",
    }
    parts = [f"{n} {why.get(k, k)}" for k, n in skipped.items() if n]
    return f"skipped {sum(skipped.values())} of {res['n_considered']} questions, as the protocol does: " + "; ".join(
        parts
    )


def longmemeval_markdown(res: dict[str, Any]) -> str:
    from memclaw.bench.report import budget_md, disk_md, md_table, one_memory_md, provenance_md
    from memclaw.bench.signal_view import signal_view_md

    keys = [f"{m}@{k}" for m in ("recall_any", "recall_all", "ndcg_any") for k in M.LME_KS]
    lines = [
        "# LongMemEval retrieval benchmark",
        "",
        *provenance_md(res),
        f"- {res['n_questions']} questions scored of {res['n_considered']} considered ({res['n_in_file']} in the "
        f"file); skipped: {res['skipped']}; {res['n_sessions']} haystack sessions; index time {res['index_seconds']} s",
        f"- corpus `{res.get('corpus', 'history')}`: " + CORPUS_NOTES[res.get("corpus", "history")],
        *([ANSWERS_ALL_NOTE] if res.get("answers") == "all" else []),
        *disk_md(res),
        *(["", *one_memory_md(res)] if res.get("one_memory") else []),
        "",
        "## Overall",
        "",
    ]
    lines += md_table(
        ["system", *keys, "p50 ms", "p95 ms"],
        [[n, *[s[k] for k in keys], s["p50_ms"], s["p95_ms"]] for n, s in res["systems"].items()],
    )
    lines += ["", *budget_md(res, ["recall_any", "recall_all"])]
    by_session = sessions_md(res)
    lines += ["", *by_session] if by_session else []
    view_keys = (*SIGNAL_VIEW_KEYS, *SESSION_KEYS) if by_session else SIGNAL_VIEW_KEYS
    view = signal_view_md(res, by="by_question_type", keys=view_keys)
    lines += ["", *view] if view else []
    bkeys = [f"{m}@{b}t" for m in ("recall_any", "recall_all") for b in res.get("budgets", ())]
    types = sorted({t for s in res["systems"].values() for t in s["by_question_type"]})
    for t in types:
        first = next(s for s in res["systems"].values() if t in s["by_question_type"])
        lines += ["", f"## {t} ({first['by_question_type'][t]['n']} questions)", ""]
        lines += md_table(
            ["system", *keys, *[k.replace("recall_", "") for k in bkeys]],
            [
                [n, *[s["by_question_type"][t][k] for k in keys], *[s["by_question_type"][t].get(k) for k in bkeys]]
                for n, s in res["systems"].items()
                if t in s["by_question_type"]
            ],
        )
    return "\n".join(lines) + "\n"


def write_longmemeval_results(res: dict[str, Any], out_dir: Path) -> list[Path]:
    from memclaw.bench.plots import budget_plot, recall_plot
    from memclaw.bench.rankings import write_rankings

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "longmemeval.json", out_dir / "longmemeval.md", out_dir / "longmemeval-recall.png"]
    summary = {k: v for k, v in res.items() if k != "rankings"}
    paths[0].write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
    if "rankings" in res:
        paths.append(write_rankings(res, out_dir / "longmemeval-rankings.json.gz"))
    paths[1].write_text(longmemeval_markdown(res), "utf-8")
    recall_plot(
        res,
        paths[2],
        keys=[f"recall_all@{k}" for k in M.LME_KS],
        title=f"LongMemEval — {questions_title(res)} (recall_all@k)",
    )
    if res.get("budgets"):
        paths.append(out_dir / "longmemeval-budget.png")
        budget_plot(res, paths[-1], key="recall_all", title="LongMemEval — recall_all within a token budget")
    return paths
