"""A benchmark corpus: one converted workspace, its units as memclaw parses them, and what each unit covers.

The coverage side file records units by kind and text as the converter wrote them; here they are matched to
the units memclaw's own parser reads from the Markdown, so scoring uses the same unit ids recall returns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from memclaw.markdown.units import OWNER_SCOPE, MemoryUnit

_STAMP = re.compile(r"^\[\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2})?\]\s*")
_DATE_SUFFIX = re.compile(r"\s*\(\d{4}-\d{2}-\d{2}\)\s*$")


def norm(text: str) -> str:
    return " ".join(text.split()).lower()


def _keys(kind: str, text: str) -> list[str]:
    t = norm(text)
    keys = [f"{kind}|{t}", f"{kind}|{norm(_STAMP.sub('', t))}", f"{kind}|{norm(_DATE_SUFFIX.sub('', t))}"]
    return list(dict.fromkeys(keys))


@dataclass
class BenchCorpus:
    """Units of one workspace (owner scope) with their coverage. `order` is file order (MEMORY.md, HISTORY.md)."""

    root: Path
    units: list[MemoryUnit]
    cover: dict[str, frozenset[str]]
    unmatched: list[str] = field(default_factory=list)  # unit ids the side file did not describe

    @property
    def by_id(self) -> dict[str, MemoryUnit]:
        return {u.id: u for u in self.units}


def parse_units(root: Path, scope: str = OWNER_SCOPE) -> list[MemoryUnit]:
    """The units memclaw's parser reads from a workspace scope, MEMORY.md first, each file in line order."""
    from memclaw.markdown.files import read_units
    from memclaw.workspace import Workspace

    ws = Workspace(Path(root))
    units: list[MemoryUnit] = []
    for path, kind in ((ws.memory_file(scope), "fact"), (ws.history_file(scope), "history")):
        if path.exists():
            found = read_units(path, scope=scope, kind=kind, source=ws.source_of(path))
            units.extend(sorted(found, key=lambda u: u.line))
    return units


def map_coverage(units: Iterable[MemoryUnit], entries: Iterable[dict]) -> tuple[dict[str, frozenset[str]], list[str]]:
    """Match parsed units to side-file entries ({kind, text, date, covers}) -> (unit id -> covered items,
    ids of units no entry describes). Units with identical text share the union of their entries' coverage."""
    lookup: dict[str, set[str]] = {}
    for e in entries:
        variants = [e["text"]]
        if e.get("date"):
            variants += [f"{e['text']} ({e['date']})", f"[{e['date']}] {e['text']}"]
        for v in variants:
            for key in _keys(e["kind"], v):
                lookup.setdefault(key, set()).update(e["covers"])
    cover: dict[str, frozenset[str]] = {}
    unmatched: list[str] = []
    for u in units:
        for key in _keys(u.kind, u.text):
            if key in lookup:
                cover[u.id] = frozenset(lookup[key])
                break
        else:
            cover[u.id] = frozenset()
            unmatched.append(u.id)
    return cover, unmatched


def load_corpus(root: Path, side_file: Path) -> BenchCorpus:
    units = parse_units(root)
    entries = json.loads(Path(side_file).read_text("utf-8"))["units"]
    cover, unmatched = map_coverage(units, entries)
    return BenchCorpus(Path(root), units, cover, unmatched)
