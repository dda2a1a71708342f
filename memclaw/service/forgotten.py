"""What the owner forgot stays forgotten: consolidation does not learn it again from the conversation it was said in.

`memclaw memory forget`, chat's /forget and Discord's /forget all go through `MemoryService.forget`, which records
each forgotten memory (scope, text, when) in `<workspace>/sessions/forgotten.jsonl` (`record`). When a chunk of a
session is consolidated, a `Guard` for each scope takes the memories forgotten since the chunk began and

1. redacts every message of the chunk sent before the forget that restates one (the model never reads it);
2. names them to the model as forgotten on purpose (memclaw/prompts/consolidate.md): not to be added back;
3. drops any fact operation that would write one back, and any sentence of the history entry that restates one,

unless the owner said it again after forgetting it (then it is news, and kept). The file keeps the last MAX_ENTRIES.

Each entry also names the facts and history entries that restated the forgotten memory when it was forgotten (its
`mentions`): the Markdown keeps them as the owner wrote them, recall hides those facts and masks those sentences
(memclaw.service.forgotten_recall), and the forget says which they are, so the owner can forget them too.

A text "restates" a forgotten one (`restates`, the one rule for consolidation and recall: memclaw.service.
forgotten_recall) when it holds at least RESTATE_SHARE of the forgotten text's content words (BM25 tokens: stop
words out, words stemmed), so rewording, another order or extra words do not hide it; or RESTATE_SHARE of its
distinctive words: its names and numbers (a word capitalised inside a sentence, a word with a digit; not a weekday
or a month) that at most DISTINCTIVE_DF memories of the scope hold, so a short echo ("Got it, Biscuitron it is.")
restates "The owner's dog is named Biscuitron" while a turn that shares a common word with it ("my dog") does not.
A name the scope talks about often (a friend's, a city's) is the topic of many memories, not this one's content.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memclaw.errors import MemoryFileError
from memclaw.markdown.formats import split_trailing_date
from memclaw.markdown.units import MemoryUnit
from memclaw.util.files import replace_atomically
from memclaw.util.safepath import NotRegularFileError, read_regular

log = logging.getLogger(__name__)

FORGOTTEN_FILE = "forgotten.jsonl"
RESTATE_SHARE = 0.75
DISTINCTIVE_DF = 3  # a name held by more memories of the scope than this is a topic of the scope, not distinctive
MAX_ENTRIES = 2000
REDACTED = "[removed: something the owner asked to forget]"
MASKED = "[forgotten]"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_OPENING = "\"'([“‘«"
_CALENDAR = frozenset(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january",
                       "february", "march", "april", "may", "june", "july", "august", "september", "october",
                       "november", "december"))  # fmt: skip

Tokenize = Callable[[str], list[str]]
DocFreq = Callable[[str], int]  # how many memories of a scope hold a BM25 token


@dataclass(frozen=True)
class ForgottenMemory:
    scope: str
    text: str
    at: datetime  # when it was forgotten (aware)
    mentions: frozenset[str] | None = None  # ids of the units that restated it then; None: noted before mentions were


@dataclass(frozen=True)
class Forgot:
    """What a forget removed, and what still restates it: a forgotten unit's id -> the facts and history entries
    that restated it (recall hides or masks them; the owner may forget them too)."""

    gone: list[MemoryUnit]
    mentions: dict[str, list[MemoryUnit]]

    @property
    def also(self) -> list[MemoryUnit]:
        """Every unit that still restates something forgotten, once each, in the order found."""
        return list({u.id: u for units in self.mentions.values() for u in units}.values())


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo else ts.astimezone()


def _message_time(m: dict[str, Any]) -> datetime | None:
    value = m.get("ts")
    if not isinstance(value, str):
        return None
    try:
        return _aware(datetime.fromisoformat(value))
    except ValueError:
        return None


def load(path: Path) -> list[ForgottenMemory]:
    """The recorded forgotten memories, oldest first; a line that does not parse is skipped. MemoryFileError when
    something other than a regular file stands at `path` (a FIFO would hang the read)."""
    try:
        raw = read_regular(Path(path), follow=True).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except NotRegularFileError as e:
        raise MemoryFileError(f"cannot read {path}: {e.strerror}; memclaw reads only regular files") from e
    out: list[ForgottenMemory] = []
    for line in raw.splitlines():
        with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
            d = json.loads(line)
            said = d.get("mentions")
            mentions = frozenset(str(i) for i in said) if isinstance(said, list) else None
            at = _aware(datetime.fromisoformat(d["at"]))
            out.append(ForgottenMemory(str(d["scope"]), str(d["text"]), at, mentions))
    return out


def _line(e: ForgottenMemory) -> str:
    d: dict[str, Any] = {"scope": e.scope, "text": e.text, "at": e.at.isoformat()}
    if e.mentions is not None:
        d["mentions"] = sorted(e.mentions)
    return json.dumps(d, ensure_ascii=False)


def record(path: Path, units: Iterable[MemoryUnit], now: datetime | None = None,
           mentions: Mapping[str, Sequence[str]] | None = None) -> None:  # fmt: skip
    """Add forgotten memories to the file (one atomic rewrite keeping the last MAX_ENTRIES). `mentions`: a forgotten
    unit's id -> the ids of the units that restate it. Raises OSError."""
    at = _aware(now or datetime.now())
    said = mentions or {}
    new = [ForgottenMemory(u.scope, u.text, at, frozenset(said.get(u.id, ()))) for u in units]
    if not new:
        return
    entries = (load(path) + new)[-MAX_ENTRIES:]
    lines = [_line(e) for e in entries]
    replace_atomically(Path(path), ("\n".join(lines) + "\n").encode("utf-8"), mode=0o600)


def check_notes(sessions_dir: Path) -> None:
    """Raise MemoryFileError if the record of forgotten memories cannot be read: a forget checks this before it
    deletes anything, so a refusal leaves every file as it was."""
    load(Path(sessions_dir) / FORGOTTEN_FILE)


def note_forgotten(sessions_dir: Path, gone: Sequence[MemoryUnit],
                   mentions: Mapping[str, Sequence[str]] | None = None) -> None:  # fmt: skip
    """`record` the memories just forgotten in `sessions_dir`. They are deleted already: a note that cannot be
    written is a warning, not a failure of the forget."""
    path = Path(sessions_dir) / FORGOTTEN_FILE
    try:
        record(path, gone, mentions=mentions)
    except OSError as e:
        log.warning("cannot note the forgotten memories in %s (%s): a chat that said them may write them back "
                    "when it is consolidated", path, e.strerror or e)  # fmt: skip


@dataclass(frozen=True)
class ForgottenKey:
    """What a text must hold to restate a forgotten memory: its content words and its distinctive ones."""

    words: frozenset[str]
    names: frozenset[str]  # its names and numbers; `distinctive` keeps the rare ones

    def distinctive(self, doc_freq: DocFreq) -> ForgottenKey:
        """The key with only the names that at most DISTINCTIVE_DF memories of the scope hold."""
        return ForgottenKey(self.words, frozenset(t for t in self.names if doc_freq(t) <= DISTINCTIVE_DF))


def _is_name(word: str, opens_sentence: bool) -> bool:
    """Whether a word of a text is a name or a number (see the module docstring)."""
    bare = word.lstrip(_OPENING)
    if any(c.isdigit() for c in bare):
        return True
    return not opens_sentence and bare[:1].isupper() and bare.strip(".,;:!?'\"”’)»").lower() not in _CALENDAR


def key_of(text: str, tokenize: Tokenize) -> ForgottenKey:
    """The key of a forgotten memory's text (its learned-mark left out), every name in it."""
    body = split_trailing_date(text)[0]
    words = frozenset(tokenize(body))
    names: set[str] = set()
    for sentence in _SENTENCE_END.split(body):
        for n, word in enumerate(sentence.split()):
            if _is_name(word, n == 0):
                names.update(tokenize(word))
    return ForgottenKey(words, frozenset(names & words))


def _holds(words: set[str], part: frozenset[str]) -> bool:
    return bool(part) and len(part & words) >= RESTATE_SHARE * len(part)


def restates(words: set[str], key: ForgottenKey) -> bool:
    """Whether a text (its BM25 tokens) restates a forgotten memory (its `key`): it holds at least RESTATE_SHARE of
    its content words or of its distinctive ones."""
    return _holds(words, key.words) or _holds(words, key.names)


def sentences(text: str) -> list[str]:
    """A history entry's sentences, as `Guard.scrub` and recall's masking split it."""
    return _SENTENCE_END.split(text)


def masked(text: str, restated: Callable[[str], bool]) -> str | None:
    """`text` with each run of sentences that `restated` holds true of replaced by MASKED; None when nothing else is
    left. `text` itself when no sentence is."""
    parts = sentences(text)
    out: list[str] = []
    for s in parts:
        if not restated(s):
            out.append(s)
        elif not out or out[-1] != MASKED:
            out.append(MASKED)
    if len(out) == len(parts) and MASKED not in out:
        return text
    return None if all(s == MASKED for s in out) else " ".join(out)


def _said(m: dict[str, Any]) -> str:
    """The text a message says (its tool calls are not said)."""
    content = m.get("content")
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _content_text(m: dict[str, Any]) -> str:
    parts = [_said(m)]
    parts += [str((tc.get("function") or {}).get("arguments", "")) for tc in m.get("tool_calls") or []]
    return " ".join(parts)


def _redacted(m: dict[str, Any]) -> dict[str, Any]:
    """A message that restates a forgotten memory, as the model reads and the archive keeps it: what it said is
    REDACTED, its tool calls' arguments are emptied. A message that said nothing (it only called a tool) still says
    nothing: the archive keeps no turn for it, as for any tool call."""
    out = {**m, "content": REDACTED} if _said(m).strip() else dict(m)
    if m.get("tool_calls"):
        out["tool_calls"] = [{**tc, "function": {**(tc.get("function") or {}), "arguments": "{}"}}
                             for tc in m["tool_calls"]]  # fmt: skip
    return out


class Guard:
    """The memories of one scope forgotten since a chunk of a session began, and what follows for that chunk."""

    def __init__(self, forgotten: Sequence[ForgottenMemory], scope: str, msgs: Sequence[dict[str, Any]],
                 tokenize: Tokenize, doc_freq: DocFreq | None = None) -> None:  # fmt: skip
        """`doc_freq`: how many memories of the scope hold a token (which names are distinctive; without it, every
        name is)."""
        self._tokenize = tokenize
        times = [t for t in (_message_time(m) for m in msgs) if t]
        begin = min(times) if times else None
        self.entries = [f for f in forgotten if f.scope == scope and (begin is None or f.at >= begin)]
        keys = [key_of(f.text, tokenize) for f in self.entries]
        self._keys = [k.distinctive(doc_freq) for k in keys] if doc_freq else keys
        # said again after it was forgotten: news, not a leftover
        self._said_again = [
            any(
                m.get("role") == "user" and (t := _message_time(m)) is not None and t > f.at
                and self._restates(_content_text(m), key)
                for m in msgs
            )
            for f, key in zip(self.entries, self._keys, strict=True)
        ]  # fmt: skip

    @property
    def texts(self) -> list[str]:
        """The forgotten memories to name to the model (those not said again since)."""
        return [f.text for f, again in zip(self.entries, self._said_again, strict=True) if not again]

    def _restates(self, text: str, key: ForgottenKey) -> bool:
        return restates(set(self._tokenize(text)), key)

    def _hit(self, text: str, *, before: datetime | None = None, all_: bool = False) -> bool:
        """Whether `text` restates a forgotten memory (one forgotten after `before`; not said again unless all_)."""
        return any(
            (all_ or not again) and (before is None or f.at >= before) and self._restates(text, key)
            for f, key, again in zip(self.entries, self._keys, self._said_again, strict=True)
        )

    def redact(self, msgs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """`msgs` with each message sent before a forget that restates what was forgotten `_redacted`."""
        if not self.entries:
            return list(msgs)
        out = []
        for m in msgs:
            t = _message_time(m)
            out.append(_redacted(m) if self._hit(_content_text(m), before=t, all_=True) else m)
        return out

    def keeps(self, text: str | None) -> bool:
        """Whether a fact the model wants to add or update to `text` may be written."""
        if text and self._hit(text):
            log.info("consolidation wanted to write back a forgotten memory; dropped: %s", text)
            return False
        return True

    def scrub(self, entry: str) -> str:
        """The history entry without the sentences that restate a forgotten memory."""
        if not entry or not self.entries:
            return entry
        kept = [s for s in sentences(entry) if not self._hit(s)]
        if len(kept) < len(sentences(entry)):
            log.info("consolidation's history entry restated a forgotten memory; that sentence was dropped")
        return " ".join(kept)
