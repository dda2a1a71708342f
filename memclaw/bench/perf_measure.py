"""The timed measurements of `bench perf` at one size: ingest, warm recall, add one fact, cold CLI recall, index
size on disk, and recall over a Chroma server."""

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
from pathlib import Path
from typing import Any

from memclaw.bench.synthetic import (
    FACT_TEMPLATES,
    fill_template,
    synthetic_memories,
    synthetic_queries,
    write_workspace,
)


def dir_size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(dirpath, f))
    return total


_LAUNCHER = """
import json, os, subprocess, sys, time
t = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = p.stderr.read()
_pid, status, ru = os.wait4(p.pid, 0)
p.returncode = os.waitstatus_to_exitcode(status)
print(json.dumps({"code": p.returncode, "wall_s": time.perf_counter() - t, "cpu_s": ru.ru_utime + ru.ru_stime,
                  "maxrss_kb": ru.ru_maxrss, "err": err.decode("utf-8", "replace")[-400:]}))
"""
"""Runs a command and prints its wall time, CPU time and peak RSS. A child's peak RSS starts at its parent's at the
fork (Linux keeps the high-water mark across exec), so the measured process is forked by this small launcher,
never by the benchmark's own large process."""


def cold_recall(ws: Path, home: Path, query: str, runs: int = 3, *, chroma_url: str | None = None) -> dict[str, Any]:
    """`memclaw recall` in a fresh Python process: wall time (median of `runs`), its CPU time (median: what the
    load of a shared machine does not inflate) and peak RSS (the largest)."""
    env = {**os.environ, "MEMCLAW_HOME": str(home)}
    if chroma_url:
        env["MEMCLAW_MEMORY__CHROMA_URL"] = chroma_url
    times, cpu, rss = [], [], []
    for _ in range(runs):
        cmd = [sys.executable, "-m", "memclaw.cli.main", "recall", query, "--workspace", str(ws), "--json"]
        proc = subprocess.run([sys.executable, "-c", _LAUNCHER, *cmd], env=env, capture_output=True, text=True,
                              timeout=600)  # fmt: skip
        try:
            got = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return {"error": (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]}
        if got["code"] != 0:
            lines = got["err"].strip().splitlines()
            return {"error": lines[-1] if lines else f"exit code {got['code']}"}
        times.append(got["wall_s"])
        cpu.append(got["cpu_s"])
        rss.append(got["maxrss_kb"] / 1024)
    return {"median_s": round(statistics.median(times), 3), "runs_s": [round(t, 3) for t in times],
            "cpu_s": round(statistics.median(cpu), 3), "peak_rss_mb": round(max(rss), 1)}  # fmt: skip


def warm_latencies(svc: Any, queries: list[str]) -> tuple[list[float], list[float]]:
    """(recall ms, query-embedding ms) per query, after a warm-up of 10 queries."""
    # warm-up (first Chroma query after open, caches)
    for q in queries[:10]:
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
    from memclaw.bench.run_config import bench_config
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
            svc.add_fact(f"Perf probe {i}: {fill_template(random.Random(i), FACT_TEMPLATES[0])}")
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
