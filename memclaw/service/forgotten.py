"""What the owner forgot stays forgotten: consolidation does not learn it again, and recall does not serve it back.

`MemoryService.forget` records each forgotten memory (scope, text, when) in `<workspace>/sessions/forgotten.jsonl`.
`memclaw memory forget`, chat's /forget and Discord's /forget all go through it. The file keeps the last
MAX_ENTRIES. Each entry also names its `mentions`: the facts and history entries that restated it at forget time.

At consolidation, a `Guard` per scope takes the memories forgotten since the chunk began. It redacts each message
sent before the forget that restates one, so the model never reads it. It names them to the model as forgotten on
purpose (memclaw/prompts/consolidate.md). It drops any fact operation or history sentence that would write one
back. What the owner said again after forgetting it is news, and kept.

At recall, a `ForgottenFilter` leaves out an archived turn that restates a forgotten memory and was said before the
forget, as a hit and from every excerpt's window. A mention that is a fact is left out. A mention that is a history
entry is served with each restating sentence masked (MASKED). It is left out when nothing else is left, or when
what is left shares no word with the query. The Markdown is never rewritten: the files stay the owner's.

`restates` is the one rule for both. A text restates a forgotten one when it holds RESTATE_SHARE of its content
words, as BM25 tokens, or RESTATE_SHARE of its distinctive words. Distinctive words are names and numbers that at
most DISTINCTIVE_DF memories of the scope hold. So "Got it, Biscuitron it is." restates "The owner's dog is named
Biscuitron", while "my dog" does not. A name the scope talks about often is a topic, not this memory's content.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memclaw.errors import MemoryFileError
from memclaw.markdown.formats import split_trailing_date
from memclaw.markdown.units import MemoryUnit
from memclaw.util.files import replace_atomically
from memclaw.util.safepath import NotRegularFileError, read_regular

if TYPE_CHECKING:
    from memclaw.recall.results import RecallHit, RecallResult

log = logging.getLogger(__name__)

FORGOTTEN_FILE = "forgotten.jsonl"
RESTATE_SHARE = 0.75
# a name held by more memories of the scope than this is a topic of the scope, not distinctive
DISTINCTIVE_DF = 3
MAX_ENTRIES = 2000
REDACTED = "[removed: something the owner asked to forget]"
MASKED = "[forgotten]"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_OPENING = "\"'([“‘«"
_CALENDAR = frozenset(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january",
                       "february", "march", "april", "may", "june", "july", "august", "september", "october",
                       "november", "december"))  # fmt: skip

Tokenize = Callable[[str], list[str]]
# how many memories of a scope hold a BM25 token
DocFreq = Callable[[str], int]


@dataclass(frozen=True)
class ForgottenMemory:
    scope: str
    text: str
    # when it was forgotten (aware)
    at: datetime
    # ids of the units that restated it then; None: noted before mentions were
    mentions: frozenset[str] | None = None


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
    # its names and numbers; `distinctive` keeps the rare ones
    names: frozenset[str]

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


# ----- at recall time: what restates a forgotten memory is left out or masked ------------------------------
Keys = list[tuple[ForgottenMemory, ForgottenKey]]


class ForgottenFilter:
    """The recall-time rule above, for one workspace's sessions folder."""

    def __init__(self, sessions_dir: Path, tokenize: Tokenize, doc_freq: Callable[[str], DocFreq]) -> None:
        """`doc_freq(scope)`: how many memories of that scope hold a token, as its index holds them now."""
        self.path = Path(sessions_dir) / FORGOTTEN_FILE
        self.tokenize = tokenize
        self.doc_freq = doc_freq
        self._lock = threading.Lock()
        self._sig: tuple[int, int] | None = None
        self._entries: Keys = []

    def _load(self) -> Keys:
        try:
            st = os.stat(self.path)
            sig = (st.st_mtime_ns, st.st_size)
        except OSError:
            sig = None
        with self._lock:
            if sig != self._sig:
                entries = load(self.path) if sig is not None else []
                self._entries = [(f, key_of(f.text, self.tokenize)) for f in entries]
                self._sig = sig
            return self._entries

    def hides(self, u: MemoryUnit, keys: Keys) -> bool:
        """Whether the archived turn `u` restates one of `keys` forgotten after it was said."""
        if u.kind != "archive" or not keys:
            return False
        # naive local time, as written
        said = u.timestamp.astimezone() if u.timestamp is not None else None
        words = set(self.tokenize(u.text.split(": ", 1)[-1]))
        return any((said is None or said <= f.at) and restates(words, key) for f, key in keys)

    def keys_in(self, scope: str) -> Keys:
        """The keys of the memories forgotten in `scope`, their names distinctive in it now."""
        entries = [(f, key) for f, key in self._load() if f.scope == scope]
        if not entries:
            return []
        doc_freq = self.doc_freq(scope)
        return [(f, key.distinctive(doc_freq)) for f, key in entries]

    def _restates(self, text: str, key: ForgottenKey) -> bool:
        return restates(set(self.tokenize(text)), key)

    def said_in(self, u: MemoryUnit) -> list[set[str]]:
        """The words of fact or history entry `u` as `restated_in` reads them: a fact whole, an entry per sentence."""
        return [set(self.tokenize(p)) for p in (sentences(u.text) if u.kind == "history" else [u.text])]

    def restated_in(self, said: list[set[str]], key: ForgottenKey) -> bool:
        """Whether a fact or history entry (its `said_in`) restates a forgotten memory: a fact as a whole, a history
        entry in one of its sentences at least (as consolidation's scrub reads a new one). A long entry that holds
        the words of a short fact spread over many sentences does not restate it."""
        return any(restates(words, key) for words in said)

    def _mentioned(self, u: MemoryUnit, keys: Keys) -> list[ForgottenKey]:
        """The keys of the forgotten memories that fact or history entry `u` restated when they were forgotten (one
        noted before mentions were: a history entry dated before the forget that restates it)."""
        if u.kind == "archive":
            return []
        said = u.timestamp.astimezone() if u.kind == "history" and u.timestamp is not None else None
        words: list[set[str]] | None = None
        out = []
        for f, key in keys:
            if f.mentions is not None:
                hit = u.id in f.mentions
            elif said is not None and said <= f.at:
                words = self.said_in(u) if words is None else words
                hit = self.restated_in(words, key)
            else:
                hit = False
            if hit:
                out.append(key)
        return out

    def shown(self, u: MemoryUnit, keys: Keys) -> MemoryUnit | None:
        """A fact or history entry as recall serves it (the module docstring): itself, masked, or None (left out)."""
        mentioned = self._mentioned(u, keys)
        if not mentioned:
            return u
        if u.kind != "history":
            return None
        text = masked(u.text, lambda s: any(self._restates(s, k) for k in mentioned))
        # no one sentence restates it now (its names' frequencies changed since): the whole entry is out
        if text is None or text == u.text:
            return None
        return dataclasses.replace(u, text=text)

    def _still_matches(self, shown: MemoryUnit, query: set[str]) -> bool:
        """Whether a masked entry's visible text still shares a word with the query (a query of stop words only:
        yes). An entry that matched only through what was masked is left out, not served as a masked first hit."""
        return not query or bool(query & set(self.tokenize(shown.text.replace(MASKED, " "))))

    def mentions(self, scope: str, gone: Sequence[MemoryUnit], units: Sequence[MemoryUnit]) -> dict[str, list[str]]:
        """For each fact or history entry about to be forgotten: the ids of the other facts and history entries
        of `units` that restate it (its names distinctive in the scope as it is indexed now)."""
        doc_freq = self.doc_freq(scope)
        ids = {u.id for u in gone}
        rest = [(u, self.said_in(u)) for u in units if u.kind != "archive" and u.id not in ids]
        out: dict[str, list[str]] = {}
        for g in gone:
            if g.kind == "archive":
                continue
            key = key_of(g.text, self.tokenize).distinctive(doc_freq)
            out[g.id] = [u.id for u, said in rest if self.restated_in(said, key)]
        return out

    def marks(self, scope: str, units: Sequence[MemoryUnit]) -> dict[str, str]:
        """Which facts and history entries recall leaves out ("hidden") or serves in part ("masked"), by id."""
        keys = self.keys_in(scope)
        out: dict[str, str] = {}
        for u in units if keys else ():
            shown = self.shown(u, keys)
            if shown is not u:
                out[u.id] = "hidden" if shown is None else "masked"
        return out

    def apply(self, result: RecallResult) -> RecallResult:
        """`result` without what the owner's forgets hide: archived turns (hits and window turns), facts, and the
        sentences of history entries."""
        keys = self.keys_in(result.scope)
        if not keys:
            return result
        query = set(self.tokenize(result.query))
        kept: list[RecallHit] = []
        for h in result.hits:
            if self.hides(h.unit, keys):
                continue
            if h.excerpt:
                h = dataclasses.replace(h, excerpt=_window_without(h, lambda t: self.hides(t, keys)))
            shown = self.shown(h.unit, keys)
            if shown is None or (shown is not h.unit and not self._still_matches(shown, query)):
                continue
            kept.append(h if shown is h.unit else dataclasses.replace(h, unit=shown))
        result.hits = kept
        return result


def _window_without(h: RecallHit, hidden: Callable[[MemoryUnit], bool]) -> tuple[MemoryUnit, ...]:
    """The run of turns around the hit's own turn that holds no hidden turn."""
    turns = list(h.excerpt)
    at = next(n for n, t in enumerate(turns) if t.id == h.unit.id)
    lo = hi = at
    while lo > 0 and not hidden(turns[lo - 1]):
        lo -= 1
    while hi + 1 < len(turns) and not hidden(turns[hi + 1]):
        hi += 1
    return tuple(turns[lo : hi + 1])
