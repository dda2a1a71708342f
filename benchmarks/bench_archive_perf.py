"""The archive's cost (issue 22): warm recall at N memories plus an archive of M archived turns against the same N
memories without the archive, measured A/B in one run; what the archive costs on disk per 1,000 turns (index and
Markdown); how fast it is indexed, and what one more conversation costs to index once M turns are there.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_archive_perf.py --units 10000 --turns 100000 \\
        --cache /tmp/docs.npz --workdir /tmp/archive-perf

Both stores are built in `--workdir` (kept, and reused by a later run with `--reuse`): A = `bench perf`'s synthetic
memories (memclaw.bench.synthetic), B = the same plus synthetic archive days (memclaw.bench.synthetic_archive: 20
turns per conversation, five conversations a day). Document vectors come from `--cache` when it holds them (the
model's own, memclaw.bench.embedcache); queries are always embedded live. Both services run in this process,
warmed up, and each query is timed on A and on B back to back, the order alternating, so that any drift of the
machine falls on both alike; B is timed a second time without a short turn's BM25 score with the turns beside it
(`recall.bm25_context_weight` 0, same store), so the cost of that score is measured in the same rounds. The
machine's load is recorded before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any


def build(root: Path, n_units: int, n_turns: int, embedder: Any, reuse: bool) -> tuple[Any, dict[str, Any]]:
    """A synced MemoryService over the workspace at `root` (facts and history, then the archive, each synced and
    timed), and what it took."""
    from memclaw.bench.run_config import bench_config
    from memclaw.bench.synthetic import synthetic_memories, write_workspace
    from memclaw.bench.synthetic_archive import synthetic_archive, write_archive
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    info: dict[str, Any] = {"units": n_units, "turns": n_turns}
    fresh = not (reuse and (root / "memory").is_dir())
    if fresh:
        shutil.rmtree(root, ignore_errors=True)
        write_workspace(root, *synthetic_memories(n_units))
    svc = MemoryService(Workspace(root), bench_config(), embedder=embedder)
    t0 = time.perf_counter()
    svc.sync()
    info["sync_units_s"] = round(time.perf_counter() - t0, 1)
    if n_turns and fresh:
        info["archive_markdown_bytes"] = write_archive(root / "memory", synthetic_archive(n_turns))
        t0 = time.perf_counter()
        svc.sync()
        info["sync_archive_s"] = round(time.perf_counter() - t0, 1)
    if n_turns:
        info["archive_markdown_bytes"] = sum(p.stat().st_size for p in (root / "memory" / "archive").iterdir())
    return svc, info


def cold_ab(workdir: Path, query: str, runs: int) -> dict[str, float]:
    """Median wall time of `memclaw recall` in a fresh process on each store, the two alternating."""
    import tempfile

    from memclaw.bench.perf_measure import cold_recall

    home = Path(tempfile.mkdtemp(prefix="memclaw-archive-perf-home-"))
    times: dict[str, list[float]] = {"plain": [], "archive": []}
    try:
        for _ in range(runs):
            for name in times:
                got = cold_recall(workdir / name, home, query, runs=1)
                times[name].append(got.get("median_s", float("nan")))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return {n: round(statistics.median(t), 2) for n, t in times.items()}


def append_cost(svc: Any) -> dict[str, float]:
    """One more conversation (20 turns) appended to the last day's file, then to a new day's file: each synced
    (which builds memclaw.index.bm25_context's TurnContexts of the new state), then recalled from twice."""
    from memclaw.bench.synthetic_archive import synthetic_archive
    from memclaw.markdown.archive import append_chunk

    ws = svc.workspace
    last = ws.archive_files()[-1]
    new = synthetic_archive(40, first=datetime.now().date(), seed=99)
    [day] = new.values()
    out = {}
    for name, path, chunk in (("append_to_day_ms", last, day.chunks[0]), ("new_day_ms", None, day.chunks[1])):
        if path is None:
            path = ws.archive_file("owner", datetime.fromisoformat(last.stem).date() + timedelta(days=1))
        before = path.read_text("utf-8") if path.exists() else ""
        after = append_chunk(before, chunk)
        with open(path, "a", encoding="utf-8") as f:
            f.write(after[len(before) :])
        t0 = time.perf_counter()
        svc.sync()
        out[name] = round((time.perf_counter() - t0) * 1000, 1)
        for when in ("first", "next"):  # (the sync builds the BM25 contexts of the new state, not the first recall)
            t0 = time.perf_counter()
            svc.recall("what did we say about the trip", k=8)
            out[name.replace("_ms", f"_{when}_recall_ms")] = round((time.perf_counter() - t0) * 1000, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--units", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "archive-perf")
    a = ap.parse_args()
    from memclaw.bench.embedcache import CachedEmbedder
    from memclaw.bench.machine import machine_info
    from memclaw.bench.metrics import percentile
    from memclaw.bench.perf_measure import dir_size, preload
    from memclaw.bench.run_config import bench_config
    from memclaw.bench.synthetic import synthetic_queries
    from memclaw.bench.systems import SystemSpec, system_config
    from memclaw.embedding.load import load_embedder
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    embedder = CachedEmbedder(load_embedder(bench_config().embeddings), a.cache)
    preload(embedder)
    plain, plain_info = build(a.workdir / "plain", a.units, 0, embedder, a.reuse)
    arch, arch_info = build(a.workdir / "archive", a.units, a.turns, embedder, a.reuse)
    embedder.save()
    # The archive store once more, without a short turn's BM25 score with the turns beside it: what that costs.
    no_ctx = system_config(bench_config(), SystemSpec("nocontext", "memclaw", "", tuning={"bm25_context_weight": 0.0}))
    arch_nc = MemoryService(Workspace(a.workdir / "archive"), no_ctx, embedder=embedder, store=arch.store)
    queries = synthetic_queries(a.queries)
    for q in queries[:20]:  # warm-up
        for s in (plain, arch, arch_nc):
            s.recall(q)
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {"plain": [], "archive": [], "archive-nocontext": []}
    for r in range(a.rounds):
        for i, q in enumerate(queries):
            arms = [("plain", plain), ("archive", arch), ("archive-nocontext", arch_nc)]
            arms = arms[i % 3 :] + arms[: i % 3]  # each first in turn, the order reversed every other round
            for name, svc in arms if r % 2 == 0 else arms[::-1]:
                t = time.perf_counter()
                svc.recall_detailed(q)
                times[name].append((time.perf_counter() - t) * 1000)
    load_after = os.getloadavg()
    cold = cold_ab(a.workdir, queries[0], runs=3)
    appended = append_cost(arch)
    sizes = {n: dir_size(s.layout.root) for n, s in (("plain", plain), ("archive", arch))}
    for s in (plain, arch_nc, arch):
        s.close()
    stats = {n: {"p50_ms": round(percentile(t, 50), 2), "p95_ms": round(percentile(t, 95), 2),
                 "mean_ms": round(statistics.fmean(t), 2)} for n, t in times.items()}  # fmt: skip
    per_k = 1000 / a.turns
    res = {
        "date": datetime.now().astimezone().isoformat(timespec="minutes"),
        "machine": machine_info(),
        "revision": revision(),
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in load_after],
        "queries": len(queries),
        "rounds": a.rounds,
        "recall": stats,
        "p95_ratio": round(stats["archive"]["p95_ms"] / stats["plain"]["p95_ms"], 3),
        "p95_ratio_nocontext": round(stats["archive-nocontext"]["p95_ms"] / stats["plain"]["p95_ms"], 3),
        "plain": plain_info | {"index_bytes": sizes["plain"]},
        "archive": arch_info | {"index_bytes": sizes["archive"]},
        "per_1000_turns": {
            "index_kib": round((sizes["archive"] - sizes["plain"]) * per_k / 1024, 1),
            "markdown_kib": round(arch_info["archive_markdown_bytes"] * per_k / 1024, 1),
        },
        "after_the_archive": appended,
        "cold_cli_recall_s": cold,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n", "utf-8")
    a.out.with_suffix(".md").write_text(report_md(res), "utf-8")
    print(json.dumps(res, indent=1))


def revision() -> str:
    """The checkout's commit (and whether it has changes), for the report."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + (" (modified)" if git("status", "--porcelain", "memclaw") else "")


def report_md(r: dict[str, Any]) -> str:
    m = r["machine"]
    store = {"plain": "plain", "archive": "archive", "archive-nocontext": "archive"}
    rows = [f"| {n} | {r[store[n]]['units']:,} | {r[store[n]]['turns']:,} | {s['p50_ms']} | {s['p95_ms']} | "
            f"{s['mean_ms']} | {r[store[n]]['index_bytes'] / 2**20:.1f} |" for n, s in r["recall"].items()]  # fmt: skip
    return "\n".join([
        "# The archive's cost: warm recall with and without 100k archived turns (A/B, one run)",
        "",
        f"- date: {r['date']}; revision {r['revision']}",
        f"- machine: {m['nproc']} cores, {m['cpu']}, {m['ram_gib']} GiB, {m['os']}, Python {m['python']}",
        f"- load average (1/5/15 min) before {r['load_avg_before']}, after {r['load_avg_after']} (a shared machine)",
        f"- {r['queries']} synthetic queries x {r['rounds']} rounds, each timed on both stores back to back, the "
        "order alternating; query embedding included; `benchmarks/bench_archive_perf.py`",
        "",
        "| store | memories | archived turns | warm recall p50 ms | p95 ms | mean ms | index MiB |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"p95 with the archive / without: **{r['p95_ratio']}** (target: within 1.5); "
        f"{r.get('p95_ratio_nocontext')} for the archive store without a short turn's BM25 score with the turns "
        "beside it (`archive-nocontext`: `recall.bm25_context_weight` 0, the same store, timed in the same rounds).",
        "",
        f"Per 1,000 archived turns: index {r['per_1000_turns']['index_kib']} KiB, Markdown "
        f"{r['per_1000_turns']['markdown_kib']} KiB.",
        "",
        f"Cold `memclaw recall` in a fresh process (median of 3): {r['cold_cli_recall_s']['plain']} s without the "
        f"archive, {r['cold_cli_recall_s']['archive']} s with it.",
        "",
        "With the archive in place: one more conversation (20 turns) appended to the last day's file and synced "
        f"{r['after_the_archive']['append_to_day_ms']} ms; one on a new day {r['after_the_archive']['new_day_ms']} "
        "ms (embedding included, and the BM25 contexts of the new state, memclaw.index.bm25_context). The first "
        f"recall after each {r['after_the_archive'].get('append_to_day_first_recall_ms')} / "
        f"{r['after_the_archive'].get('new_day_first_recall_ms')} ms, the next "
        f"{r['after_the_archive'].get('append_to_day_next_recall_ms')} / "
        f"{r['after_the_archive'].get('new_day_next_recall_ms')} ms.",
        "",
    ])  # fmt: skip


if __name__ == "__main__":
    main()
