"""A MEMORY.md of many distinct facts, written at once, for the tests and the benchmark of a bounded consolidation.

The facts read like a year of consolidation: one short sentence each with its learned-mark, about 27 tokens a
line as the consolidation prompt lists it. No filler fact names Lisbon, Porto or penicillin: the tests' own facts
do.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

PEOPLE = [
    "Aiko", "Bruno", "Chiara", "Dmitri", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kaito", "Lena",
    "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sami", "Tereza", "Umar", "Vera", "Wen", "Ximena",
    "Yusuf", "Zofia", "Anton", "Bea", "Cyril", "Dalia", "Emil", "Freya", "Goran", "Hana", "Ivo", "Jana",
]  # fmt: skip
RELATIONS = ["Colleague", "Neighbour", "Cousin", "Friend", "Former classmate", "Climbing partner", "Landlord"]
DOINGS = [
    "collects vintage {0} maps", "runs a {0} bakery on weekends", "is learning to play the {0} banjo",
    "keeps {0} bees on a rooftop", "restores {0} motorcycles", "teaches {0} pottery on Thursdays",
    "brews {0} cider every autumn", "plans a cycling trip through {0}", "writes a newsletter about {0} trains",
    "volunteers at the {0} botanical garden", "grows {0} chillies on a balcony", "photographs {0} lighthouses",
]  # fmt: skip
PLACES = [
    "Oslo", "Tallinn", "Krakow", "Ghent", "Utrecht", "Bergen", "Graz", "Ljubljana", "Tartu", "Aarhus", "Zagreb",
    "Gdansk", "Brno", "Turku", "Malmo", "Leuven", "Bologna", "Valencia", "Seville", "Nantes", "Dresden", "Basel",
]  # fmt: skip


def filler_fact(i: int) -> str:
    """The i-th filler fact: every i below 36 * 7 * 12 * 22 gives another sentence."""
    person = PEOPLE[i % len(PEOPLE)]
    i //= len(PEOPLE)
    relation = RELATIONS[i % len(RELATIONS)]
    i //= len(RELATIONS)
    doing = DOINGS[i % len(DOINGS)]
    i //= len(DOINGS)
    place = PLACES[i % len(PLACES)]
    return f"{relation} {person} {doing.format(place)}"


def many_facts_md(n: int, own: dict[str, list[str]], learned: date = date(2026, 1, 5)) -> str:
    """MEMORY.md text: the `own` facts by section, then `n` filler facts under People, each with a learned-mark."""
    lines: list[str] = []
    for section, facts in own.items():
        lines += [f"# {section}", *(f"- {f} ({learned.isoformat()})" for f in facts), ""]
    lines.append("# People")
    for i in range(n):
        day = learned - timedelta(days=i % 365)
        lines.append(f"- {filler_fact(i)} ({day.isoformat()} #c{i:08x})")
    return "\n".join(lines) + "\n"


def write_memory(root: Path, n: int, own: dict[str, list[str]]) -> Path:
    """A workspace folder at `root` whose MEMORY.md holds `own` and `n` filler facts."""
    (root / "memory").mkdir(parents=True, exist_ok=True)
    path = root / "memory" / "MEMORY.md"
    path.write_text(many_facts_md(n, own), "utf-8")
    return path
