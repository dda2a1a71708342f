"""The one size limit of a memory unit, a MEMORY.md fact or a HISTORY.md entry, and the two ways it applies.

The limit is `MAX_UNIT_CHARS` characters, about 15,000 words. Every unit the benchmarks index is well under it:
LongMemEval_S's longest session holds 31,122 characters, LoCoMo's longest unit 6,394. A unit at the limit takes a
few seconds to embed once, about 300 passages. A 5 MB unit would take about 17,000 passages: minutes, with no end
in sight.

- New text given to memclaw is refused above the limit, before anything is written. That is `memory add`, the
  `remember` tool, and a consolidation's facts and history entry. `too_long` says why.
- A longer unit in a memory file, from a hand edit or a paste, stays in the file as it is. It is read, indexed,
  recalled and shown only up to the limit, with one warning naming the file and line (`cap_units`). Its id is the
  whole text's, so `memory forget` still finds it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import TYPE_CHECKING

from memclaw.markdown.formats import normalize_section

if TYPE_CHECKING:
    from memclaw.markdown.units import MemoryUnit

log = logging.getLogger(__name__)

MAX_UNIT_CHARS = 100_000
MAX_SECTION_CHARS = 200
"""The one length limit of a fact's section, its heading path as written ("Work > Projects", whitespace
normalised): `memory add --section`, the `remember` tool and a consolidation's fact ops alike (`section_too_long`)."""
STORE_ELSEWHERE = "save long text as a file in the workspace instead"
# a cut moves back to the last space within this many characters
_WORD_BACKOFF = 200

_UNIT_NAMES = {"fact": "a fact", "history": "a history entry", "archive": "an archived turn"}
"""What the size warning calls a unit of each kind."""

_warned: set[tuple[str, str, int, int]] = set()
_warned_lock = threading.Lock()


def too_long(text: str, what: str = "fact", instead: str = STORE_ELSEWHERE) -> str | None:
    """Why new memory text cannot be kept (over the limit; `instead`: what to do), or None when it fits."""
    if len(text) <= MAX_UNIT_CHARS:
        return None
    return (
        f"{what} too long ({len(text):,} characters, at most {MAX_UNIT_CHARS:,}): a memory is a fact or a short "
        f"summary; {instead}"
    )


def section_too_long(section: str | None) -> str | None:
    """Why a section cannot be used (its heading path is over MAX_SECTION_CHARS), or None when it fits."""
    path = normalize_section(section) or ""
    if len(path) <= MAX_SECTION_CHARS:
        return None
    return (
        f"section too long ({len(path):,} characters, at most {MAX_SECTION_CHARS:,}): a section is a heading path "
        "such as 'Work > Projects'; name a short heading"
    )


def cut(text: str) -> str:
    """`text` up to the limit, at a word boundary when one is near it."""
    if len(text) <= MAX_UNIT_CHARS:
        return text
    head = text[:MAX_UNIT_CHARS]
    space = max(head.rfind(" ", MAX_UNIT_CHARS - _WORD_BACKOFF), head.rfind("\n", MAX_UNIT_CHARS - _WORD_BACKOFF))
    return head[:space].rstrip() if space > 0 else head


def cap_units(units: list[MemoryUnit]) -> list[MemoryUnit]:
    """The units, each over the limit cut to it (warned about once per process, naming its file and line)."""
    if all(len(u.text) <= MAX_UNIT_CHARS for u in units):
        return units
    out = []
    for u in units:
        if len(u.text) > MAX_UNIT_CHARS:
            _warn(u)
            u = dataclasses.replace(u, text=cut(u.text))
        out.append(u)
    return out


def _warn(u: MemoryUnit) -> None:
    key = (u.scope, u.source, u.line, len(u.text))
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    what = _UNIT_NAMES.get(u.kind, "a memory")
    log.warning(
        "%s line %d: %s of %s characters is longer than a memory may be (%s); only its first %s are indexed and "
        "recalled (the file is unchanged): split it, or move the text to a file of its own",
        u.source, u.line, what, f"{len(u.text):,}", f"{MAX_UNIT_CHARS:,}", f"{MAX_UNIT_CHARS:,}",
    )  # fmt: skip
