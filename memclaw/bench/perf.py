"""`memclaw bench perf`: recall latency, ingest rate, cold CLI start and index size at 1k / 10k / 100k memories.

Memories are synthetic but realistic: a seeded template grammar of people, places, activities, foods, jobs and
dates produces MEMORY.md facts (85 %) and HISTORY.md entries (15 %) in one scope. Per size:

* ingest: write the Markdown, then one `MemoryService.sync()` (embedding + Chroma + BM25) -> memories/s; the
  model load, its first run and the chromadb import are one-time process costs paid before any size is timed;
* warm hybrid recall: p50/p95 over a few hundred queries after a warm-up, query embedding included;
* add one fact to the full store (`add_fact`: Markdown + incremental index update), median of a few;
* cold `memclaw recall` in a fresh process (subprocess wall time, median of 3);
* index size on disk (Chroma + BM25 + unit table);
* with a Chroma server URL (`--chroma-url`): the same index copied to the server (`memory migrate`, no
  re-embedding) and warm/cold recall measured again over HTTP, beside the embedded figures.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memclaw.bench.estimate import SECONDS_PER_MEMORY, SECONDS_PER_SIZE, Estimate
from memclaw.errors import UsageError

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


def _fill(rng: random.Random, template: str) -> str:
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
        t = _fill(rng, rng.choice(FACT_TEMPLATES))
        if t in seen:
            t = f"{t} ({len(facts)})"
        seen.add(t)
        facts.append(t)
    start = datetime(2020, 1, 1, 9, 0)
    hist = [
        (start + timedelta(hours=6 * i + rng.randint(0, 5)), _fill(rng, rng.choice(HISTORY_TEMPLATES)))
        for i in range(n_hist)
    ]
    return facts, hist


def synthetic_queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [_fill(rng, rng.choice(QUERY_TEMPLATES)) for _ in range(n)]


def write_workspace(root: Path, facts: list[str], hist: list[tuple[datetime, str]]) -> None:
    mem = root / "memory"
    mem.mkdir(parents=True, exist_ok=True)
    lines = ["# People and facts", ""] + [f"- {f}" for f in facts]
    (mem / "MEMORY.md").write_text("\n".join(lines) + "\n", "utf-8")
    (mem / "HISTORY.md").write_text("\n\n".join(f"[{ts:%Y-%m-%d %H:%M}] {t}" for ts, t in hist) + "\n", "utf-8")


def dir_size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(dirpath, f))
    return total


def parse_sizes(value: str) -> list[int]:
    try:
        sizes = [int(s.replace("_", "").replace("k", "000")) for s in value.split(",") if s.strip()]
    except ValueError:
        raise UsageError(
            f"--sizes must be a comma-separated list of integers, e.g. 1000,10000 (got {value!r})"
        ) from None
    if not sizes or any(s < 10 for s in sizes):
        raise UsageError(f"--sizes needs sizes of at least 10 memories (got {value!r})")
    return sizes


def cold_recall(ws: Path, home: Path, query: str, runs: int = 3, *, chroma_url: str | None = None) -> dict[str, Any]:
    """Wall time of `memclaw recall` in a fresh Python process (median of `runs`)."""
    env = {**os.environ, "MEMCLAW_HOME": str(home)}
    if chroma_url:
        env["MEMCLAW_MEMORY__CHROMA_URL"] = chroma_url
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "memclaw.cli.main", "recall", query, "--workspace", str(ws), "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            return {"error": lines[-1] if lines else f"exit code {proc.returncode}"}
    return {"median_s": round(statistics.median(times), 3), "runs_s": [round(t, 3) for t in times]}


def warm_latencies(svc: Any, queries: list[str]) -> tuple[list[float], list[float]]:
    """(recall ms, query-embedding ms) per query, after a warm-up of 10 queries."""
    for q in queries[:10]:  # warm-up (first Chroma query after open, caches)
        svc.recall(q)
    lat, embed_ms = [], []
    for q in queries:
        t = time.perf_counter()
        res = svc.recall_detailed(q)
        lat.append((time.perf_counter() - t) * 1000)
        embed_ms.append(res.timings_ms.get("embed", 0.0))
    return lat, embed_ms


def server_recall(
    root: Path, cfg: Any, url: str, embedder: Any, queries: list[str], home: Path, cold_runs: int
) -> dict[str, Any]:
    """Copy the workspace's embedded index to the Chroma server at `url` and measure recall over HTTP."""
    from memclaw.bench.metrics import percentile
    from memclaw.service.facade import MemoryService
    from memclaw.service.migrate import migrate_to_server
    from memclaw.workspace import Workspace

    ws = Workspace(root)
    t0 = time.perf_counter()
    copied = migrate_to_server(ws, cfg, url)
    migrate_s = time.perf_counter() - t0
    server_cfg = cfg.model_copy(update={"memory": cfg.memory.model_copy(update={"chroma_url": url})})
    svc = MemoryService(ws, server_cfg, embedder=embedder)
    try:
        lat, _ = warm_latencies(svc, queries)
        cold = cold_recall(root, home, queries[0], runs=cold_runs, chroma_url=url)
    finally:
        for scope in ws.scopes():
            svc.store.drop(scope)
        svc.close()
    return {
        "url": url,
        "copied": copied,
        "migrate_seconds": round(migrate_s, 2),
        "recall_p50_ms": round(percentile(lat, 50), 2),
        "recall_p95_ms": round(percentile(lat, 95), 2),
        "cold_cli_recall": cold,
    }


def run_size(
    n: int,
    *,
    embedder: Any,
    n_queries: int = 300,
    cold_runs: int = 3,
    progress: Any = None,
    chroma_url: str | None = None,
) -> dict[str, Any]:
    """Every perf measurement at one size, in a temp workspace removed afterwards."""
    from memclaw.bench.metrics import percentile
    from memclaw.bench.runner import bench_config
    from memclaw.service.facade import MemoryService
    from memclaw.store.clients import release_embedded_below
    from memclaw.workspace import Workspace

    facts, hist = synthetic_memories(n)
    queries = synthetic_queries(n_queries)
    tmp = Path(tempfile.mkdtemp(prefix=f"memclaw-perf-{n}-"))
    try:
        root = tmp / "ws"
        write_workspace(root, facts, hist)
        cfg = bench_config()
        svc = MemoryService(Workspace(root), cfg, embedder=embedder)
        t0 = time.perf_counter()
        svc.sync(progress=progress)
        ingest_s = time.perf_counter() - t0
        lat, embed_ms = warm_latencies(svc, queries)
        add_ms = []
        for i in range(5):
            t = time.perf_counter()
            svc.add_fact(f"Perf probe {i}: {_fill(random.Random(i), FACT_TEMPLATES[0])}")
            add_ms.append((time.perf_counter() - t) * 1000)
        after_add = svc.recall_detailed(queries[0])
        svc.close()
        index_dir = Path(cfg.memory.index_dir or Workspace(root).index_dir)
        size = dir_size(index_dir)
        home = tmp / "home"
        home.mkdir()
        cold = cold_recall(root, home, queries[0], runs=cold_runs)
        server = server_recall(root, cfg, chroma_url, embedder, queries, home, cold_runs) if chroma_url else None
        return {
            "memories": n,
            "facts": len(facts),
            "history": len(hist),
            "ingest_seconds": round(ingest_s, 2),
            "ingest_per_s": round(n / ingest_s, 1) if ingest_s > 0 else None,
            "recall_queries": len(lat),
            "recall_p50_ms": round(percentile(lat, 50), 2),
            "recall_p95_ms": round(percentile(lat, 95), 2),
            "query_embed_p50_ms": round(percentile(embed_ms, 50), 2),
            "add_fact_median_ms": round(statistics.median(add_ms), 1),
            "recall_after_add_ms": round(after_add.timings_ms.get("total", 0.0), 2),
            "cold_cli_recall": cold,
            "index_bytes": size,
            "index_mib": round(size / 2**20, 1),
            **({"server": server} if server else {}),
        }
    finally:
        release_embedded_below(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def preload(embedder: Any) -> None:
    """Pay one-time process costs before timing, as for the model load: the model's first run (session
    warm-up) and importing chromadb (~1 s, which was charged to the first size's ingest alone)."""
    from memclaw.store.clients import import_client

    import_client()
    warm = getattr(embedder, "warm_up", None)
    if callable(warm):
        warm()


def run_perf(
    sizes: list[int],
    *,
    progress: bool = True,
    n_queries: int = 300,
    cold_runs: int = 3,
    chroma_url: str | None = None,
) -> dict[str, Any]:
    from memclaw.bench.runner import Progress, bench_config, load_embedder_once, machine_info
    from memclaw.bench.systems import SYSTEMS

    cfg = bench_config()
    embedder = load_embedder_once(cfg, [SYSTEMS["hybrid"]])
    preload(embedder)
    results = []
    per_memory_s, fixed_s = SECONDS_PER_MEMORY, SECONDS_PER_SIZE
    basis = "on 2 cores; then as measured on each size"
    with Progress(progress) as prog:
        for n in sizes:
            estimate = Estimate(n, per_memory_s, "memory", fixed_s=fixed_s, basis=basis)
            prog.log(f"perf: {n} memories: {estimate.describe()}")
            advance = prog.task(f"ingest {n}", n)
            t = time.perf_counter()
            results.append(
                run_size(
                    n,
                    embedder=embedder,
                    n_queries=n_queries,
                    cold_runs=cold_runs,
                    progress=advance,
                    chroma_url=chroma_url,
                )
            )
            # the next size's estimate: this machine's ingest rate and fixed cost, as measured on this size
            ingest_s = results[-1]["ingest_seconds"]
            per_memory_s = ingest_s / n if n else per_memory_s
            fixed_s = max(0.0, time.perf_counter() - t - ingest_s)
            basis = f"as measured on {n} memories"
    return {
        "benchmark": "perf",
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine_info(),
        "embeddings_model": cfg.embeddings.model,
        "embedder": type(embedder).__name__,
        "recall_config": json.loads(cfg.recall.model_dump_json()),
        "sizes": results,
    }


def perf_markdown(res: dict[str, Any]) -> str:
    from memclaw.bench.runner import md_table

    m = res["machine"]
    rows = []
    for r in res["sizes"]:
        cold = r["cold_cli_recall"]
        rows.append(
            [r["memories"], r["recall_p50_ms"], r["recall_p95_ms"], r["query_embed_p50_ms"], r["ingest_per_s"],
             r["add_fact_median_ms"], cold.get("median_s", cold.get("error")), r["index_mib"]]
        )  # fmt: skip
    lines = [
        "# memclaw performance benchmark",
        "",
        f"- date: {res['date']}",
        f"- machine: {m['nproc']} cores, {m['cpu']}, {m['ram_gib']} GiB RAM, {m['os']}, Python {m['python']}",
        f"- embeddings: {res['embeddings_model']} ({res['embedder']})",
        f"- recall config: `{json.dumps(res['recall_config'])}`",
        "- memories: synthetic (seeded template grammar), 85 % MEMORY.md facts, 15 % HISTORY.md entries, one scope",
        "",
        *md_table(
            [
                "memories",
                "warm recall p50 ms",
                "p95 ms",
                "query embed p50 ms",
                "ingest /s",
                "add_fact ms",
                "cold CLI recall s",
                "index MiB",
            ],
            rows,
        ),  # fmt: skip
        "",
        "Targets (issue 2): warm hybrid recall p95 <= 30 ms at 10k and <= 50 ms at 100k; ingest >= 200/s; "
        "cold CLI recall <= 3 s.",
    ]
    servers = [r for r in res["sizes"] if "server" in r]
    if servers:
        srows = []
        for r in servers:
            sv = r["server"]
            cold = sv["cold_cli_recall"]
            srows.append(
                [r["memories"], r["recall_p50_ms"], r["recall_p95_ms"], sv["recall_p50_ms"], sv["recall_p95_ms"],
                 cold.get("median_s", cold.get("error")), sv["migrate_seconds"]]
            )  # fmt: skip
        lines += [
            "",
            f"## Chroma server mode ({servers[0]['server']['url']}, `chroma run` on loopback)",
            "",
            "The same index copied to the server with `memclaw memory migrate` (no re-embedding), then recalled over "
            "HTTP with `memory.chroma_url` set; BM25 stays local.",
            "",
            *md_table(
                [
                    "memories",
                    "embedded p50 ms",
                    "embedded p95 ms",
                    "server p50 ms",
                    "server p95 ms",
                    "cold CLI recall s (server)",
                    "migrate s",
                ],
                srows,
            ),  # fmt: skip
        ]
    return "\n".join(lines) + "\n"


def write_perf_results(res: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "perf.json", out_dir / "perf.md"]
    paths[0].write_text(json.dumps(res, indent=2) + "\n", "utf-8")
    paths[1].write_text(perf_markdown(res), "utf-8")
    return paths
