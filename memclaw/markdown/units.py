"""The memory unit: one MEMORY fact, one HISTORY entry or one archived turn, and the scopes that keep people apart."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal
from urllib.parse import quote, unquote

from memclaw.errors import InvalidSenderError
from memclaw.util.text import ECHO_CHARS, shorten

Kind = Literal["fact", "history", "archive"]
KINDS: tuple[Kind, ...] = ("fact", "history", "archive")
"""Every kind of unit, in the order the index stores them by number (append only)."""

OWNER_SCOPE = "owner"
_PEOPLE_PREFIX = "people/"


@dataclass(frozen=True)
class MemoryUnit:
    """One retrievable memory. `id` is stable across line moves: it derives from scope, source, kind,
    text and the occurrence number of identical texts in that file."""

    id: str
    kind: Kind
    scope: str
    # path relative to the workspace, POSIX separators
    source: str
    # 1-based line of the unit's first line in `source`
    line: int
    text: str
    # history entries (and facts that carry a date)
    timestamp: datetime | None = None
    # heading path of a fact, e.g. "Work > Projects"
    section: str | None = None
    extra: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def content_hash(self) -> str:
        """What the index embeds for the unit changed when this did (an archived turn's neighbours too:
        memclaw.markdown.archive)."""
        return content_hash(self.text, self.timestamp, self.section, self.extra.get(NEAR, ""))


NEAR = "near"
"""`extra` key of an archived turn: a digest of the turns beside it in its chunk (the index embeds a short turn with
them, memclaw.index.passages.turn_context)."""


def content_hash(text: str, timestamp: datetime | None, section: str | None, near: str = "") -> str:
    h = hashlib.sha256()
    h.update(text.encode("utf-8"))
    h.update(b"\x00" + (timestamp.isoformat() if timestamp else "").encode())
    h.update(b"\x00" + (section or "").encode("utf-8"))
    if near:
        h.update(b"\x00" + near.encode())
    return h.hexdigest()[:16]


def unit_id(scope: str, source: str, kind: Kind, text: str, occurrence: int = 0) -> str:
    """Stable id: the same text in the same file keeps its id when lines move around it."""
    norm = " ".join(text.split())
    h = hashlib.sha256(f"{scope}\x00{source}\x00{kind}\x00{norm}\x00{occurrence}".encode())
    return _ID_PREFIX[kind] + h.hexdigest()[:11]


_ID_PREFIX = {"fact": "f", "history": "h", "archive": "a"}


_SENDER_RE = re.compile(r"^[^\x00-\x1f\x7f]+$")
MAX_SENDER_ID_CHARS = 200
"""The one length limit of a sender id as a scope names it (`discord:1234`, what `--sender` takes): the CLI, the
Discord gateway, the agent and the context builder all apply it through `normalize_sender_id`."""
# a folder name, on every common filesystem
_MAX_DIRNAME_BYTES = 255


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= ECHO_CHARS else shorten(raw, ECHO_CHARS))


def normalize_sender_id(sender_id: str) -> str:
    """The one reading of a sender id: surrounding whitespace is dropped (`" 1234"` is `1234`); what is left must
    be 1-MAX_SENDER_ID_CHARS printable characters whose folder name (percent-encoded) fits the filesystem, else
    InvalidSenderError showing the id as given."""
    sid = str(sender_id).strip()
    why = None
    if not sid:
        why = "it is empty"
    elif not _SENDER_RE.match(sid):
        why = "it holds control characters"
    elif len(sid) > MAX_SENDER_ID_CHARS:
        why = f"it is {len(sid):,} characters long"
    elif len(quote(sid, safe="")) > _MAX_DIRNAME_BYTES:
        why = "its folder name would be too long for the filesystem (fewer non-ASCII characters fit)"
    if why is not None:
        raise InvalidSenderError(
            f"invalid sender id {_shown(str(sender_id))}: {why}; a sender id is 1-{MAX_SENDER_ID_CHARS} printable "
            "characters, e.g. 'discord:1234'"
        )
    return sid


def sender_scope(sender_id: str | None) -> str:
    """Scope name for a sender: `owner` for None/'owner', else `people/<sender>` (see normalize_sender_id).

    Sender ids may contain any printable characters (e.g. `discord:1234`); they are percent-encoded when
    they become a directory name, so `../x` or `a/b` can never escape `memory/people/`.
    """
    if sender_id is None:
        return OWNER_SCOPE
    sid = normalize_sender_id(sender_id)
    return OWNER_SCOPE if sid == OWNER_SCOPE else _PEOPLE_PREFIX + sid


def scope_dirname(scope: str) -> str:
    """Directory (relative to the workspace) holding a scope's MEMORY.md and HISTORY.md."""
    if scope == OWNER_SCOPE:
        return "memory"
    if not scope.startswith(_PEOPLE_PREFIX):
        raise InvalidSenderError(f"unknown scope {scope!r}: expected 'owner' or 'people/<sender-id>'")
    encoded = quote(scope[len(_PEOPLE_PREFIX) :], safe="")
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    return f"memory/people/{encoded}"


def scope_from_dirname(name: str) -> str:
    """Inverse of scope_dirname for a directory name under memory/people/."""
    return _PEOPLE_PREFIX + unquote(name)
