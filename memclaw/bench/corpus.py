"""A benchmark corpus: one converted workspace, its units as memclaw parses them, and what each unit covers.

The coverage side file records units as the converter wrote them; here they are matched to the units memclaw's own
parser reads from the Markdown, so scoring uses the same unit ids recall returns. A fact is matched by its text (as
the writer wrote it), a history entry by its consolidation id (else its text), an archived turn by its
consolidation id and position in the chunk.

Two covers: `cover` (the count view: a ranked unit counts for what it covers; an archived turn for its session, the
official session-level protocol) and `credit` (the budgeted view: what a served unit earns; an archived turn only
its own turn, LoCoMo's dia_id or a LongMemEval `has_answer` turn's session). For facts and summaries they are equal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from memclaw.markdown.units import OWNER_SCOPE, MemoryUnit

_STAMP = re.compile(r"^\[\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2})?(?: #c[0-9a-f]+)?\]\s*")
_DATE_SUFFIX = re.compile(r"\s*\(\d{4}-\d{2}-\d{2}(?: #c[0-9a-f]+)?\)\s*$")


def norm(text: str) -> str:
    return " ".join(text.split()).lower()


def _keys(kind: str, text: str) -> list[str]:
    t = norm(text)
    keys = [f"{kind}|{t}", f"{kind}|{norm(_STAMP.sub('', t))}", f"{kind}|{norm(_DATE_SUFFIX.sub('', t))}"]
    return list(dict.fromkeys(keys))


def _id_key(kind: str, cid: object, turn: object = None) -> str:
    return f"{kind}|#{cid}" + ("" if turn is None else f"|{turn}")


@dataclass
class BenchCorpus:
    """Units of one workspace (owner scope) with their coverage. `order` is file order (MEMORY.md, HISTORY.md,
    archive day files)."""

    root: Path
    units: list[MemoryUnit]
    cover: dict[str, frozenset[str]]
    # Unit ids the side file did not describe
    unmatched: list[str] = field(default_factory=list)
    # The budgeted view's cover (default: cover)
    credit: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def by_id(self) -> dict[str, MemoryUnit]:
        return {u.id: u for u in self.units}


def parse_units(root: Path, scope: str = OWNER_SCOPE) -> list[MemoryUnit]:
    """The units memclaw's parser reads from a workspace scope, MEMORY.md, HISTORY.md, then the archive day files
    (oldest first), each file in line order."""
    from memclaw.markdown.files import read_units
    from memclaw.workspace import Workspace

    ws = Workspace(Path(root))
    files = [(ws.memory_file(scope), "fact"), (ws.history_file(scope), "history")]
    files += [(p, "archive") for p in ws.archive_files(scope)]
    units: list[MemoryUnit] = []
    for path, kind in files:
        if path.exists():
            found = read_units(path, scope=scope, kind=kind, source=ws.source_of(path))
            units.extend(sorted(found, key=lambda u: u.line))
    return units


def map_coverage(
    units: Iterable[MemoryUnit], entries: Iterable[dict]
) -> tuple[dict[str, frozenset[str]], list[str], dict[str, frozenset[str]]]:
    """Match parsed units to side-file entries ({kind, text, date, covers} or {kind, cid, [turn], covers,
    [credit]}) -> (unit id -> covered items, ids of units no entry describes, unit id -> credited items). Units
    with identical text share the union of their entries' coverage."""
    lookup: dict[str, set[str]] = {}
    credit_of: dict[str, set[str]] = {}
    for e in entries:
        if e.get("cid"):
            key = _id_key(e["kind"], e["cid"], e.get("turn"))
            lookup.setdefault(key, set()).update(e["covers"])
            credit_of.setdefault(key, set()).update(e.get("credit", e["covers"]))
            continue
        variants = [e["text"]]
        if e.get("date"):
            variants += [f"{e['text']} ({e['date']})", f"[{e['date']}] {e['text']}"]
        for v in variants:
            for key in _keys(e["kind"], v):
                lookup.setdefault(key, set()).update(e["covers"])
    cover: dict[str, frozenset[str]] = {}
    credit: dict[str, frozenset[str]] = {}
    unmatched: list[str] = []
    for u in units:
        cid = u.extra.get("cid")
        keys = [_id_key(u.kind, cid, u.extra.get("turn"))] if cid else []
        for key in [*keys, *_keys(u.kind, u.text)]:
            if key in lookup:
                cover[u.id] = frozenset(lookup[key])
                credit[u.id] = frozenset(credit_of.get(key, lookup[key]))
                break
        else:
            cover[u.id] = credit[u.id] = frozenset()
            unmatched.append(u.id)
    return cover, unmatched, credit


def load_corpus(root: Path, side_file: Path) -> BenchCorpus:
    units = parse_units(root)
    entries = json.loads(Path(side_file).read_text("utf-8"))["units"]
    cover, unmatched, credit = map_coverage(units, entries)
    return BenchCorpus(Path(root), units, cover, unmatched, credit)
