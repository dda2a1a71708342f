"""Crash-safe conversation sessions: one JSONL file per (channel, chat id) under `<workspace>/sessions/`.

Each line is one message or a metadata record `{"_meta": {...}}`. A message is an OpenAI-style dict plus `ts`, and
for a user message who sent it. The last metadata record wins. Its `last_consolidated` counts the file's messages
already in long-term memory.

- Appends take an exclusive lock on a sidecar `.lock` file and write whole lines with one `write`, then fsync. Two
  writers never interleave, and an acknowledged message is on disk.
- Loading drops a torn last line and skips a corrupt line in the middle, each with a warning. The next append cuts
  a torn tail off first.
- Every read-modify-write (`drop`, `clear`, `drop_retried`) works under that lock on the file as it is then.
  `drop` finds the caller's run of messages by content, not position, and rewrites the file without it atomically.
  So messages appended meanwhile are kept, and a run already gone removes nothing.
- A consolidation holds the session's claim (`try_lock`, a second lock file) from reading to trimming. So two
  processes sharing a session never consolidate it at once. A turn holds the turn lock (memclaw.agent._turnlock).
- A failed turn keeps the user's message. Sent again, it is not stored twice: `drop_retried` removes the
  unanswered run first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from memclaw.errors import SessionError
from memclaw.util.files import file_lock, replace_atomically
from memclaw.util.safepath import is_symlink_error, open_nofollow, read_nofollow, refusal

log = logging.getLogger(__name__)

LLM_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
_MAX_NAME = 180


CONSOLIDATION_PROGRESS = "consolidating"
"""Meta key: which scopes of the chunk being consolidated are already written to memory, so a retry after a
partial failure does not write them twice. Cleared when the pointer moves past the chunk."""


CLAIM_SUFFIX = ".consolidation.lock"
"""The consolidation claim's lock file is the session file's name plus this (see SessionStore.try_lock)."""
TURN_SUFFIX = ".turn.lock"
"""The turn lock's file: one turn at a time per session, across processes and threads (memclaw.agent._turnlock)."""


INCOGNITO = "incognito"
"""Meta key: the rest of this session is private (`/incognito`, until `/new`); and message key: the message was
sent while it was. Private messages are neither consolidated nor archived (memclaw.agent.conversation)."""


def session_filename(channel: str, chat_id: str) -> str:
    """A file name safe for any ids: percent-encoded, never starting with a dot, bounded in length."""
    name = quote(str(channel), safe="") + "__" + quote(str(chat_id), safe="")
    if name.startswith("."):
        name = "%2E" + name[1:]
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        name = name[: _MAX_NAME - 17] + "-" + digest
    return name + ".jsonl"


def parse_filename(name: str) -> tuple[str, str] | None:
    stem = name.removesuffix(".jsonl")
    if "__" not in stem:
        return None
    ch, cid = stem.split("__", 1)
    return unquote(ch), unquote(cid)


@dataclass
class Session:
    channel: str
    chat_id: str
    path: Path
    messages: list[dict[str, Any]] = field(default_factory=list)
    last_consolidated: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return (self.channel, self.chat_id)

    @property
    def incognito(self) -> bool:
        return self.meta.get(INCOGNITO) is True

    @property
    def unconsolidated(self) -> list[dict[str, Any]]:
        return self.messages[self.last_consolidated :]

    def history(self) -> list[dict[str, Any]]:
        """The not-yet-consolidated messages as the LLM should see them (see `llm_messages`)."""
        return llm_messages(self.unconsolidated)


def llm_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Session messages as OpenAI messages: only the keys the API takes, and no dangling tool call.

    A tool call whose results never reached the disk is dropped with its partial results. So the provider never
    sees a call without its answer."""
    out: list[dict[str, Any]] = []
    i = 0
    n = len(messages)
    while i < n:
        m = messages[i]
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls"):
            ids = [tc.get("id") for tc in m["tool_calls"]]
            j = i + 1
            results = []
            while j < n and messages[j].get("role") == "tool":
                results.append(messages[j])
                j += 1
            got = {r.get("tool_call_id") for r in results}
            if all(x in got for x in ids):
                out.append({k: m[k] for k in LLM_KEYS if k in m})
                out.extend({k: r[k] for k in LLM_KEYS if k in r} for r in results if r.get("tool_call_id") in ids)
            elif m.get("content"):
                out.append({"role": "assistant", "content": m["content"]})
            i = j
            continue
        # Orphan result
        if role == "tool":
            i += 1
            continue
        if role in ("user", "assistant", "system"):
            out.append({k: m[k] for k in LLM_KEYS if k in m and k not in ("tool_calls", "tool_call_id")})
        i += 1
    return out


class SessionStore:
    """All sessions of one workspace."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path_for(self, channel: str, chat_id: str) -> Path:
        return self.root / session_filename(channel, chat_id)

    @contextlib.contextmanager
    def _locked(self, path: Path, lock: Path | None = None, *, wait: bool = True) -> Iterator[None]:
        lock = lock or Path(str(path) + ".lock")
        held = contextlib.ExitStack()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            held.enter_context(file_lock(lock, wait=wait))
        except BlockingIOError:
            raise
        except OSError as e:
            _refuse_link(e, lock)
            raise SessionError(
                f"cannot open session lock for {path}: {e.strerror}; check the workspace permissions"
            ) from e
        with held:
            yield

    def try_lock(self, session: Session, suffix: str = CLAIM_SUFFIX) -> contextlib.ExitStack | None:
        """Take one of the session's lock files without waiting: None when another thread or process holds it.

        The default is the consolidation claim, held from reading the session to trimming it. With TURN_SUFFIX it is
        the turn lock. Closing the returned stack releases the lock."""
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(self._locked(session.path, Path(str(session.path) + suffix), wait=False))
        except BlockingIOError:
            return None
        return stack

    # ----- reading ---------------------------------------------------------------------------------------
    def load(self, channel: str, chat_id: str) -> Session:
        return self._read(channel, chat_id, self.path_for(channel, chat_id))

    def refresh(self, session: Session) -> None:
        """Bring `session` up to date with its file (what any process appended or trimmed since it was read)."""
        _adopt(session, self._read(session.channel, session.chat_id, session.path))

    def holds(self, session: Session, chunk: Sequence[Mapping[str, Any]]) -> bool:
        """Whether `chunk` (messages read from this session) is still in it and not yet consolidated."""
        fresh = self._read(session.channel, session.chat_id, session.path)
        return find_run(fresh.unconsolidated, chunk) is not None

    def _read(self, channel: str, chat_id: str, path: Path) -> Session:
        s = Session(channel=channel, chat_id=chat_id, path=path)
        try:
            raw = read_nofollow(path)
        except FileNotFoundError:
            return s
        except OSError as e:
            _refuse_link(e, path)
            raise SessionError(f"cannot read session {path}: {e.strerror}; check its permissions") from e
        self._parse_into(s, raw)
        return s

    def _parse_into(self, s: Session, raw: bytes) -> None:
        lines = raw.split(b"\n")
        # No final newline: the last write did not complete
        torn_tail = lines[-1] != b""
        last = _last_nonempty(lines)
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    raise ValueError("not a JSON object")
            except (ValueError, UnicodeDecodeError) as e:
                if i == last and torn_tail:
                    msg = f"session {s.path.name}: dropped a torn last line ({len(line)} bytes; a crash mid-write?)"
                else:
                    msg = f"session {s.path.name}: skipped corrupt line {i + 1} ({e})"
                log.warning(msg)
                s.warnings.append(msg)
                continue
            if "_meta" in rec:
                if isinstance(rec["_meta"], dict):
                    s.meta.update(rec["_meta"])
                continue
            s.messages.append(rec)
        lc = s.meta.get("last_consolidated", 0)
        s.last_consolidated = min(max(int(lc), 0), len(s.messages)) if isinstance(lc, int) else 0

    def list(self) -> list[tuple[str, str]]:
        if not self.root.exists():
            return []
        out = []
        for p in sorted(self.root.glob("*.jsonl")):
            key = parse_filename(p.name)
            if key:
                out.append(key)
        return out

    # ----- writing ---------------------------------------------------------------------------------------
    def append(self, session: Session, *messages: Mapping[str, Any]) -> None:
        """Append messages (each gets a `ts` if missing), fsynced before returning."""
        recs = []
        for m in messages:
            rec = dict(m)
            rec.setdefault("ts", datetime.now().astimezone().isoformat(timespec="milliseconds"))
            recs.append(rec)
        self._write_lines(session.path, [json.dumps(r, ensure_ascii=False, default=str) for r in recs])
        session.messages.extend(recs)

    def set_meta(self, session: Session, **values: Any) -> None:
        """Record metadata durably (a `_meta` line; the last value of each key wins when the file is read)."""
        self._write_lines(session.path, [json.dumps({"_meta": values}, ensure_ascii=False, default=str)])
        session.meta.update(values)

    def _write_lines(self, path: Path, lines: list[str]) -> None:
        with self._locked(path):
            self._append(path, lines)

    def _append(self, path: Path, lines: list[str]) -> None:
        """Append whole lines, fsynced; the caller holds the lock."""
        data = ("\n".join(lines) + "\n").encode("utf-8")
        try:
            fd = open_nofollow(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as e:
            _refuse_link(e, path)
            raise SessionError(f"cannot write session {path}: {e.strerror}; check the workspace permissions") from e
        try:
            _cut_torn_tail(fd, path)
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        except OSError as e:
            raise SessionError(f"cannot write session {path}: {e.strerror}; free disk space or fix permissions") from e
        finally:
            os.close(fd)

    def drop(self, session: Session, chunk: Sequence[Mapping[str, Any]]) -> bool:
        """Remove `chunk`, a run of this session's messages as the caller read them (consolidated, or deliberately
        dropped), by an atomic rewrite under the lock of the file as it is now. The run is found by its content, not
        its position: messages anyone appended since are kept, and a run no longer there (another process
        consolidated it) removes nothing: False. The pointer moves with the messages; `session` is brought up to
        date either way."""
        with self._locked(session.path):
            fresh = self._read(session.channel, session.chat_id, session.path)
            at = find_run(fresh.messages, chunk)
            if at is not None and chunk:
                self._rewrite(fresh, at, len(chunk))
        _adopt(session, fresh)
        return at is not None

    def _rewrite(self, fresh: Session, at: int, n: int) -> None:
        """Rewrite `fresh`'s file without its messages [at, at + n); the caller holds the lock."""
        keep = fresh.messages[:at] + fresh.messages[at + n :]
        overlap = max(0, min(fresh.last_consolidated, at + n) - at)
        meta = {k: v for k, v in fresh.meta.items() if k not in ("last_consolidated", CONSOLIDATION_PROGRESS)}
        meta["last_consolidated"] = fresh.last_consolidated - overlap
        meta["trimmed_at"] = datetime.now().astimezone().isoformat(timespec="seconds")
        lines = [json.dumps({"_meta": meta})] + [json.dumps(m, ensure_ascii=False, default=str) for m in keep]
        try:
            replace_atomically(fresh.path, ("\n".join(lines) + "\n").encode("utf-8"), mode=0o600)
        except OSError as e:
            _refuse_link(e, fresh.path)
            raise SessionError(f"cannot rewrite session {fresh.path}: {e.strerror}; free disk space") from e
        fresh.messages, fresh.meta, fresh.last_consolidated = keep, meta, meta["last_consolidated"]

    def drop_retried(self, session: Session, message: Mapping[str, Any]) -> bool:
        """Before `message` is appended: when it repeats the session's last user message and that message was never
        answered (a failed or interrupted turn; `unanswered_retry`), drop that message and what its turn appended, so
        the retry holds the message once. Never while a consolidation holds the claim (it may be reading that run):
        then nothing is dropped (False)."""
        run = unanswered_retry(session.unconsolidated, message)
        if not run:
            return False
        claim = self.try_lock(session)
        if claim is None:
            return False
        with claim:
            return self.drop(session, run)

    def clear(self, session: Session) -> bool:
        """Start a fresh session: drop every message `session` holds (all must already be consolidated or deliberately
        dropped); messages appended since it was read stay."""
        return self.drop(session, session.messages)


def unanswered_retry(messages: Sequence[Mapping[str, Any]], message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The run from the last user message to the end, when that message is `message` again (same text, same
    sender) and nothing after it is a reply (only the tool calls and results of its turn); else []."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        role = m.get("role")
        if role == "user":
            same = m.get("content") == message.get("content") and str(m.get("sender_id")) == str(
                message.get("sender_id")
            )
            return [dict(x) for x in messages[i:]] if same else []
        if role != "tool" and not (role == "assistant" and m.get("tool_calls")):
            return []
    return []


def find_run(messages: Sequence[Mapping[str, Any]], chunk: Sequence[Mapping[str, Any]]) -> int | None:
    """Where `chunk` starts as a contiguous run of `messages` (compared by content), or None; 0 for an empty chunk."""
    want = [_canonical(m) for m in chunk]
    have = [_canonical(m) for m in messages]
    for i in range(len(have) - len(want) + 1):
        if have[i : i + len(want)] == want:
            return i
    return None


def _canonical(message: Mapping[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)


def _adopt(session: Session, fresh: Session) -> None:
    session.messages, session.meta, session.last_consolidated = fresh.messages, fresh.meta, fresh.last_consolidated


def _refuse_link(e: OSError, path: Path) -> None:
    """A session file (or its lock or temp file) that is a symlink is refused, never followed: a link could hand one
    chat another's conversation."""
    if is_symlink_error(e, path):
        raise SessionError(refusal(path, "sessions")) from e


def _last_nonempty(lines: list[bytes]) -> int:
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip():
            return i
    return -1


def _cut_torn_tail(fd: int, path: Path) -> None:
    """If the file does not end with a newline (a torn write), cut the partial line off before appending."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    pos = size
    chunk = 4096
    cut = 0
    while pos > 0:
        start = max(0, pos - chunk)
        buf = os.pread(fd, pos - start, start)
        k = buf.rfind(b"\n")
        if k >= 0:
            cut = start + k + 1
            break
        pos = start
    tail = os.pread(fd, size - cut, cut)
    try:
        # Complete record, only its newline is missing
        if isinstance(json.loads(tail), dict):
            os.write(fd, b"\n")
            return
    except (ValueError, UnicodeDecodeError):
        pass
    log.warning("session %s: cut a torn last line (%d bytes) before appending", path.name, size - cut)
    os.ftruncate(fd, cut)
