"""Synthetic but realistic memories for `bench perf`: a seeded template grammar of people, places, activities, foods,
jobs and dates that produces MEMORY.md facts (85 %) and HISTORY.md entries (15 %) in one scope, and queries."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path

PEOPLE = [
    "Anna",
    "Lena",
    "Tom",
    "Marco",
    "Priya",
    "Kenji",
    "Sofia",
    "Omar",
    "Chloe",
    "Lucas",
    "Mei",
    "Jonas",
    "Aisha",
    "Diego",
    "Hannah",
    "Ravi",
    "Nora",
    "Felix",
    "Yara",
    "Elias",
    "Ingrid",
    "Mateo",
    "Zoe",
    "Hugo",
    "Leila",
    "Samir",
    "Clara",
    "Ivan",
    "Emma",
    "Noah",
    "Freya",
    "Tariq",
    "Julia",
    "Pablo",
    "Amara",
    "Oskar",
    "Lin",
    "Rosa",
]


RELATIONS = [
    "sister",
    "brother",
    "cousin",
    "colleague",
    "neighbour",
    "friend",
    "manager",
    "aunt",
    "uncle",
    "flatmate",
    "mentor",
    "partner",
]


CITIES = [
    "Lyon",
    "Porto",
    "Berlin",
    "Kyoto",
    "Oslo",
    "Lisbon",
    "Madrid",
    "Vienna",
    "Prague",
    "Dublin",
    "Seville",
    "Nantes",
    "Bologna",
    "Krakow",
    "Tallinn",
    "Ghent",
    "Bergen",
    "Zurich",
    "Munich",
    "Utrecht",
    "Valencia",
    "Turin",
    "Gdansk",
    "Leeds",
    "Bristol",
    "Lille",
    "Basel",
    "Graz",
]


PLACES = [
    "the climbing gym",
    "the farmers market",
    "the public library",
    "the old harbour",
    "the botanical garden",
    "the jazz club",
    "the community pool",
    "the bakery on Main Street",
    "the hospital",
    "the train station",
    "the ramen place",
    "the museum of modern art",
    "the hiking trail above the lake",
    "the coworking space",
    "the dentist",
    "the yoga studio",
    "the chess club",
]


ACTIVITIES = [
    "went hiking",
    "played chess",
    "went bouldering",
    "baked sourdough bread",
    "watched a documentary about whales",
    "practised the cello",
    "repaired the bike",
    "planted tomatoes and basil",
    "ran ten kilometres",
    "visited an exhibition",
    "cooked a Thai curry",
    "went kayaking",
    "painted a watercolour of the river",
    "played board games",
    "went to a concert",
    "fixed the leaking kitchen tap",
    "learnt Portuguese verbs",
    "built a bookshelf",
    "went birdwatching",
    "tried pottery",
]


FOODS = [
    "sushi",
    "lentil soup",
    "tiramisu",
    "falafel",
    "ramen",
    "paella",
    "dumplings",
    "goulash",
    "pho",
    "shakshuka",
    "risotto",
    "tacos",
]


JOBS = [
    "nurse",
    "battery engineer",
    "primary school teacher",
    "data analyst",
    "carpenter",
    "architect",
    "marine biologist",
    "pharmacist",
    "translator",
    "bus driver",
    "software developer",
    "physiotherapist",
    "journalist",
    "chef",
    "accountant",
]


COMPANIES = [
    "Solaris Energy",
    "Northwind",
    "Bluefin Labs",
    "Atlas Freight",
    "Greenleaf",
    "Copperline",
    "Helix Health",
    "Orbit Media",
]


HOBBIES = [
    "photography",
    "gardening",
    "bird watching",
    "chess",
    "salsa dancing",
    "rock climbing",
    "knitting",
    "astronomy",
    "sailing",
]


ALLERGIES = ["penicillin", "peanuts", "cats", "pollen", "shellfish", "dust mites", "lactose"]


FACT_TEMPLATES = (
    "My {rel} {p} lives in {city} and works as a {job}",
    "{p} works at {company} as a {job}",
    "{p} is allergic to {allergy}",
    "{p}'s favourite food is {food}",
    "{p} took up {hobby} in {year}",
    "I met {p} at {place} in {city}",
    "{p} moved from {city} to {city2} in {month} {year}",
    "{p}'s birthday is on {day} {month}",
    "{p} and I {act} near {city} every other weekend",
    "I prefer {food} over {food2} when eating out with {p}",
    "{p} recommended reading about {hobby} before the trip to {city}",
    "My {rel} {p} is learning {hobby} and wants to visit {city}",
)


HISTORY_TEMPLATES = (
    "Talked with {p} about the trip to {city}: {act} on the first day, then dinner with {food} at {place}.",
    "{p} called about the new job at {company}; they start as a {job} in {month} and may move to {city}.",
    "Planned the weekend with {p}: {act}, then a visit to {place}. {p2} might join if the weather holds.",
    "Helped {p} prepare for the interview at {company}; we practised questions about being a {job}.",
    "Discussed {p}'s allergy to {allergy} after the dinner at {place}; next time we cook {food} at home.",
)


QUERY_TEMPLATES = (
    "Where does {p} live?",
    "What does {p} do for work?",
    "What is {p} allergic to?",
    "When did I last go {actshort} with {p}?",
    "Who works at {company}?",
    "What did we plan for the trip to {city}?",
    "What food does {p} like?",
    "Which hobby did {p} take up?",
)


MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def fill_template(rng: random.Random, template: str) -> str:
    """`template` filled with people, places, foods, jobs and dates drawn from `rng`."""
    p, p2 = rng.sample(PEOPLE, 2)
    city, city2 = rng.sample(CITIES, 2)
    food, food2 = rng.sample(FOODS, 2)
    act = rng.choice(ACTIVITIES)
    return template.format(
        p=p,
        p2=p2,
        rel=rng.choice(RELATIONS),
        city=city,
        city2=city2,
        job=rng.choice(JOBS),
        company=rng.choice(COMPANIES),
        allergy=rng.choice(ALLERGIES),
        food=food,
        food2=food2,
        hobby=rng.choice(HOBBIES),
        year=rng.randint(2012, 2025),
        month=rng.choice(MONTHS),
        day=rng.randint(1, 28),
        place=rng.choice(PLACES),
        act=act,
        actshort=act.split()[-1],
    )


def synthetic_memories(n: int, seed: int = 7) -> tuple[list[str], list[tuple[datetime, str]]]:
    """n memories: (facts, dated history entries), ~85 % facts, deterministic for a seed. Texts are unique."""
    rng = random.Random(seed)
    n_hist = n * 15 // 100
    facts: list[str] = []
    seen: set[str] = set()
    while len(facts) < n - n_hist:
        t = fill_template(rng, rng.choice(FACT_TEMPLATES))
        if t in seen:
            t = f"{t} ({len(facts)})"
        seen.add(t)
        facts.append(t)
    start = datetime(2020, 1, 1, 9, 0)
    hist = [
        (start + timedelta(hours=6 * i + rng.randint(0, 5)), fill_template(rng, rng.choice(HISTORY_TEMPLATES)))
        for i in range(n_hist)
    ]
    return facts, hist


def synthetic_queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [fill_template(rng, rng.choice(QUERY_TEMPLATES)) for _ in range(n)]


def write_workspace(root: Path, facts: list[str], hist: list[tuple[datetime, str]]) -> None:
    mem = root / "memory"
    mem.mkdir(parents=True, exist_ok=True)
    lines = ["# People and facts", ""] + [f"- {f}" for f in facts]
    (mem / "MEMORY.md").write_text("\n".join(lines) + "\n", "utf-8")
    (mem / "HISTORY.md").write_text("\n\n".join(f"[{ts:%Y-%m-%d %H:%M}] {t}" for ts, t in hist) + "\n", "utf-8")
