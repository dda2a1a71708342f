"""LoCoMo (Maharana et al., ACL 2024): loader and converter to memclaw workspaces.

Reads the upstream `locomo10.json` format (and the dev split, which is a subset of it). One workspace per
conversation:

* corpus `all`: every `observation` fact is a bullet of `memory/MEMORY.md` under a heading per speaker, with
  its session's date as a trailing ` (YYYY-MM-DD)`; every `session_summary` is a `memory/HISTORY.md` entry
  `[YYYY-MM-DD HH:MM] summary` stamped with its session's date and time.
* corpus `facts`: the facts only (no HISTORY.md).
* corpus `sessions` (a LongMemEval-style proxy): every session's raw turns (`speaker: text`, one line per turn,
  an image shared in a turn as `[image: caption]`) as one HISTORY.md entry; no facts.

Which evidence turns a unit covers is written to a side file next to the workspace (`<workspace>.coverage.json`),
never into the indexed Markdown. An observation covers its own evidence turn(s); a session entry (summary or raw
session) covers every turn of its session.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from memclaw.errors import UsageError

Corpus = Literal["all", "facts", "sessions"]
CORPORA: tuple[str, ...] = ("all", "facts", "sessions")
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
    questions: list[Question]  # eligible ones only (categories 1-4 with evidence)
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


@dataclass
class CoverageEntry:
    """One unit as the converter wrote it, and the evidence it covers (side file, never indexed)."""

    kind: Literal["fact", "history"]
    text: str
    date: str  # YYYY-MM-DD (facts) or YYYY-MM-DD HH:MM (history)
    session: int
    covers: list[str]


def coverage_path(workspace_root: Path) -> Path:
    root = Path(workspace_root)
    return root.with_name(root.name + ".coverage.json")


def _escape_entry_line(line: str) -> str:
    """A line inside a history entry must not look like the start of a new entry, nor be blank."""
    if re.match(r"^\s*\[\d{4}-\d{2}-\d{2}", line):
        return "(" + line.lstrip()[1:]
    return line


def write_conversation(conv: Conversation, root: Path, corpus: Corpus = "all") -> list[CoverageEntry]:
    """Write one conversation as a memclaw workspace at `root` (memory/MEMORY.md, memory/HISTORY.md) and its
    coverage side file next to it. Returns the coverage entries."""
    if corpus not in CORPORA:
        raise UsageError(f"unknown corpus {corpus!r}: use one of {', '.join(CORPORA)}")
    mem_dir = Path(root) / "memory"
    mem_dir.mkdir(parents=True, exist_ok=True)
    entries: list[CoverageEntry] = []
    session_turns = {n: [t.dia_id for t in s.turns] for n, s in conv.sessions.items()}
    # Evidence that names a turn missing from its (existing) session is covered by that session's entry only.
    for q in conv.questions:
        for t in q.evidence:
            m = _TURN_RE.fullmatch(t)
            n = int(m.group(1)) if m else -1
            if n in session_turns and t not in session_turns[n]:
                session_turns[n].append(t)

    facts_md = ""
    if corpus in ("all", "facts"):
        lines: list[str] = []
        speakers = list(dict.fromkeys([*conv.speakers, *(o.speaker for o in conv.observations)]))
        for speaker in speakers:
            obs = [o for o in conv.observations if o.speaker == speaker]
            if not obs:
                continue
            lines += [f"# {speaker}", ""]
            for o in sorted(obs, key=lambda o: o.session):
                day = conv.sessions[o.session].when.strftime("%Y-%m-%d")
                lines.append(f"- {o.text} ({day})")
                entries.append(CoverageEntry("fact", o.text, day, o.session, list(o.evidence)))
            lines.append("")
        facts_md = "\n".join(lines)
    history: list[str] = []
    for n in sorted(conv.sessions):
        s = conv.sessions[n]
        stamp = s.when.strftime("%Y-%m-%d %H:%M")
        if corpus == "all" and n in conv.summaries:
            text = conv.summaries[n]
        elif corpus == "sessions":
            text = "\n".join(_escape_entry_line(t.line()) for t in s.turns if t.text.strip() or t.image_caption)
        else:
            continue
        history.append(f"[{stamp}] {text}")
        entries.append(CoverageEntry("history", text, stamp, n, list(session_turns[n])))
    (mem_dir / "MEMORY.md").write_text(facts_md, "utf-8")
    (mem_dir / "HISTORY.md").write_text("\n\n".join(history) + ("\n" if history else ""), "utf-8")
    coverage_path(root).write_text(
        json.dumps(
            {"conversation": conv.sample_id, "corpus": corpus, "units": [e.__dict__ for e in entries]}, indent=1
        ),
        "utf-8",
    )
    return entries
