"""Synthetic archive days for the archive's performance benchmark (`benchmarks/bench_archive_perf.py`): seeded
conversations between the owner and the assistant (the template grammar of memclaw.bench.synthetic), one chunk per
consolidation, written as memclaw's archive writes them (memclaw.markdown.archive)."""

from __future__ import annotations

import hashlib
import random
from datetime import date, datetime, time, timedelta
from pathlib import Path

from memclaw.bench.run_config import BENCH_AGENT
from memclaw.bench.synthetic import fill_template
from memclaw.markdown.archive import ArchiveChunk, ArchiveDay, ArchivedTurn, consolidation_id, render_day

OWNER_TURNS = (
    "Did {p} say when they move to {city}?",
    "I {act} with {p} yesterday, near {place}.",
    "Remind me what {p} is allergic to, we are cooking {food} tonight.",
    "{p} wants to try the {food} at {place} on {day} {month}.",
    "Can you note that my {rel} {p} starts as a {job} at {company}?",
    "What was the name of the place in {city} where we had {food}?",
    "{p} took up {hobby} and asked whether I want to join in {month}.",
    "I think {p2} recommended {place}, or was it {p}?",
    "ok",
    "Thanks, that helps.",
)
ASSISTANT_TURNS = (
    "Noted: {p} moves to {city} in {month} {year}.",
    "{p} is allergic to {allergy}; {food} should be fine if you skip it.",
    "You mentioned {place} in {city}: you had {food} there with {p}.",
    "I added {place} on {day} {month} to your notes for you and {p}.",
    "{p} works at {company} as a {job}, since {year}.",
    "Last time {p} talked about {hobby}; it could be a gift idea.",
    "Sure. Anything else for the trip to {city}?",
)


def synthetic_archive(
    n_turns: int, *, turns_per_chunk: int = 20, chunks_per_day: int = 5, first: date = date(2022, 1, 1), seed: int = 3
) -> dict[date, ArchiveDay]:
    """`n_turns` turns of conversation (owner and assistant taking turns) in chunks of `turns_per_chunk`,
    `chunks_per_day` chunks a day from `first` on; deterministic for a seed."""
    rng = random.Random(seed)
    days: dict[date, ArchiveDay] = {}
    made = 0
    n_chunk = 0
    while made < n_turns:
        day = first + timedelta(days=n_chunk // chunks_per_day)
        start = datetime.combine(day, time(8 + 2 * (n_chunk % chunks_per_day), 0))
        turns = []
        for i in range(min(turns_per_chunk, n_turns - made)):
            at = (start + timedelta(minutes=i)).time()
            if i % 2 == 0:
                turns.append(ArchivedTurn("Maya", fill_template(rng, rng.choice(OWNER_TURNS)), at))
            else:
                turns.append(ArchivedTurn(BENCH_AGENT, fill_template(rng, rng.choice(ASSISTANT_TURNS)), at))
        cid = consolidation_id(hashlib.sha1(f"{seed}:{n_chunk}".encode()).hexdigest())
        days.setdefault(day, ArchiveDay(day)).chunks.append(ArchiveChunk(cid, start, tuple(turns)))
        made += len(turns)
        n_chunk += 1
    return days


def write_archive(memory_dir: Path, days: dict[date, ArchiveDay]) -> int:
    """The day files under `memory_dir/archive/`; returns their total size in bytes."""
    d = Path(memory_dir) / "archive"
    d.mkdir(parents=True, exist_ok=True)
    total = 0
    for day, doc in days.items():
        data = render_day(doc).encode("utf-8")
        (d / f"{day.isoformat()}.md").write_bytes(data)
        total += len(data)
    return total
