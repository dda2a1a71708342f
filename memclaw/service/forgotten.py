"""What the owner forgot stays forgotten: consolidation does not learn it again from the conversation it was said in.

`memclaw memory forget`, chat's /forget and Discord's /forget all go through `MemoryService.forget`, which records
each forgotten memory (scope, text, when) in `<workspace>/sessions/forgotten.jsonl` (`record`). When a chunk of a
session is consolidated, a `Guard` for each scope takes the memories forgotten since the chunk began and

1. redacts every message of the chunk sent before the forget that restates one (the model never reads it);
2. names them to the model as forgotten on purpose (memclaw/prompts/consolidate.md): not to be added back;
3. drops any fact operation that would write one back, and any sentence of the history entry that restates one,

unless the owner said it again after forgetting it (then it is news, and kept). A text "restates" a forgotten one
when it holds at least RESTATE_SHARE of the forgotten text's content words (BM25 tokens: stop words out, words
stemmed), so rewording, another order or extra words do not hide it. The file keeps the last MAX_ENTRIES.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memclaw.markdown.formats import split_trailing_date
from memclaw.markdown.units import MemoryUnit
from memclaw.util.files import replace_atomically

log = logging.getLogger(__name__)

FORGOTTEN_FILE = "forgotten.jsonl"
RESTATE_SHARE = 0.75
MAX_ENTRIES = 2000
REDACTED = "[removed: something the owner asked to forget]"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

Tokenize = Callable[[str], list[str]]


@dataclass(frozen=True)
class ForgottenMemory:
    scope: str
    text: str
    at: datetime  # when it was forgotten (aware)


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
    """The recorded forgotten memories, oldest first; a line that does not parse is skipped."""
    try:
        raw = Path(path).read_text("utf-8", errors="replace")
    except FileNotFoundError:
        return []
    out: list[ForgottenMemory] = []
    for line in raw.splitlines():
        with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
            d = json.loads(line)
            out.append(ForgottenMemory(str(d["scope"]), str(d["text"]), _aware(datetime.fromisoformat(d["at"]))))
    return out


def record(path: Path, units: Iterable[MemoryUnit], now: datetime | None = None) -> None:
    """Add forgotten memories to the file (one atomic rewrite keeping the last MAX_ENTRIES). Raises OSError."""
    at = _aware(now or datetime.now())
    new = [ForgottenMemory(u.scope, u.text, at) for u in units]
    if not new:
        return
    entries = (load(path) + new)[-MAX_ENTRIES:]
    lines = [
        json.dumps({"scope": e.scope, "text": e.text, "at": e.at.isoformat()}, ensure_ascii=False) for e in entries
    ]
    replace_atomically(Path(path), ("\n".join(lines) + "\n").encode("utf-8"), mode=0o600)


def note_forgotten(sessions_dir: Path, gone: Sequence[MemoryUnit]) -> None:
    """`record` the memories just forgotten in `sessions_dir`. They are deleted already: a note that cannot be
    written is a warning, not a failure of the forget."""
    path = Path(sessions_dir) / FORGOTTEN_FILE
    try:
        record(path, gone)
    except OSError as e:
        log.warning("cannot note the forgotten memories in %s (%s): a chat that said them may write them back "
                    "when it is consolidated", path, e.strerror or e)  # fmt: skip


def restates(words: set[str], key: set[str]) -> bool:
    """Whether a text (its BM25 tokens) restates a forgotten memory (its content words, `key`): it holds at least
    RESTATE_SHARE of them."""
    return bool(key) and len(key & words) >= RESTATE_SHARE * len(key)


def _content_text(m: dict[str, Any]) -> str:
    content = m.get("content")
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    parts = [content if isinstance(content, str) else ""]
    parts += [str((tc.get("function") or {}).get("arguments", "")) for tc in m.get("tool_calls") or []]
    return " ".join(parts)


class Guard:
    """The memories of one scope forgotten since a chunk of a session began, and what follows for that chunk."""

    def __init__(self, forgotten: Sequence[ForgottenMemory], scope: str, msgs: Sequence[dict[str, Any]],
                 tokenize: Tokenize) -> None:  # fmt: skip
        self._tokenize = tokenize
        times = [t for t in (_message_time(m) for m in msgs) if t]
        begin = min(times) if times else None
        self.entries = [f for f in forgotten if f.scope == scope and (begin is None or f.at >= begin)]
        self._keys = [self._key(f.text) for f in self.entries]
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

    def _key(self, text: str) -> set[str]:
        return set(self._tokenize(split_trailing_date(text)[0]))

    def _restates(self, text: str, key: set[str]) -> bool:
        return restates(set(self._tokenize(text)), key)

    def _hit(self, text: str, *, before: datetime | None = None, all_: bool = False) -> bool:
        """Whether `text` restates a forgotten memory (one forgotten after `before`; not said again unless all_)."""
        return any(
            (all_ or not again) and (before is None or f.at >= before) and self._restates(text, key)
            for f, key, again in zip(self.entries, self._keys, self._said_again, strict=True)
        )

    def redact(self, msgs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """`msgs` with each message sent before a forget that restates what was forgotten replaced by REDACTED."""
        if not self.entries:
            return list(msgs)
        out = []
        for m in msgs:
            t = _message_time(m)
            if self._hit(_content_text(m), before=t, all_=True):
                m = {**m, "content": REDACTED}
                if m.get("tool_calls"):
                    m["tool_calls"] = [{**tc, "function": {**(tc.get("function") or {}), "arguments": "{}"}}
                                       for tc in m["tool_calls"]]  # fmt: skip
            out.append(m)
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
        kept = [s for s in _SENTENCE_END.split(entry) if not self._hit(s)]
        if len(kept) < len(_SENTENCE_END.split(entry)):
            log.info("consolidation's history entry restated a forgotten memory; that sentence was dropped")
        return " ".join(kept)
