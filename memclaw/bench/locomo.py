"""LoCoMo (Maharana et al., ACL 2024): loader and converter to memclaw workspaces.

Reads the upstream `locomo10.json` format (and the dev split, which is a subset of it). One workspace per
conversation, written through memclaw's own consolidation writer (memclaw.bench.record): each session is one
consolidation of that conversation, whose time is the session's; the benchmark's observations and session summary
stand in for the model's answer. The converter supplies no date and no link: learned-marks ` (YYYY-MM-DD #cid)`,
history stamps `[YYYY-MM-DD HH:MM #cid]` and archive chunks are memclaw's.

* corpus `all`: every `observation` is a fact (under a heading per speaker), every `session_summary` a HISTORY.md
  entry; no archive.
* corpus `facts`: the facts only.
* corpus `sessions`: every session's raw turns as archived turns (`memory/archive/YYYY-MM-DD.md`, one chunk per
  session; an image shared in a turn as `[image: caption]`); no facts, no summaries.
* corpus `full`: facts + summaries + archive: what memclaw holds after consolidating those conversations.

Which evidence turns a unit covers is written to a side file next to the workspace (`<workspace>.coverage.json`),
never into the indexed Markdown. An observation covers its own evidence turn(s); a summary every turn of its
session; an archived turn, in the count view, every turn of its session (session-level, as a session unit did) and,
in the budgeted view, only itself (memclaw.bench.corpus: `credit`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from memclaw.errors import UsageError

if TYPE_CHECKING:
    from memclaw.bench.record import BenchSession

Corpus = Literal["all", "facts", "sessions", "full"]
CORPORA: tuple[str, ...] = ("all", "facts", "sessions", "full")
CATEGORIES: dict[str, str] = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}

_TURN_RE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %B %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %d %b %Y")


def parse_session_datetime(text: str) -> datetime:
    """LoCoMo's `session_N_date_time`, e.g. "1:56 pm on 8 May, 2023" -> 2023-05-08 13:56."""
    s = " ".join(text.replace(".", "").split())
    s = re.sub(r"\b(am|pm)\b", lambda m: m.group(1).upper(), s, flags=re.IGNORECASE)
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(s, fmt)
        except ValueError:
            continue
    raise UsageError(f"unrecognised LoCoMo session date {text!r}: expected e.g. '1:56 pm on 8 May, 2023'")


def normalize_evidence(raw: Iterable[object]) -> tuple[list[str], list[str]]:
    """Evidence strings -> canonical turn ids "D<session>:<turn>" (deduplicated, in order) and the anomalies seen.

    Upstream has malformed items: several ids in one string ("D8:6; D9:17"), a stray colon ("D:11:26"),
    a bare "D". Each id found is kept; an item that needed repair or held nothing is reported.
    """
    out: list[str] = []
    anomalies: list[str] = []
    for item in raw:
        s = str(item).strip()
        found = [f"D{int(a)}:{int(b)}" for a, b in _TURN_RE.findall(s)]
        if not found:
            anomalies.append(f"unparseable evidence {s!r} dropped")
            continue
        if len(found) > 1 or found[0] != s:
            anomalies.append(f"malformed evidence {s!r} read as {', '.join(found)}")
        for t in found:
            if t not in out:
                out.append(t)
    return out, anomalies


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    image_caption: str | None = None

    def line(self) -> str:
        text = " ".join(self.text.split())
        if self.image_caption:
            text = f"{text} [image: {' '.join(self.image_caption.split())}]".strip()
        return f"{self.speaker}: {text}"


@dataclass(frozen=True)
class Session:
    number: int
    when: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Observation:
    session: int
    speaker: str
    text: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    qid: str
    conversation: str
    question: str
    answer: str
    category: str
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: dict[int, Session]
    observations: list[Observation]
    summaries: dict[int, str]
    # Eligible ones only (categories 1-4 with evidence)
    questions: list[Question]
    anomalies: list[str] = field(default_factory=list)

    @property
    def last_date(self) -> datetime:
        return max(s.when for s in self.sessions.values())


@dataclass
class LocomoData:
    path: Path
    conversations: list[Conversation]
    n_qa_total: int
    n_eligible: int
    n_by_category: dict[str, int]
    anomalies: list[str]

    @property
    def questions(self) -> list[Question]:
        return [q for c in self.conversations for q in c.questions]


def _session_numbers(conv: dict, prefix: str) -> list[int]:
    nums = []
    for key in conv:
        m = re.fullmatch(prefix, key)
        if m:
            nums.append(int(m.group(1)))
    return sorted(nums)


def parse_conversation(raw: dict) -> tuple[Conversation, int]:
    """One upstream conversation object -> Conversation (eligible questions only) and its total QA count."""
    sid = str(raw.get("sample_id", "?"))
    conv = raw["conversation"]
    anomalies: list[str] = []
    sessions: dict[int, Session] = {}
    for n in _session_numbers(conv, r"session_(\d+)"):
        turns = conv.get(f"session_{n}") or []
        if not turns:
            continue
        dt_raw = conv.get(f"session_{n}_date_time")
        if not dt_raw:
            anomalies.append(f"{sid}: session {n} has no date; skipped")
            continue
        sessions[n] = Session(
            n,
            parse_session_datetime(dt_raw),
            tuple(
                Turn(str(t["dia_id"]).strip(), str(t.get("speaker", "")), str(t.get("text", "")), t.get("blip_caption"))
                for t in turns
            ),
        )
    observations: list[Observation] = []
    for key, per_speaker in (raw.get("observation") or {}).items():
        m = re.search(r"session_(\d+)", key)
        if not m or int(m.group(1)) not in sessions:
            anomalies.append(f"{sid}: observation block {key!r} has no dated session; skipped")
            continue
        n = int(m.group(1))
        for speaker, facts in (per_speaker or {}).items():
            for fact in facts:
                text, ev = (fact[0], fact[1]) if isinstance(fact, list | tuple) and len(fact) >= 2 else (fact, [])
                evs, bad = normalize_evidence(ev if isinstance(ev, list) else [ev])
                anomalies.extend(f"{sid}: observation {a}" for a in bad)
                text = " ".join(str(text).split())
                if text:
                    observations.append(Observation(n, speaker, text, tuple(evs)))
    summaries: dict[int, str] = {}
    for key, summ in (raw.get("session_summary") or {}).items():
        m = re.search(r"session_(\d+)", key)
        if not m or int(m.group(1)) not in sessions:
            anomalies.append(f"{sid}: summary {key!r} has no dated session; skipped")
            continue
        text = " ".join(str(summ).split())
        if text:
            summaries[int(m.group(1))] = text
    all_turns = {t.dia_id for s in sessions.values() for t in s.turns}
    questions: list[Question] = []
    qa = raw.get("qa") or []
    for i, q in enumerate(qa):
        cat = str(q.get("category"))
        if cat not in CATEGORIES or not q.get("evidence"):
            continue
        evs, bad = normalize_evidence(q["evidence"])
        anomalies.extend(f"{sid} q{i}: {a}" for a in bad)
        for t in evs:
            if t not in all_turns:
                anomalies.append(f"{sid} q{i}: evidence {t} is not a turn of the conversation")
        if not evs:
            anomalies.append(f"{sid} q{i}: no usable evidence; question skipped")
            continue
        questions.append(Question(f"{sid}#q{i}", sid, str(q["question"]), str(q.get("answer", "")), cat, tuple(evs)))
    speakers = (str(conv.get("speaker_a", "A")), str(conv.get("speaker_b", "B")))
    return Conversation(sid, speakers, sessions, observations, summaries, questions, anomalies), len(qa)


def load_locomo(path: Path) -> LocomoData:
    """Load the upstream LoCoMo JSON (a list of conversations). Raises UsageError on a file of another shape."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise UsageError(f"no LoCoMo file at {path}: pass the path of locomo10.json (or the dev split)") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read LoCoMo file {path}: {e}; pass a valid locomo10.json") from None
    if not isinstance(raw, list) or not all(isinstance(c, dict) and "conversation" in c for c in raw):
        raise UsageError(f"{path} is not in the LoCoMo format (a list of objects with 'conversation' and 'qa')")
    convs: list[Conversation] = []
    total = 0
    eligible_raw = 0
    by_cat: Counter[str] = Counter()
    anomalies: list[str] = []
    for c in raw:
        conv, n = parse_conversation(c)
        total += n
        eligible_raw += sum(1 for q in c.get("qa") or [] if str(q.get("category")) in CATEGORIES and q.get("evidence"))
        by_cat.update(q.category for q in conv.questions)
        anomalies.extend(conv.anomalies)
        convs.append(conv)
    n_eligible = sum(len(c.questions) for c in convs)
    if n_eligible != eligible_raw:
        anomalies.append(f"{eligible_raw - n_eligible} eligible question(s) had no usable evidence")
    return LocomoData(path, convs, total, n_eligible, dict(sorted(by_cat.items())), anomalies)


# ----- converter ------------------------------------------------------------------------------------------


def coverage_path(workspace_root: Path) -> Path:
    root = Path(workspace_root)
    return root.with_name(root.name + ".coverage.json")


def write_conversation(conv: Conversation, root: Path, corpus: Corpus = "all") -> list[dict]:
    """Write one conversation as a memclaw workspace at `root` through memclaw's consolidation writer (one record
    per session: memclaw.bench.record) and its coverage side file next to it. Returns the coverage entries."""
    from memclaw.bench.record import write_sessions

    sessions, entries = conversation_sessions(conv, corpus)
    write_sessions(root, sessions)
    coverage_path(root).write_text(
        json.dumps({"conversation": conv.sample_id, "corpus": corpus, "units": entries}, indent=1), "utf-8"
    )
    return entries


def conversation_sessions(conv: Conversation, corpus: Corpus = "all") -> tuple[list[BenchSession], list[dict]]:
    """One conversation as the writer's sessions (see write_conversation), and the coverage entries of their
    units."""
    from memclaw.bench.record import BenchSession, bench_cid
    from memclaw.markdown.archive import ArchivedTurn
    from memclaw.service.learned import bare_fact, mark_fact

    if corpus not in CORPORA:
        raise UsageError(f"unknown corpus {corpus!r}: use one of {', '.join(CORPORA)}")
    session_turns = {n: [t.dia_id for t in s.turns] for n, s in conv.sessions.items()}
    # Evidence that names a turn missing from its (existing) session is covered by that session's entry only.
    for q in conv.questions:
        for t in q.evidence:
            m = _TURN_RE.fullmatch(t)
            n = int(m.group(1)) if m else -1
            if n in session_turns and t not in session_turns[n]:
                session_turns[n].append(t)
    facts, summaries = corpus in ("all", "facts", "full"), corpus in ("all", "full")
    archive = corpus in ("sessions", "full")
    entries: list[dict] = []
    sessions: list[BenchSession] = []
    for n in sorted(conv.sessions):
        s = conv.sessions[n]
        b = BenchSession(str(n), s.when, cid=bench_cid("locomo", conv.sample_id, str(n)))
        if archive:
            kept = [t for t in s.turns if t.text.strip() or t.image_caption]
            b.turns = tuple(ArchivedTurn(t.speaker, t.line()[len(t.speaker) + 2 :], s.when.time()) for t in kept)
            entries += [{"kind": "archive", "cid": b.cid, "turn": i, "covers": list(session_turns[n]),
                         "credit": [t.dia_id]} for i, t in enumerate(kept)]  # fmt: skip
        if summaries and n in conv.summaries:
            b.summary = conv.summaries[n]
            entries.append({"kind": "history", "cid": b.cid, "session": n, "covers": list(session_turns[n])})
        if facts:
            obs = [o for o in conv.observations if o.session == n]
            b.facts = [(o.text, o.speaker) for o in obs]
            # The text as the writer writes it (memclaw.service.learned), to match the unit
            for o in obs:
                written = bare_fact(mark_fact(o.text, s.when.date(), b.cid))
                entries.append({"kind": "fact", "text": written, "session": n, "covers": list(o.evidence)})
        sessions.append(b)
    return sessions, entries
